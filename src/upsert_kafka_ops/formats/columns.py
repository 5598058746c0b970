"""Spark column helpers the codecs share: the decoded pair, reading fields as text, binding a value once.

Every helper builds a Spark column expression; none runs Python per row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from upsert_kafka_ops import spark_compat
from upsert_kafka_ops.formats.text_values import JSON, Dialect, scalar
from upsert_kafka_ops.spec.types import RowField, SqlType

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

Fields = list[tuple[str, SqlType]]
INTEGRAL_BYTES = {"TINYINT": 1, "SMALLINT": 2, "INT": 4, "BIGINT": 8}
BINARY_TYPES = {"BYTES", "BINARY", "VARBINARY"}


@dataclass(frozen=True)
class Decoded:
    """``value``: struct of the format's fields (NULL for NULL bytes); ``error``: true where undecodable."""

    value: Column
    error: Column


def parse_once(df: DataFrame, sides: Sequence[tuple[Any, str]]) -> tuple[DataFrame, list[Decoded]]:
    """``df`` with each codec's parse of its column (``(codec, column)``, e.g. the value codec and
    ``"value"``) projected as a column of its own, ``_parsed_<column>``, and each side's
    :class:`Decoded` reading from that column.

    A decoded field refers to the parse several times (the NULL test, the text's pattern, the cast).
    Inline, Spark evaluates it once per reference in a branch, and the plan is that many copies long:
    measured on 1,000,000 JSON keys, the key's decoding took 22 s of a 46 s run, and building and
    running the projection of 10 records 0.6 s. Spark does not merge a projection into the next when
    that would repeat a costly expression, so the parse stays once per record."""
    from pyspark.sql import functions as F

    parses = [(codec, column, codec.parse(F.col(column))) for codec, column in sides]
    staged = df.select("*", *[p.alias(f"_parsed_{c}") for _, c, p in parses if p is not None])
    decoded = [
        codec.decode(F.col(c), F.col(f"_parsed_{c}") if p is not None else None) for codec, c, p in parses
    ]
    return staged, decoded


def quote_field(name: str) -> str:
    """A Spark SQL identifier in backticks."""
    return "`" + name.replace("`", "``") + "`"


def text_schema(t: SqlType) -> str:
    """Spark schema that reads every scalar leaf as text (so quoted numbers are not lost)."""
    if t.name == "ROW":
        return "STRUCT<" + ", ".join(f"{quote_field(f.name)}: {text_schema(f.type)}" for f in t.fields) + ">"
    if t.name == "ARRAY" and t.element is not None:
        return f"ARRAY<{text_schema(t.element)}>"
    if t.name == "MULTISET" and t.element is not None:
        return f"MAP<{text_schema(t.element)}, STRING>"
    if t.name == "MAP" and t.key is not None and t.value is not None:
        return f"MAP<{text_schema(t.key)}, {text_schema(t.value)}>"
    if t.name == "DECIMAL":
        # read exactly: as text, Spark's JSON reader would pass big numbers through a double. At the
        # widest precision, so that a value past the declared one becomes NULL (as in Flink), not a
        # broken record
        return f"DECIMAL(38,{t.params[1] if len(t.params) > 1 else 0})"
    return "STRING"


def from_text(c: Column, t: SqlType, dialect: Dialect = JSON) -> tuple[Column, Column]:
    """Convert a column read by :func:`text_schema` to type ``t``: (value, error flag). A nested
    value that does not convert is NULL where it stands (an element, a field, a map value), as in
    Flink; the error flag says that something did not."""
    from pyspark.sql import functions as F

    false = F.lit(False)
    if t.name == "ROW":
        parts = [from_text(c.getField(f.name), f.type, dialect) for f in t.fields]
        value = F.when(c.isNull(), F.lit(None)).otherwise(
            F.struct(*[p[0].alias(f.name) for p, f in zip(parts, t.fields, strict=True)])
        )
        error = false
        for _, e in parts:
            error = error | e
        return value, F.when(c.isNull(), false).otherwise(error)
    if t.name == "ARRAY" and t.element is not None:
        elem = t.element
        value = F.transform(c, lambda x: from_text(x, elem, dialect)[0])
        return value, F.coalesce(F.exists(c, lambda x: from_text(x, elem, dialect)[1]), false)
    if t.name in ("MAP", "MULTISET"):
        k_type = t.key if t.name == "MAP" else t.element
        v_type = t.value if t.name == "MAP" else SqlType("INT")
        assert k_type is not None and v_type is not None
        value = F.transform_values(
            F.transform_keys(c, lambda k, _v: from_text(k, k_type, dialect)[0]),
            lambda _k, v: from_text(v, v_type, dialect)[0],
        )
        error = F.exists(F.map_keys(c), lambda k: from_text(k, k_type, dialect)[1]) | F.exists(
            F.map_values(c), lambda v: from_text(v, v_type, dialect)[1]
        )
        return value, F.coalesce(error, false)
    if t.name in ("STRING", "VARCHAR", "CHAR"):
        return c, false
    if t.name == "DECIMAL":  # read as DECIMAL(38, s): past the declared precision it is NULL, as in Flink
        return spark_compat.try_cast(c, t.to_spark()), false
    if t.name == "BOOLEAN":
        # Flink: a JSON boolean as is, any other text through Boolean.parseBoolean ("true", any case)
        return F.when(c.isNull(), F.lit(None)).otherwise(F.lower(F.trim(c)) == "true"), false
    return scalar(c, t, dialect)


def bind_once(value: Column, body: Callable[[Column], Column]) -> Column:
    """``body(value)`` with ``value`` computed once: a one-element ``transform`` binds it to a lambda
    variable. Without it every use repeats the whole expression, and a few DECIMAL columns make
    plans too large for code generation."""
    from pyspark.sql import functions as F

    return F.transform(F.array(value), body)[0]


def row_fields(fields: Fields) -> list[RowField]:
    """The fields as a ROW type's fields."""
    return [RowField(name, t) for name, t in fields]
