"""``import-flink-sql``: a Flink SQL script becomes the pipeline it stands for, and every construct
without an equivalent is reported with its line and column, all at once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from upsert_kafka_ops.cli import main
from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.jobs import Pipeline
from upsert_kafka_ops.jobs.flink_sql import import_flink_sql
from upsert_kafka_ops.pipeline import (
    DeltaTarget,
    KafkaSource,
    MaterializeJob,
    PostgresTarget,
    TopicToTopicJob,
)

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "pipelines" / "pageviews.sql"

KAFKA = "'connector' = 'kafka', 'topic' = '{t}', 'properties.bootstrap.servers' = '{s}', 'format' = 'json'"
UPSERT = ("'connector' = 'upsert-kafka', 'topic' = '{t}', 'properties.bootstrap.servers' = '{s}', "
          "'key.format' = 'json', 'value.format' = 'json'")  # fmt: skip


def _kafka(name: str, servers: str = "a:9092") -> str:
    return f"CREATE TABLE {name} (id BIGINT, v STRING) WITH ({KAFKA.format(t=name, s=servers)});\n"


def _upsert(name: str, servers: str = "a:9092", columns: str = "id BIGINT, v STRING") -> str:
    return (f"CREATE TABLE {name} ({columns}, PRIMARY KEY (id) NOT ENFORCED) "
            f"WITH ({UPSERT.format(t=name, s=servers)});\n")  # fmt: skip


def test_the_shipped_script_becomes_a_topic_to_topic_and_a_materialize_job(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["import-flink-sql", str(SCRIPT)]) == 0
    out, err = capsys.readouterr()
    p = Pipeline.from_yaml(out)
    assert p.name == "pageviews" and list(p.tables) == ["pageviews", "pageviews_per_region"]
    flow, lake = p.job("pageviews-per-region"), p.job("pageviews-per-region-lake")
    assert isinstance(flow, TopicToTopicJob) and isinstance(flow.sources["pageviews"], KafkaSource)
    assert "COUNT(DISTINCT user_id)" in flow.query and flow.sink.table.value_format == "avro"
    assert isinstance(lake, MaterializeJob) and isinstance(lake.target, DeltaTarget)
    assert lake.source.table.topic == ["pageviews_per_region"]  # type: ignore[union-attr]
    assert "WATERMARK" not in out and "WATERMARK dropped" in err and "'parallelism.default' dropped" in err
    assert p.connections["kafka"].bootstrap_servers == "localhost:9092"


def test_the_migration_guide_shows_the_script_and_what_it_imports_to(
    capsys: pytest.CaptureFixture[str],
) -> None:
    guide = (ROOT / "docs" / "flink-migration.md").read_text()
    main(["import-flink-sql", "pipelines/pageviews.sql"])
    out = capsys.readouterr().out
    assert f"```sql\n{SCRIPT.read_text()}```" in guide
    assert f"```yaml\n{out}```" in guide


def test_every_construct_without_an_equivalent_is_reported_with_its_line_and_column() -> None:
    script = (
        _kafka("pv") + _upsert("per_id")  # lines 1-2
        + "CREATE VIEW v AS SELECT 1;\n"  # 3
        + "SET 'foo.bar' = 'x';\n"  # 4
        + "INSERT INTO per_id SELECT id, v FROM TABLE(TUMBLE(TABLE pv, DESCRIPTOR(ts), INTERVAL '5' MINUTES));\n"  # 5
        + "INSERT INTO per_id\nSELECT p.id, u.v FROM pv AS p JOIN per_id FOR SYSTEM_TIME AS OF p.ts AS u ON p.id = u.id;\n"  # 6-7
        + "INSERT OVERWRITE per_id SELECT id, v FROM pv;\n"  # 8
        + "INSERT INTO nowhere SELECT id, v FROM pv;\n"  # 9
        + "CREATE TABLE f (id BIGINT, v STRING) WITH ('connector' = 'filesystem', 'path' = '/x', 'format' = 'csv');\n"  # 10
        + "INSERT INTO f SELECT * FROM per_id;\n"  # 11
        + "CREATE TABLE c (id BIGINT, n AS id + 1) WITH ('connector' = 'kafka');\n"  # 12
    )  # fmt: skip
    with pytest.raises(SpecError) as caught:
        import_flink_sql(script)
    found = [(p.field, p.message.split(":")[0]) for p in caught.value.problems]
    assert found == [
        ("line 3, column 1", "CREATE VIEW v"),
        ("line 4, column 1", "SET 'foo.bar'"),
        ("line 5, column 44", "TUMBLE"),
        ("line 7, column 43", "FOR SYSTEM_TIME AS OF"),
        ("line 8, column 1", "INSERT OVERWRITE"),
        ("line 9, column 1", "table nowhere"),
        ("line 10, column 1", "table f"),  # a filesystem table that is not Parquet, found by its INSERT
        ("line 12, column 28", "computed column"),
    ], caught.value


def test_a_statement_set_two_clusters_and_a_postgres_target() -> None:
    script = (
        "-- two clusters\n" + _kafka("pv", "a:9092") + _upsert("out", "b:9092") + _upsert("out2", "b:9092")
        + "CREATE TABLE pg (id BIGINT, v STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'jdbc', "
        "'url' = 'jdbc:postgresql://db:5433/dw', 'table-name' = 'public.out', 'username' = 'etl', 'password' = 'pw');\n"
        + "EXECUTE STATEMENT SET BEGIN\nINSERT INTO out SELECT id, v FROM pv;\nINSERT INTO out2 SELECT id, v FROM pv;\n"
        "END;\nINSERT INTO pg SELECT * FROM out;\n"
    )  # fmt: skip
    imported = import_flink_sql(script, name="two")
    p = Pipeline.model_validate(imported.pipeline)
    assert {k: c.bootstrap_servers for k, c in p.connections.items()} == {
        "kafka": "a:9092",
        "kafka2": "b:9092",
    }
    assert [j.name for j in p.jobs] == ["out", "out2", "pg"] and p.name == "two"
    assert p.job("out2").sink.connection == "kafka2"  # type: ignore[union-attr]
    target = p.job("pg").target  # type: ignore[union-attr]
    assert isinstance(target, PostgresTarget) and (target.host, target.port, target.database) == (
        "db",
        5433,
        "dw",
    )
    assert target.password is not None and target.password.env == "PG_PASSWORD"
    assert "pw" not in yaml.safe_dump(imported.pipeline) and any("$PG_PASSWORD" in n for n in imported.notes)


def test_a_script_without_an_insert_and_a_warehouse_written_from_a_query_are_refused() -> None:
    with pytest.raises(SpecError, match="no INSERT INTO"):
        import_flink_sql(_kafka("pv"))
    lake = "CREATE TABLE lake (id BIGINT, v STRING) WITH ('connector' = 'delta', 'table-path' = '/l');\n"
    with pytest.raises(SpecError, match="a materialize job folds one upsert-kafka table"):
        import_flink_sql(_upsert("u") + lake + "INSERT INTO lake SELECT id, v FROM u WHERE id > 1;\n")


def test_streaming_checkpoints_go_under_flinks_checkpoint_folder_or_a_variable() -> None:
    script = _kafka("pv") + _upsert("out") + "INSERT INTO out SELECT id, v FROM pv;\n"
    plain = Pipeline.from_yaml(
        yaml.safe_dump(import_flink_sql(script).pipeline), {"UKO_CHECKPOINT_DIR": "/ck"}
    )
    assert plain.job("out").checkpoint.path == "/ck/out"  # type: ignore[union-attr]
    on_s3 = import_flink_sql("SET 'state.checkpoints.dir' = 's3://b/ck/';\n" + script).pipeline
    assert on_s3["jobs"][0]["checkpoint"] == {"path": "s3a://b/ck/out"}
    with pytest.raises(
        SpecError, match=re.escape("line 1, column 1: SET 'execution.checkpointing.dir': is 'hdfs://nn/ck'")
    ):
        import_flink_sql("SET 'execution.checkpointing.dir' = 'hdfs://nn/ck';\n" + script)


def test_flip_149s_statements_import_or_are_named_with_their_place() -> None:
    data = ROOT / "tests" / "data" / "flink"
    supported = import_flink_sql((data / "flip149_supported.sql").read_text()).pipeline
    p = Pipeline.from_yaml(yaml.safe_dump(supported), {"UKO_CHECKPOINT_DIR": "/ck"})
    users, regions = p.job("users"), p.job("pageviews-per-region")
    assert isinstance(users, TopicToTopicJob) and isinstance(regions, TopicToTopicJob)
    assert users.sources["dbz_users"].table.value_format == "debezium-json"  # type: ignore[union-attr]
    assert not isinstance(regions.sources["pageviews_per_region_5min"], KafkaSource)
    with pytest.raises(SpecError) as caught:
        import_flink_sql((data / "flip149.sql").read_text())
    assert [(p.field, p.message.split(":")[0]) for p in caught.value.problems] == [
        ("line 7, column 3", "computed column"),
        ("line 17, column 17", "FOR SYSTEM_TIME AS OF"),
        ("line 21, column 3", "TUMBLE_START"),
    ]
