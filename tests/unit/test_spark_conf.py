"""The Spark configuration is built without starting Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from upsert_kafka_ops import jars
from upsert_kafka_ops.errors import JarsError
from upsert_kafka_ops.runtime import spark_conf


@pytest.fixture
def jars_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "spark"
    folder.mkdir()
    names = ["spark-sql-kafka.jar", "delta.jar"]
    for n in names:
        (folder / n).write_bytes(b"PK")
    fp = jars.SPARK_GROUP.fingerprint()
    (folder / "manifest.json").write_text(json.dumps({"fingerprint": fp, "jars": names}))
    return tmp_path


def test_conf_points_spark_at_the_cached_jars_and_enables_delta(jars_dir: Path) -> None:
    conf = spark_conf(jars_dir=jars_dir, shuffle_partitions=3)
    assert conf["spark.master"] == "local[*]"
    assert conf["spark.jars"].split(",") == [
        str(jars_dir / "spark" / n) for n in ("delta.jar", "spark-sql-kafka.jar")
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


def test_local_driver_gets_more_than_sparks_1g_default(jars_dir: Path) -> None:
    memory = spark_conf(jars_dir=jars_dir)["spark.driver.memory"]
    assert memory.endswith("g") and 1 <= int(memory[:-1]) <= 8
    assert "spark.driver.memory" not in spark_conf("yarn", jars_dir=jars_dir)
