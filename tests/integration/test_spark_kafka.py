"""Records produced with confluent-kafka come back identical through Spark's Kafka batch source."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, Producer, TopicPartition

from upsert_kafka_ops import spark_lines
from upsert_kafka_ops.local import LocalKafka

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

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
