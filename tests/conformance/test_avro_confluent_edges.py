"""avro-confluent values written by producers whose schemas are not the table's: Avro's promotions
(int to long, float and int to double, bytes to string and back), union and plain forms of a nullable
column, a field the table lacks, a nullable column the writer lacks, fields in another order, with
edge values through each. Real Flink (its avro-confluent bundle, with the registry client in it)
and the engine read the same topic through the same real registry: the same table.
"""

from __future__ import annotations

import io
import json
import math
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import fastavro
import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from tests.conformance import engine, flink

from upsert_kafka_ops.local import LocalKafka, LocalSchemaRegistry

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

COLUMNS = "`id` INT, `l` BIGINT, `d` DOUBLE, `f` FLOAT, `s` STRING, `b` BYTES, `n` INT"


def _record(fields: list[tuple[str, Any]]) -> dict[str, Any]:
    return {"type": "record", "name": "record", "namespace": "org.apache.flink.avro.generated",
            "fields": [{"name": n, "type": t, **({"default": None} if isinstance(t, list) else {})}
                       for n, t in fields]}  # fmt: skip


def _opt(t: str) -> list[str]:
    return ["null", t]


#: writer schema -> the records it writes (values of its own fields)
WRITERS: list[tuple[dict[str, Any], list[dict[str, Any]]]] = [
    (  # the table's own schema, as Flink derives it
        _record([("l", _opt("long")), ("d", _opt("double")), ("f", _opt("float")), ("s", _opt("string")),
                 ("b", _opt("bytes")), ("n", _opt("int"))]),
        [{"l": 2**63 - 1, "d": math.nan, "f": -0.0, "s": "a\u0000b", "b": b"", "n": None},
         {"l": -(2**63), "d": -math.inf, "f": 3.4028234663852886e38, "s": "", "b": bytes(range(8)), "n": 0}],
    ),
    (  # promotions: int -> long, float -> double, int -> float, bytes -> string, string -> bytes
        _record([("l", _opt("int")), ("d", _opt("float")), ("f", _opt("int")), ("s", _opt("bytes")),
                 ("b", _opt("string")), ("n", _opt("int"))]),
        [{"l": 2**31 - 1, "d": 0.1, "f": 16777217, "s": "ünï€ 😀".encode(), "b": "é", "n": 1},
         {"l": -(2**31), "d": math.inf, "f": -(2**31), "s": b"", "b": "", "n": None}],
    ),
    (  # plain types for the nullable columns, fields in another order, one the table lacks,
       # and no n (the table's n is nullable: NULL)
        _record([("extra", "string"), ("s", "string"), ("b", "bytes"), ("f", "float"), ("d", "double"),
                 ("l", "long")]),
        [{"extra": "x", "s": "𝄞", "b": b"\xff", "f": math.nan, "d": 5e-324, "l": 0}],
    ),
    (  # int -> double, long -> float (Avro's promotion, with float's rounding)
        _record([("l", _opt("long")), ("d", _opt("int")), ("f", _opt("long")), ("s", _opt("string")),
                 ("b", _opt("bytes")), ("n", _opt("int"))]),
        [{"l": 7, "d": 2**31 - 1, "f": 2**62 + 1, "s": "x", "b": b"y", "n": -1}],
    ),
]  # fmt: skip


@pytest.fixture(scope="module")
def registry(jars_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSchemaRegistry]:
    with LocalSchemaRegistry(tmp_path_factory.mktemp("registry"), jars_dir=jars_dir) as server:
        yield server


@pytest.fixture(scope="module")
def runs(
    kafka: LocalKafka,
    registry: LocalSchemaRegistry,
    flink_jars: list[Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Any]:
    topic = f"avro-confluent-edges-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, partitions=1, config={"cleanup.policy": "compact"})
    client = SchemaRegistryClient({"url": registry.url})
    subject = f"{topic}-value"
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    next_id = 0
    for schema, records in WRITERS:
        schema_id = client.register_schema(subject, Schema(json.dumps(schema), "AVRO"))
        if schema is WRITERS[0][0]:  # the others are other producers' schemas, on purpose
            client.set_compatibility(subject, "NONE")
        parsed = fastavro.parse_schema(schema)
        for record in records:
            out = io.BytesIO()
            out.write(b"\x00" + struct.pack(">I", schema_id))  # Confluent's wire format
            fastavro.schemaless_writer(out, parsed, record)
            producer.produce(topic, key=f'{{"id":{next_id}}}'.encode(), value=out.getvalue())
            next_id += 1
    assert producer.flush(30) == 0
    ddl = (
        f"CREATE TABLE `confluent_edges` ({COLUMNS}, PRIMARY KEY (`id`) NOT ENFORCED) WITH ("
        f"'connector' = 'upsert-kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = "
        f"'{kafka.bootstrap_servers}', 'key.format' = 'json', 'value.format' = 'avro-confluent', "
        f"'value.avro-confluent.url' = '{registry.url}', 'value.fields-include' = 'EXCEPT_KEY', "
        "'scan.bounded.mode' = 'latest-offset')"
    )
    log = tmp_path_factory.mktemp("flink-confluent") / "flink.log"
    outcome = flink.run([flink.Case("edges", "confluent_edges", ddl)], flink_jars, log)["edges"]
    return {"ddl": ddl, "flink": outcome, "records": next_id}


def test_other_producers_schemas_read_as_flink_reads_them(runs: dict[str, Any], spark: SparkSession) -> None:
    outcome: flink.Outcome = runs["flink"]
    assert outcome.error is None, f"Flink failed the read: {outcome.error}"
    want = sorted(outcome.table(["id"]).values(), key=repr)
    got = sorted(engine.rows(spark, runs["ddl"]), key=repr)
    assert len(want) == runs["records"] == 6
    assert got == want, f"\nFlink:  {want}\nengine: {got}"
