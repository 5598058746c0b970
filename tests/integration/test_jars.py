"""The resolved jar folders, checked against the installed pyspark and the Kafka tools."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from upsert_kafka_ops import jars, spark_lines


def _artifact(jar: str) -> str:
    # "kafka-clients-3.9.0.jar" -> "kafka-clients"
    return re.sub(r"-\d+(\.\d+)+[\w.\-]*\.jar$", "", jar)


def test_spark_group_adds_no_second_copy_of_a_pyspark_jar(jars_dir: Path) -> None:
    import pyspark

    shipped = {_artifact(p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    ours = {_artifact(p.name) for p in jars.jar_paths("spark", jars_dir)}
    assert ours & shipped == set()
    line = spark_lines.line_of(pyspark.__version__)
    scala = line.scala
    assert {
        f"spark-sql-kafka-0-10_{scala}",
        f"spark-token-provider-kafka-0-10_{scala}",
        "kafka-clients",
    } <= ours
    assert {
        f"spark-avro_{scala}",
        spark_lines.delta_for(pyspark.__version__).artifact,
        "delta-storage",
        "postgresql",
        "commons-pool2",
    } <= ours


def test_s3_group_is_the_s3a_connector_with_no_second_copy_of_a_jar(jars_dir: Path) -> None:
    import pyspark

    def classes(paths: list[Path]) -> set[str]:
        found: set[str] = set()
        for path in paths:
            with zipfile.ZipFile(path) as z:
                found.update(
                    n for n in z.namelist() if n.endswith(".class") and not n.startswith("META-INF/")
                )
        return found

    # by class, not by file name: the SDK's annotations-2.24.5.jar is not pyspark's (JetBrains') annotations
    shipped = classes(sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar")))
    paths = jars.jar_paths("s3", jars_dir)
    ours = classes(paths)
    assert ours & shipped == set() and ours & classes(jars.jar_paths("spark", jars_dir)) == set()
    names = {_artifact(p.name) for p in paths}
    assert {"hadoop-aws", "s3", "s3-transfer-manager", "sts", "apache-client"} <= names
    assert "org/apache/hadoop/fs/s3a/S3AFileSystem.class" in ours
    assert "bundle" not in names  # the AWS SDK's 532 MB bundle, which hadoop-aws names
    assert sum(p.stat().st_size for p in paths) < 15_000_000


def test_kafka_group_has_the_broker_and_the_perf_tools(jars_dir: Path) -> None:
    classes: set[str] = set()
    for jar in jars.jar_paths("kafka", jars_dir):
        if jar.name.startswith(("kafka_2.13-", "kafka-tools-")):
            with zipfile.ZipFile(jar) as z:
                classes.update(z.namelist())
    for cls in ("kafka/Kafka.class", "kafka/tools/StorageTool.class"):
        assert cls in classes
    for cls in ("ProducerPerformance", "ConsumerPerformance"):
        assert f"org/apache/kafka/tools/{cls}.class" in classes
    # separate classpaths: no Spark jar in the broker's folder
    assert not [p for p in jars.jar_paths("kafka", jars_dir) if p.name.startswith("spark-")]


def test_second_fetch_is_a_no_op(jars_dir: Path) -> None:
    manifest = jars.group_dir("spark", jars_dir) / "manifest.json"
    before = manifest.stat().st_mtime_ns
    proc = subprocess.run(
        [sys.executable, "-m", "upsert_kafka_ops.cli", "jars", "fetch", "--dir", str(jars_dir)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "kafka up to date" in proc.stdout and "spark up to date" in proc.stdout
    assert manifest.stat().st_mtime_ns == before


def test_a_first_fetch_reports_its_downloads(
    jars_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fetch into an empty cache with an empty local Maven repository: Maven really downloads
    (from the machine's own Maven repository served as a file:// repository, so no network is
    needed) and the fetch reports the files and bytes as they arrive."""
    m2 = Path.home() / ".m2" / "repository"
    assert (m2 / "org" / "apache" / "kafka").is_dir(), f"{m2} should hold what `make jars` resolved"
    monkeypatch.setenv("MAVEN_OPTS", f"-Dmaven.repo.local={tmp_path / 'm2'}")
    monkeypatch.setattr(jars, "PROGRESS_EVERY_S", 0.0)  # a report after every download
    folders = jars.fetch(["kafka"], jars_dir=tmp_path / "jars", repo_url=m2.as_uri(), log=True)

    lines = [ln for ln in capsys.readouterr().err.splitlines() if "files downloaded" in ln]
    counts = [
        int(re.search(r"jars: kafka: (\d+) files downloaded \(([\d.]+) MB\), \d+s$", ln)[1]) for ln in lines
    ]  # type: ignore[index]
    assert len(counts) > 10 and counts == sorted(counts) and counts[0] >= 1
    assert sorted(p.name for p in folders["kafka"].glob("*.jar")) == sorted(
        p.name for p in jars.jar_paths("kafka", jars_dir)
    )
