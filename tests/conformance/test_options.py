"""Documented options on the same records, through real Flink and through the engine: the same table,
or both refuse the read."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Producer
from tests.conformance import flink
from tests.conformance.values import canon

from upsert_kafka_ops import UpsertKafkaTable, materialize
from upsert_kafka_ops.errors import UpsertKafkaOpsError
from upsert_kafka_ops.local import LocalKafka

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: a record without the field ``v`` (and one with ``v`` null), for fail-on-missing-field
MISSING_FIELD = [
    (b'{"id":1}', b'{"id":1,"v":"a"}'),
    (b'{"id":2}', b'{"id":2}'),
    (b'{"id":3}', b'{"id":3,"v":null}'),
]
CASES: dict[str, tuple[dict[str, str], list[tuple[bytes, bytes | None]]]] = {
    "missing_field_is_null": ({}, MISSING_FIELD),
    "missing_field_fails": ({"value.json.fail-on-missing-field": "true"}, MISSING_FIELD),
    # the topics have two partitions: partition 1 is not listed, and there is no group to end it at
    "bounded_offsets_unlisted": (
        {"scan.bounded.mode": "specific-offsets", "scan.bounded.specific-offsets": "partition:0,offset:1"},
        MISSING_FIELD,
    ),
}


def _ddl(name: str, topic: str, bootstrap: str, options: dict[str, str]) -> str:
    opts = {"connector": "upsert-kafka", "topic": topic, "properties.bootstrap.servers": bootstrap,
            "key.format": "json", "value.format": "json", "scan.bounded.mode": "latest-offset", **options}  # fmt: skip
    with_ = ", ".join(f"'{k}' = '{v}'" for k, v in opts.items())
    return f"CREATE TABLE `{name}` (`id` BIGINT, `v` STRING, PRIMARY KEY (`id`) NOT ENFORCED) WITH ({with_})"


@pytest.fixture(scope="module")
def runs(
    kafka: LocalKafka, flink_jars: list[Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    ddl = {}
    for name, (options, records) in CASES.items():
        topic = f"opt-{name}-{uuid.uuid4().hex[:8]}"
        kafka.create_topic(topic, partitions=2, config={"cleanup.policy": "compact"})
        producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
        for key, value in records:
            producer.produce(topic, key=key, value=value, partition=0)
        assert producer.flush(30) == 0
        ddl[name] = _ddl(name, topic, kafka.bootstrap_servers, options)
    log = tmp_path_factory.mktemp("flink") / "flink.log"
    outcomes = flink.run([flink.Case(n, n, d) for n, d in ddl.items()], flink_jars, log)
    return {"ddl": ddl, "flink": outcomes}


def _engine(spark: SparkSession, ddl: str) -> dict[str, list[Any]] | str:
    table = UpsertKafkaTable.from_flink_ddl(ddl)
    try:
        rows = materialize(spark, table).df.collect()
    except UpsertKafkaOpsError as exc:
        return f"error: {exc}"
    return {str(canon(r["id"])): [canon(v) for v in r] for r in rows}


def test_a_missing_json_field_reads_as_null_by_default(runs: dict[str, Any], spark: SparkSession) -> None:
    outcome: flink.Outcome = runs["flink"]["missing_field_is_null"]
    assert outcome.error is None
    want = {k.strip("[]"): v for k, v in outcome.table(["id"]).items()}
    assert want == {"1": [1, "a"], "2": [2, None], "3": [3, None]}
    assert _engine(spark, runs["ddl"]["missing_field_is_null"]) == want


def test_fail_on_missing_field_fails_the_read_in_both(runs: dict[str, Any], spark: SparkSession) -> None:
    outcome: flink.Outcome = runs["flink"]["missing_field_fails"]
    assert outcome.error is not None and "field is missing" in outcome.error, outcome.error
    got = _engine(spark, runs["ddl"]["missing_field_fails"])
    assert isinstance(got, str) and "offset 1" in got, got


def test_bounded_offsets_that_leave_a_partition_out_fail_in_both_without_a_group(
    runs: dict[str, Any], spark: SparkSession
) -> None:
    outcome: flink.Outcome = runs["flink"]["bounded_offsets_unlisted"]
    assert outcome.error is not None, outcome.changes
    got = _engine(spark, runs["ddl"]["bounded_offsets_unlisted"])
    assert isinstance(got, str) and "partition 1" in got and "properties.group.id" in got, got
