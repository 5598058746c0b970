"""Jar coordinates, the generated pom and the fetch manifest (no Maven run here)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from importlib.metadata import version
from pathlib import Path

import pytest

from upsert_kafka_ops import jars, spark_lines
from upsert_kafka_ops.errors import JarsError, ToolchainError

NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def test_spark_connectors_match_the_installed_pyspark_and_delta() -> None:
    line = spark_lines.line_of(version("pyspark"))
    delta = spark_lines.delta_for(version("pyspark"))
    assert version("delta-spark") == delta.version
    coords = {a.artifact: a.version for a in jars.spark_group().artifacts}
    assert coords[f"spark-sql-kafka-0-10_{line.scala}"] == version("pyspark")
    assert coords[f"spark-avro_{line.scala}"] == version("pyspark")
    assert coords[delta.artifact] == delta.version
    assert jars.spark_group().dir_name == f"spark-{version('pyspark')}"


@pytest.mark.parametrize(
    ("spark", "kafka", "delta", "iceberg"),
    [
        ("3.5.6-amzn-1", "spark-sql-kafka-0-10_2.12:3.5.6", "delta-spark_2.12:3.3.2", "iceberg-spark-runtime-3.5_2.12"),
        ("4.0.2", "spark-sql-kafka-0-10_2.13:4.0.2", "delta-spark_4.0_2.13:4.4.0", "iceberg-spark-runtime-4.0_2.13"),
        ("4.1.1", "spark-sql-kafka-0-10_2.13:4.1.1", "delta-spark_4.1_2.13:4.4.0", "iceberg-spark-runtime-4.1_2.13"),
    ],
)  # fmt: skip
def test_a_clusters_spark_version_picks_its_lines_coordinates(
    spark: str, kafka: str, delta: str, iceberg: str
) -> None:
    coords = [f"{a.artifact}:{a.version}" for a in jars.spark_group(spark).artifacts]
    assert coords[0] == kafka and coords[2] == delta
    assert jars.iceberg_group(spark).artifacts[0].artifact == iceberg
    # each release keeps its own folder: a machine can hold the jars of several lines
    assert jars.spark_group(spark).dir_name == f"spark-{spark_lines.release(spark)}"
    assert jars.s3_group("4.1.1").dir_name != jars.s3_group("4.0.2").dir_name


def test_a_line_without_a_connector_release_is_refused_naming_what_is_missing() -> None:
    with pytest.raises(ToolchainError, match=r"No Apache Iceberg Spark runtime is published for Spark 4\.2"):
        jars.iceberg_group("4.2.0")
    assert jars.spark_group("4.2.0").artifacts[2].artifact == "delta-spark_4.2_2.13"  # Delta has one
    with pytest.raises(ToolchainError, match=r"Spark 4\.3\.0 is not supported \(no Delta or Iceberg release"):
        jars.spark_group("4.3.0")
    with pytest.raises(JarsError, match="AWS SDK v1"):
        jars.s3_group("3.5.7")


def test_groups_the_platform_provides_are_neither_fetched_nor_on_the_class_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_fetched(tmp_path, jars.KAFKA_GROUP, ["k.jar"])
    monkeypatch.setattr(jars, "_resolve", lambda *a: pytest.fail("Maven must not run for a provided group"))
    monkeypatch.setenv(jars.ENV_PROVIDED, "all")
    assert jars.fetch(["kafka", "spark", "iceberg"], jars_dir=tmp_path, log=False) == {
        "kafka": tmp_path / "kafka"
    }
    assert jars.class_path(["spark", "s3", "iceberg"], tmp_path) == []
    monkeypatch.setenv(jars.ENV_PROVIDED, "spark, delta")
    with pytest.raises(
        JarsError, match=r"UPSERT_KAFKA_OPS_PROVIDED_JARS names \['delta'\].*spark, s3, iceberg"
    ):
        jars.provided()


def test_kafka_broker_is_4x_with_tools_and_a_logging_binding() -> None:
    names = {a.artifact: a.version for a in jars.KAFKA_GROUP.artifacts}
    assert names["kafka_2.13"].startswith("4.")
    assert names["kafka-tools"] == names["kafka_2.13"]
    assert "log4j-slf4j-impl" in names


def test_pom_lists_each_artifact_with_the_exclusions() -> None:
    spark = jars.spark_group()
    root = ET.fromstring(jars.pom_xml(spark))
    deps = root.findall("m:dependencies/m:dependency", NS)
    got = [(d.findtext("m:groupId", namespaces=NS), d.findtext("m:artifactId", namespaces=NS)) for d in deps]
    assert got == [(a.group, a.artifact) for a in spark.artifacts]
    excl = deps[0].findall("m:exclusions/m:exclusion", NS)
    assert len(excl) == len(spark.exclusions)
    assert {"org.apache.hadoop", "org.scala-lang"} <= {e.findtext("m:groupId", namespaces=NS) for e in excl}


def test_settings_mirror_everything_to_one_repository() -> None:
    root = ET.fromstring(jars.maven_settings("https://repo.example/maven2"))
    assert root.findtext("mirrors/mirror/mirrorOf") == "*"
    assert root.findtext("mirrors/mirror/url") == "https://repo.example/maven2"


def _fake_fetched(base: Path, group: jars.JarGroup, names: list[str]) -> Path:
    folder = base / group.dir_name
    folder.mkdir(parents=True)
    for n in names:
        (folder / n).write_bytes(b"PK")
    (folder / "manifest.json").write_text(json.dumps({"fingerprint": group.fingerprint(), "jars": names}))
    return folder


def test_manifest_decides_whether_a_group_is_fetched(tmp_path: Path) -> None:
    assert not jars.is_fetched("spark", tmp_path)
    folder = _fake_fetched(tmp_path, jars.spark_group(), ["b.jar", "a.jar"])
    assert jars.is_fetched("spark", tmp_path)
    assert jars.jar_paths("spark", tmp_path) == [folder / "a.jar", folder / "b.jar"]
    (folder / "a.jar").unlink()
    assert not jars.is_fetched("spark", tmp_path)


def test_changed_coordinates_make_the_cache_stale(tmp_path: Path) -> None:
    _fake_fetched(tmp_path, jars.spark_group(), ["a.jar"])
    manifest = tmp_path / jars.spark_group().dir_name / "manifest.json"
    manifest.write_text(json.dumps({"fingerprint": "something-else", "jars": ["a.jar"]}))
    with pytest.raises(JarsError, match="upsert-kafka-ops jars fetch"):
        jars.jar_paths("spark", tmp_path)


def test_fetch_of_an_up_to_date_group_runs_no_maven(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_fetched(tmp_path, jars.KAFKA_GROUP, ["k.jar"])
    monkeypatch.setattr(jars, "_resolve", lambda *a: pytest.fail("Maven must not run for a fetched group"))
    assert jars.fetch(["kafka"], jars_dir=tmp_path, log=False) == {"kafka": tmp_path / "kafka"}


def test_unknown_group_is_named(tmp_path: Path) -> None:
    with pytest.raises(JarsError, match="'storm'"):
        jars.fetch(["storm"], jars_dir=tmp_path, log=False)


def test_jars_dir_env_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(jars.ENV_JARS_DIR, str(tmp_path / "cache"))
    assert jars.default_jars_dir() == (tmp_path / "cache").resolve()


def test_fetch_without_groups_leaves_the_flink_oracle_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    resolved: list[str] = []
    monkeypatch.setattr(jars, "_resolve", lambda g, *a: resolved.append(g.name))
    assert sorted(jars.fetch(jars_dir=tmp_path, log=False)) == ["kafka", "spark"]
    assert resolved == ["kafka", "spark"]
    assert "flink" in jars.GROUP_NAMES and "flink" not in jars.DEFAULT_GROUPS


def test_the_yarn_group_is_the_hadoop_of_pyspark_and_takes_the_timeline_jar_alone() -> None:
    from upsert_kafka_ops.spark_lines import spark_home

    client = sorted((spark_home() / "jars").glob("hadoop-client-api-*.jar"))
    hadoop = spark_lines.line_of(version("pyspark")).hadoop
    assert [p.name for p in client] == [f"hadoop-client-api-{hadoop}.jar"]
    assert "yarn" in jars.GROUP_NAMES and "yarn" not in jars.DEFAULT_GROUPS
    root = ET.fromstring(jars.pom_xml(jars.yarn_group()))
    excluded = {
        d.findtext("m:artifactId", namespaces=NS): [
            (e.findtext("m:groupId", namespaces=NS), e.findtext("m:artifactId", namespaces=NS))
            for e in d.iterfind("m:exclusions/m:exclusion", NS)
        ]
        for d in root.iterfind("m:dependencies/m:dependency", NS)
    }
    assert excluded["hadoop-yarn-server-timelineservice"] == [("*", "*")]  # HBase and the rest stay out
    assert excluded["hadoop-yarn-server-resourcemanager"] == []
    # the flag is part of the coordinates, so a changed flag refetches the group
    alone = jars.Artifact("g", "a", "1", transitive=False)
    assert str(alone) != str(jars.Artifact("g", "a", "1"))
