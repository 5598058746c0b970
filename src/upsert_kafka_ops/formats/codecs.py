"""Kafka key and value formats as Spark column expressions (no Python UDFs: everything runs in the JVM).

A codec decodes the bytes of a key or value into a struct of its fields, plus a boolean column that
is true where the bytes could not be decoded, and encodes a struct back into bytes.

Decoding accepts what Flink's decoders accept instead of silently producing NULL: JSON numbers and
booleans sent as strings (``"42"``), numbers sent where strings are expected, both of Flink's
timestamp text forms (SQL ``2020-03-08 13:12:11.123`` and ISO-8601 ``2020-03-08T13:12:11.123``).
To get that, JSON and CSV fields are first read as text and then converted with ``try_cast``; a
field whose text does not convert marks the record as a parse error (never a silent NULL).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.spec.types import RowField, SqlType

if TYPE_CHECKING:
    from pyspark.sql import Column

Fields = list[tuple[str, SqlType]]
_INTEGRAL_BYTES = {"TINYINT": 1, "SMALLINT": 2, "INT": 4, "BIGINT": 8}
_TEXT = {"STRING", "VARCHAR", "CHAR", "TIME"}
_BINARY = {"BYTES", "BINARY", "VARBINARY"}


@dataclass(frozen=True)
class Decoded:
    """``value``: struct of the format's fields (NULL for NULL bytes); ``error``: true where undecodable."""

    value: Column
    error: Column


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _text_schema(t: SqlType) -> str:
    """Spark schema that reads every scalar leaf as text (so quoted numbers are not lost)."""
    if t.name == "ROW":
        return "STRUCT<" + ", ".join(f"{_q(f.name)}: {_text_schema(f.type)}" for f in t.fields) + ">"
    if t.name == "ARRAY" and t.element is not None:
        return f"ARRAY<{_text_schema(t.element)}>"
    if t.name == "MULTISET" and t.element is not None:
        return f"MAP<{_text_schema(t.element)}, STRING>"
    if t.name == "MAP" and t.key is not None and t.value is not None:
        return f"MAP<{_text_schema(t.key)}, {_text_schema(t.value)}>"
    if t.name == "DECIMAL":
        # read exactly: as text, Spark's JSON reader would pass big numbers through a double
        return t.to_spark()
    return "STRING"


def _from_text(c: Column, t: SqlType) -> tuple[Column, Column]:
    """Convert a column read by :func:`_text_schema` to type ``t``: (value, error flag)."""
    from pyspark.sql import functions as F

    false = F.lit(False)
    if t.name == "ROW":
        parts = [_from_text(c.getField(f.name), f.type) for f in t.fields]
        value = F.when(c.isNull(), F.lit(None)).otherwise(
            F.struct(*[p[0].alias(f.name) for p, f in zip(parts, t.fields, strict=True)])
        )
        error = false
        for _, e in parts:
            error = error | e
        return value, F.when(c.isNull(), false).otherwise(error)
    if t.name == "ARRAY" and t.element is not None:
        elem = t.element
        value = F.transform(c, lambda x: _from_text(x, elem)[0])
        return value, F.coalesce(F.exists(c, lambda x: _from_text(x, elem)[1]), false)
    if t.name in ("MAP", "MULTISET"):
        k_type = t.key if t.name == "MAP" else t.element
        v_type = t.value if t.name == "MAP" else SqlType("INT")
        assert k_type is not None and v_type is not None
        value = F.transform_values(
            F.transform_keys(c, lambda k, _v: _from_text(k, k_type)[0]),
            lambda _k, v: _from_text(v, v_type)[0],
        )
        error = F.exists(F.map_keys(c), lambda k: _from_text(k, k_type)[1]) | F.exists(
            F.map_values(c), lambda v: _from_text(v, v_type)[1]
        )
        return value, F.coalesce(error, false)
    if t.name in _TEXT or t.name == "DECIMAL":
        return c, false
    if t.name == "BOOLEAN":
        # Flink: a JSON boolean as is, any other text through Boolean.parseBoolean ("true", any case)
        return F.when(c.isNull(), F.lit(None)).otherwise(F.lower(F.trim(c)) == "true"), false
    binary = t.name in _BINARY
    value = F.try_to_binary(c, F.lit("base64")) if binary else F.trim(c).try_cast(t.to_spark())
    return value, c.isNotNull() & value.isNull()


class JsonCodec:
    """Flink's ``json`` format."""

    def __init__(self, fields: Fields, options: dict[str, str]) -> None:
        self.fields = fields
        self.options = options
        if options.get("fail-on-missing-field", "false").lower() == "true":
            raise SpecError(
                "json.fail-on-missing-field", "'true' is not supported yet.", "leave it at 'false'."
            )
        self.row_type = SqlType("ROW", fields=tuple(_row_fields(fields)))

    def decode(self, data: Column) -> Decoded:
        from pyspark.sql import functions as F

        schema = ", ".join(f"{_q(f.name)} {_text_schema(f.type)}" for f in self.row_type.fields)
        parsed = F.from_json(
            data.cast("string"),
            f"{schema}, `__corrupt` STRING",
            {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "__corrupt"},
        )
        value, field_error = _from_text(parsed, self.row_type)
        error = data.isNotNull() & (parsed.isNull() | parsed.getField("__corrupt").isNotNull() | field_error)
        return Decoded(F.when(data.isNull(), F.lit(None)).otherwise(value), error)

    def encode(self, row: Column) -> Column:
        """Flink's JSON encoder, byte for byte: fields in declaration order, nulls written (unless
        ``encode.ignore-null-fields``), Java's number text, decimals with trailing zeros stripped."""
        from pyspark.sql import functions as F

        return F.encode(_json_value(row, self.row_type, self.options), "UTF-8")


def _json_string(c: Column) -> Column:
    """A JSON string literal as Jackson writes it (Spark's own JSON writer is Jackson too)."""
    from pyspark.sql import functions as F

    text = F.to_json(F.array(c))
    return F.substring(text, 2, F.length(text) - 2)


def _let(value: Column, body: Callable[[Column], Column]) -> Column:
    """``body(value)`` with ``value`` computed once: a one-element ``transform`` binds it to a lambda
    variable. Without it every use repeats the whole expression, and a few DECIMAL columns make
    plans too large for code generation."""
    from pyspark.sql import functions as F

    return F.transform(F.array(value), body)[0]


def _json_decimal(c: Column, plain: bool) -> Column:
    """``BigDecimal.stripTrailingZeros()`` then ``toString()`` (or ``toPlainString()`` when plain).

    Built from trims and substrings of the decimal's plain text, each used a fixed number of times:
    nested regexes used from every branch grew the generated code past the JVM's 64 KB method limit,
    and Spark fell back to interpreted evaluation."""
    from pyspark.sql import functions as F

    text = c.cast("string")
    neg = text.startswith("-")
    body = F.when(neg, F.substring(text, 2, 1 << 30)).otherwise(text)
    sign = F.when(neg, F.lit("-")).otherwise(F.lit(""))
    has_point = body.contains(".")
    stripped = F.rtrim(F.rtrim(body, F.lit("0")), F.lit("."))  # with a point: 1.50 -> 1.5, 2.00 -> 2
    if plain:
        txt = F.when(has_point, stripped).otherwise(body)
        return F.when(txt == "0", F.lit("0")).otherwise(F.concat(sign, txt))

    def sci(digits: Column, exp_sign: str, exp: Column) -> Column:
        rest = F.substring(digits, 2, 1 << 30)
        return F.concat(
            F.substring(digits, 1, 1),
            F.when(rest != "", F.concat(F.lit("."), rest)).otherwise(F.lit("")),
            F.lit(exp_sign),
            exp.cast("string"),
        )

    # no point: an integer whose trailing zeros become an exponent (100 -> 1E+2)
    int_digits = F.rtrim(body, F.lit("0"))
    zeros = F.length(body) - F.length(int_digits)
    integral = (
        F.when(body == "0", F.lit("0"))
        .when(zeros > 0, F.concat(sign, sci(int_digits, "E+", zeros + F.length(int_digits) - 1)))
        .otherwise(F.concat(sign, body))
    )
    # a point: below 1e-6 (0.000000ddd) scientific, otherwise plain
    after = F.substring(stripped, 3, 1 << 30)
    frac = F.ltrim(after, F.lit("0"))
    tiny = F.concat(sign, sci(frac, "E-", F.length(after) - F.length(frac) + 1))
    fractional = (
        F.when(stripped == "0", F.lit("0"))
        .when(stripped.startswith("0.000000"), tiny)
        .otherwise(F.concat(sign, stripped))
    )
    return F.when(has_point, fractional).otherwise(integral)


def _json_value(c: Column, t: SqlType, options: dict[str, str]) -> Column:
    """The JSON text of ``c`` (type ``t``) as Flink's ``RowDataToJsonConverters`` write it."""
    from pyspark.sql import functions as F

    iso = options.get("timestamp-format.standard", "SQL").upper() == "ISO-8601"
    if t.name == "ROW":
        skip_nulls = options.get("encode.ignore-null-fields", "false").lower() == "true"
        parts = []
        for f in t.fields:
            field = c.getField(f.name)
            part = F.concat(
                F.lit(json.dumps(f.name, ensure_ascii=False) + ":"), _json_value(field, f.type, options)
            )
            parts.append(F.when(field.isNotNull(), part) if skip_nulls else part)
        text = F.concat(F.lit("{"), F.concat_ws(",", *parts), F.lit("}"))
    elif t.name == "ARRAY" and t.element is not None:
        elem = t.element
        text = F.concat(
            F.lit("["), F.array_join(F.transform(c, lambda x: _json_value(x, elem, options)), ","), F.lit("]")
        )
    elif t.name == "MAP" and t.key is not None and t.value is not None:
        v_t = t.value

        def entry(e: Column) -> Column:  # Flink writes map keys as JSON strings
            key = _json_string(e.getField("key").cast("string"))
            return F.concat(key, F.lit(":"), _json_value(e.getField("value"), v_t, options))

        text = F.concat(F.lit("{"), F.array_join(F.transform(F.map_entries(c), entry), ","), F.lit("}"))
    elif t.name in ("STRING", "VARCHAR", "CHAR"):
        text = _json_string(c)
    elif t.name == "TIME":
        text = _json_string(F.substring(c, 1, 8))  # Flink writes TIME as HH:mm:ss
    elif t.name == "BOOLEAN" or t.name in _INTEGRAL_BYTES:
        text = c.cast("string")
    elif t.name in ("FLOAT", "DOUBLE"):
        raw = c.cast("string")
        text = F.when(
            F.isnan(c) | (F.abs(c) == float("inf")), F.concat(F.lit('"'), raw, F.lit('"'))
        ).otherwise(raw)
    elif t.name == "DECIMAL":
        text = _json_decimal(c, options.get("encode.decimal-as-plain-number", "false").lower() == "true")
    elif t.name == "DATE":
        text = _json_string(c.cast("string"))
    elif t.name == "TIMESTAMP":
        ts = c.cast("string")
        text = _json_string(F.regexp_replace(ts, " ", "T") if iso else ts)
    elif t.name == "TIMESTAMP_LTZ":
        utc = F.convert_timezone(F.current_timezone(), F.lit("UTC"), c.cast("timestamp_ntz")).cast("string")
        text = _json_string(F.concat(F.regexp_replace(utc, " ", "T") if iso else utc, F.lit("Z")))
    elif t.name in _BINARY:
        text = _json_string(F.regexp_replace(F.base64(c), "\\r\\n", ""))
    else:
        raise SpecError("json", f"type {t.to_flink()} cannot be written as JSON here.")
    return F.when(c.isNull(), F.lit("null")).otherwise(text)


class RawCodec:
    """Flink's ``raw`` format: one column; strings as text in a charset, numbers big-endian."""

    def __init__(self, fields: Fields, options: dict[str, str]) -> None:
        if len(fields) != 1:
            raise SpecError(
                "raw",
                f"the raw format holds exactly one column, got {len(fields)}: {', '.join(n for n, _ in fields)}.",
                "use json/csv/avro for several columns, or value.fields-include = 'EXCEPT_KEY'.",
            )
        self.name, self.type = fields[0]
        self.charset = options.get("charset", "UTF-8")
        if options.get("endianness", "big-endian") != "big-endian":
            raise SpecError("raw.endianness", "only 'big-endian' is supported.")
        if self.type.name not in _TEXT | _BINARY | set(_INTEGRAL_BYTES) | {"BOOLEAN"}:
            raise SpecError("raw", f"type {self.type.to_flink()} is not supported by the raw format here.")

    def decode(self, data: Column) -> Decoded:
        from pyspark.sql import functions as F

        n = _INTEGRAL_BYTES.get(self.type.name)
        if self.type.name in _BINARY:
            value, error = data, F.lit(False)
        elif self.type.name in _TEXT:
            value, error = F.decode(data, self.charset), F.lit(False)
        elif self.type.name == "BOOLEAN":
            value, error = data == F.lit(b"\x01"), data.isNotNull() & (F.length(data) != 1)
        else:
            assert n is not None
            unsigned = F.conv(F.hex(data), 16, 10).cast("decimal(20,0)")
            half, full = (F.lit(str(2 ** (8 * n - k))).cast("decimal(20,0)") for k in (1, 0))
            signed = F.when(unsigned >= half, unsigned - full).otherwise(unsigned)
            value = signed.cast(self.type.to_spark())
            error = data.isNotNull() & (F.length(data) != n)
            value = F.when(error, F.lit(None)).otherwise(value)
        return Decoded(F.when(data.isNull(), F.lit(None)).otherwise(F.struct(value.alias(self.name))), error)

    def encode(self, row: Column) -> Column:
        from pyspark.sql import functions as F

        c = row.getField(self.name)
        n = _INTEGRAL_BYTES.get(self.type.name)
        if self.type.name in _BINARY:
            return c
        if self.type.name in _TEXT:
            return F.encode(c, self.charset)
        if self.type.name == "BOOLEAN":
            return F.when(c, F.lit(b"\x01")).when(~c, F.lit(b"\x00"))
        assert n is not None
        return F.unhex(F.substring(F.lpad(F.hex(c.cast("bigint")), 16, "0"), 17 - 2 * n, 2 * n))


def _row_fields(fields: Fields) -> list[RowField]:
    return [RowField(name, t) for name, t in fields]


from upsert_kafka_ops.formats.avro_codec import AvroCodec  # noqa: E402
from upsert_kafka_ops.formats.avro_confluent import AvroConfluentCodec  # noqa: E402
from upsert_kafka_ops.formats.csv_codec import CsvCodec  # noqa: E402  (it uses the helpers above)

Codec = JsonCodec | RawCodec | CsvCodec | AvroCodec | AvroConfluentCodec
_CODECS: dict[str, type[JsonCodec | RawCodec | CsvCodec | AvroCodec]] = {
    "json": JsonCodec,
    "raw": RawCodec,
    "csv": CsvCodec,
    "avro": AvroCodec,
}


def make_codec(
    fmt: str, fields: Fields, options: dict[str, str], topics: tuple[str, ...] = (), side: str = "value"
) -> Codec:
    """The codec of ``fmt`` for these fields; ``options`` without the ``<format>.`` prefix.

    ``topics`` and ``side`` (key or value) give the Schema Registry subjects of ``avro-confluent``.
    """
    if fmt == "avro-confluent":
        return AvroConfluentCodec(fields, options, topics, side)
    if fmt not in _CODECS:
        raise SpecError(
            fmt,
            f"the {fmt!r} format is not implemented on Spark yet.",
            f"use one of {sorted([*_CODECS, 'avro-confluent'])}.",
        )
    return _CODECS[fmt](fields, options)
