"""Our Spark codecs against golden byte vectors produced by Flink's own format encoders.

The vectors (``tests/golden/flink_formats.json``, see its README) were made by running Flink's
``json``/``csv``/``raw``/``avro`` encoders on each row. Encoding must give the same bytes, since key
bytes pick the partition and are the compaction key; decoding those bytes must give the row back.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
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


def test_every_implemented_format_has_vectors() -> None:
    formats = {v["format"] for v in VECTORS}
    assert formats >= IMPLEMENTED
    assert sum(1 for v in VECTORS if v["format"] in IMPLEMENTED) >= 40


@pytest.mark.parametrize("vector", _cases(IMPLEMENTED))
def test_encoding_is_byte_identical_to_flink(spark: SparkSession, vector: dict[str, Any]) -> None:
    from pyspark.sql import functions as F

    fields = _fields(vector)
    if not _supported(vector):
        with pytest.raises(Exception, match="raw"):
            make_codec(vector["format"], fields, _options(vector))
        return
    schema = ", ".join(f"`{n}` {t.to_spark()}" for n, t in fields)
    row = tuple(_py(value, t) for value, (_, t) in zip(vector["row"], fields, strict=True))
    if vector["id"] in UNREPRESENTABLE:
        with pytest.raises(ValueError, match="not nullable"):
            spark.createDataFrame([row], schema)
        return
    df = spark.createDataFrame([row], schema)
    codec = make_codec(vector["format"], fields, _options(vector))
    encoded = df.select(codec.encode(F.struct(*[F.col(n) for n, _ in fields])).alias("b")).first()["b"]
    got = None if encoded is None else bytes(encoded)
    want = None if vector["bytes_hex"] is None else bytes.fromhex(vector["bytes_hex"])
    if vector["id"] in KNOWN_DIFFERENCES:
        assert got != want, f"{vector['id']} now matches Flink: remove it from KNOWN_DIFFERENCES"
        return
    assert got == want, f"{got!r} != {want!r}"
    if want is not None and "decode_roundtrip" not in vector:
        # decoding Flink's bytes gives the row back: re-encoding it reproduces the bytes exactly
        decoded = codec.decode(F.lit(want))
        again = df.select(decoded.error.alias("err"), codec.encode(decoded.value).alias("b")).first()
        assert again["err"] is False
        assert bytes(again["b"]) == want
