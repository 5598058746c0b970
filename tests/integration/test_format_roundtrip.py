"""Every format through the engine: write_changelog, then materialize and read_changelog read it back.

FLIP-149 declares its ``users`` table with a csv key and an avro value; that pair runs here, and
the reverse, on composite keys with nulls in the value columns.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING

import pytest
from tests.integration.oracle import kafka_partition, read_all

from upsert_kafka_ops.engine import materialize, read_changelog, write_changelog
from upsert_kafka_ops.local import LocalKafka
from upsert_kafka_ops.spec.connection import KafkaConnection
from upsert_kafka_ops.spec.table import UpsertKafkaTable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SCHEMA = "op STRING, seq INT, user_id BIGINT, region STRING, user_name STRING, amount DECIMAL(10, 2), seen TIMESTAMP_NTZ"
T = dt.datetime(2026, 11, 20, 8, 30, 15, 123000)
CHANGES = [
    ("+I", 1, 100, "eu", "Bob", Decimal("1.50"), T),
    ("+I", 2, 101, "eu", "Alice", None, T),
    ("+I", 3, 101, "us", 'Alice, "A"', Decimal("-2.00"), None),
    ("+U", 4, 100, "eu", "Bob", Decimal("3.25"), T),
    ("-D", 5, 101, "eu", "Alice", None, T),
]


@pytest.mark.parametrize(("key_format", "value_format"), [("csv", "avro"), ("avro", "csv"), ("raw", "json")])
def test_formats_round_trip_through_the_engine(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str], key_format: str, value_format: str
) -> None:
    topic = new_topic(partitions=3)
    key = ["user_id"] if key_format == "raw" else ["user_id", "region"]
    columns = [
        {"name": "user_id", "type": "BIGINT"}, {"name": "region", "type": "STRING"},
        {"name": "user_name", "type": "STRING"}, {"name": "amount", "type": "DECIMAL(10, 2)"},
        {"name": "seen", "type": "TIMESTAMP(3)"},
    ]  # fmt: skip
    if key_format == "raw":
        columns[0]["type"] = "STRING"  # raw keys hold one column; a STRING key is its UTF-8 text
    table = UpsertKafkaTable.from_options(
        {"connector": "upsert-kafka", "topic": topic, "key.format": key_format, "value.format": value_format},
        columns=columns,
        primary_key=key,
    )
    conn = KafkaConnection(bootstrap_servers=kafka.bootstrap_servers)
    rows = [(op, seq, str(u) if key_format == "raw" else u, *rest) for op, seq, u, *rest in CHANGES]
    schema = SCHEMA.replace("user_id BIGINT", "user_id STRING") if key_format == "raw" else SCHEMA
    result = write_changelog(spark.createDataFrame(rows, schema), table, conn, order_by="seq")

    records = read_all(kafka.bootstrap_servers, [topic])
    assert len(records) == result.records_out
    for r in records:  # Kafka's default partitioner on the encoded key bytes
        assert r.key is not None and r.partition == kafka_partition(r.key, 3)

    df, _ = materialize(spark, table, conn)
    got = sorted(tuple(r) for r in df.collect())
    if key_format == "raw":  # one key column: the last change of 101 is its delete
        assert got == [("100", "eu", "Bob", Decimal("3.25"), T)]
    else:
        assert got == [
            (100, "eu", "Bob", Decimal("3.25"), T),
            (101, "us", 'Alice, "A"', Decimal("-2.00"), None),
        ]
    # every change is written in order, as Flink's sink writes them: read back in upsert mode, each key's
    # first record is an insert, its later values updates and its tombstone a delete
    changes, _ = read_changelog(spark, table, conn, mode="upsert")
    want = ["+I", "+I", "+U", "+U", "-D"] if key_format == "raw" else ["+I", "+I", "+I", "+U", "-D"]
    assert sorted(r.op for r in changes.collect()) == want
    assert sum(1 for r in records if r.value is None) == 1


def test_avro_bytes_that_do_not_decode_are_bad_records_not_rows_of_nulls(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    """Spark's from_avro (PERMISSIVE) turns undecodable bytes into a row whose fields are all NULL.
    A value whose nullable columns are all NULL is valid Avro too (b'\\x00\\x00': both unions at their
    null branch) and must stay a row; a truncated or garbage value must be a bad record."""
    from confluent_kafka import Producer

    from upsert_kafka_ops.engine.source import DataError

    topic = new_topic()
    table = UpsertKafkaTable.from_options(
        {"connector": "upsert-kafka", "topic": topic, "key.format": "raw", "value.format": "avro",
         "value.fields-include": "EXCEPT_KEY"},
        columns=[{"name": "id", "type": "STRING"}, {"name": "name", "type": "STRING"}, {"name": "n", "type": "INT"}],
        primary_key=["id"],
    )  # fmt: skip
    conn = KafkaConnection(bootstrap_servers=kafka.bootstrap_servers)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    producer.produce(topic, key=b"a", value=b"\x02\x02x\x02\x0a")  # name 'x', n 5
    producer.produce(topic, key=b"b", value=b"\x00\x00")  # both NULL: valid
    assert producer.flush(30) == 0
    df, _ = materialize(spark, table, conn)
    assert sorted(tuple(r) for r in df.collect()) == [("a", "x", 5), ("b", None, None)]

    # a union index out of range; a string cut short (offsets 2 and 4, each followed by a tombstone)
    for offset, bad in ((2, b"\x09\x09\x09"), (4, b"\x02\x02")):
        producer.produce(topic, key=b"c", value=bad)
        assert producer.flush(30) == 0
        with pytest.raises(DataError) as info:
            materialize(spark, table, conn)
        assert f"topic {topic!r}, partition 0, offset {offset}" in str(info.value)
        assert "no ignore-parse-errors option" in str(info.value)
        producer.produce(topic, key=b"c", value=None)  # a tombstone supersedes it: readable again
        assert producer.flush(30) == 0
        df, _ = materialize(spark, table, conn)
        assert sorted(tuple(r) for r in df.collect()) == [("a", "x", 5), ("b", None, None)]


def test_json_decimals_are_written_as_javas_stripped_big_decimal_text(spark: SparkSession) -> None:
    """Flink's JSON encoder writes a DECIMAL as Jackson's node of ``stripTrailingZeros()``, whose text is
    ``BigDecimal.toString()``: 89879170.00 -> 8.987917E+7 (a randomized sink run against Flink 2.2.1
    found the engine writing 89879170). Python's ``Decimal.normalize()`` follows the same decimal
    arithmetic spec: the oracle, on random values of random precisions and scales."""
    import decimal
    import random

    from pyspark.sql import functions as F
    from pyspark.sql.types import DecimalType, StructField, StructType

    from upsert_kafka_ops.formats.json_codec import json_decimal

    rng = random.Random(20261125)
    exact = decimal.Context(prec=60)
    for _ in range(6):
        p = rng.randint(1, 38)
        s = rng.randint(0, p)
        values = []
        for _ in range(40):
            whole = rng.choice([0, rng.randint(0, 9), rng.randint(0, 10 ** (p - s) - 1)]) if p > s else 0
            whole = whole - whole % 10 ** rng.randint(0, max(0, len(str(whole)) - 1)) if whole else 0
            frac = rng.choice([0, rng.randint(0, 10**s - 1)]) if s else 0
            sign = rng.choice([1, -1])
            values.append(
                exact.multiply(Decimal(sign), Decimal(whole) + Decimal(frac).scaleb(-s)).quantize(
                    Decimal(1).scaleb(-s), context=exact
                )
            )
        schema = StructType([StructField("d", DecimalType(p, s))])
        df = spark.createDataFrame([(v,) for v in values], schema)
        got = [r[0] for r in df.select(json_decimal(F.col("d"), plain=False)).collect()]
        want = ["0" if v.is_zero() else str(v.normalize(exact)) for v in values]
        assert got == want, f"DECIMAL({p}, {s})"


@pytest.mark.parametrize("fmt", ["json", "avro"])
def test_decoding_parses_each_record_once(spark: SparkSession, fmt: str) -> None:
    """A decoded field refers to the parse several times; parse_once keeps the parse in a projection
    of its own, which Spark's optimizer does not merge into the decoding (it would repeat it)."""
    from pyspark.sql import functions as F

    from upsert_kafka_ops.formats.codecs import make_codec
    from upsert_kafka_ops.formats.columns import parse_once
    from upsert_kafka_ops.spec.types import parse_type

    fields = [(n, parse_type(t)) for n, t in (("id", "BIGINT"), ("amount", "DECIMAL(12, 2)"), ("name", "STRING"),
                                              ("at", "TIMESTAMP(3)"))]  # fmt: skip
    codec = make_codec(fmt, fields, {})
    # from the range's ids, so that the optimizer cannot fold the bytes into constants
    row = F.struct(F.col("id").alias("id"), (F.col("id") + F.lit(1.5)).cast("decimal(12,2)").alias("amount"),
                   F.concat(F.lit("x"), F.col("id").cast("string")).alias("name"),
                   F.timestamp_millis(F.col("id") + 1704164645123).alias("at"))  # fmt: skip
    raw = spark.range(3).select(codec.encode(row).alias("value"))
    staged, (vd,) = parse_once(raw, [(codec, "value")])
    out = staged.select(*[vd.value.getField(n).alias(n) for n, _ in fields], vd.error.alias("error"))
    parse = "from_json" if fmt == "json" else "from_avro"
    plan = out._jdf.queryExecution().optimizedPlan().toString()
    assert plan.count(f"{parse}(") == 1, plan
    inline = raw.select(*[codec.decode(F.col("value")).value.getField(n).alias(n) for n, _ in fields])
    assert inline._jdf.queryExecution().optimizedPlan().toString().count(f"{parse}(") > 1  # what it saves
    got = sorted(out.collect())
    assert [(r["id"], str(r["amount"]), r["name"], r["error"]) for r in got] == [
        (i, f"{i + 1}.50", f"x{i}", False) for i in range(3)
    ]


def test_pysparks_classes_are_named_without_a_search_of_the_class_path(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PySpark names some JVM classes without their package (``sc._jvm.PythonUtils``, behind every
    ``select`` of several columns); py4j would look each such name up in every star-imported package
    at each use, every miss a search of the driver's class path. The project's sessions bind those
    names at start (``engine.session``), so building a query sends no such lookup, nor one of
    ``functions`` by the full name PySpark gives it at each ``F.*`` call."""
    from py4j.clientserver import ClientServerConnection
    from pyspark.sql import functions as F

    sent: list[str] = []
    send = ClientServerConnection.send_command

    def counted(self: ClientServerConnection, command: str) -> str:
        sent.append(command)
        return send(self, command)

    df = spark.range(3).selectExpr("id AS a", "id * 2 AS b")
    monkeypatch.setattr(ClientServerConnection, "send_command", counted)
    query = df.select("a", "b").withColumn("c", F.col("a") + F.lit(1)).groupBy("a").agg(F.max("c"))
    monkeypatch.undo()
    assert sent, "building the query made no JVM calls: this test measures nothing"
    # py4j's reflection command ("r"), its lookup of a name ("u"): none for a class without its
    # package, nor for ``functions`` (which PySpark names by its full name at every ``F.*`` call)
    names = [c.split("\n")[2] for c in sent if c.startswith("r\nu\n")]
    looked_up = [n for n in names if "." not in n or n == "org.apache.spark.sql.functions"]
    assert looked_up == [], f"looked up in the JVM: {sorted(set(looked_up))}"
    assert sorted(query.collect()) == [(0, 1), (1, 2), (2, 3)]


def test_building_a_decoder_records_no_python_call_sites(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PySpark 4 records each call's Python call site in the JVM (five round trips and a stack walk per
    call); the project's sessions turn that off (``engine.session.spark_conf``), so building a codec's
    decoding costs only the JVM calls that build it."""
    from py4j.clientserver import ClientServerConnection
    from pyspark.sql import functions as F

    from upsert_kafka_ops.formats.codecs import make_codec
    from upsert_kafka_ops.spec.types import parse_type

    sent: list[str] = []
    send = ClientServerConnection.send_command

    def counted(self: ClientServerConnection, command: str) -> str:
        sent.append(command)
        return send(self, command)

    codec = make_codec("json", [("id", parse_type("BIGINT")), ("at", parse_type("TIMESTAMP(3)"))], {})
    monkeypatch.setattr(ClientServerConnection, "send_command", counted)
    decoded = codec.decode(F.col("value"))
    monkeypatch.undo()
    assert sent, "building the decoding made no JVM calls: this test measures nothing"
    assert not [c for c in sent if "PySparkCurrentOrigin" in c], "call sites were recorded"
    if spark.version >= "4":
        assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
    assert (
        spark.range(1).selectExpr("'{\"id\": 7}' AS value").select(decoded.value.getField("id")).first()[0]
        == 7
    )
