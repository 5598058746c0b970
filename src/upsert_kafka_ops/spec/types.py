"""Flink SQL data types: parse Flink's type syntax, print it back canonically, map it to Spark SQL.

:func:`parse_type` reads the type syntax of Flink's ``CREATE TABLE`` (case-insensitive, with
Flink's synonyms and DDL defaults); :meth:`SqlType.to_flink` prints the canonical form, which
parses back to an equal :class:`SqlType`; :meth:`SqlType.to_spark` gives the Spark SQL DDL type.

Defaults follow Flink's SQL DDL: ``VARCHAR`` and ``VARBINARY`` without a length are ``STRING``
and ``BYTES`` (Flink's type system gives them the maximum length), ``CHAR`` and ``BINARY`` have
length 1, ``DECIMAL`` is ``DECIMAL(10, 0)``, ``TIME`` is ``TIME(0)``, ``TIMESTAMP`` and
``TIMESTAMP_LTZ`` have precision 6.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from upsert_kafka_ops.errors import SpecError

#: Length of ``STRING`` (``VARCHAR(2147483647)``) and ``BYTES`` (``VARBINARY(2147483647)``).
MAX_LENGTH = 2147483647
#: Largest ``DECIMAL`` precision, in Flink and in Spark.
MAX_DECIMAL_PRECISION = 38

_SUPPORTED = (
    "STRING, VARCHAR(n), CHAR(n), BOOLEAN, TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, DECIMAL(p, s), DATE, "
    "TIME(p), TIMESTAMP(p), TIMESTAMP_LTZ(p), BYTES, BINARY(n), VARBINARY(n), ARRAY<T>, MULTISET<T>, MAP<K, V> "
    "or ROW<name T, ...>"
)
_SIMPLE = {"INTEGER": "INT", "REAL": "FLOAT"} | {
    n: n
    for n in ("STRING", "BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DATE", "BYTES")
}
_UNSUPPORTED = {
    "INTERVAL": "INTERVAL",
    "RAW": "RAW",
    "NULL": "the NULL type",
    "VARIANT": "VARIANT",
}
_SPARK = {
    "STRING": "STRING",
    "VARCHAR": "STRING",
    "CHAR": "STRING",
    "BOOLEAN": "BOOLEAN",
    "TINYINT": "TINYINT",
    "SMALLINT": "SMALLINT",
    "INT": "INT",
    "BIGINT": "BIGINT",
    "FLOAT": "FLOAT",
    "DOUBLE": "DOUBLE",
    "DATE": "DATE",
    # Spark 4.0 has no TIME type: a time of day travels as its ISO text, e.g. '12:30:00.5'.
    "TIME": "STRING",
    "TIMESTAMP": "TIMESTAMP_NTZ",
    "TIMESTAMP_LTZ": "TIMESTAMP",
    "BYTES": "BINARY",
    "BINARY": "BINARY",
    "VARBINARY": "BINARY",
}
_TOKEN = re.compile(r"\s*(?:([^\W\d]\w*)|`((?:[^`]|``)*)`|'((?:[^']|'')*)'|(\d+)|(\S))")


@dataclass(frozen=True)
class RowField:
    """A field of a ``ROW`` type.

    :param name: the field name, unquoted.
    :param type: the field type.
    :param description: the optional ``'description'`` after the field type.
    """

    name: str
    type: SqlType
    description: str | None = None

    def to_flink(self) -> str:
        """The field as in Flink's ``ROW<...>`` syntax, e.g. ``\\`a\\` INT 'the a'``."""
        text = f"{quote_name(self.name)} {self.type.to_flink()}"
        return text if self.description is None else text + " '" + self.description.replace("'", "''") + "'"


@dataclass(frozen=True)
class SqlType:
    """A Flink SQL data type.

    :param name: the canonical Flink name: ``STRING``, ``VARCHAR``, ``CHAR``, ``BOOLEAN``, ``TINYINT``,
        ``SMALLINT``, ``INT``, ``BIGINT``, ``FLOAT``, ``DOUBLE``, ``DECIMAL``, ``DATE``, ``TIME``,
        ``TIMESTAMP``, ``TIMESTAMP_LTZ``, ``BYTES``, ``BINARY``, ``VARBINARY``, ``ARRAY``, ``MAP``,
        ``MULTISET`` or ``ROW``.
    :param nullable: ``False`` for ``NOT NULL``.
    :param params: length (``VARCHAR``, ``CHAR``, ``BINARY``, ``VARBINARY``), precision and scale
        (``DECIMAL``) or fractional-second precision (``TIME``, ``TIMESTAMP``, ``TIMESTAMP_LTZ``).
    :param element: the element type of ``ARRAY`` and ``MULTISET``.
    :param key: the key type of ``MAP``.
    :param value: the value type of ``MAP``.
    :param fields: the fields of ``ROW``.
    """

    name: str
    nullable: bool = True
    params: tuple[int, ...] = ()
    element: SqlType | None = None
    key: SqlType | None = None
    value: SqlType | None = None
    fields: tuple[RowField, ...] = ()

    def to_flink(self) -> str:
        """The canonical Flink DDL text, e.g. ``DECIMAL(10, 2) NOT NULL`` or ``MAP<STRING, BYTES>``."""
        if self.name in ("ARRAY", "MULTISET"):
            text = f"{self.name}<{_part(self.element, self).to_flink()}>"
        elif self.name == "MAP":
            text = f"MAP<{_part(self.key, self).to_flink()}, {_part(self.value, self).to_flink()}>"
        elif self.name == "ROW":
            text = "ROW<" + ", ".join(f.to_flink() for f in self.fields) + ">"
        elif self.params:
            text = f"{self.name}({', '.join(map(str, self.params))})"
        else:
            text = self.name
        return text if self.nullable else text + " NOT NULL"

    def to_spark(self) -> str:
        """The Spark SQL DDL type, e.g. ``DECIMAL(10,2)``, ``TIMESTAMP_NTZ`` or ``STRUCT<`a`: INT>``.

        Spark keeps nullability on fields, not types, so ``NOT NULL`` appears only on ``STRUCT`` fields.
        """
        if self.name == "DECIMAL":
            return "DECIMAL({},{})".format(*self.params)
        if self.name == "ARRAY":
            return f"ARRAY<{_part(self.element, self).to_spark()}>"
        if self.name == "MULTISET":  # Flink itself represents a multiset as a map of element to count
            return f"MAP<{_part(self.element, self).to_spark()}, INT>"
        if self.name == "MAP":
            return f"MAP<{_part(self.key, self).to_spark()}, {_part(self.value, self).to_spark()}>"
        if self.name == "ROW":
            fields = (
                f"{quote_name(f.name)}: {f.type.to_spark()}{'' if f.type.nullable else ' NOT NULL'}"
                for f in self.fields
            )
            return "STRUCT<" + ", ".join(fields) + ">"
        return _SPARK[self.name]

    def with_nullable(self, nullable: bool) -> SqlType:
        """This type with ``NOT NULL`` (``nullable=False``) or without it."""
        return replace(self, nullable=nullable)


def quote_name(name: str) -> str:
    """``name`` in backticks, inner backticks doubled, as Flink and Spark DDL quote identifiers."""
    return "`" + name.replace("`", "``") + "`"


def parse_type(text: str) -> SqlType:
    """Parse a Flink SQL data type, e.g. ``DECIMAL(10, 2) NOT NULL`` or ``MAP<STRING, ARRAY<ROW<x INT>>>``.

    :raises SpecError: (field ``type``) the text is malformed or names a type that upsert-kafka-ops
        does not support (``INTERVAL``, ``RAW``, the ``NULL`` type, ``VARIANT``, user-defined types).
    """
    return _TypeParser(text).parse()


def _part(part: SqlType | None, parent: SqlType) -> SqlType:
    if part is None:
        raise SpecError("type", f"{parent.name} type without its element, key or value type.")
    return part


class _TypeParser:
    """Recursive descent over the tokens of one type: words, `names`, 'strings', numbers, symbols."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str]] = []
        for m in _TOKEN.finditer(text):
            kind = ("word", "name", "string", "number", "symbol")[(m.lastindex or 1) - 1]
            value = m.group(m.lastindex or 1)
            self.tokens.append(
                (kind, value.replace("``", "`") if kind == "name" else value.replace("''", "'"))
            )
        self.pos = 0

    def parse(self) -> SqlType:
        result = self.type_()
        if self.kind():
            raise self.malformed(f"unexpected {self.tokens[self.pos][1]!r}")
        return result

    def malformed(self, detail: str) -> SpecError:
        return SpecError(
            "type",
            f"malformed data type {self.text!r}: {detail}.",
            "write a Flink SQL type, e.g. DECIMAL(10, 2), ARRAY<STRING> or ROW<`a` INT, `b` STRING>.",
        )

    def unsupported(self, what: str) -> SpecError:
        return SpecError(
            "type",
            f"{what} is not supported by upsert-kafka-ops (in {self.text!r}).",
            f"use one of {_SUPPORTED}.",
        )

    def kind(self) -> str:
        """The kind of the current token, ``''`` at the end."""
        return self.tokens[self.pos][0] if self.pos < len(self.tokens) else ""

    def peek(self, ahead: int = 0) -> str:
        """The upper-cased word or symbol ``ahead`` tokens on; ``''`` for other tokens and past the end."""
        index = self.pos + ahead
        if index >= len(self.tokens) or self.tokens[index][0] not in ("word", "symbol"):
            return ""
        return self.tokens[index][1].upper()

    def accept(self, *words: str) -> bool:
        if all(self.peek(i) == w for i, w in enumerate(words)):
            self.pos += len(words)
            return True
        return False

    def expect(self, symbol: str) -> None:
        if not self.accept(symbol):
            found = repr(self.tokens[self.pos][1]) if self.kind() else "the end"
            raise self.malformed(f"expected {symbol!r}, found {found}")

    def take(self, *kinds: str, what: str) -> str:
        if self.kind() not in kinds:
            raise self.malformed(f"expected {what}")
        self.pos += 1
        return self.tokens[self.pos - 1][1]

    def type_(self) -> SqlType:
        result = self.base()
        while True:
            if self.accept("NOT", "NULL"):
                result = result.with_nullable(False)
            elif self.accept("NULL"):
                result = result.with_nullable(True)
            elif self.peek() in ("ARRAY", "MULTISET"):
                result = SqlType(self.take("word", what="ARRAY").upper(), element=result)
            else:
                return result

    def params(self, most: int) -> tuple[int, ...]:
        if not self.accept("("):
            return ()
        values = [int(self.take("number", what="a number"))]
        while len(values) < most and self.accept(","):
            values.append(int(self.take("number", what="a number")))
        self.expect(")")
        return tuple(values)

    def base(self) -> SqlType:
        original = self.take("word", what="a type name")
        word = original.upper()
        if word in _SIMPLE:
            if word == "DOUBLE":
                self.accept("PRECISION")
            return SqlType(_SIMPLE[word])
        if word in _UNSUPPORTED:
            raise self.unsupported(_UNSUPPORTED[word])
        if word in ("CHAR", "VARCHAR", "BINARY", "VARBINARY"):
            (length,) = self.params(1) or ((1,) if word in ("CHAR", "BINARY") else (MAX_LENGTH,))
            if not 1 <= length <= MAX_LENGTH:
                raise self.malformed(f"{word} length must be between 1 and {MAX_LENGTH}, not {length}")
            if length == MAX_LENGTH and word in ("VARCHAR", "VARBINARY"):
                return SqlType("STRING" if word == "VARCHAR" else "BYTES")
            return SqlType(word, params=(length,))
        if word in ("DECIMAL", "DEC", "NUMERIC"):
            precision, scale = ((self.params(2) or (10,)) + (0,))[:2]
            if not (1 <= precision <= MAX_DECIMAL_PRECISION and 0 <= scale <= precision):
                raise self.malformed(
                    f"DECIMAL needs 1 <= precision <= {MAX_DECIMAL_PRECISION} and 0 <= scale <= precision"
                )
            return SqlType("DECIMAL", params=(precision, scale))
        if word in ("TIME", "TIMESTAMP", "TIMESTAMP_LTZ"):
            return self.temporal(word)
        if word in ("ARRAY", "MULTISET"):
            self.expect("<")
            element = self.type_()
            self.expect(">")
            return SqlType(word, element=element)
        if word == "MAP":
            self.expect("<")
            key = self.type_()
            self.expect(",")
            value = self.type_()
            self.expect(">")
            return SqlType("MAP", key=key, value=value)
        if word == "ROW":
            return self.row()
        raise self.unsupported(f"user-defined type {original!r}")

    def temporal(self, word: str) -> SqlType:
        (precision,) = self.params(1) or ((0,) if word == "TIME" else (6,))
        if not 0 <= precision <= 9:
            raise self.malformed(f"{word} precision must be between 0 and 9, not {precision}")
        if word == "TIMESTAMP" and self.accept("WITH", "LOCAL", "TIME", "ZONE"):
            word = "TIMESTAMP_LTZ"
        elif word != "TIMESTAMP_LTZ" and not self.accept("WITHOUT", "TIME", "ZONE") and self.peek() == "WITH":
            raise self.unsupported(f"{word} with a time zone")
        return SqlType(word, params=(precision,))

    def row(self) -> SqlType:
        close = ">" if self.accept("<") else ")"
        if close == ")":
            self.expect("(")
        fields: list[RowField] = []
        while not self.accept(close):
            if fields:
                self.expect(",")
            name = self.take("word", "name", what="a field name")
            if any(f.name == name for f in fields):
                raise self.malformed(f"duplicate ROW field name {name!r}")
            field_type = self.type_()
            description = self.take("string", what="a description") if self.kind() == "string" else None
            fields.append(RowField(name, field_type, description))
        return SqlType("ROW", fields=tuple(fields))
