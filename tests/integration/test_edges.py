"""Input sizes and strings at their edges, through the engine against the real broker (issue 23,
item 7): topics with no record and with one, a 5 MB value, 10 KB keys, unicode and NUL bytes. Each
folds to what the plain-Python oracle folds, and writes back byte for byte what it read."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Producer
from tests.integration.oracle import fold, read_all

from upsert_kafka_ops.engine import materialize, write_snapshot
from upsert_kafka_ops.local import LocalKafka
from upsert_kafka_ops.spec.table import UpsertKafkaTable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration
BIG = 6 * 1024 * 1024  # room for a 5 MB value on the topic and in the producers


def _table(topic: str, bootstrap: str, key_type: str = "INT") -> UpsertKafkaTable:
    return UpsertKafkaTable.from_flink_ddl(
        f"CREATE TABLE t (id {key_type}, v STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ("
        f"'connector' = 'upsert-kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{bootstrap}', "
        f"'key.format' = 'json', 'value.format' = 'json', 'properties.max.request.size' = '{BIG}')"
    )


def _produce(bootstrap: str, topic: str, rows: list[tuple[Any, str | None]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": BIG})
    for key, v in rows:
        value = None if v is None else json.dumps({"id": key, "v": v}, ensure_ascii=False).encode()
        producer.produce(topic, key=json.dumps({"id": key}).encode(), value=value)
    assert producer.flush(60) == 0


def _folded(bootstrap: str, topic: str) -> dict[Any, str]:
    state = fold(read_all(bootstrap, [topic]), lambda k: json.loads(k)["id"], json.loads)
    return {k: v["v"] for k, v in state.items()}


def _engine(spark: SparkSession, table: UpsertKafkaTable) -> dict[Any, str]:
    with materialize(spark, table) as read:  # a read's rows stay cached until it is released
        assert read.df.storageLevel.useMemory
        rows = {r["id"]: r["v"] for r in read.df.collect()}
    assert not read.df.storageLevel.useMemory
    return rows


def test_topics_with_no_record_and_with_one(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    empty, one = new_topic(partitions=3), new_topic(partitions=3)
    read = materialize(spark, _table(empty, kafka.bootstrap_servers))
    assert read.df.count() == 0 and read.result.records_in == 0
    assert read.result.end_offsets == {empty: {"0": 0, "1": 0, "2": 0}}
    _produce(kafka.bootstrap_servers, one, [(1, "only")])
    assert _engine(spark, _table(one, kafka.bootstrap_servers)) == {1: "only"}


def test_a_5_mb_value_and_10_kb_keys_round_trip(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    config = {"max.message.bytes": str(BIG)}
    source, sink = new_topic(partitions=2, config=config), new_topic(partitions=2, config=config)
    huge = "".join(chr(0x20 + i % 90) for i in range(5 * 1024 * 1024))
    _produce(kafka.bootstrap_servers, source, [(1, "a"), (2, huge), (1, "b")])
    table = _table(source, kafka.bootstrap_servers)
    got = _engine(spark, table)
    assert got == _folded(kafka.bootstrap_servers, source) and len(got[2]) == 5 * 1024 * 1024
    # written back: the same bytes, one record per key
    read = materialize(spark, table)
    try:
        assert write_snapshot(read.df, _table(sink, kafka.bootstrap_servers)).records_out == 2
    finally:
        read.df.unpersist()
    assert _folded(kafka.bootstrap_servers, sink) == {1: "b", 2: huge}
    # keys of 10 KB (a STRING primary key)
    keyed = new_topic(partitions=2)
    keys = [("k" * 10_240)[:-1] + str(i) for i in range(4)]
    _produce(kafka.bootstrap_servers, keyed, [(k, f"v{i}") for i, k in enumerate(keys)] + [(keys[0], None)])
    assert _engine(spark, _table(keyed, kafka.bootstrap_servers, "STRING")) == {k: f"v{i}" for i, k in
                                                                               enumerate(keys) if i}  # fmt: skip


def test_unicode_and_nul_bytes_in_keys_and_values(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=2)
    strings = ["nul\x00inside", "emoji \U0001f680\U0001f469\u200d\U0001f4bb", "rtl \u05e9\u05dc\u05d5\u05dd",
               "combining e\u0301", "surrogate-free \uffff", "tab\tnewline\n", "", "quote\"backslash\\"]  # fmt: skip
    _produce(kafka.bootstrap_servers, topic, [(s, s[::-1]) for s in strings])
    table = _table(topic, kafka.bootstrap_servers, "STRING")
    got = _engine(spark, table)
    assert got == _folded(kafka.bootstrap_servers, topic) == {s: s[::-1] for s in strings}
