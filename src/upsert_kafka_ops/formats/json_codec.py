"""Flink's ``json`` format on Spark: decoding that accepts what Flink's decoder accepts, encoding byte for
byte as Flink's ``RowDataToJsonConverters``."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.formats.columns import (
    BINARY_TYPES,
    INTEGRAL_BYTES,
    Decoded,
    Fields,
    from_text,
    quote_field,
    row_fields,
    text_schema,
)
from upsert_kafka_ops.formats.text_values import Dialect
from upsert_kafka_ops.spec.types import SqlType

if TYPE_CHECKING:
    from pyspark.sql import Column


class JsonCodec:
    """Flink's ``json`` format."""

    def __init__(self, fields: Fields, options: dict[str, str]) -> None:
        self.fields = fields
        self.options = options
        self.fail_on_missing = _flag(options, "fail-on-missing-field")
        if self.fail_on_missing and _flag(options, "ignore-parse-errors"):
            raise SpecError(
                "json.fail-on-missing-field",
                "fail-on-missing-field and ignore-parse-errors shouldn't both be true.",
                "keep one of them.",
            )
        nested = [n for n, t in fields if "ROW" in t.to_flink()]
        if self.fail_on_missing and nested:
            raise SpecError(
                "json.fail-on-missing-field",
                f"'true' checks top-level fields only here, and {', '.join(nested)} hold ROW fields.",
                "leave it at 'false' for tables with ROW columns.",
            )
        mode = options.get("map-null-key.mode", "FAIL").upper()
        if mode not in ("FAIL", "DROP", "LITERAL"):
            # Spark maps cannot hold a null key, so the mode never has one to act on; its value is still
            # checked as Flink checks it
            raise SpecError(
                "json.map-null-key.mode", f"unsupported value {mode!r}.", "use FAIL, DROP or LITERAL."
            )
        self.ignore_errors = _flag(options, "ignore-parse-errors")
        standard = options.get("timestamp-format.standard", "SQL").upper()
        if standard not in ("SQL", "ISO-8601"):
            raise SpecError(
                "json.timestamp-format.standard", f"unsupported value {standard!r}.", "use SQL or ISO-8601."
            )
        self.dialect = Dialect("json", iso=standard == "ISO-8601")
        self.row_type = SqlType("ROW", fields=tuple(row_fields(fields)))

    def parse(self, data: Column) -> Column:
        """Spark's JSON parse of the bytes into text fields: the one costly step of :meth:`decode`,
        which a plan projects once per record (:func:`~upsert_kafka_ops.formats.columns.parse_once`)."""
        from pyspark.sql import functions as F

        schema = ", ".join(f"{quote_field(f.name)} {text_schema(f.type)}" for f in self.row_type.fields)
        return F.from_json(
            data.cast("string"),
            f"{schema}, `__corrupt` STRING",
            {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "__corrupt"},
        )

    def decode(self, data: Column, parsed: Column | None = None) -> Decoded:
        """Flink's JSON decoder: a field that does not convert fails the record, or with
        ``ignore-parse-errors`` is NULL (in Flink 2 the record is dropped only when its text is not
        a JSON object). ``parsed``: :meth:`parse` of ``data``, already projected."""
        from pyspark.sql import functions as F

        text = data.cast("string")
        if parsed is None:
            parsed = self.parse(data)
        value, field_error = from_text(parsed, self.row_type, self.dialect)
        if self.ignore_errors:  # Spark's partial result holds NULL where a field did not convert
            error = F.json_object_keys(text).isNull()
        else:
            if self.fail_on_missing:  # a top-level field absent from the object (an explicit null is present)
                keys = F.json_object_keys(text)
                for f in self.row_type.fields:
                    field_error = field_error | F.coalesce(~F.array_contains(keys, f.name), F.lit(False))
            error = parsed.isNull() | parsed.getField("__corrupt").isNotNull() | field_error
        # no CASE on NULL bytes around the value (from_json of NULL is NULL, so is the value): there
        # the parse would sit in a branch, and Spark evaluates a parse it cannot share once per field
        return Decoded(value, data.isNotNull() & error)

    def encode(self, row: Column) -> Column:
        """Flink's JSON encoder, byte for byte: fields in declaration order, nulls written (unless
        ``encode.ignore-null-fields``), Java's number text, decimals with trailing zeros stripped."""
        from pyspark.sql import functions as F

        return F.encode(_json_value(row, self.row_type, self.options), "UTF-8")


def _flag(options: dict[str, str], name: str) -> bool:
    value = options.get(name, "false").lower()
    if value not in ("true", "false"):
        raise SpecError(f"json.{name}", f"must be 'true' or 'false', got {value!r}.")
    return value == "true"


def json_string(c: Column) -> Column:
    """A JSON string literal as Jackson writes it (Spark's own JSON writer is Jackson too)."""
    from pyspark.sql import functions as F

    text = F.to_json(F.array(c))
    return F.substring(text, 2, F.length(text) - 2)


def _quoted(text: Column) -> Column:
    """A JSON string of text that has nothing to escape (dates, times, base64): quotes only, without
    the JSON writer that :func:`json_string` runs per row."""
    from pyspark.sql import functions as F

    return F.concat(F.lit('"'), text, F.lit('"'))


def json_decimal(c: Column, plain: bool) -> Column:
    """A decimal's text as Flink 2.x writes it: plain, ``toPlainString()`` at the column's scale (12.30
    stays 12.30; Flink 1.x stripped the trailing zeros), else ``stripTrailingZeros().toString()``.

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
        return F.concat(sign, body)

    def sci(digits: Column, exp_sign: str, exp: Column) -> Column:
        rest = F.substring(digits, 2, 1 << 30)
        return F.concat(
            F.substring(digits, 1, 1),
            F.when(rest != "", F.concat(F.lit("."), rest)).otherwise(F.lit("")),
            F.lit(exp_sign),
            exp.cast("string"),
        )

    # the digits once the fraction's trailing zeros are gone: an integer when the fraction was all
    # zeros (89879170.00 -> 89879170, which goes on below as an integer: 8.987917E+7)
    value = F.when(has_point, stripped).otherwise(body)
    # an integer whose trailing zeros become an exponent (100 -> 1E+2)
    int_digits = F.rtrim(value, F.lit("0"))
    zeros = F.length(value) - F.length(int_digits)
    integral = (
        F.when(value == "0", F.lit("0"))
        .when(zeros > 0, F.concat(sign, sci(int_digits, "E+", zeros + F.length(int_digits) - 1)))
        .otherwise(F.concat(sign, value))
    )
    # a fraction: below 1e-6 (0.000000ddd) scientific, otherwise plain
    after = F.substring(value, 3, 1 << 30)
    frac = F.ltrim(after, F.lit("0"))
    tiny = F.concat(sign, sci(frac, "E-", F.length(after) - F.length(frac) + 1))
    fractional = F.when(value.startswith("0.000000"), tiny).otherwise(F.concat(sign, value))
    return F.when(value.contains("."), fractional).otherwise(integral)


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
            key = json_string(e.getField("key").cast("string"))
            return F.concat(key, F.lit(":"), _json_value(e.getField("value"), v_t, options))

        text = F.concat(F.lit("{"), F.array_join(F.transform(F.map_entries(c), entry), ","), F.lit("}"))
    elif t.name in ("STRING", "VARCHAR", "CHAR"):
        text = json_string(c)
    elif t.name == "TIME":
        text = _quoted(F.substring(c, 1, 8))  # Flink writes TIME as HH:mm:ss
    elif t.name == "BOOLEAN" or t.name in INTEGRAL_BYTES:
        text = c.cast("string")
    elif t.name in ("FLOAT", "DOUBLE"):
        raw = c.cast("string")
        text = F.when(
            F.isnan(c) | (F.abs(c) == float("inf")), F.concat(F.lit('"'), raw, F.lit('"'))
        ).otherwise(raw)
    elif t.name == "DECIMAL":
        text = json_decimal(c, options.get("encode.decimal-as-plain-number", "false").lower() == "true")
    elif t.name == "DATE":
        text = _quoted(c.cast("string"))
    elif t.name == "TIMESTAMP":
        ts = c.cast("string")
        text = _quoted(F.regexp_replace(ts, " ", "T") if iso else ts)
    elif t.name == "TIMESTAMP_LTZ":
        utc = F.convert_timezone(F.current_timezone(), F.lit("UTC"), c.cast("timestamp_ntz")).cast("string")
        text = _quoted(F.concat(F.regexp_replace(utc, " ", "T") if iso else utc, F.lit("Z")))
    elif t.name in BINARY_TYPES:
        text = _quoted(F.regexp_replace(F.base64(c), "\\r\\n", ""))
    else:
        raise SpecError("json", f"type {t.to_flink()} cannot be written as JSON here.")
    return F.when(c.isNull(), F.lit("null")).otherwise(text)
