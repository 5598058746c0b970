"""How Flink's ``json`` and ``csv`` decoders turn a field's text into each scalar type, as Spark
column expressions: which texts they accept (no more, no less), and what value they give.

Measured against Flink 2.2.1 (tests/conformance/test_type_edges.py); where the two formats differ,
the :class:`Dialect` says which one reads:

- integers: trimmed decimal digits with an optional sign; JSON also takes a number with a fraction
  or an exponent for INT and BIGINT (Jackson truncates it toward zero), never for TINYINT/SMALLINT;
- FLOAT/DOUBLE: Java's ``parseDouble`` (trimmed; ``NaN``, ``Infinity``, a ``d``/``f`` suffix);
- DECIMAL: rounded half-up to the scale; a value past the precision is NULL, not an error (CSV
  reads the text untrimmed);
- DATE: JSON takes ``yyyy-MM-dd`` strictly; CSV takes ``java.sql.Date.valueOf``'s
  ``yyyy-[m]m-[d]d`` and rolls an overflowing day into the next month, as it does;
- TIME: JSON takes ``HH:mm:ss[.f]`` (``24:00:00`` is midnight), CSV ``HH:mm[:ss[.f]]``; both keep
  whole seconds only, as Flink's decoders do;
- TIMESTAMP(p) and TIMESTAMP_LTZ(p): the format's own text (``yyyy-MM-dd HH:mm:ss[.f]``, or with
  ``T`` and optional seconds for JSON's ISO-8601; LTZ ends in ``Z``), CSV trimmed; the fraction
  truncated to ``p`` digits;
- BYTES: padded base64, whitespace skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from upsert_kafka_ops import spark_compat

if TYPE_CHECKING:
    from pyspark.sql import Column

    from upsert_kafka_ops.spec.types import SqlType


@dataclass(frozen=True)
class Dialect:
    """Which decoder reads: ``json`` (``iso`` for ``timestamp-format.standard = 'ISO-8601'``) or ``csv``."""

    format: str
    iso: bool = False


JSON = Dialect("json")
CSV = Dialect("csv")

_INTEGER = r"^\s*[+-]?[0-9]+\s*$"
_NUMBER = r"^\s*-?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?\s*$"
_JAVA_DOUBLE = r"^\s*[+-]?(NaN|Infinity|([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)\s*$"
DECIMAL_TEXT = r"^[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?$"
_DAY = r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
_CLOCK = r"([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]([.][0-9]{0,9})?"
_ISO_CLOCK = r"([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9]([.][0-9]{0,9})?)?"
_BASE64 = r"^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
_INTEGERS = {"TINYINT", "SMALLINT", "INT", "BIGINT"}


def scalar(c: Column, t: SqlType, dialect: Dialect) -> tuple[Column, Column]:
    """The value of text ``c`` as type ``t`` and whether the text is invalid for it (NULL stays NULL
    without an error). Types read as they are (STRING, BOOLEAN, DECIMAL) are not handled here."""
    from pyspark.sql import functions as F

    if t.name in _INTEGERS:
        value = F.when(c.rlike(_INTEGER), spark_compat.try_cast(F.trim(c), t.to_spark()))
        if dialect.format == "json" and t.name in ("INT", "BIGINT"):
            value = value.when(
                c.rlike(_NUMBER),
                spark_compat.try_cast(spark_compat.try_cast(F.trim(c), "double"), t.to_spark()),
            )
    elif t.name in ("FLOAT", "DOUBLE"):
        if dialect.format == "json":  # Spark's JSON reader quotes a number past DOUBLE's range: "Infinity"
            c = F.regexp_replace(c, '^"(-?Infinity)"$', "$1")
        number = F.regexp_replace(F.trim(c), "[fFdD]$", "")
        value = F.when(c.rlike(_JAVA_DOUBLE), spark_compat.try_cast(number, t.to_spark()))
    elif t.name == "DATE":
        value = _date(c, dialect)
    elif t.name == "TIME":
        value = _time(c, dialect)
    elif t.name in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        value = _timestamp(c, t, dialect)
    elif t.name in ("BYTES", "BINARY", "VARBINARY"):
        packed = F.regexp_replace(c, r"\s", "")
        value = F.when(packed.rlike(_BASE64), F.try_to_binary(packed, F.lit("base64")))
    else:
        raise AssertionError(f"no text rule for {t.name}")
    return value, c.isNotNull() & value.isNull()


def _date(c: Column, dialect: Dialect) -> Column:
    from pyspark.sql import functions as F

    if dialect.format == "json":
        return F.when(c.rlike(f"^{_DAY}$"), spark_compat.try_cast(c, "date"))
    parts = r"^([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})$"
    year, month, day = (F.regexp_extract(c, parts, i).cast("int") for i in (1, 2, 3))
    valid = c.rlike(parts) & month.between(1, 12) & day.between(1, 31)
    return F.when(valid, F.date_add(F.make_date(year, month, F.lit(1)), day - 1))


def _time(c: Column, dialect: Dialect) -> Column:
    """``HH:mm:ss``: the whole seconds of the day Flink's decoders keep."""
    from pyspark.sql import functions as F

    if dialect.format == "json":
        midnight = F.when(c.rlike(r"^24:00:00([.]0{0,9})?$"), F.lit("00:00:00"))
        return midnight.when(c.rlike(f"^{_CLOCK}$"), F.substring(c, 1, 8))
    hm = F.substring(c, 1, 5)
    seconds = F.when(F.length(c) >= 8, F.substring(c, 6, 3)).otherwise(F.lit(":00"))
    return F.when(c.rlike(f"^{_ISO_CLOCK}$"), F.concat(hm, seconds))


def _timestamp(c: Column, t: SqlType, dialect: Dialect) -> Column:
    from pyspark.sql import functions as F

    zone = "Z" if t.name == "TIMESTAMP_LTZ" else ""
    text = F.trim(c) if dialect.format == "csv" else c
    shape = f"^{_DAY}T{_ISO_CLOCK}{zone}$" if dialect.iso else f"^{_DAY} {_CLOCK}{zone}$"
    digits = t.params[0] if t.params else 6
    cut = r"[.][0-9]*" if digits == 0 else f"([.][0-9]{{0,{digits}}})[0-9]*"
    truncated = F.regexp_replace(text, cut, "" if digits == 0 else "$1")
    # Spark reads either form; the zone letter makes an LTZ text UTC
    return F.when(text.rlike(shape), spark_compat.try_cast(truncated, t.to_spark()))
