"""What differs between Spark lines behaves the same on the one that runs (each line's lane runs this
file too): casts that do not convert, bytes that are not UTF-8, TIMESTAMP_NTZ as epoch milliseconds
and back (checked against Python's own arithmetic), and a streaming query's progress."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from upsert_kafka_ops import spark_compat

pytestmark = pytest.mark.lines

EPOCH = dt.datetime(1970, 1, 1)


def test_a_cast_that_does_not_convert_is_null_and_one_that_does_is_the_value(spark: SparkSession) -> None:
    df = spark.createDataFrame([("12",), ("x1",), ("99999999999",)], "s string")
    got = [r[0] for r in df.select(spark_compat.try_cast(F.col("s"), "int")).collect()]
    assert got == [12, None, None]


def test_bytes_that_are_not_utf8_get_a_replacement_character(spark: SparkSession) -> None:
    samples = [b"abc", b"ab\xffc", "żółw".encode(), b"\xc3"]
    df = spark.createDataFrame([(bytearray(b),) for b in samples], "b binary")
    got = [r[0] for r in df.select(spark_compat.valid_utf8(F.col("b"))).collect()]
    assert got == [b.decode("utf-8", "replace") for b in samples]


def test_timestamp_ntz_as_epoch_millis_and_back_whatever_the_session_zone(spark: SparkSession) -> None:
    stamps = [
        dt.datetime(1970, 1, 1, 0, 0, 1, 234000),
        dt.datetime(2026, 11, 28, 23, 59, 59, 999999),  # truncated to ...999 ms
        dt.datetime(1969, 12, 31, 23, 59, 59, 500000),
        dt.datetime(1900, 3, 1, 12, 0),
        dt.datetime(9999, 12, 31, 23, 59, 59, 999000),
    ]
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    try:
        df = spark.createDataFrame([(s,) for s in stamps], "t timestamp_ntz")
        millis = [r[0] for r in df.select(spark_compat.ntz_millis(F.col("t"))).collect()]
        expected = [int((s - EPOCH) / dt.timedelta(microseconds=1)) for s in stamps]
        assert millis == [int(e / 1000) for e in expected]  # truncated toward zero, as timestamp_diff
        back = spark.createDataFrame([(m,) for m in millis], "m long")
        got = [r[0] for r in back.select(spark_compat.ntz_from_millis(F.col("m"))).collect()]
        assert got == [EPOCH + dt.timedelta(milliseconds=m) for m in millis]
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)


def test_a_streaming_querys_progress_reads_as_json_documents(spark: SparkSession, tmp_path: Path) -> None:
    source = tmp_path / "in"
    source.mkdir()
    (source / "a.json").write_text('{"n": 1}\n{"n": 2}\n')
    stream = spark.readStream.schema("n long").json(str(source))
    query = (
        stream.writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    docs = spark_compat.progress_documents(query.recentProgress)
    assert sum(d["numInputRows"] for d in docs) == 2
    ends = [s["endOffset"] for d in docs for s in d["sources"]]
    assert ends and all(isinstance(e, dict) for e in ends)  # JSON values, never a Python str() of one
    assert ends[-1]["logOffset"] == 0
