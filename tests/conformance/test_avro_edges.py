"""Avro values at their edges through real Flink and through the engine: a topic per type, one record
per edge value, written with the schema Flink derives for the table (as any Avro producer would with
it): the type's limits, NaN and the infinities, -0.0, decimals at and past their precision and in
non-minimal bytes, ints outside TINYINT/SMALLINT, dates, times and timestamps at and past the calendar's
ends. Each topic gives the same table, or both refuse it; a documented difference says so below.
"""

from __future__ import annotations

import io
import math
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import fastavro
import pytest
from confluent_kafka import Producer
from tests.conformance import engine, flink

from upsert_kafka_ops.formats.avro_codec import avro_schema
from upsert_kafka_ops.local import LocalKafka
from upsert_kafka_ops.spec.types import parse_type

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _unscaled(n: int, width: int | None = None) -> bytes:
    """Two's complement big-endian bytes of ``n`` (minimal unless ``width`` pads them)."""
    size = width or max(1, (n.bit_length() + 8) // 8)
    return n.to_bytes(size, "big", signed=True)


DAY_ONE, DAY_LAST = -719162, 2932896  # 0001-01-01 and 9999-12-31 as days since 1970-01-01
MILLIS_ONE, MILLIS_LAST = -62135596800000, 253402300799999
#: type -> the Avro values written (as the schema's underlying type: logical types carry raw numbers)
EDGES: dict[str, list[Any]] = {
    "TINYINT": [0, 127, -128, 128, -129, 200],
    "SMALLINT": [32767, -32768, 32768, -70000],
    "INT": [2**31 - 1, -(2**31), 0],
    "BIGINT": [2**63 - 1, -(2**63), 0],
    "FLOAT": [math.nan, math.inf, -math.inf, -0.0, 3.4028234663852886e38, 1.401298464324817e-45],
    "DOUBLE": [math.nan, math.inf, -math.inf, -0.0, 1.7976931348623157e308, 5e-324],
    "DECIMAL(5, 2)": [_unscaled(99999), _unscaled(-99999), _unscaled(0), _unscaled(1, 4), _unscaled(123456)],
    "DECIMAL(38, 10)": [_unscaled(10**38 - 1), _unscaled(-(10**38 - 1)), _unscaled(-1, 16)],
    "BOOLEAN": [True, False],
    "STRING": ["", "ünï€ødé 𝄞 😀", "a\u0000b", "x" * 1000],
    "BYTES": [b"", bytes(range(256))],
    "DATE": [0, -1, DAY_ONE, DAY_LAST],
    "TIME(3)": [0, 86399999, 123, 3723004],
    "TIMESTAMP(3)": [0, -1, MILLIS_ONE, MILLIS_LAST, 1704164645123],
    "ARRAY<INT>": [[], [None, 1], [2**31 - 1, -(2**31)]],
    "MAP<STRING, INT>": [{}, {"a": None}, {"ü€": 1}],
    "ROW<`a` INT, `b` STRING>": [{"a": None, "b": None}, {"a": 1, "b": ""}],
}
# docs/semantics.md, "Deliberate differences": (type, repr of the value written) -> the engine's cell
DIFFERENCES: dict[tuple[str, str], Any] = {
    # a time-millis outside the day: Flink keeps the number (its text reads 24:00:00, or is garbled
    # for a negative one); here it is taken into the day
    ("TIME(3)", "86400000"): "time:00:00:00.000000000",
    ("TIME(3)", "-1"): "time:23:59:59.999000000",
    # past 9999-12-31 Flink's own text of a date or timestamp is wrong (year 0000); here the real date
    ("DATE", repr(DAY_LAST + 1)): "date:+10000-01-01",
    ("TIMESTAMP(3)", repr(MILLIS_LAST + 1)): "timestamp:+10000-01-01 00:00:00.000000000",
}
# Flink reads a (local-)timestamp-micros long as milliseconds; past Spark's range the engine's value
# is NULL, where Flink's text is garbled
DIFFERENCES.update({("TIMESTAMP(6)", repr(v)): None for v in (MILLIS_ONE * 1000, MILLIS_LAST * 1000 + 999)})
DIFFERENCES[("TIMESTAMP_LTZ(6)", repr(MILLIS_LAST * 1000 + 999))] = None
# ... and a real micros value lands in year 55972, which Flink's text shows as 5972 (see year 10000)
for _t in ("TIMESTAMP(6)", "TIMESTAMP_LTZ(6)"):
    DIFFERENCES[(_t, repr(1704164645123456))] = "timestamp:+55972-10-29 20:05:23.456000000"
EDGES["TIME(3)"] += [86400000, -1]
EDGES["DATE"] += [DAY_LAST + 1, DAY_ONE - 1]
EDGES["TIMESTAMP(3)"] += [MILLIS_LAST + 1, MILLIS_ONE - 1]
EDGES["DECIMAL(5, 2)"] += [b""]


def _raw_schema(schema: Any) -> Any:
    """The schema with logical types dropped: the values above are the underlying numbers and bytes."""
    if isinstance(schema, list):
        return [_raw_schema(s) for s in schema]
    if isinstance(schema, dict):
        if "logicalType" in schema:
            return schema["type"]
        return {k: _raw_schema(v) for k, v in schema.items()}
    return schema


MICROS_ONE, MICROS_LAST = MILLIS_ONE * 1000, MILLIS_LAST * 1000 + 999  # (as in DIFFERENCES)
#: with 'avro.timestamp_mapping.legacy' = 'false': local-timestamp-* for TIMESTAMP, timestamp-* for LTZ
NON_LEGACY: dict[str, list[Any]] = {
    "TIMESTAMP(6)": [0, -1, MICROS_ONE, MICROS_LAST, 1704164645123456],
    "TIMESTAMP(3)": [0, -1, MILLIS_ONE, MILLIS_LAST],
    "TIMESTAMP_LTZ(6)": [0, -1, 1704164645123456, MICROS_LAST],
    "TIMESTAMP_LTZ(3)": [0, -1, 1704164645123],
}


def _topics() -> dict[str, tuple[str, list[Any]]]:
    topics = {_slug(sql_type): (sql_type, [*values, None]) for sql_type, values in EDGES.items()}
    for sql_type, values in NON_LEGACY.items():
        topics[f"{_slug(sql_type)}_non_legacy"] = (sql_type, [*values, None])
    return topics


def _slug(sql_type: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in sql_type.lower()).strip("_")


TOPICS = _topics()


@pytest.fixture(scope="module")
def runs(
    kafka: LocalKafka, flink_jars: list[Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    ddl = {}
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for name, (sql_type, values) in TOPICS.items():
        topic = f"avro-edge-{name.replace('_', '-')}-{uuid.uuid4().hex[:8]}"
        kafka.create_topic(topic, partitions=1, config={"cleanup.policy": "compact"})
        legacy = not name.endswith("_non_legacy")
        schema = fastavro.parse_schema(_raw_schema(avro_schema([("c", parse_type(sql_type))], legacy)))
        for i, value in enumerate(values):
            out = io.BytesIO()
            fastavro.schemaless_writer(out, schema, {"c": value})
            producer.produce(topic, key=f'{{"id":{i}}}'.encode(), value=out.getvalue())
        ddl[name] = (
            f"CREATE TABLE `{name}` (`id` INT, `c` {sql_type}, PRIMARY KEY (`id`) NOT ENFORCED) WITH ("
            f"'connector' = 'upsert-kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = "
            f"'{kafka.bootstrap_servers}', 'key.format' = 'json', 'value.format' = 'avro', "
            f"'value.avro.timestamp_mapping.legacy' = '{str(legacy).lower()}', "
            "'value.fields-include' = 'EXCEPT_KEY', 'scan.bounded.mode' = 'latest-offset')"
        )
    assert producer.flush(30) == 0
    log = tmp_path_factory.mktemp("flink-avro") / "flink.log"
    return {"ddl": ddl, "flink": flink.run([flink.Case(n, n, d) for n, d in ddl.items()], flink_jars, log)}


@pytest.mark.parametrize("name", TOPICS)
def test_an_avro_edge_value_reads_as_flink_reads_it(
    runs: dict[str, Any], spark: SparkSession, name: str
) -> None:
    sql_type = TOPICS[name][0]
    outcome: flink.Outcome = runs["flink"][name]
    got = engine.outcome(spark, runs["ddl"][name])
    context = f"{name}: values {TOPICS[name][1]!r}\nFlink: {outcome.error or outcome.changes}\nengine: {got}"
    if outcome.error is not None:
        assert isinstance(got, str), context
        return
    want = sorted(outcome.table(["id"]).values(), key=repr)
    values = TOPICS[name][1]
    for row in want:
        key = (sql_type, repr(values[row[0]]))
        if key in DIFFERENCES:
            documented = DIFFERENCES[key]
            assert row[1] != documented, f"{context}\nno longer a difference"
            row[1] = documented
    assert got == want, context
