"""Pipeline files and job specs: round trips, references between parts, and errors that name the fix."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.jobs import Pipeline
from upsert_kafka_ops.pipeline import (
    BackfillJob,
    MaterializeJob,
    PostgresTarget,
    TopicToTopicJob,
    expand_env,
)
from upsert_kafka_ops.spec.cadence import cron_expression, longest_gap, shortest_gap

DDL = """CREATE TABLE users (id BIGINT, name STRING, PRIMARY KEY (id) NOT ENFORCED)
WITH ('connector' = 'upsert-kafka', 'topic' = 'users', 'key.format' = 'json', 'value.format' = 'json')"""


def _pipeline(**job: Any) -> dict[str, Any]:
    base = {"name": "users", "kind": "materialize", "source": {"connection": "main", "table": {"ddl": DDL}},
            "target": {"kind": "delta", "path": "/tmp/users"}}  # fmt: skip
    return {"connections": {"main": {"bootstrap_servers": "b:9092"}}, "jobs": [{**base, **job}]}


def test_yaml_and_json_round_trip_keep_every_field() -> None:
    p = Pipeline.model_validate(_pipeline())
    assert Pipeline.from_yaml(p.to_yaml()) == p
    assert Pipeline.model_validate_json(json.dumps(p.to_json_dict())) == p
    job = p.job("users")
    assert isinstance(job, MaterializeJob) and job.source.table.primary_key == ["id"]
    assert job.consumer_group == "upsert-kafka-ops.users"


def test_options_form_and_ddl_form_build_the_same_table() -> None:
    options = {"connector": "upsert-kafka", "topic": "users", "key.format": "json", "value.format": "json"}
    table = {"name": "users", "options": options, "columns": [{"name": "id", "type": "BIGINT"},
             {"name": "name", "type": "STRING"}], "primary_key": ["id"]}  # fmt: skip
    a = Pipeline.model_validate(_pipeline()).job("users")
    b = Pipeline.model_validate(_pipeline(source={"connection": "main", "table": table})).job("users")
    assert isinstance(a, MaterializeJob) and isinstance(b, MaterializeJob)
    assert a.source.table.to_options() == b.source.table.to_options()


def test_an_unknown_connection_names_the_job_and_the_defined_ones() -> None:
    bad = _pipeline(source={"connection": "other", "table": {"ddl": DDL}})
    with pytest.raises(SpecError, match=r"jobs.0.connection.*'other'.*defined: main"):
        Pipeline.model_validate(bad)


MISSPELLED = """\
version: 1
connections:
  local:
    bootstrap_servers: 127.0.0.1:9092
    securty_protocol: PLAINTEXT
jobs:
  - name: users-to-delta
    kind: materialize
    source:
      connection: local
      table:
        ddl: |
          CREATE TABLE users (id BIGINT, PRIMARY KEY (id) NOT ENFORCED)
          WITH ('connector' = 'upsert-kafka', 'topic' = 'u', 'key.format' = 'csv', 'value.format' = 'json')
    targt: {kind: delta, path: /tmp/x}
  - name: two
    kind: materialize
    source: {connection: local, table: {ddl: "CREATE VIEW"}}
    target: {kind: delta, pth: /tmp/y}
"""


def test_every_problem_of_a_file_is_named_with_its_path_line_and_a_suggestion() -> None:
    with pytest.raises(SpecError) as info:
        Pipeline.from_yaml(MISSPELLED)
    got = [(p.field, p.file_line, p.message.split(";")[0], p.fix) for p in info.value.problems]
    assert got == [
        ("connections.local.securty_protocol", 5, "unknown field", "rename it to 'security_protocol'."),
        ("jobs.0.targt", 15, "unknown field", "rename it to 'target'."),  # not also "target: required"
        (
            "jobs.1.source.table.ddl",
            18,
            "syntax error: unexpected 'VIEW' (line 1, column 8)",
            info.value.problems[2].fix,
        ),
        ("jobs.1.target.pth", 19, "unknown field", "rename it to 'path'."),
    ]
    text = str(info.value)
    assert text.startswith(
        "4 problems:\n  - connections.local.securty_protocol (line 5): unknown field; did you mean"
    )
    assert "materialize" not in text  # pydantic's tag for the union member is in no file


def test_duplicate_job_names_and_bad_names_are_refused() -> None:
    data = _pipeline()
    data["jobs"].append(dict(data["jobs"][0]))
    with pytest.raises(SpecError, match="duplicate job name"):
        Pipeline.model_validate(data)
    with pytest.raises(SpecError, match="not a valid job name"):
        Pipeline.model_validate(_pipeline(name="9 lives"))


def test_a_schedule_is_a_cron_expression_or_a_preset_and_a_typo_names_the_field() -> None:
    assert Pipeline.model_validate(_pipeline(schedule="*/15 * * * *")).jobs[0].schedule == "*/15 * * * *"
    assert cron_expression("@hourly") == "0 * * * *" and cron_expression(" 0  9 * * 1-5 ") == "0 9 * * 1-5"
    with pytest.raises(SpecError) as info:
        Pipeline.model_validate(_pipeline(schedule="every hour"))
    assert info.value.field == "jobs.0.schedule" and "'every hour' is not a cron expression" in str(
        info.value
    )
    assert "@hourly" in (info.value.fix or "")
    with pytest.raises(SpecError, match="not a cron expression"):
        cron_expression("61 * * * *")  # minute out of range


def test_the_longest_gap_of_a_schedule_covers_its_weekends_and_long_months() -> None:
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert longest_gap("@hourly", start) == timedelta(hours=1)
    assert longest_gap("0 9 * * 1-5", start) == timedelta(days=3)  # Friday 9:00 to Monday 9:00
    assert longest_gap("@monthly", start) == timedelta(days=31)
    assert shortest_gap("0 9 * * 1-5", start) == timedelta(days=1) and shortest_gap(
        "@monthly", start
    ) == timedelta(days=28)


def test_a_literal_password_is_refused_even_when_substituted_from_the_environment() -> None:
    text = "connections:\n  main:\n    bootstrap_servers: b:9092\n    password: ${PW}\njobs: []\n"
    with pytest.raises(SpecError, match="literal secret is not allowed"):
        Pipeline.from_yaml(text, env={"PW": "hunter2"})
    data = _pipeline()
    data["jobs"][0]["target"] = {"kind": "postgres", "host": "h", "database": "d", "user": "u",
                                 "password": {"env": "PGPASS"}, "table": "public.users"}  # fmt: skip
    p = Pipeline.model_validate(data)
    target = p.job("users").target  # type: ignore[union-attr]
    assert isinstance(target, PostgresTarget)
    assert p.to_json_dict()["jobs"][0]["target"]["password"] == {"env": "PGPASS"}
    assert "PGPASS" in repr(target) and target.schema_name == "public"


def test_env_expansion_with_defaults_and_a_clear_error_when_unset() -> None:
    assert expand_env("a ${X} ${Y:-dflt}", {"X": "1"}) == "a 1 dflt"
    with pytest.raises(SpecError, match=r"\$\{NOPE\}, which is not set.*export NOPE"):
        expand_env("${NOPE}", {})


def test_postgres_table_names_are_checked() -> None:
    with pytest.raises(SpecError, match="table: 'a;drop' is not a plain"):
        PostgresTarget(kind="postgres", host="h", database="d", user="u", table="a;drop")


def test_backfill_until_forms() -> None:
    base = {"name": "b", "kind": "backfill", "source": {"connection": "main", "table": {"ddl": DDL}},
            "target": {"kind": "parquet", "path": "/tmp/x"}}  # fmt: skip
    assert BackfillJob.model_validate({**base, "until": {"timestamp_ms": 5}}).until_bound() == {
        "timestamp_ms": 5
    }
    offsets = BackfillJob.model_validate({**base, "until": {"offsets": {"users": {"0": 7}}}})
    assert offsets.until_bound() == {"users": {"0": 7}}
    with pytest.raises(SpecError, match="until: cannot use 'yesterday'"):
        BackfillJob.model_validate({**base, "until": "yesterday"})


def test_topic_to_topic_sources_default_to_upsert_and_need_sql_view_names() -> None:
    sink = {"connection": "main", "table": {"ddl": DDL}}
    job = TopicToTopicJob.model_validate({"name": "t", "kind": "topic-to-topic", "query": "SELECT * FROM u",
                                          "sources": {"u": {"connection": "main", "table": {"ddl": DDL}}},
                                          "sink": sink})  # fmt: skip
    assert job.sources["u"].kind == "upsert-kafka"
    with pytest.raises(SpecError, match="not a valid SQL view name"):
        TopicToTopicJob.model_validate({"name": "t", "kind": "topic-to-topic", "query": "q", "sink": sink,
                                        "sources": {"my-view": {"connection": "main", "table": {"ddl": DDL}}}})  # fmt: skip


def test_only_keeps_one_job_and_the_connections_it_uses() -> None:
    data = _pipeline()
    data["connections"]["other"] = {"bootstrap_servers": "o:9092"}
    single = Pipeline.model_validate(data).only("users")
    assert list(single.connections) == ["main"] and [j.name for j in single.jobs] == ["users"]
    with pytest.raises(SpecError, match=r"no job named 'x'.*use one of: users"):
        single.job("x")


def test_snapshot_targets_belong_to_backfills_and_need_their_own_column_name() -> None:
    snap = {"kind": "delta", "path": "/tmp/daily", "as_of_column": "as_of"}
    with pytest.raises(SpecError, match=r"target\.as_of_column.*kind: backfill"):
        Pipeline.model_validate(_pipeline(target=snap))
    ok = Pipeline.model_validate(_pipeline(kind="backfill", target=snap)).job("users")
    assert isinstance(ok, BackfillJob) and ok.snapshot
    clash = {**snap, "as_of_column": "name"}
    with pytest.raises(SpecError, match=r"target\.as_of_column.*'name' is also a column"):
        Pipeline.model_validate(_pipeline(kind="backfill", target=clash))
    latest = Pipeline.model_validate(_pipeline(kind="backfill")).job("users")
    assert isinstance(latest, BackfillJob) and not latest.snapshot


def test_cdc_sources_take_a_fold_key_and_plain_tables_do_not() -> None:
    dbz = """CREATE TABLE dbz_users (user_id BIGINT, user_name STRING)
        WITH ('connector' = 'kafka', 'topic' = 'dbz_users', 'format' = 'debezium-json')"""
    plain = dbz.replace("debezium-json", "json")
    sink = {"connection": "main", "table": {"ddl": DDL}}

    def job(ddl: str, **src: Any) -> dict[str, Any]:
        return {"connections": {"main": {"bootstrap_servers": "b:9092"}}, "jobs": [{
            "name": "t", "kind": "topic-to-topic", "query": "SELECT user_id AS id, user_name AS name FROM s",
            "sources": {"s": {"kind": "kafka", "connection": "main", "table": {"ddl": ddl}, **src}}, "sink": sink}]}  # fmt: skip

    ok = Pipeline.model_validate(job(dbz, key=["user_id"])).job("t")
    assert isinstance(ok, TopicToTopicJob) and ok.sources["s"].key == ["user_id"]  # type: ignore[union-attr]
    with pytest.raises(SpecError, match=r"key.*applies to changelog formats only"):
        Pipeline.model_validate(job(plain, key=["user_id"]))
    with pytest.raises(SpecError, match=r"key.*'region' is not a column"):
        Pipeline.model_validate(job(dbz, key=["region"]))


def test_read_append_refuses_a_changelog_table() -> None:
    from upsert_kafka_ops.engine import read_append
    from upsert_kafka_ops.spec.table import KafkaTable

    table = KafkaTable.from_options({"topic": "t", "format": "canal-json"}, [{"name": "a", "type": "INT"}])
    with pytest.raises(SpecError, match=r"changelog, not an append-only table.*read_cdc"):
        read_append(None, table)  # type: ignore[arg-type]  # refused before any Spark use


def test_materialize_jobs_take_a_cdc_source_only_with_its_key() -> None:
    dbz = """CREATE TABLE dbz (id BIGINT, name STRING)
        WITH ('connector' = 'kafka', 'topic' = 'dbz', 'format' = 'maxwell-json')"""
    src = {"kind": "kafka", "connection": "main", "table": {"ddl": dbz}}
    ok = Pipeline.model_validate(_pipeline(source={**src, "key": ["id"]})).job("users")
    assert isinstance(ok, MaterializeJob)
    view = ok.source.upsert_view()  # type: ignore[union-attr]
    assert view.primary_key == ["id"] and view.topic == ["dbz"]
    with pytest.raises(SpecError, match=r"source\.key.*needs the key of its rows"):
        Pipeline.model_validate(_pipeline(source=src))
    plain = {**src, "table": {"ddl": dbz.replace("maxwell-json", "json")}}
    with pytest.raises(SpecError, match=r"source.*append-only json table"):
        Pipeline.model_validate(_pipeline(source=plain))
    topic_target = {"kind": "topic", "connection": "main", "table": {"ddl": DDL}}
    with pytest.raises(SpecError, match=r"target.*warehouse targets only"):
        Pipeline.model_validate(
            _pipeline(kind="backfill", source={**src, "key": ["id"]}, target=topic_target)
        )


@pytest.mark.parametrize("kind", ["materialize", "backfill"])
def test_a_folded_cdc_source_refuses_a_start_after_the_earliest_offset(kind: str) -> None:
    dbz = """CREATE TABLE dbz (id BIGINT, name STRING) WITH ('connector' = 'kafka', 'topic' = 'dbz',
        'format' = 'debezium-json', 'scan.startup.mode' = 'latest-offset')"""
    src = {"kind": "kafka", "connection": "main", "table": {"ddl": dbz}, "key": ["id"]}
    with pytest.raises(SpecError, match="'latest-offset': a warehouse job folds its source") as info:
        Pipeline.model_validate(_pipeline(kind=kind, source=src))
    assert info.value.field.endswith("source.table.scan.startup.mode") and info.value.fix
    earliest = {**src, "table": {"ddl": dbz.replace("latest-offset", "earliest-offset")}}
    job = Pipeline.model_validate(_pipeline(kind=kind, source=earliest)).job("users")
    assert job.source.table.startup_mode == "earliest-offset"  # type: ignore[union-attr]


def test_a_sink_table_with_several_topics_is_refused_when_the_pipeline_is_read() -> None:
    from upsert_kafka_ops.errors import SpecError
    from upsert_kafka_ops.pipeline import UpsertSink

    table = {"name": "s", "options": {"connector": "upsert-kafka", "topic": "t1;t2", "key.format": "json",
             "value.format": "json"}, "columns": [{"name": "id", "type": "BIGINT"}], "primary_key": ["id"]}  # fmt: skip
    with pytest.raises(SpecError, match="exactly one topic") as info:
        UpsertSink.model_validate({"connection": "main", "table": table})
    assert info.value.field == "sink.table.topic" and "'t1;t2'" in str(info.value)


@pytest.mark.parametrize(
    ("options", "connection", "field", "message"),
    [
        ("'properties.security.protocol' = 'SSL'", {"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN",
         "username": "u", "password": {"env": "P"}}, "jobs.0.source.properties.security.protocol",
         "the connection sets security_protocol"),
        ("'properties.security.protocol' = 'SASL_PLAINTEXT', 'properties.sasl.mechanism' = 'GSSAPI', "
         "'properties.connector.kerberos.principal' = 'etl@EX.COM'", {}, "jobs.0.source.kerberos_keytab",
         "go together"),
    ],
)  # fmt: skip
def test_a_tables_security_is_merged_with_its_connection_at_validation(
    options: str, connection: dict[str, Any], field: str, message: str
) -> None:
    """What a run would refuse when it merges a table's security into its connection (two explicit
    values, a half-given Kerberos login) is refused when the pipeline file is read, naming the job."""
    ddl = DDL.replace("'value.format' = 'json'", f"'value.format' = 'json', {options}")
    data = _pipeline(source={"connection": "main", "table": {"ddl": ddl}})
    data["connections"]["main"].update(connection)
    with pytest.raises(SpecError, match=message) as info:
        Pipeline.model_validate(data)
    assert info.value.field == field


def test_a_continuous_trigger_is_a_materialize_jobs_with_an_interval_and_no_schedule_or_full_mode() -> None:
    job = Pipeline.model_validate(_pipeline(trigger={"continuous": True, "interval": "500ms"})).job("users")
    assert job.continuous and job.trigger is not None and job.trigger.interval_s == 0.5
    assert Pipeline.from_yaml(Pipeline.model_validate(_pipeline(trigger={"continuous": True})).to_yaml()).job(
        "users"
    ).trigger == job.trigger.model_copy(update={"interval": "2s"})
    assert (
        not Pipeline.model_validate(_pipeline(trigger={"continuous": False}, mode="full"))
        .job("users")
        .continuous
    )
    refused = {
        "trigger.interval": _pipeline(trigger={"continuous": True, "interval": "50ms"}),
        "schedule": _pipeline(trigger={"continuous": True}, schedule="@hourly"),
        "mode": _pipeline(trigger={"continuous": True}, mode="full"),
        "trigger.continuous": _pipeline(kind="backfill", trigger={"continuous": True}),
        "execution": {
            **_pipeline(),
            "jobs": [
                {
                    "name": "t",
                    "kind": "topic-to-topic",
                    "query": "SELECT * FROM u",
                    "execution": "snapshot",
                    "trigger": {"continuous": True},
                    "sources": {"u": {"connection": "main", "table": {"ddl": DDL}}},
                    "sink": {"connection": "main", "table": {"ddl": DDL}},
                }
            ],
        },
    }
    for field, spec in refused.items():
        with pytest.raises(SpecError) as err:
            Pipeline.model_validate(spec)
        assert err.value.field.endswith(field), (field, err.value)
        assert err.value.fix, field
    with pytest.raises(SpecError, match="every batch would rewrite every key"):
        Pipeline.model_validate(refused["execution"])
    # a publish runs continuously from a Delta table's change feed, never from a query's full result
    sink = {"connection": "main", "table": {"ddl": DDL}}
    publish = {"name": "p", "kind": "publish", "sink": sink, "trigger": {"continuous": True}}
    feed = {**_pipeline(), "jobs": [{**publish, "source": {"kind": "delta-cdf", "path": "/tmp/src"}}]}
    assert Pipeline.model_validate(feed).job("p").continuous
    query = {**_pipeline(), "jobs": [{**publish, "source": {"kind": "query", "query": "SELECT 1 AS id"}}]}
    with pytest.raises(SpecError, match="every batch would send every row again") as err:
        Pipeline.model_validate(query)
    assert err.value.field.endswith("source") and "delta-cdf" in err.value.fix
