"""Records produced with confluent-kafka come back identical through Spark's Kafka batch source, and
through the engine's small-range read in this process."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from upsert_kafka_ops import spark_lines
from upsert_kafka_ops.engine import source
from upsert_kafka_ops.engine.bounds import Bounds, resolve_bounds
from upsert_kafka_ops.local import LocalKafka
from upsert_kafka_ops.spec.connection import KafkaConnection
from upsert_kafka_ops.spec.table import UpsertKafkaTable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

Record = tuple[int, int, bytes | None, bytes | None]  # partition, offset, key, value


def _read_back(kafka: LocalKafka, topic: str, partitions: int, expected: int) -> list[Record]:
    consumer = Consumer({**kafka.client_config(), "group.id": f"oracle-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[Record] = []
    try:
        while len(out) < expected:
            msg = consumer.poll(10)
            assert msg is not None, f"only {len(out)} of {expected} records came back"
            assert msg.error() is None, msg.error()
            out.append((msg.partition(), msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    return sorted(out)


def test_produced_records_with_tombstones_round_trip_through_spark(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=3, config={"cleanup.policy": "compact"})
    producer = Producer({**kafka.client_config(), "enable.idempotence": True})
    sent = [
        (b"100", b'{"user_id":100,"user_name":"Bob","region":"Beijing"}'),
        (b"101", b'{"user_id":101,"user_name":"Alice","region":"Shanghai"}'),
        (b"101", b'{"user_id":101,"user_name":"Alice","region":"Hangzhou"}'),
        (b"103", b'{"user_id":103,"user_name":"Richard","region":"Berlin"}'),
        (b"103", None),  # tombstone
        (b"104", b""),  # empty value: not a tombstone
        (b"\x00\xff", b"\x01binary\x00"),
    ]
    for key, value in sent:
        producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0
    oracle = _read_back(kafka, topic, 3, len(sent))

    rows = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .select("partition", "offset", "key", "value")
        .collect()
    )
    got = sorted(
        (r["partition"], r["offset"], bytes(r["key"]), None if r["value"] is None else bytes(r["value"]))
        for r in rows
    )
    assert got == oracle
    values = {(k, v) for _, _, k, v in got}
    assert (b"103", None) in values  # the tombstone stays null
    assert (b"104", b"") in values  # the empty value stays empty, not null
    assert sorted((k, v or b"") for _, _, k, v in got) == sorted((k, v or b"") for k, v in sent)


def test_spark_has_delta_and_the_connector_jars(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "delta-table")
    spark.range(5).write.format("delta").save(path)
    assert spark.read.format("delta").load(path).count() == 5
    jars = spark.sparkContext.getConf().get("spark.jars") or ""
    line = spark_lines.line_of(spark.version)
    assert f"spark-sql-kafka-0-10_{line.scala}-{spark.version}.jar" in jars
    delta = spark_lines.delta_for(spark.version)
    assert f"{delta.artifact}-{delta.version}.jar" in jars


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_a_small_range_read_here_equals_sparks_read(
    kafka: LocalKafka,
    spark: SparkSession,
    new_topic: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
    isolation: str,
) -> None:
    """A read of at most SMALL_RANGE offsets comes from librdkafka in this process: record for record
    (keys, values, tombstones, empty values, headers, timestamps and their types, aborted
    transactions and their markers) what Spark's Kafka source gives for the same bounds."""
    topic = new_topic(partitions=3)
    plain = Producer({**kafka.client_config(), "enable.idempotence": True})
    for i in range(12):
        plain.produce(
            topic,
            key=b"k%d" % (i % 5),
            value=None if i % 4 == 3 else (b"" if i == 5 else b"v%d" % i),
            partition=i % 3,
            headers=[("h", b"x%d" % i), ("none", None)] if i % 2 else None,
            timestamp=1_700_000_000_000 + i if i % 3 == 0 else 0,
        )
    assert plain.flush(30) == 0
    tx = Producer(kafka.client_config(**{"transactional.id": f"tx-{uuid.uuid4().hex[:8]}"}))
    tx.init_transactions(10)
    for commit in (True, False, True):  # committed, aborted (records and marker skipped), committed
        tx.begin_transaction()
        for p in range(3):
            tx.produce(topic, key=b"t%d" % p, value=b"commit" if commit else b"abort", partition=p)
        tx.flush(10)  # on the broker: an abort would otherwise drop them unsent
        if commit:
            tx.commit_transaction(10)
        else:
            tx.abort_transaction(10)
    conn = KafkaConnection(bootstrap_servers=kafka.bootstrap_servers)
    table = UpsertKafkaTable.from_options(
        {
            "connector": "upsert-kafka",
            "topic": topic,
            "properties.bootstrap.servers": kafka.bootstrap_servers,
            "properties.isolation.level": isolation,
            "key.format": "raw",
            "value.format": "raw",
            "value.fields-include": "EXCEPT_KEY",
        },
        columns=[{"name": "k", "type": "STRING"}, {"name": "v", "type": "STRING"}],
        primary_key=["k"],
        name=topic,
    )
    bounds = resolve_bounds(table, conn.to_librdkafka(), "earliest", "latest")
    start = {tp: 1 for tp in bounds.end}  # a range that starts inside the log, as an incremental run's
    bounds = Bounds(start, bounds.end)
    assert 0 < bounds.span() <= source.SMALL_RANGE

    def rows(df: DataFrame) -> list[tuple[object, ...]]:
        return sorted((tuple(r) for r in df.collect()), key=lambda r: (r[3], r[4]))  # partition, offset

    here = source.read_small(spark, table, conn, bounds, headers=True)
    assert here is not None
    monkeypatch.setattr(source, "SMALL_RANGE", 0)  # read_raw now always asks Spark
    spark_read = source.read_raw(spark, table, conn, bounds, headers=True)
    assert here.schema == spark_read.schema
    got, expected = rows(here), rows(spark_read)
    assert got == expected
    values = [r[1] for r in got]
    assert None in values and b"" in values  # a tombstone and an empty value, told apart
    assert (b"abort" in values) == (isolation == "read_uncommitted")
    assert {r[6] for r in got} == {0}  # CreateTime
    assert any(r[7] for r in got) and any(r[7] is None for r in got)  # headers, and none
