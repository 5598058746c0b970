"""The pipeline's ``tables`` section: a table defined once and named by the jobs' sources and sinks
gives the jobs an inline definition would give; wrong names and kinds are errors at the part."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.jobs import Pipeline
from upsert_kafka_ops.pipeline import (
    KafkaSink,
    KafkaSource,
    PostgresTarget,
    TopicToTopicJob,
    UpsertSink,
    UpsertSource,
)

ROOT = Path(__file__).resolve().parents[2]

USERS = """CREATE TABLE users (id BIGINT, name STRING, PRIMARY KEY (id) NOT ENFORCED)
WITH ('connector' = 'upsert-kafka', 'topic' = 'users', 'key.format' = 'json', 'value.format' = 'json')"""
CLICKS = """CREATE TABLE clicks (id BIGINT, url STRING)
WITH ('connector' = 'kafka', 'topic' = 'clicks', 'format' = 'json')"""
CONNECTIONS = {"main": {"bootstrap_servers": "b:9092"}, "other": {"bootstrap_servers": "c:9092"}}


def _pipeline(jobs: list[dict[str, Any]], **tables: dict[str, Any]) -> dict[str, Any]:
    return {"connections": CONNECTIONS, "tables": tables, "jobs": jobs}


def _materialize(source: dict[str, Any]) -> dict[str, Any]:
    return {"name": "users", "kind": "materialize", "source": source,
            "target": {"kind": "delta", "path": "/tmp/users"}}  # fmt: skip


def test_demo_defines_each_table_once_and_its_jobs_are_those_of_inline_tables() -> None:
    text = (ROOT / "pipelines" / "demo.yaml").read_text()
    names = re.findall(r"CREATE TABLE (\w+)", text)
    assert len(names) == len(set(names)) == 4, names
    named = Pipeline.from_yaml(text)
    data = yaml.safe_load(text)
    tables = data.pop("tables")
    for job in data["jobs"]:  # the same file with each table written out where it is named
        parts = [*job.get("sources", {}).values(), job.get("source"), job.get("sink")]
        for part in (p for p in parts if p and isinstance(p.get("table"), str)):
            entry = dict(tables[part["table"]])
            part["connection"] = entry.pop("connection")
            part["table"] = entry
            if "'connector' = 'kafka'" in entry["ddl"]:
                part["kind"] = "kafka"
    inline = Pipeline.model_validate(Pipeline.from_yaml(yaml.safe_dump(data)).to_json_dict())
    assert named.jobs == inline.jobs
    assert [type(s) for s in named.job("pageviews-per-region").sources.values()] == [
        KafkaSource,
        UpsertSource,
    ]  # type: ignore[union-attr]


def test_a_named_table_takes_its_connection_and_a_part_may_name_another() -> None:
    tables = {"users": {"connection": "main", "ddl": USERS}}
    p = Pipeline.model_validate(_pipeline([_materialize({"table": "users"})], **tables))
    assert p.jobs[0].source.connection == "main" and p.jobs[0].source.table.topic == ["users"]  # type: ignore[union-attr]
    q = Pipeline.model_validate(
        _pipeline([_materialize({"table": "users", "connection": "other"})], **tables)
    )
    assert q.jobs[0].source.connection == "other"  # type: ignore[union-attr]
    assert Pipeline.model_validate(q.to_json_dict()) == q
    assert q.only("users").tables == {} and q.only("users").jobs == q.jobs


def test_the_options_form_and_an_append_table_take_the_kind_their_connector_says() -> None:
    options = {"connector": "upsert-kafka", "topic": "out", "key.format": "json", "value.format": "json"}
    out = {"connection": "main", "options": options, "primary_key": ["id"],
           "columns": [{"name": "id", "type": "BIGINT"}, {"name": "n", "type": "BIGINT"}]}  # fmt: skip
    clicks_out = {"connection": "main", "ddl": CLICKS.replace("'clicks'", "'clicks_out'")}
    job = {"name": "t", "kind": "topic-to-topic", "sources": {"clicks": {"table": "clicks"}},
           "query": "SELECT id, COUNT(*) AS n FROM clicks GROUP BY id", "sink": {"table": "out"}}  # fmt: skip
    copy = {**job, "name": "c", "query": "SELECT id, url FROM clicks", "sink": {"table": "clicks_out"}}
    p = Pipeline.model_validate(
        _pipeline([job, copy], clicks={"connection": "main", "ddl": CLICKS}, out=out, clicks_out=clicks_out)
    )
    t, c = p.job("t"), p.job("c")
    assert isinstance(t.sources["clicks"], KafkaSource) and isinstance(t.sink, UpsertSink)  # type: ignore[union-attr]
    assert t.sink.table.primary_key == ["id"] and isinstance(c.sink, KafkaSink)  # type: ignore[union-attr]


def test_a_warehouse_target_table_stays_a_table_name() -> None:
    target = {"kind": "postgres", "host": "h", "database": "d", "user": "u", "table": "users"}
    job = {**_materialize({"table": "users"}), "target": target}
    p = Pipeline.model_validate(_pipeline([job], users={"connection": "main", "ddl": USERS}))
    assert isinstance(p.jobs[0].target, PostgresTarget) and p.jobs[0].target.table == "users"  # type: ignore[union-attr]


BAD = """\
version: 1
connections:
  main: {bootstrap_servers: "b:9092"}
tables:
  users: {connection: main, ddl: "%s"}
jobs:
  - name: users
    kind: materialize
    source: {table: %s}
    target: {kind: delta, path: /tmp/users}
"""


def test_an_unknown_table_name_is_an_error_at_its_line_naming_the_defined_ones() -> None:
    with pytest.raises(SpecError) as caught:
        Pipeline.from_yaml(BAD % (USERS.replace("\n", " "), "user"))
    assert caught.value.field == "jobs.0.source.table" and caught.value.file_line == 9
    assert "'user'" in caught.value.message and "defined: users" in (caught.value.fix or "")


@pytest.mark.parametrize(
    ("tables", "source", "field", "says"),
    [
        ({"users": {"connection": "main", "ddl": USERS}}, {"table": "users", "kind": "kafka"},
         "jobs.0.source.kind", "'upsert-kafka' table"),
        ({"clicks": {"connection": "main", "ddl": CLICKS}}, {"table": "clicks", "kind": "upsert-kafka"},
         "jobs.0.source.kind", "'kafka' table"),
        ({"users": {"connection": "nowhere", "ddl": USERS}}, {"table": "users"},
         "tables.users.connection", "'nowhere'"),
        ({"users": {"connection": "main", "ddl": USERS.replace("'upsert-kafka'", "'filesystem'")}},
         {"table": "users"}, "tables.users.connector", "'filesystem'"),
        ({"users": {"connection": "main"}}, {"table": "users"}, "tables.users.ddl", "one of the two"),
        ({"users": {"connection": "main", "ddl": USERS, "primary_key": ["id"]}}, {"table": "users"},
         "tables.users.primary_key", "cannot be combined"),
        ({"users": {"connection": "main", "ddl": USERS.replace("'topic' = 'users', ", "")}}, {"table": "users"},
         "tables.users", "topic"),
    ],
)  # fmt: skip
def test_a_wrong_table_or_kind_is_an_error_at_the_field(
    tables: dict[str, Any], source: dict[str, Any], field: str, says: str
) -> None:
    with pytest.raises(SpecError) as caught:
        Pipeline.model_validate(_pipeline([_materialize(source)], **tables))
    fields = [p.field for p in caught.value.problems]
    assert any(f.startswith(field) for f in fields), (fields, str(caught.value))
    assert says in str(caught.value)


def test_the_example_in_the_jobs_guide_loads() -> None:
    guide = (ROOT / "docs" / "jobs.md").read_text()
    section = guide[guide.index("### Tables defined once") :]
    text = section[section.index("```yaml\n") + 8 : section.index("```\n", section.index("```yaml\n") + 8)]
    env = {"KAFKA_BOOTSTRAP": "a:9092", "KAFKA_REPLICA_BOOTSTRAP": "b:9092"}
    p = Pipeline.from_yaml(text, env)
    flow = p.job("clicks-per-region")
    assert isinstance(flow.sources["clicks"], KafkaSource) and flow.sources["users"].connection == "replica"  # type: ignore[union-attr]
    assert flow.sink.table.primary_key == ["region"]  # type: ignore[union-attr]


def _flow(sql: str, **more: Any) -> dict[str, Any]:
    tables = {"clicks": {"connection": "main", "ddl": CLICKS},
              "users": {"connection": "main", "ddl": USERS}}  # fmt: skip
    return _pipeline([{"name": "t", "kind": "topic-to-topic", "sql": sql, **more}], **tables)


def test_a_job_given_as_a_flink_insert_reads_and_writes_the_tables_it_names() -> None:
    sql = "INSERT INTO users\nSELECT id, MAX(url) FROM clicks GROUP BY id"
    p = Pipeline.model_validate(_flow(sql))
    job = p.job("t")
    assert isinstance(job, TopicToTopicJob) and job.sql == sql
    assert list(job.sources) == ["clicks"] and isinstance(job.sources["clicks"], KafkaSource)
    assert job.sink.table.topic == ["users"] and "GROUP BY" in job.query
    assert Pipeline.model_validate(p.to_json_dict()) == p  # written back, read again
    driver = p.only("t")  # what a driver receives: no 'tables', the job whole
    assert driver.tables == {} and Pipeline.model_validate_json(json.dumps(driver.to_json_dict())) == driver


@pytest.mark.parametrize(
    ("flink", "spark"),
    [
        ("CAST(url AS TIMESTAMP(3))", "CAST(url AS TIMESTAMP_NTZ)"),
        ("CAST(url AS TIMESTAMP_LTZ(3))", "CAST(url AS TIMESTAMP_LTZ)"),
        ("CAST(url AS BYTES)", "CAST(url AS BINARY)"),
        ("SPLIT_INDEX(url, '.', 1)", "IF(url = '', NULL, GET(SPLIT(url, CONCAT('\\\\Q', '.', '\\\\E')), 1))"),
        ("JSON_VALUE(url, '$.a')", "GET_JSON_OBJECT(url, '$.a')"),
        ("TO_TIMESTAMP(url)", "TO_TIMESTAMP_NTZ(url)"),
        ("PROCTIME()", "CURRENT_TIMESTAMP()"),
        ("`url`", "`url`"),
    ],
)
def test_flink_expressions_become_spark_ones(flink: str, spark: str) -> None:
    job = Pipeline.model_validate(_flow(f"INSERT INTO users SELECT id, {flink} FROM clicks")).job("t")
    assert " ".join(job.query.split()) == f"SELECT id, {spark} FROM clicks"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("sql", "more", "says"),
    [
        ("INSERT INTO users\nSELECT id, url FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' MINUTES))",
         {}, "TUMBLE: an event-time window has no equivalent here yet (line 2, column 27)"),
        ("INSERT INTO nowhere SELECT id, url FROM clicks", {}, "names table 'nowhere'"),
        ("INSERT INTO users SELECT id, url FROM clicks", {"query": "SELECT 1"}, "is given with 'query'"),
        ("SELECT id FROM clicks", {}, "is not INSERT INTO table SELECT"),
    ],
)  # fmt: skip
def test_a_flink_insert_that_cannot_run_here_is_an_error_at_sql(
    sql: str, more: dict[str, Any], says: str
) -> None:
    with pytest.raises(SpecError) as caught:
        Pipeline.model_validate(_flow(sql, **more))
    assert caught.value.field == "jobs.0.sql" and says in str(caught.value), str(caught.value)
