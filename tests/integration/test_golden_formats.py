"""Our Spark codecs against golden byte vectors produced by Flink's own format encoders.

The vectors (``tests/golden/flink_formats.json``, see its README) were made by running Flink's
``json``/``csv``/``raw``/``avro`` encoders on each row. Encoding must give the same bytes, since key
bytes pick the partition and are the compaction key; decoding those bytes must give the row back.

Spark work is batched: a module fixture holds every selected vector's row in one checkpointed
one-row DataFrame and, per format, computes in one Spark job the codec expressions a per-vector job
would run (encode the row; decode Flink's bytes and re-encode the decoded row) as columns side by
side. Each vector is still its own test asserting on its own entry. If a format's job fails, its
vectors run one by one so that the error lands on its vector.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from upsert_kafka_ops.formats.codecs import make_codec
from upsert_kafka_ops.spec.types import SqlType, parse_type

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

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
    """What Spark gave one vector: its encoding ``{"b": bytes}`` and decoding ``{"err": flag, "b": the
    decoded row encoded again}`` (:func:`_collect_wide`), or the exception that computing them raised
    (the vector's test raises it)."""

    encode: Any = None
    decode: Any = None


def _base_row(spark: SparkSession, vectors: list[dict[str, Any]]) -> Any:
    """Every vector's row in one checkpointed one-row DataFrame, one struct column ``v<i>`` per vector,
    or None when Spark refuses one of the rows (then each vector runs alone: :func:`_alone`).

    A DataFrame of Python rows is recomputed by a Python worker in every job that reads it, which costs
    about a second per vector even inside one job; checkpointed once, the jobs read it from memory."""
    try:
        inputs = [_schema_and_row(v) for v in vectors]
        schema = ", ".join(f"`v{i}` STRUCT<{s}> NOT NULL" for i, (s, _) in enumerate(inputs))
        return spark.createDataFrame([tuple(row for _, row in inputs)], schema).localCheckpoint()
    except Exception:
        return None


def _columns(row: Any, vector: dict[str, Any]) -> tuple[Any, Any, Any]:
    """The codec of one vector, and its expressions on the vector's row (a struct column): the encoded
    row and, where :func:`_checks_decoding`, Flink's bytes decoded (None otherwise). The decoded row is
    encoded again by a projection after the one that decodes it, as the engine reads a decoded record:
    inlined, Spark would copy the whole decoder into every use of each field (minutes of planning and
    code generation for the DECIMAL vectors)."""
    from pyspark.sql import functions as F

    fields = _fields(vector)
    codec = make_codec(vector["format"], fields, _options(vector))
    encoded = codec.encode(F.struct(*[row.getField(n).alias(n) for n, _ in fields]))
    decoded = codec.decode(F.lit(_want(vector))) if _checks_decoding(vector) else None
    return codec, encoded, decoded


def _collect_wide(base: Any, vectors: list[tuple[int, dict[str, Any]]]) -> dict[str, _Result]:
    """One Spark job for ``vectors`` (index in ``base``, vector): a projection of every vector's
    columns side by side over the one row, then the decoded rows encoded again; the results by vector
    id. Raises what the job raised, or a TypeError for a column of another type than the test reads
    (bytes, and a boolean error flag)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, BooleanType, NullType

    first, second = [], []
    for i, v in vectors:
        codec, encoded, decoded = _columns(F.col(f"v{i}"), v)
        first.append(encoded.alias(f"e{i}"))
        second.append(F.col(f"e{i}"))
        if decoded is not None:
            first += [decoded.error.alias(f"x{i}"), decoded.value.alias(f"d{i}")]
            second += [F.col(f"x{i}"), codec.encode(F.col(f"d{i}")).alias(f"d{i}")]
    frame = base.select(*first).select(*second)
    for field in frame.schema.fields:  # an all-NULL column is NullType: its value is None, which fails
        want = BooleanType() if field.name.startswith("x") else BinaryType()
        if field.dataType not in (want, NullType()):
            raise TypeError(f"{field.name} is {field.dataType.simpleString()}, not {want.simpleString()}")
    found = frame.collect()[0].asDict()
    return {
        v["id"]: _Result(
            encode={"b": found[f"e{i}"]},
            decode={"err": found[f"x{i}"], "b": found[f"d{i}"]} if f"x{i}" in found else None,
        )
        for i, v in vectors
    }


def _alone(spark: SparkSession, vector: dict[str, Any]) -> _Result:
    """One vector in a job of its own: its row made alone, so that an error lands on it."""
    try:
        schema, row = _schema_and_row(vector)
        base = spark.createDataFrame([(row,)], f"`v0` STRUCT<{schema}> NOT NULL")
        return _collect_wide(base, [(0, vector)])[vector["id"]]
    except Exception as e:
        return _Result(encode=e, decode=e)


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
    """The Spark results of every selected vector that needs Spark: per format, one job computes
    every vector's encoding and decoding side by side (see :func:`_collect_wide`); when a format's job
    fails, its vectors run one by one, so that the error lands on its vector."""
    selected = _selected_vector_ids(request)
    vectors = [v for v in VECTORS if v["id"] in selected and not v.get("expected_error") and _runs_spark(v)]
    base = _base_row(spark, vectors)
    if base is None:
        return {v["id"]: _alone(spark, v) for v in vectors}
    formats: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for i, v in enumerate(vectors):
        formats.setdefault(v["format"], []).append((i, v))
    results: dict[str, _Result] = {}
    for batch in formats.values():
        try:
            results.update(_collect_wide(base, batch))
        except Exception:
            results.update({v["id"]: _alone(spark, v) for _, v in batch})
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
