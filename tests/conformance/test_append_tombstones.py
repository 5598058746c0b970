"""A tombstone (a null value) in a plain ``kafka`` source, through real Flink and through the engine:
the same rows. Flink's json, csv and avro decoders give no row for a null value (the record is
skipped, not an error); its ``raw`` format reads it as a NULL value column."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Producer
from tests.conformance import flink

from upsert_kafka_ops import KafkaTable
from upsert_kafka_ops.engine import read_append
from upsert_kafka_ops.local import LocalKafka

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _avro(id_: int, v: str) -> bytes:
    """Flink's ``avro`` bytes of the row (id BIGINT, v STRING): each field a union with null, index 1."""

    def varint(n: int) -> bytes:
        z, out = (n << 1) ^ (n >> 63), b""
        while z > 0x7F:
            out, z = out + bytes([(z & 0x7F) | 0x80]), z >> 7
        return out + bytes([z])

    text = v.encode()
    return b"\x02" + varint(id_) + b"\x02" + varint(len(text)) + text


ROWS = "`id` BIGINT, `v` STRING"
#: per case: the columns, the format options, and the records (key, value), a tombstone among them
CASES: dict[str, tuple[str, str, list[tuple[bytes | None, bytes | None]]]] = {
    "json": (ROWS, "'format' = 'json'", [(None, b'{"id":1,"v":"a"}'), (b"1", None), (None, b'{"id":2,"v":"b"}')]),
    "json_keyed": (ROWS, "'key.format' = 'json', 'key.fields' = 'id', 'value.format' = 'json', "
                   "'value.fields-include' = 'EXCEPT_KEY'",
                   [(b'{"id":1}', b'{"v":"a"}'), (b'{"id":3}', None), (b'{"id":2}', b'{"v":"b"}')]),
    "csv": (ROWS, "'format' = 'csv'", [(None, b"1,a"), (None, None), (None, b"2,b")]),
    "avro": (ROWS, "'format' = 'avro'", [(None, _avro(1, "a")), (None, None), (None, _avro(2, "b"))]),
    "raw_keyed": ("`k` STRING, `v` STRING", "'key.format' = 'raw', 'key.fields' = 'k', 'value.format' = 'raw', "
                  "'value.fields-include' = 'EXCEPT_KEY'", [(b"k1", b"a"), (b"k3", None), (b"k2", b"b")]),
}  # fmt: skip


@pytest.fixture(scope="module")
def runs(
    kafka: LocalKafka, flink_jars: list[Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    bootstrap = kafka.bootstrap_servers
    producer = Producer({"bootstrap.servers": bootstrap})
    ddl = {}
    for name, (columns, formats, records) in CASES.items():
        topic = f"tomb-{name}-{uuid.uuid4().hex[:8]}"
        kafka.create_topic(topic, partitions=1)
        for key, value in records:
            producer.produce(topic, key=key, value=value, partition=0)
        ddl[name] = (
            f"CREATE TABLE `{name}` ({columns}) WITH ('connector' = 'kafka', 'topic' = '{topic}', "
            f"'properties.bootstrap.servers' = '{bootstrap}', 'scan.startup.mode' = 'earliest-offset', "
            f"'scan.bounded.mode' = 'latest-offset', {formats})"
        )
    assert producer.flush(30) == 0
    log = tmp_path_factory.mktemp("flink") / "flink.log"
    outcomes = flink.run([flink.Case(n, n, d) for n, d in ddl.items()], flink_jars, log)
    return {"ddl": ddl, "flink": outcomes}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_tombstone_in_a_plain_kafka_source_reads_as_flink_reads_it(
    runs: dict[str, Any], spark: SparkSession, case: str
) -> None:
    outcome: flink.Outcome = runs["flink"][case]
    assert outcome.error is None, outcome.error
    want = Counter(tuple(cells) for _, cells in outcome.changes)
    # the raw value reads as a NULL column; every other format gives no row for it
    assert sum(want.values()) == (3 if case.startswith("raw") else 2), want
    read = read_append(spark, KafkaTable.from_flink_ddl(runs["ddl"][case]))
    assert Counter(tuple(r) for r in read.df.collect()) == want
    tombstones = 0 if case.startswith("raw") else 1
    assert (read.result.records_in, read.result.tombstones_in, read.result.records_out) == (
        3,
        tombstones,
        3 - tombstones,
    )
