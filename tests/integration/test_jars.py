"""The resolved jar folders, checked against the installed pyspark and the Kafka tools."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

from upsert_kafka_ops import jars


def _artifact(jar: str) -> str:
    # "kafka-clients-3.9.0.jar" -> "kafka-clients"
    return re.sub(r"-\d+(\.\d+)+[\w.\-]*\.jar$", "", jar)


def test_spark_group_adds_no_second_copy_of_a_pyspark_jar(jars_dir: Path) -> None:
    import pyspark

    shipped = {_artifact(p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    ours = {_artifact(p.name) for p in jars.jar_paths("spark", jars_dir)}
    assert ours & shipped == set()
    assert {"spark-sql-kafka-0-10_2.13", "spark-token-provider-kafka-0-10_2.13", "kafka-clients"} <= ours
    assert {"spark-avro_2.13", "delta-spark_2.13", "delta-storage", "postgresql", "commons-pool2"} <= ours


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
