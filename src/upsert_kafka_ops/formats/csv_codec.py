"""Flink's ``csv`` format as Spark column expressions (no Python UDFs).

Encoding reproduces the bytes of Flink's ``CsvRowDataSerializationSchema`` (Jackson CSV 2.14): one
line with no header and no trailing newline, Jackson's loose quoting rule for string values (quoted
when longer than 24 UTF-16 chars, or holding a char below ``max(delimiter, quote) + 1``, the quote
char, or the escape char (a backslash when there is none); the quote char is doubled inside quotes,
and so is the escape char), numbers and booleans never quoted, nulls as the ``null-literal`` (or
nothing), ARRAY and nested ROW joined with the ``array-element-delimiter`` into one field.

Decoding follows Jackson's CSV reader rather than Spark's ``from_csv``: Spark's reader turns every
empty unquoted field into NULL and knows no escape char in Jackson's sense, while Flink reads an
empty field as ``""`` (so ``1,,null`` with ``null-literal = 'null'`` is ``(1, "", NULL)``). The first
line is split into fields by one regular expression (quoted fields may hold delimiters, doubled
quotes and line breaks; escapes ``\\n \\r \\t \\0`` and ``\\x`` for any other char), then every
field goes through the same text-to-type conversion as JSON. A record with the wrong number of
fields, an unclosed quote, or a field that does not convert is a parse error.
"""

from __future__ import annotations

import codecs
from typing import TYPE_CHECKING

from upsert_kafka_ops import spark_compat
from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.formats.columns import Decoded, Fields, bind_once, from_text
from upsert_kafka_ops.formats.json_codec import json_decimal
from upsert_kafka_ops.formats.text_values import CSV, DECIMAL_TEXT

if TYPE_CHECKING:
    from pyspark.sql import Column

    from upsert_kafka_ops.spec.types import SqlType

_NUMERIC = {"BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE"}
_SCALAR = _NUMERIC | {
    "STRING",
    "VARCHAR",
    "CHAR",
    "DECIMAL",
    "DATE",
    "TIME",
    "TIMESTAMP",
    "TIMESTAMP_LTZ",
    "BYTES",
    "BINARY",
    "VARBINARY",
}
_MAX_QUOTE_CHECK = 24  # CsvEncoder.MAX_QUOTE_CHECK


def _x(ch: str) -> str:
    """One char as a Java regex escape, valid inside and outside character classes."""
    return f"\\x{{{ord(ch):X}}}"


def _char_option(
    options: dict[str, str], name: str, default: str | None, unescape: bool = False
) -> str | None:
    value = options.get(name)
    if value is None:
        return default
    if unescape:
        value = codecs.decode(value, "unicode_escape")
    if len(value) != 1:
        raise SpecError(f"csv.{name}", f"must be a single character, got {value!r}.")
    return value


def _bool_option(options: dict[str, str], name: str) -> bool:
    value = options.get(name, "false").lower()
    if value not in ("true", "false"):
        raise SpecError(f"csv.{name}", f"must be 'true' or 'false', got {options[name]!r}.")
    return value == "true"


class CsvCodec:
    """Flink's ``csv`` format."""

    def __init__(self, fields: Fields, options: dict[str, str]) -> None:
        self.fields = fields
        delimiter = _char_option(options, "field-delimiter", ",", unescape=True)
        assert delimiter is not None
        self.delimiter = delimiter
        disable_quote = _bool_option(options, "disable-quote-character")
        if disable_quote and "quote-character" in options:
            raise SpecError(
                "csv.quote-character",
                "a quote character and disable-quote-character = 'true' cannot be set together.",
                "drop one of the two options.",
            )
        self.quote = None if disable_quote else _char_option(options, "quote-character", '"')
        self.escape = _char_option(options, "escape-character", None)
        self.null_literal = options.get("null-literal")
        self.array_delimiter = options.get("array-element-delimiter", ";")
        if not self.array_delimiter:
            raise SpecError("csv.array-element-delimiter", "must not be empty.")
        self.allow_comments = _bool_option(options, "allow-comments")
        self.ignore_errors = _bool_option(options, "ignore-parse-errors")
        self.scientific = _bool_option(options, "write-bigdecimal-in-scientific-notation")
        for name, t in fields:
            _check_type(name, t)

    # ------------------------------------------------------------------ encoding

    def encode(self, row: Column) -> Column:
        """One CSV line, byte-identical to Flink's encoder (see the module docstring)."""
        from pyspark.sql import functions as F

        parts = [self._field_text(row.getField(name), t) for name, t in self.fields]
        line = F.concat_ws(self.delimiter, *parts)
        return F.when(row.isNull(), F.lit(None)).otherwise(F.encode(line, "UTF-8"))

    def _null_text(self) -> Column:
        from pyspark.sql import functions as F

        return F.lit(self.null_literal or "")

    def _field_text(self, c: Column, t: SqlType) -> Column:
        from pyspark.sql import functions as F

        if t.name in _NUMERIC:
            text = c.cast("string")  # Java's toString for all of them; never quoted
        elif t.name == "DECIMAL":
            text = self._quoted(json_decimal(c, plain=not self.scientific))
        elif t.name == "ARRAY" and t.element is not None:
            elem = t.element
            joined = F.array_join(F.transform(c, lambda x: self._element_text(x, elem)), self.array_delimiter)
            text = self._quoted(joined)
        elif t.name == "ROW":
            row_texts = [self._element_text(c.getField(f.name), f.type) for f in t.fields]
            text = self._quoted(F.concat_ws(self.array_delimiter, *row_texts))
        else:
            text = self._quoted(_scalar_text(c, t))
        return F.when(c.isNull(), self._null_text()).otherwise(text)

    def _element_text(self, c: Column, t: SqlType) -> Column:
        """An ARRAY element or nested ROW field: ``String.valueOf`` of the value, never quoted alone."""
        from pyspark.sql import functions as F

        if t.name in _NUMERIC:
            text = c.cast("string")
        elif t.name == "DECIMAL":  # CsvGenerator#writeNumber(BigDecimal) uses toString() in arrays
            text = json_decimal(c, plain=False)
        else:
            text = _scalar_text(c, t)
        return F.when(c.isNull(), self._null_text()).otherwise(text)

    def _quoted(self, s: Column) -> Column:
        """Jackson's ``CsvEncoder`` loose quoting of a string value."""
        from pyspark.sql import functions as F

        if self.quote is None:
            return s
        q = self.quote
        min_safe = max(ord(self.delimiter), ord(q)) + 1
        specials = self.escape if self.escape is not None else q + "\\"
        pattern = "[\\x{0}" + "-" + _x(chr(min_safe - 1)) + "".join(_x(ch) for ch in specials) + "]"
        doubled = [q] if self.escape is None else [q, self.escape]

        def quote(v: Column) -> Column:  # v is bound once (see columns.bind_once)
            utf16_len = F.length(v) + F.length(F.regexp_replace(v, "[^\\x{10000}-\\x{10FFFF}]", ""))
            need = (utf16_len > _MAX_QUOTE_CHECK) | v.rlike(pattern)
            body = F.regexp_replace(v, "(" + "|".join(_x(ch) for ch in doubled) + ")", "$1$1")
            return F.when(need, F.concat(F.lit(q), body, F.lit(q))).otherwise(v)

        return bind_once(s, quote)

    # ------------------------------------------------------------------ decoding

    def parse(self, data: Column) -> None:
        """Nothing to parse apart from decoding (see :func:`~upsert_kafka_ops.formats.columns.parse_once`)."""
        return None

    def decode(self, data: Column, parsed: Column | None = None) -> Decoded:
        from pyspark.sql import functions as F

        text = data.cast("string")
        field = self._field_pattern()
        sep = _x(self.delimiter)
        record = f"^{field}(?:{sep}{field})*+(?:[\\r\\n][\\s\\S]*)?$"
        line = F.regexp_extract(text, f"^({field}(?:{sep}{field})*+)", 1)
        tokens = F.regexp_extract_all(
            F.concat(line, F.lit(self.delimiter)), F.lit(f"\\G({field}){sep}"), F.lit(1)
        )
        values = F.transform(tokens, self._token_value)
        if self.null_literal is not None:
            literal = self.null_literal
            values = F.transform(values, lambda v: F.when(v == literal, F.lit(None)).otherwise(v))
        bad = (F.length(text) == 0) | ~text.rlike(record) | (F.size(tokens) != len(self.fields))
        if self.allow_comments:
            bad = bad | text.startswith("#")
        # a field that does not convert fails the record, or with ignore-parse-errors is NULL (Flink)
        counts = F.lit(not self.ignore_errors)

        def convert(vs: Column) -> Column:
            parts = []
            error = F.lit(False)
            for i, (name, t) in enumerate(self.fields):
                value, field_error = self._from_field_text(F.try_element_at(vs, F.lit(i + 1)), t)
                parts.append(value.alias(name))
                error = error | field_error
            return F.struct(F.struct(*parts).alias("value"), error.alias("error"))

        # bind the tokenized fields once (a one-element transform) instead of re-splitting per field
        converted = F.transform(F.array(values), convert)[0]
        error = data.isNotNull() & F.coalesce(bad | (counts & converted.getField("error")), F.lit(True))
        struct = F.when(data.isNull() | error, F.lit(None)).otherwise(converted.getField("value"))
        return Decoded(struct, error)

    def _field_pattern(self) -> str:
        """A Java regex of one field as Jackson's ``CsvDecoder`` reads it (possessive, no backtracking)."""
        sep = _x(self.delimiter)
        esc = None if self.escape is None or self.escape == self.quote else _x(self.escape)
        escaped = f"|{esc}[\\s\\S]" if esc else ""
        no_esc = esc or ""
        if self.quote is None:
            return f"(?:[^{sep}\\r\\n{no_esc}]++{escaped})*+"
        q = _x(self.quote)
        unquoted = f"(?:(?:[^{sep}\\r\\n{q}{no_esc}]{escaped})(?:[^{sep}\\r\\n{no_esc}]++{escaped})*+)?+"
        quoted = f"{q}(?:[^{q}{no_esc}]++|{q}{q}{escaped})*+{q}[\\x{{0}}-\\x{{20}}&&[^\\r\\n{sep}]]*+"
        return f"(?:{quoted}|{unquoted})"

    def _token_value(self, token: Column) -> Column:
        """The value of one raw field: quotes removed, doubled quotes and escapes undone."""
        from pyspark.sql import functions as F

        esc = None if self.escape is None or self.escape == self.quote else self.escape

        def unescape(s: Column, quoted: bool) -> Column:
            if esc is None:
                return F.replace(s, F.lit(self.quote * 2), F.lit(self.quote)) if quoted and self.quote else s
            e = _x(esc)
            pieces = (
                f"({e}[\\s\\S]|" + (f"{_x(self.quote) * 2}|" if quoted and self.quote else "") + "[\\s\\S])"
            )
            chars = F.regexp_extract_all(s, F.lit(pieces), F.lit(1))

            def one(p: Column) -> Column:
                second = F.substring(p, 2, 1)
                escaped = (
                    F.when(second == "0", F.lit("\u0000"))
                    .when(second == "n", F.lit("\n"))
                    .when(second == "r", F.lit("\r"))
                    .when(second == "t", F.lit("\t"))
                    .otherwise(second)
                )
                return (
                    F.when(F.length(p) == 1, p)
                    .when(p.startswith(esc), escaped)
                    .otherwise(F.substring(p, 1, 1))
                )

            return F.array_join(F.transform(chars, one), "")

        if self.quote is None:
            return unescape(token, quoted=False)
        q = _x(self.quote)
        inner = F.regexp_extract(token, f"^{q}([\\s\\S]*){q}[^{q}]*$", 1)
        return F.when(token.startswith(self.quote), unescape(inner, quoted=True)).otherwise(
            unescape(token, quoted=False)
        )

    def _from_field_text(self, c: Column, t: SqlType) -> tuple[Column, Column]:
        from pyspark.sql import functions as F

        false = F.lit(False)
        if t.name == "ARRAY" and t.element is not None:
            elem = t.element
            elements = self._split(c)
            parts = F.transform(elements, lambda x: _leaf(x, elem)[0])
            error = F.coalesce(F.exists(elements, lambda x: _leaf(x, elem)[1]), false)
            value = F.when(F.trim(c) == "", F.array().cast(t.to_spark())).otherwise(parts)
            return F.when(c.isNull(), F.lit(None)).otherwise(value), F.when(c.isNull(), false).otherwise(
                error
            )
        if t.name == "ROW":
            elements = self._split(c)
            leaves = [_leaf(F.try_element_at(elements, F.lit(i + 1)), f.type) for i, f in enumerate(t.fields)]
            error = F.size(elements) != len(t.fields)
            for _, e in leaves:
                error = error | e
            value = F.struct(*[v.alias(f.name) for (v, _), f in zip(leaves, t.fields, strict=True)])
            empty = c.isNull() | (c == "")
            return F.when(empty, F.lit(None)).otherwise(value), F.when(empty, false).otherwise(error)
        return _leaf(c, t)

    def _split(self, c: Column) -> Column:
        """An ARRAY / nested ROW field split on the element delimiter, the null literal as NULL."""
        from pyspark.sql import functions as F

        pattern = "".join(_x(ch) for ch in self.array_delimiter)
        parts = F.split(c, pattern, -1)
        if self.null_literal is None:
            return parts
        literal = self.null_literal
        return F.transform(parts, lambda x: F.when(x == literal, F.lit(None)).otherwise(x))


def _check_type(name: str, t: SqlType) -> None:
    """Flink's CSV schema holds scalars, ARRAY of scalars and ROW of scalars (no MAP, no nesting)."""
    if t.name in _SCALAR:
        return
    inner: list[SqlType] = []
    if t.name == "ARRAY" and t.element is not None:
        inner = [t.element]
    elif t.name == "ROW":
        inner = [f.type for f in t.fields]
    else:
        raise SpecError("csv", f"column {name!r}: type {t.to_flink()} cannot be written as CSV.")
    for sub in inner:
        if sub.name not in _SCALAR:
            raise SpecError(
                "csv",
                f"column {name!r}: type {t.to_flink()} nests {sub.to_flink()}; Flink's CSV format "
                "supports ARRAY and ROW of scalar types only.",
            )


def _scalar_text(c: Column, t: SqlType) -> Column:
    """The text Flink's ``RowDataToCsvConverters`` give a non-numeric scalar (before quoting)."""
    from pyspark.sql import functions as F

    if t.name in ("STRING", "VARCHAR", "CHAR"):
        return c
    if t.name == "DECIMAL":
        return json_decimal(c, plain=False)
    if t.name == "DATE":
        return c.cast("string")
    if t.name == "TIME":
        # ISO_LOCAL_TIME of a millisecond time: seconds always, fraction minimal, at most 3 digits
        digits = min(t.params[0] if t.params else 0, 3)
        hms = F.regexp_extract(c, "^([0-9]{2}:[0-9]{2})(:[0-9]{2})?", 1)
        sec = F.regexp_extract(c, "^[0-9]{2}:[0-9]{2}(:[0-9]{2})", 1)
        frac = F.regexp_extract(c, "^[0-9:]{8}[.]([0-9]*)", 1)
        frac = F.regexp_replace(F.substring(frac, 1, digits), "0+$", "") if digits else F.lit("")
        sec = F.when(sec == "", F.lit(":00")).otherwise(sec)
        return F.concat(hms, sec, F.when(frac == "", F.lit("")).otherwise(F.concat(F.lit("."), frac)))
    if t.name == "TIMESTAMP":
        return c.cast("string")
    if t.name == "TIMESTAMP_LTZ":
        utc = F.convert_timezone(F.current_timezone(), F.lit("UTC"), c.cast("timestamp_ntz"))
        return F.concat(utc.cast("string"), F.lit("Z"))
    if t.name in ("BYTES", "BINARY", "VARBINARY"):
        return F.regexp_replace(F.base64(c), "\\r\\n", "")
    if t.name in _NUMERIC:
        return c.cast("string")
    raise SpecError("csv", f"type {t.to_flink()} cannot be written as CSV.")


def _leaf(c: Column, t: SqlType) -> tuple[Column, Column]:
    """A scalar from its CSV text: (value, error flag). An empty field reads as Flink reads it for
    STRING (``""``), BOOLEAN (``false``, from ``Boolean.parseBoolean``) and BYTES (no bytes); for the
    other types it is NULL, which is how Flink writes a NULL without a null-literal (Flink itself
    then fails to read it back)."""
    from pyspark.sql import functions as F

    if t.name == "DECIMAL":  # untrimmed; an overflow is NULL without an error, as in Flink
        value = F.when(c.rlike(DECIMAL_TEXT), spark_compat.try_cast(c, t.to_spark()))
        error = c.isNotNull() & ~c.rlike(DECIMAL_TEXT)
    else:
        value, error = from_text(c, t, CSV)
    if t.name in ("STRING", "VARCHAR", "CHAR", "BOOLEAN", "BYTES", "BINARY", "VARBINARY"):
        return value, error
    empty = c == ""
    return F.when(empty, F.lit(None)).otherwise(value), F.when(empty, F.lit(False)).otherwise(error)
