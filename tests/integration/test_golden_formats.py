"""Our Spark codecs against golden byte vectors produced by Flink's own format encoders.

The vectors (``tests/golden/flink_formats.json``, see its README) were made by running Flink's
``json``/``csv``/``raw``/``avro`` encoders on each row. Encoding must give the same bytes, since key
bytes pick the partition and are the compaction key; decoding those bytes must give the row back.

Spark work is batched: a module fixture cuts every selected vector's row from one checkpointed
DataFrame, applies the codec expressions a per-vector job would run (encode the row; decode Flink's
bytes and re-encode the decoded row), and collects the per-vector results, keyed by vector id, in
one Spark job per format and direction. Each vector is still its own test asserting on its own
entry. If a batch job fails, its vectors run one by one so that the error lands on its vector.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import json
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from upsert_kafka_ops.formats.codecs import make_codec
from upsert_kafka_ops.spec.types import SqlType, parse_type

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

VECTORS = json.loads((Path(__file__).parents[1] / "golden" / "flink_formats.json").read_text())
IMPLEMENTED = {"json", "raw", "csv", "avro"}

#: Vectors we knowingly do not reproduce, with the reason (docs/semantics.md lists them too). The
#: test asserts that these still differ, so a fix forces this list to shrink.
KNOWN_DIFFERENCES = {
    "json_string_escaping": "Flink escapes characters outside the BMP (emoji) as \\uD83D\\uDE00; Spark writes UTF-8",
    "json_timestamp_precisions_sql": "Spark timestamps stop at microseconds; TIMESTAMP(9) nanoseconds are cut",
    "json_timestamp_precisions_iso8601": "Spark timestamps stop at microseconds; TIMESTAMP(9) nanoseconds are cut",
    "json_test_sql_timestamp_format": "Spark timestamps stop at microseconds; TIMESTAMP(9) nanoseconds are cut",
    "json_test_iso_timestamp_format": "Spark timestamps stop at microseconds; TIMESTAMP(9) nanoseconds are cut",
    "json_nested_row_array_map": "map entry order: Flink writes its hash map's order, Spark the map's own order",
}
#: Rows that Spark cannot even hold.
UNREPRESENTABLE = {
    "json_map_null_key_literal": "Spark maps cannot have a NULL key",
    "json_map_null_key_drop": "Spark maps cannot have a NULL key",
}


def _py(value: Any, t: SqlType) -> Any:
    """A vector's JSON value as the Python value Spark takes for type ``t``."""
    if value is None:
        return None
    if t.name == "ROW":
        return tuple(_py(value.get(f.name), f.type) for f in t.fields)
    if t.name == "ARRAY" and t.element is not None:
        return [_py(v, t.element) for v in value]
    if t.name == "MAP" and t.key is not None and t.value is not None:
        return {_py(k, t.key): _py(v, t.value) for k, v in value["map"]}
    if t.name == "DECIMAL":
        return Decimal(str(value))
    if t.name in ("FLOAT", "DOUBLE"):
        return float(value)
    if t.name == "DATE":
        return dt.date.fromisoformat(value)
    if t.name == "TIMESTAMP":
        return dt.datetime.fromisoformat(value[:26])
    if t.name == "TIMESTAMP_LTZ":
        return dt.datetime.fromisoformat(value[:26].rstrip("Z") + "+00:00")
    if t.name in ("BYTES", "BINARY", "VARBINARY"):
        return base64.b64decode(value["base64"])
    return value


def _cases(fmt: set[str]) -> list[Any]:
    out = []
    for v in VECTORS:
        if v["format"] in fmt and not v.get("expected_error"):
            out.append(pytest.param(v, id=v["id"]))
    return out


def _fields(vector: dict[str, Any]) -> list[tuple[str, SqlType]]:
    return [(name, parse_type(type_text)) for name, type_text in vector["columns"]]


def _options(vector: dict[str, Any]) -> dict[str, str]:
    head = vector["format"] + "."
    return {k[len(head) :]: str(v) for k, v in vector["options"].items()}


def _supported(vector: dict[str, Any]) -> bool:
    return vector["options"].get("raw.endianness", "big-endian") == "big-endian" and not (
        vector["format"] == "raw" and vector["columns"][0][1] in ("FLOAT", "DOUBLE")
    )


def _schema_and_row(vector: dict[str, Any]) -> tuple[str, tuple[Any, ...]]:
    fields = _fields(vector)
    schema = ", ".join(f"`{n}` {t.to_spark()}" for n, t in fields)
    row = tuple(_py(value, t) for value, (_, t) in zip(vector["row"], fields, strict=True))
    return schema, row


def _want(vector: dict[str, Any]) -> bytes | None:
    """Flink 2.x's bytes: the vector's own, or where Flink 2 writes differently, those."""
    hex_ = vector.get("flink_2_0_0_bytes_hex") or vector["bytes_hex"]
    return None if hex_ is None else bytes.fromhex(hex_)


def _checks_decoding(vector: dict[str, Any]) -> bool:
    """Whether the test decodes Flink's bytes (only where Flink's own decoder gives the row back:
    Flink's JSON and CSV decoders keep the whole seconds of a TIME, so a fraction it wrote does not
    come back, here as there; tests/conformance/test_value_edges.py checks that against Flink)."""
    time_fraction = vector["format"] in ("json", "csv") and any(
        t.startswith("TIME(") and not t.startswith("TIME(0") for _, t in vector["columns"]
    )
    return (
        vector["id"] not in KNOWN_DIFFERENCES
        and _want(vector) is not None
        and "decode_roundtrip" not in vector
        and not time_fraction
    )


def _runs_spark(vector: dict[str, Any]) -> bool:
    """Whether the test needs Spark results (the other vectors assert on errors raised in Python)."""
    return _supported(vector) and vector["id"] not in UNREPRESENTABLE


@dataclass
class _Result:
    """What Spark gave one vector: a row of the encode / decode frame of :func:`_plan`, or the
    exception that computing it raised (the vector's test raises it)."""

    encode: Any = None
    decode: Any = None


def _input_frames(
    spark: SparkSession, vectors: list[dict[str, Any]], results: dict[str, _Result]
) -> dict[str, DataFrame]:
    """Each vector's row as a one-row DataFrame of its own columns (``createDataFrame([row], schema)``).

    All rows come from one ``createDataFrame`` call (one struct column per vector) that is
    checkpointed once: a DataFrame of Python rows is recomputed by a Python worker in every job that
    reads it, which costs about a second per vector even inside one job.
    """
    try:
        inputs = [_schema_and_row(v) for v in vectors]
        schema = ", ".join(f"`v{i}` STRUCT<{s}> NOT NULL" for i, (s, _) in enumerate(inputs))
        base = spark.createDataFrame([tuple(row for _, row in inputs)], schema).localCheckpoint()
        return {v["id"]: base.select(f"v{i}.*") for i, v in enumerate(vectors)}
    except Exception:  # a row Spark refuses: make them one by one, the error lands on its vector
        frames = {}
        for v in vectors:
            try:
                schema, row = _schema_and_row(v)
                frames[v["id"]] = spark.createDataFrame([row], schema)
            except Exception as e:
                results[v["id"]].encode = e
        return frames


def _plan(df: DataFrame, vector: dict[str, Any]) -> tuple[DataFrame, DataFrame | None]:
    """The codec expressions of one vector on its row ``df`` (no job yet): a frame of (id, b) with
    the encoded row and, where :func:`_checks_decoding`, a frame of (id, err, b) with the decoding
    error flag of Flink's bytes and the decoded row encoded again."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, BooleanType, NullType

    def checked(frame: DataFrame, types: dict[str, Any]) -> DataFrame:
        # the union needs one type per column: an all-NULL column is cast, another type fails the vector
        cols = [F.col("id")]
        for name, want_type in types.items():
            got_type = frame.schema[name].dataType
            if isinstance(got_type, NullType):
                cols.append(F.col(name).cast(want_type).alias(name))
            elif got_type == want_type:
                cols.append(F.col(name))
            else:
                raise TypeError(f"{name} is {got_type.simpleString()}, not {want_type.simpleString()}")
        return frame.select(*cols)

    fields = _fields(vector)
    codec = make_codec(vector["format"], fields, _options(vector))
    vid = F.lit(vector["id"]).alias("id")
    encoded = codec.encode(F.struct(*[F.col(n) for n, _ in fields]))
    encode = checked(df.select(vid, encoded.alias("b")), {"b": BinaryType()})
    if not _checks_decoding(vector):
        return encode, None
    # decoding Flink's bytes gives the row back: re-encoding it reproduces the bytes exactly.
    # The decoded row is a column that the re-encoding reads, as the engine reads a decoded
    # record: inlined, Spark would copy the whole decoder into every use of each field
    # (minutes of planning and code generation for the DECIMAL vectors).
    decoded = codec.decode(F.lit(_want(vector)))
    row = df.select(vid, decoded.error.alias("err"), decoded.value.alias("v"))
    decode = checked(
        row.select("id", "err", codec.encode(F.col("v")).alias("b")),
        {"err": BooleanType(), "b": BinaryType()},
    )
    return encode, decode


def _collect_union(frames: list[DataFrame]) -> dict[str, Any]:
    """The rows of one-row frames by vector id, from one Spark job over their union."""
    union = functools.reduce(lambda a, b: a.union(b), frames).coalesce(1)
    rows: dict[str, Any] = {}
    for r in union.collect():
        assert r["id"] not in rows, f"two result rows for {r['id']}"
        rows[r["id"]] = r
    return rows


def _collect_all(frames: dict[str, DataFrame]) -> dict[str, Any]:
    """Each frame's row, or the exception it raised, by vector id. One Spark job for all of them;
    only when that job fails, one job per frame, so that the error lands on the failing vector."""
    try:
        return _collect_union(list(frames.values()))
    except Exception:
        rows: dict[str, Any] = {}
        for vid, frame in frames.items():
            try:
                rows.update(_collect_union([frame]))
            except Exception as e:
                rows[vid] = e
        return rows


def _selected_vector_ids(request: pytest.FixtureRequest) -> set[str]:
    """The vectors whose encoding test this session runs (all of them unless deselected)."""
    ids = set()
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        if (
            getattr(item, "originalname", None) == test_encoding_is_byte_identical_to_flink.__name__
            and item.path == Path(__file__)
            and callspec is not None
        ):
            ids.add(callspec.params["vector"]["id"])
    return ids


@pytest.fixture(scope="module")
def spark_results(spark: SparkSession, request: pytest.FixtureRequest) -> dict[str, _Result]:
    """The Spark results of every selected vector that needs Spark: per format, one job encodes
    all rows and one job decodes all of Flink's bytes (see :func:`_plan`)."""
    selected = _selected_vector_ids(request)
    vectors = [v for v in VECTORS if v["id"] in selected and not v.get("expected_error") and _runs_spark(v)]
    results = {v["id"]: _Result() for v in vectors}
    inputs = _input_frames(spark, vectors, results)
    encode: dict[str, dict[str, DataFrame]] = {}  # format -> vector id -> frame
    decode: dict[str, dict[str, DataFrame]] = {}
    for v in vectors:
        if v["id"] not in inputs:
            continue
        try:
            enc, dec = _plan(inputs[v["id"]], v)
        except Exception as e:  # building the expressions failed: that vector's test raises it
            results[v["id"]].encode = e
            continue
        encode.setdefault(v["format"], {})[v["id"]] = enc
        if dec is not None:
            decode.setdefault(v["format"], {})[v["id"]] = dec
    for frames in encode.values():
        for vid, row in _collect_all(frames).items():
            results[vid].encode = row
    for frames in decode.values():
        for vid, row in _collect_all(frames).items():
            results[vid].decode = row
    return results


def _outcome(vector: dict[str, Any], got: Any, what: str) -> Any:
    """A row of :class:`_Result`; raises the exception Spark raised for it instead."""
    if isinstance(got, BaseException):
        raise got
    assert got is not None, f"Spark gave no {what} result for {vector['id']}"
    return got


def test_every_implemented_format_has_vectors() -> None:
    formats = {v["format"] for v in VECTORS}
    assert formats >= IMPLEMENTED
    assert sum(1 for v in VECTORS if v["format"] in IMPLEMENTED) >= 40


@pytest.mark.parametrize("vector", _cases(IMPLEMENTED))
def test_encoding_is_byte_identical_to_flink(
    spark: SparkSession, spark_results: dict[str, _Result], vector: dict[str, Any]
) -> None:
    fields = _fields(vector)
    if not _supported(vector):
        with pytest.raises(Exception, match="raw"):
            make_codec(vector["format"], fields, _options(vector))
        return
    if vector["id"] in UNREPRESENTABLE:
        schema, row = _schema_and_row(vector)
        with pytest.raises(ValueError, match="not nullable"):
            spark.createDataFrame([row], schema)
        return
    result = spark_results[vector["id"]]
    encoded = _outcome(vector, result.encode, "encode")["b"]
    got = None if encoded is None else bytes(encoded)
    want = _want(vector)
    if vector["id"] in KNOWN_DIFFERENCES:
        assert got != want, f"{vector['id']} now matches Flink: remove it from KNOWN_DIFFERENCES"
        return
    assert got == want, f"{got!r} != {want!r}"
    if _checks_decoding(vector):
        again = _outcome(vector, result.decode, "decode")
        assert again["err"] is False
        assert bytes(again["b"]) == want
