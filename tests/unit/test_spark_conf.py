"""The Spark configuration is built without starting Spark."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from upsert_kafka_ops import jars
from upsert_kafka_ops.engine import class_archive
from upsert_kafka_ops.errors import JarsError, ToolchainError
from upsert_kafka_ops.runtime import spark_conf


@pytest.fixture
def jars_dir(tmp_path: Path) -> Path:
    group = jars.spark_group()
    folder = tmp_path / group.dir_name
    folder.mkdir()
    names = ["spark-sql-kafka.jar", "delta.jar"]
    for n in names:
        (folder / n).write_bytes(b"PK")
    fp = group.fingerprint()
    (folder / "manifest.json").write_text(json.dumps({"fingerprint": fp, "jars": names}))
    return tmp_path


def test_conf_points_spark_at_the_cached_jars_and_enables_delta(jars_dir: Path) -> None:
    conf = spark_conf(jars_dir=jars_dir, shuffle_partitions=3)
    assert conf["spark.master"] == "local[*]"
    assert conf["spark.jars"].split(",") == [
        str(jars_dir / jars.spark_group().dir_name / n) for n in ("delta.jar", "spark-sql-kafka.jar")
    ]
    assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert conf["spark.sql.shuffle.partitions"] == "3"
    assert conf["spark.ui.enabled"] == "false"
    assert "spark.jars.packages" not in conf  # no network resolution at run time
    assert conf["spark.driver.host"] == "127.0.0.1"


def test_cluster_master_keeps_driver_address_open_and_extra_wins(jars_dir: Path) -> None:
    conf = spark_conf("spark://127.0.0.1:7077", jars_dir=jars_dir, extra={"spark.ui.enabled": "true"})
    assert "spark.driver.host" not in conf
    assert conf["spark.ui.enabled"] == "true"
    assert int(conf["spark.sql.shuffle.partitions"]) >= 2


def test_missing_jars_say_how_to_fetch(tmp_path: Path) -> None:
    with pytest.raises(JarsError, match="jars fetch"):
        spark_conf(jars_dir=tmp_path)


def test_generated_code_past_hotspots_huge_method_limit_is_still_compiled(jars_dir: Path) -> None:
    for side in ("driver", "executor"):
        assert (
            "-XX:-DontCompileHugeMethods" in spark_conf(jars_dir=jars_dir)[f"spark.{side}.extraJavaOptions"]
        )


def test_local_driver_gets_more_than_sparks_1g_default(
    jars_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPARK_DRIVER_MEMORY", raising=False)
    memory = spark_conf(jars_dir=jars_dir)["spark.driver.memory"]
    assert memory.endswith("g") and 1 <= int(memory[:-1]) <= 8
    assert "spark.driver.memory" not in spark_conf("yarn", jars_dir=jars_dir)


def test_spark_driver_memory_sets_the_local_drivers_heap_as_with_spark_submit(
    jars_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_DRIVER_MEMORY", "1536m")
    assert spark_conf(jars_dir=jars_dir)["spark.driver.memory"] == "1536m"
    assert spark_conf(jars_dir=jars_dir, extra={"spark.driver.memory": "3g"})["spark.driver.memory"] == "3g"
    assert "spark.driver.memory" not in spark_conf("yarn", jars_dir=jars_dir)


def test_every_driver_keeps_a_runs_generated_classes_compiled(jars_dir: Path) -> None:
    # Spark's default cache of 100 classes is smaller than one Delta run's (tests/integration/test_jobs_delta.py)
    for master in ("local[*]", "yarn", "spark://host:7077"):
        assert spark_conf(master, jars_dir=jars_dir)["spark.sql.codegen.cache.maxEntries"] == "1000"
    own = {"spark.sql.codegen.cache.maxEntries": "50"}
    assert spark_conf(jars_dir=jars_dir, extra=own)["spark.sql.codegen.cache.maxEntries"] == "50"


def test_sessions_record_no_python_call_sites_unless_asked(jars_dir: Path) -> None:
    # five JVM round trips per pyspark call (engine.session.spark_conf); a user's conf turns it back on
    key = "spark.python.sql.dataFrameDebugging.enabled"
    for master in ("local[2]", "yarn"):
        assert spark_conf(master, jars_dir=jars_dir)[key] == "false"
    assert spark_conf(jars_dir=jars_dir, extra={key: "true"})[key] == "true"


def test_a_local_driver_collects_garbage_for_throughput_and_a_cluster_keeps_its_choice(
    jars_dir: Path,
) -> None:
    # G1's marking cycles took a quarter of a long-lived session's CPU (engine.session.LOCAL_DRIVER_GC)
    local = spark_conf(jars_dir=jars_dir)
    assert "-XX:+UseParallelGC" in local["spark.driver.extraJavaOptions"].split()
    for master in ("yarn", "spark://host:7077"):
        conf = spark_conf(master, jars_dir=jars_dir)
        assert "GC" not in conf["spark.driver.extraJavaOptions"] + conf["spark.executor.extraJavaOptions"]
    own = {"spark.driver.extraJavaOptions": "-XX:+UseG1GC"}
    assert "ParallelGC" not in spark_conf(jars_dir=jars_dir, extra=own)["spark.driver.extraJavaOptions"]


# -- the local driver's class archive -------------------------------------------------------------
@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(jars.ENV_JARS_DIR, str(tmp_path / "cache" / "jars"))
    monkeypatch.delenv(class_archive.ENV_SWITCH, raising=False)
    return tmp_path / "cache"


def test_a_local_driver_maps_the_class_archive_of_its_runtime_once_built(jars_dir: Path, cache: Path) -> None:
    assert "SharedArchiveFile" not in spark_conf(jars_dir=jars_dir)["spark.driver.extraJavaOptions"]
    archive = class_archive.archive_path(spark_conf(jars_dir=jars_dir))
    assert archive is not None and archive.is_relative_to(cache)
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"archive")
    options = spark_conf(jars_dir=jars_dir)["spark.driver.extraJavaOptions"].split()
    assert options[0].startswith("-Dlog4j2.configurationFile=")
    assert options[-2:] == [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto"]
    assert class_archive.mapped(spark_conf(jars_dir=jars_dir)) == archive
    # the driver of a cluster master runs elsewhere; a caller's own archive option is kept as it is
    assert "SharedArchiveFile" not in spark_conf("yarn", jars_dir=jars_dir)["spark.driver.extraJavaOptions"]
    own = {"spark.driver.extraJavaOptions": "-XX:ArchiveClassesAtExit=/tmp/x.jsa"}
    assert (
        spark_conf(jars_dir=jars_dir, extra=own)["spark.driver.extraJavaOptions"]
        == own["spark.driver.extraJavaOptions"]
    )


def test_the_class_archive_follows_the_jars_and_can_be_turned_off(
    jars_dir: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = class_archive.archive_path(spark_conf(jars_dir=jars_dir))
    (jars_dir / jars.spark_group().dir_name / "delta.jar").write_bytes(b"PK another build")
    assert class_archive.archive_path(spark_conf(jars_dir=jars_dir)) != before
    archive = class_archive.archive_path(spark_conf(jars_dir=jars_dir))
    assert archive is not None
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"archive")
    assert class_archive.java_options(spark_conf(jars_dir=jars_dir))
    monkeypatch.setenv(class_archive.ENV_SWITCH, "off")
    assert class_archive.java_options(spark_conf(jars_dir=jars_dir)) == ""
    monkeypatch.setenv(class_archive.ENV_SWITCH, "sometimes")
    with pytest.raises(ToolchainError, match=class_archive.ENV_SWITCH):
        spark_conf(jars_dir=jars_dir)


def test_a_new_class_archive_keeps_three_others_the_newest(tmp_path: Path) -> None:
    archives = []
    for age in range(6):  # six other runtimes' archives, the first the newest
        old = tmp_path / f"spark-driver-{age:016x}.jsa"
        old.write_bytes(b"x")
        stamp = time.time() - 3600 * (age + 1)
        os.utime(old, (stamp, stamp))
        archives.append(old)
    new = tmp_path / "spark-driver-ffffffffffffffff.jsa"
    new.write_bytes(b"x")
    (tmp_path / "other.txt").write_text("not an archive")
    removed = class_archive.prune(new)
    assert sorted(removed) == sorted(archives[class_archive.KEEP_OTHERS :])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [new.name, "other.txt", *(a.name for a in archives[: class_archive.KEEP_OTHERS])]
    )


def test_jvm_lines_keep_their_log4j_level_for_python_logging() -> None:
    """An orchestrator logs raw stderr as errors: a driver JVM's lines reach Python logging at their
    own level, a stack trace at the level of the line it continues, the start-up notice at DEBUG."""
    import logging

    from upsert_kafka_ops.engine.session import jvm_line

    warn = "26/11/26 02:55:11 WARN NetworkClient: [Producer clientId=producer-1] Connection to node 1"
    assert jvm_line(warn) == (logging.WARNING, warn[len("26/11/26 02:55:11 ") :])
    assert jvm_line("26/11/26 02:55:11 ERROR Executor: Exception in task 0.0")[0] == logging.ERROR
    assert jvm_line("26/11/26 02:55:11 INFO SparkContext: Running Spark version 4.0.0")[0] == logging.INFO
    assert jvm_line("\tat org.apache.spark.Foo.bar(Foo.scala:1)", logging.ERROR)[0] == logging.ERROR
    assert jvm_line("Caused by: java.io.IOException: x", logging.ERROR)[0] == logging.ERROR
    assert jvm_line("WARNING: Using incubator modules: jdk.incubator.vector")[0] == logging.DEBUG
    assert jvm_line(":: loading settings :: url = jar:file:/x", logging.ERROR)[0] == logging.INFO
