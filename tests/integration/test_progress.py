"""Progress of long reads: Kafka records read so far, from Spark's task metrics, of the ranges the
engine announces (engine/progress.py)."""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Producer

from upsert_kafka_ops.engine import materialize, read_changelog
from upsert_kafka_ops.engine.progress import ReadProgress, expect
from upsert_kafka_ops.local import LocalKafka
from upsert_kafka_ops.spec.connection import KafkaConnection
from upsert_kafka_ops.spec.table import UpsertKafkaTable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

RECORDS = 120_000


def _table(topic: str) -> UpsertKafkaTable:
    return UpsertKafkaTable.from_options(
        {"topic": topic, "key.format": "json", "value.format": "json"},
        [{"name": "id", "type": "BIGINT"}, {"name": "v", "type": "STRING"}],
        ["id"],
    )


@pytest.fixture(scope="module")
def big_topic(kafka: LocalKafka) -> str:
    topic = "progress-big"
    kafka.create_topic(topic, partitions=2)
    producer = Producer(kafka.client_config(**{"linger.ms": 50, "queue.buffering.max.messages": RECORDS}))
    for i in range(RECORDS):
        producer.produce(topic, key=b'{"id":%d}' % (i % 5000), value=b'{"id":%d,"v":"x%d"}' % (i % 5000, i))
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    return topic


def test_a_materialize_reports_the_records_of_its_one_scan(
    spark: SparkSession, kafka: LocalKafka, big_topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    conn = KafkaConnection(bootstrap_servers=kafka.bootstrap_servers)
    with (
        caplog.at_level(logging.INFO, "upsert_kafka_ops.progress"),
        ReadProgress(spark, "job big", every=0.2) as p,
    ):
        read = materialize(spark, _table(big_topic), conn)
        assert read.df.count() == 5000
    # the fold scans the range once: the winning values come from the same pass
    assert p.expected == RECORDS
    assert p.records_read() == RECORDS  # Kafka stages only: the cached aggregates read bytes
    figures = [
        int(m[1].replace(",", ""))
        for m in (re.search(r"([\d,]+) of 120,000 records read", ln) for ln in p.lines)
        if m
    ]
    assert figures, "a run of several intervals logs its progress"
    assert figures == sorted(figures) and figures[-1] <= RECORDS
    assert all(ln.startswith("job big: ") and re.search(r"\(\d+%\), \d+s$", ln) for ln in p.lines)
    assert [r.getMessage() for r in caplog.records if r.name == "upsert_kafka_ops.progress"] == p.lines


def test_progress_counts_only_its_own_run_and_expect_outside_one_does_nothing(
    spark: SparkSession, kafka: LocalKafka, big_topic: str
) -> None:
    expect(10**9)  # no ReadProgress around it: ignored
    conn = KafkaConnection(bootstrap_servers=kafka.bootstrap_servers)
    with ReadProgress(spark, "changelog", every=60) as p:
        read_changelog(spark, _table(big_topic), conn).df.count()
    assert p.expected == RECORDS and p.records_read() == RECORDS and p.lines == []
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None


def test_a_session_reading_kafka_with_spark_v1_reader_logs_no_progress(
    spark: SparkSession, kafka: LocalKafka, big_topic: str
) -> None:
    conn = KafkaConnection(bootstrap_servers=kafka.bootstrap_servers)
    spark.conf.set("spark.sql.sources.useV1SourceList", "avro,csv,json,kafka,orc,parquet,text")
    try:
        with ReadProgress(spark, "v1", every=0.1) as p:
            assert materialize(spark, _table(big_topic), conn).df.count() == 5000
    finally:
        spark.conf.set("spark.sql.sources.useV1SourceList", "avro,csv,json,orc,parquet,text")
    assert p.lines == [] and p.records_read() == 0  # V1 reports no records: no misleading 0% lines
