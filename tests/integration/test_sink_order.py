"""The sink against a plain-Python oracle: every change of a key reaches its partition in order whatever
Spark's task layout, the buffer options reduce a write to the last change per key, and
``write_snapshot`` sends a key again when only its headers changed."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from tests.integration.oracle import kafka_partition, read_all

from upsert_kafka_ops.engine import materialize, write_changelog, write_snapshot
from upsert_kafka_ops.local import LocalKafka
from upsert_kafka_ops.spec.connection import KafkaConnection
from upsert_kafka_ops.spec.table import UpsertKafkaTable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SCHEMA = "op STRING, seq BIGINT, id INT, v STRING"


def _table(topic: str, bootstrap: str, extra: str = "", columns: str = "") -> UpsertKafkaTable:
    return UpsertKafkaTable.from_flink_ddl(
        f"CREATE TABLE t (id INT, v STRING{columns}, PRIMARY KEY (id) NOT ENFORCED) WITH ("
        f"'connector' = 'upsert-kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{bootstrap}', "
        f"'key.format' = 'json', 'value.format' = 'json'{extra})"
    )


def _changes(seed: int, keys: int, n: int) -> list[tuple[str, int, int, str | None]]:
    rng = random.Random(seed)
    out = []
    for seq in range(n):
        k = rng.randrange(keys)
        out.append(("-D", seq, k, None) if rng.random() < 0.15 else ("+U", seq, k, f"v{seq}"))
    return out


def _written(bootstrap: str, topic: str) -> dict[int, list[str | None]]:
    """Each key's values (None for a tombstone) in offset order, checked to sit in the key's partition."""
    out: dict[int, list[str | None]] = {}
    for r in read_all(bootstrap, [topic]):
        assert r.key is not None and r.partition == kafka_partition(r.key, 4)
        value = None if r.value is None else json.loads(r.value)["v"]
        out.setdefault(json.loads(r.key)["id"], []).append(value)
    return out


@pytest.mark.parametrize("parallelism", [None, 3])
def test_every_change_reaches_its_partition_in_order(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str], parallelism: int | None
) -> None:
    topic = new_topic(partitions=4)
    extra = f", 'sink.parallelism' = '{parallelism}'" if parallelism else ""
    table = _table(topic, kafka.bootstrap_servers, extra)
    changes = _changes(seed=7, keys=40, n=3000)
    # shuffled rows over 8 Spark partitions: nothing but order_by says which change comes first
    rng = random.Random(1)
    df = spark.createDataFrame(rng.sample(changes, len(changes)), SCHEMA).repartition(8)
    result = write_changelog(
        df, table, KafkaConnection(bootstrap_servers=kafka.bootstrap_servers), order_by="seq"
    )

    want: dict[int, list[str | None]] = {}
    for _, _, k, v in changes:
        want.setdefault(k, []).append(v)
    assert _written(kafka.bootstrap_servers, topic) == want
    assert (result.records_out, result.distinct_keys) == (3000, 40)
    assert result.tombstones_out == sum(1 for op, *_ in changes if op == "-D")


def test_the_buffer_options_write_the_last_change_per_key(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=4)
    buffered = ", 'sink.buffer-flush.max-rows' = '100', 'sink.buffer-flush.interval' = '1s'"
    table = _table(topic, kafka.bootstrap_servers, buffered)
    changes = _changes(seed=8, keys=30, n=1000)
    df = spark.createDataFrame(changes, SCHEMA).repartition(5)
    result = write_changelog(
        df, table, KafkaConnection(bootstrap_servers=kafka.bootstrap_servers), order_by="seq"
    )

    last: dict[int, str | None] = {}
    for _, _, k, v in changes:
        last[k] = v
    assert _written(kafka.bootstrap_servers, topic) == {k: [v] for k, v in last.items()}
    assert (result.records_in, result.records_out) == (1000, len(last))


def test_a_change_of_headers_alone_is_written_by_write_snapshot(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=4)
    table = _table(topic, kafka.bootstrap_servers, columns=", h MAP<STRING, BYTES> METADATA FROM 'headers'")
    conn = KafkaConnection(bootstrap_servers=kafka.bootstrap_servers)
    schema = "id INT, v STRING, h MAP<STRING, BINARY>"
    first = [(1, "a", {"src": b"x"}), (2, "b", None), (3, "c", {})]
    assert write_snapshot(spark.createDataFrame(first, schema), table, conn).records_out == 3
    # the same rows again: nothing to send (no headers and an empty map of them are the same record)
    assert write_snapshot(spark.createDataFrame(first, schema), table, conn).records_out == 0

    second = [(1, "a", {"src": b"y"}), (2, "b", {"src": b"z"}), (3, "c", None)]
    result = write_snapshot(spark.createDataFrame(second, schema), table, conn)
    assert (result.records_out, result.tombstones_out) == (2, 0)
    rows = materialize(spark, table, conn).df.collect()
    assert {r["id"]: (r["v"], dict(r["h"] or {})) for r in rows} == {
        1: ("a", {"src": b"y"}),
        2: ("b", {"src": b"z"}),
        3: ("c", {}),
    }
    assert len(read_all(kafka.bootstrap_servers, [topic])) == 5
