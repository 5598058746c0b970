"""Oversize and malformed rows at the sink, against the real broker (issue 23, item 3): a record
larger than the topic's ``max.message.bytes`` (or the producer's ``max.request.size``) and a NULL
primary key fail before the first record is written, naming the key and both limits; a record just
inside the limit is written. A key value its column cannot hold fails in the same pass, named by
Spark's cast error."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Producer
from tests.integration.oracle import read_all

from upsert_kafka_ops.engine import write_changelog, write_snapshot
from upsert_kafka_ops.engine.sink import RECORD_OVERHEAD
from upsert_kafka_ops.engine.source import DataError
from upsert_kafka_ops.local import LocalKafka
from upsert_kafka_ops.spec.table import UpsertKafkaTable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration
LIMIT = 4000


def _table(topic: str, bootstrap: str, extra: str = "") -> UpsertKafkaTable:
    return UpsertKafkaTable.from_flink_ddl(
        f"CREATE TABLE t (id INT, v STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ("
        f"'connector' = 'upsert-kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{bootstrap}', "
        f"'key.format' = 'json', 'value.format' = 'json'{extra})"
    )


def _value_bytes(i: int, v: str) -> int:
    return len(json.dumps({"id": i, "v": v}, separators=(",", ":")).encode())


def test_a_record_above_max_message_bytes_fails_before_any_write_naming_its_key(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=2, config={"max.message.bytes": str(LIMIT)})
    table = _table(topic, kafka.bootstrap_servers)
    key_bytes = len(b'{"id":7}')
    fits = "x" * (LIMIT - RECORD_OVERHEAD - key_bytes - _value_bytes(7, ""))  # exactly at the limit
    big = fits + "y"
    rows = [("+I", 1, 1, "small"), ("+I", 2, 7, big), ("+I", 3, 2, "after")]
    df = spark.createDataFrame(rows, "op STRING, seq BIGINT, id INT, v STRING")
    with pytest.raises(DataError) as err:
        write_changelog(df, table, order_by="seq")
    text = str(err.value)
    assert (
        "key '{\"id\":7}'" in text
        and f"{LIMIT + 1} bytes" in text
        and f"max.message.bytes of {LIMIT}" in text
    )
    assert "nothing was written" in text
    with pytest.raises(DataError, match=r"key '\{\"id\":7\}'"):
        write_snapshot(df.where("op = '+I'").drop("op", "seq"), table)
    assert read_all(kafka.bootstrap_servers, [topic]) == []  # not the rows before it either
    # at the limit it is written, as Kafka accepts it
    ok = spark.createDataFrame([("+I", 1, 7, fits)], "op STRING, seq BIGINT, id INT, v STRING")
    assert write_changelog(ok, table, order_by="seq").records_out == 1
    (record,) = read_all(kafka.bootstrap_servers, [topic])
    assert json.loads(record.value)["v"] == fits


def test_the_producers_max_request_size_is_a_limit_too(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=1)  # the broker's default max.message.bytes, about 1 MB
    table = _table(topic, kafka.bootstrap_servers, ", 'properties.max.request.size' = '3000'")
    df = spark.createDataFrame([(5, "z" * 3000)], "id INT, v STRING")
    with pytest.raises(DataError, match=r"max.request.size\) of 3000 bytes"):
        write_snapshot(df, table)
    assert read_all(kafka.bootstrap_servers, [topic]) == []


def test_a_null_primary_key_fails_before_any_write(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=1)
    table = _table(topic, kafka.bootstrap_servers)
    df = spark.createDataFrame(
        [("+I", 1, 1, "a"), ("+I", 2, None, "b")], "op STRING, seq BIGINT, id INT, v STRING"
    )
    with pytest.raises(DataError) as err:
        write_changelog(df, table, order_by="seq")
    assert "1 row(s) have a NULL primary key (id)" in str(err.value) and '"v":"b"' in str(err.value)
    with pytest.raises(DataError, match="NULL primary key"):
        write_snapshot(df.drop("op", "seq"), table)
    assert read_all(kafka.bootstrap_servers, [topic]) == []


def test_a_key_the_key_format_cannot_encode_fails_before_any_write(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    """A topic-to-topic query whose key overflows the sink's key column: Spark's cast refuses the
    value in the pass that measures the records, before the first one is sent."""
    from pyspark.errors import ArithmeticException

    from upsert_kafka_ops.jobs import Pipeline, run_job

    source, sink = new_topic(partitions=1), new_topic(partitions=1)
    row = json.dumps({"id": 1, "v": "a"}).encode()
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    producer.produce(source, key=b'{"id":1}', value=row)
    assert producer.flush(30) == 0

    def table(topic: str, key_type: str) -> dict[str, object]:
        return {"connection": "main", "table": {
            "name": "t", "columns": [{"name": "id", "type": key_type}, {"name": "v", "type": "STRING"}],
            "primary_key": ["id"],
            "options": {"connector": "upsert-kafka", "topic": topic, "key.format": "json", "value.format": "json"}}}  # fmt: skip

    job = {"name": "overflow", "kind": "topic-to-topic", "execution": "snapshot",
           "query": "SELECT id * 1000.5 AS id, v FROM s", "sources": {"s": table(source, "INT")},
           "sink": table(sink, "DECIMAL(4, 1)")}  # fmt: skip
    p = Pipeline.model_validate(
        {"connections": {"main": {"bootstrap_servers": kafka.bootstrap_servers}}, "jobs": [job]}
    )
    with pytest.raises(ArithmeticException) as err:
        run_job(p, spark=spark)
    assert "1000.5" in str(err.value) and "DECIMAL(4,1)" in str(err.value).replace(" ", "").upper()
    assert read_all(kafka.bootstrap_servers, [sink]) == []
