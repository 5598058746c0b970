"""The core pieces the orchestrator adapters share: backfill ends, connection overrides, secrets moved
to the driver's environment for spark-submit, and the lag condition (pure, on handmade reports)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import pytest

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.jobs import Pipeline
from upsert_kafka_ops.jobs.gates import LagCondition, judge, new_data_from_report
from upsert_kafka_ops.kafka.admin import TopicInfo
from upsert_kafka_ops.kafka.lag import LagReport, PartitionLag
from upsert_kafka_ops.pipeline import BackfillJob, as_backfill, parse_until
from upsert_kafka_ops.runtime.execute import externalize_secrets
from upsert_kafka_ops.spec.connection import KafkaConnection, SecretRef

DDL = """CREATE TABLE users (id BIGINT, name STRING, PRIMARY KEY (id) NOT ENFORCED)
WITH ('connector' = 'upsert-kafka', 'topic' = 'users', 'key.format' = 'json', 'value.format' = 'json')"""


def _pipeline() -> Pipeline:
    job = {"name": "users", "kind": "materialize", "source": {"connection": "main", "table": {"ddl": DDL}},
           "target": {"kind": "delta", "path": "/tmp/users"}}  # fmt: skip
    return Pipeline.model_validate({"connections": {"main": {"bootstrap_servers": "b:9092"}}, "jobs": [job]})


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (None, "latest"),
        ("latest", "latest"),
        ("1700000000000", {"timestamp_ms": 1_700_000_000_000}),
        (1_700_000_000_000, {"timestamp_ms": 1_700_000_000_000}),
        (
            "2026-11-22T10:00:00Z",
            {"timestamp_ms": int(datetime(2026, 11, 22, 10, tzinfo=timezone.utc).timestamp() * 1000)},
        ),
        (
            "2026-11-22T10:00:00",
            {"timestamp_ms": int(datetime(2026, 11, 22, 10, tzinfo=timezone.utc).timestamp() * 1000)},
        ),
        (
            "2026-11-22T11:00:00+01:00",
            {"timestamp_ms": int(datetime(2026, 11, 22, 10, tzinfo=timezone.utc).timestamp() * 1000)},
        ),
        ('{"users": {"0": 5}}', {"offsets": {"users": {"0": 5}}}),
        ({"offsets": {"users": {"0": 5}}}, {"offsets": {"users": {"0": 5}}}),
    ],
)
def test_parse_until_reads_what_users_type(given: Any, expected: Any) -> None:
    assert parse_until(given) == expected


def test_parse_until_names_the_field_and_the_forms() -> None:
    with pytest.raises(SpecError) as exc:
        parse_until("yesterday", field="params.end")
    assert exc.value.field == "params.end" and "ISO-8601" in str(exc.value)


def test_as_backfill_turns_a_materialize_job_into_a_bounded_rebuild() -> None:
    job = _pipeline().job("users")
    back = as_backfill(job, "1700000000000", rewind=True)
    assert isinstance(back, BackfillJob)
    assert (back.name, back.until, back.rewind, back.target) == (
        "users",
        {"timestamp_ms": 1_700_000_000_000},
        True,
        job.target,
    )  # type: ignore[union-attr]
    again = as_backfill(back, None, None)  # a backfill keeps its end and rewind unless given
    assert (again.until, again.rewind) == (back.until, True)
    assert as_backfill(back, "latest", False).until == "latest"


def test_with_connections_replaces_only_named_connections() -> None:
    p = _pipeline()
    conn = KafkaConnection(bootstrap_servers="other:9093")
    assert p.with_connections({"main": conn}).connections["main"] == conn
    assert p.connections["main"].bootstrap_servers == "b:9092"  # the original is unchanged
    with pytest.raises(SpecError) as exc:
        p.with_connections({"nope": conn})
    assert exc.value.field == "connections" and "main" in str(exc.value)


def test_in_process_secrets_become_environment_references_for_spark_submit() -> None:
    conn = KafkaConnection(
        bootstrap_servers="b:9092", security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", username="u",
        password=SecretRef.from_value("s3cret-pass"), ssl_keystore_password=SecretRef(env="KS_PASS"),
    )  # fmt: skip
    portable, env = externalize_secrets(_pipeline().with_connections({"main": conn}))
    assert env == {"UKO_SECRET_MAIN_PASSWORD": "s3cret-pass"}
    text = json.dumps(portable.to_json_dict())
    assert "s3cret-pass" not in text
    main = portable.connections["main"]
    assert main.password == SecretRef(env="UKO_SECRET_MAIN_PASSWORD")
    assert main.ssl_keystore_password == SecretRef(env="KS_PASS")  # references stay as they are


def _report(committed: list[int | None], end: list[int], time_lag: float | None = None) -> LagReport:
    parts = tuple(
        PartitionLag(
            topic="t",
            partition=i,
            committed=c,
            earliest=0,
            end=e,
            lag=e if c is None else e - c,  # no commit: everything from the earliest (0) waits
            time_lag_s=time_lag,
        )
        for i, (c, e) in enumerate(zip(committed, end, strict=True))
    )
    return LagReport(group="g", isolation="read_committed", observed_at=1000.0, partitions=parts,
                     topics={"t": TopicInfo("t", "id-1", len(parts))})  # fmt: skip


def test_lag_condition_needs_a_limit_and_a_possible_range() -> None:
    with pytest.raises(SpecError, match="at least one limit"):
        LagCondition()
    with pytest.raises(SpecError) as exc:
        LagCondition(min_offset_lag=10, max_offset_lag=5)
    assert exc.value.field == "min_offset_lag"


def test_judge_compares_offset_and_time_lag_with_the_limits() -> None:
    low = _report([10, 20], [12, 20], time_lag=3.0)
    assert judge(low, LagCondition(max_offset_lag=2)).passed
    gate = judge(low, LagCondition(max_offset_lag=1))
    assert not gate.passed and "offset lag 2 > 1" in gate.reason
    assert not judge(low, LagCondition(max_time_lag_s=2)).passed
    assert judge(low, LagCondition(max_time_lag_s=5)).passed
    # enough new data: wait until at least N records are behind
    assert not judge(low, LagCondition(min_offset_lag=3)).passed
    assert judge(_report([10, 20], [15, 20]), LagCondition(min_offset_lag=3)).passed
    # a partition without a commit counts everything from its earliest offset: never ran != caught up
    never = _report([None, 20], [7, 20])
    gate = judge(never, LagCondition(max_offset_lag=0))
    assert not gate.passed and "offset lag 7 > 0" in gate.reason
    assert judge(never, LagCondition(min_offset_lag=7)).passed
    # the window comes back as JSON for the next observation
    assert judge(low, LagCondition(max_offset_lag=5)).window["version"] == 1


def test_new_data_from_a_report_counts_records_past_the_processed_offsets() -> None:
    nd = new_data_from_report("users", _report([10, None], [15, 3]))
    assert (nd.new_records, nd.available, nd.never_ran) == (8, True, False)
    assert nd.partitions == {"t": {"0": 5, "1": 3}} and nd.end_offsets == {"t": {"0": 15, "1": 3}}
    fresh = new_data_from_report("users", _report([None], [0]))
    assert (fresh.available, fresh.never_ran) == (False, True)


def test_upstream_jobs_follow_topics_and_tables_between_jobs() -> None:
    from pathlib import Path

    from upsert_kafka_ops.jobs.graph import upstream_jobs

    demo = Pipeline.load(Path(__file__).parents[2] / "pipelines" / "demo.yaml", env={})
    assert upstream_jobs(demo) == {
        "publish-users": [],
        "users-to-delta": ["publish-users"],
        "users-history": ["publish-users"],
        "users-live": ["publish-users"],  # continuous: Airflow's task for it waits for its lag
        "pageviews-per-region": ["publish-users"],
        "pageviews-per-page": [],
    }


def test_a_cycle_between_jobs_is_named() -> None:
    from upsert_kafka_ops.jobs.graph import upstream_jobs

    def t2t(name: str, src: str, dst: str) -> dict[str, Any]:
        ddl = "CREATE TABLE {} (k BIGINT, v BIGINT, PRIMARY KEY (k) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = '{}', 'key.format' = 'json', 'value.format' = 'json')"
        return {"name": name, "kind": "topic-to-topic", "query": f"SELECT k, v FROM {src}",
                "sources": {src: {"connection": "main", "table": {"ddl": ddl.format(src, src)}}},
                "sink": {"connection": "main", "table": {"ddl": ddl.format(dst, dst)}}}  # fmt: skip

    p = Pipeline.model_validate({"connections": {"main": {"bootstrap_servers": "b:9092"}},
                                 "jobs": [t2t("a", "x", "y"), t2t("b", "y", "x")]})  # fmt: skip
    with pytest.raises(SpecError, match=r"cycle: a -> b -> a"):
        upstream_jobs(p)
