"""Randomized upsert-kafka tables and their changelogs, written as Flink's encoders write them.

A :class:`Shape` is a table (key and value formats, a composite key, ``EXCEPT_KEY`` with a prefix or
``ALL``, 1-16 partitions); :func:`changelog` is a seeded sequence of records for it: new values,
identical re-updates, tombstones of live keys and of keys never seen. Each key keeps one encoding,
so Kafka's default partitioner puts all of a key's records in one partition, in order (Flink and
Kafka define no order across partitions).
"""

from __future__ import annotations

import datetime
import json
import random
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

KEY_TYPES = ("BIGINT", "INT", "STRING")
VALUE_TYPES = ("BIGINT", "INT", "STRING", "DOUBLE", "BOOLEAN", "DECIMAL(10, 2)", "DATE", "TIMESTAMP(3)")
FORMATS = ("json", "csv")
_LETTERS = "abcdefghij KLMNO éßø"


@dataclass(frozen=True)
class Shape:
    """A table: column names with their types, which are the key, and how key and value are encoded."""

    name: str
    topic: str
    partitions: int
    key_format: str
    value_format: str
    key: tuple[tuple[str, str], ...]
    values: tuple[tuple[str, str], ...]
    except_key: bool
    prefix: str

    @property
    def key_names(self) -> list[str]:
        return [name for name, _ in self.key]

    def value_columns(self) -> tuple[tuple[str, str], ...]:
        """The columns the value format holds."""
        return self.values if self.except_key else self.key + self.values

    def ddl(self, bootstrap: str) -> str:
        """Flink's CREATE TABLE, bounded at the end offsets when the read starts."""
        columns = ",\n  ".join(f"`{n}` {t}" for n, t in self.key + self.values)
        options = {
            "connector": "upsert-kafka",
            "topic": self.topic,
            "properties.bootstrap.servers": bootstrap,
            "key.format": self.key_format,
            "value.format": self.value_format,
            "value.fields-include": "EXCEPT_KEY" if self.except_key else "ALL",
            "scan.bounded.mode": "latest-offset",
        }
        if self.prefix:
            options["key.fields-prefix"] = self.prefix
        with_ = ",\n  ".join(f"'{k}' = '{v}'" for k, v in options.items())
        keys = ", ".join(f"`{n}`" for n in self.key_names)
        return f"CREATE TABLE `{self.name}` (\n  {columns},\n  PRIMARY KEY ({keys}) NOT ENFORCED\n) WITH (\n  {with_}\n)"


def random_shape(rng: random.Random, index: int, topic: str) -> Shape:
    except_key = rng.random() < 0.6
    prefix = "k_" if except_key and rng.random() < 0.5 else ""
    key = tuple((f"{prefix}id{i}", rng.choice(KEY_TYPES)) for i in range(rng.randint(1, 3)))
    values = tuple(
        (f"v{i}", t) for i, t in enumerate(rng.sample(VALUE_TYPES, rng.randint(1, len(VALUE_TYPES))))
    )
    return Shape(
        name=f"t{index}",
        topic=topic,
        partitions=rng.choice((1, 2, 3, 5, 8, 16)),
        key_format=rng.choice(FORMATS),
        value_format=rng.choice(FORMATS),
        key=key,
        values=values,
        except_key=except_key,
        prefix=prefix,
    )


def random_value(rng: random.Random, sql_type: str, nullable: bool) -> Any:
    """A value of the type that Flink's encoders write and both readers take as it is."""
    if nullable and rng.random() < 0.1:
        return None
    if sql_type == "BIGINT":
        return rng.choice((rng.randint(-(2**63), 2**63 - 1), rng.randint(-1000, 1000)))
    if sql_type == "INT":
        return rng.randint(-(2**31), 2**31 - 1)
    if sql_type == "STRING":
        return "".join(rng.choice(_LETTERS) for _ in range(rng.randint(1, 8))).strip() or "x"
    if sql_type == "DOUBLE":
        return round(rng.uniform(-1e6, 1e6), rng.randint(0, 6))
    if sql_type == "BOOLEAN":
        return rng.random() < 0.5
    if sql_type.startswith("DECIMAL"):
        return Decimal(rng.randint(-(10**10) + 1, 10**10 - 1)).scaleb(-2)
    if sql_type == "DATE":
        return datetime.date(2000, 1, 1) + datetime.timedelta(days=rng.randint(0, 20000))
    if sql_type == "TIMESTAMP(3)":
        ms = rng.randint(0, 4_000_000_000_000)
        return datetime.datetime(1970, 1, 1) + datetime.timedelta(milliseconds=ms)
    raise AssertionError(sql_type)


def _text(value: Any, sql_type: str) -> str:
    """The value as Flink's JSON and CSV encoders write its text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ", timespec="milliseconds")
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, float):
        return repr(value)
    return str(value)


def encode(fmt: str, columns: tuple[tuple[str, str], ...], row: dict[str, Any], prefix: str = "") -> bytes:
    """A key or value of ``columns`` (the key's names without ``prefix``, as Flink's key format sees them)."""
    names = [(n[len(prefix) :] if prefix and n.startswith(prefix) else n, n, t) for n, t in columns]
    if fmt == "json":
        doc: dict[str, Any] = {}
        for field, name, t in names:
            v = row[name]
            if v is None or isinstance(v, bool | int | str):
                doc[field] = v
            elif isinstance(v, float | Decimal):
                doc[field] = json.loads(_text(v, t)) if isinstance(v, float) else _RawNumber(str(v))
            else:
                doc[field] = _text(v, t)
        return _dumps(doc).encode()
    cells = []
    for _, name, t in names:
        v = row[name]
        text = "" if v is None else _text(v, t)
        cells.append(f'"{text}"' if any(c in text for c in ',"\n ') else text)
    return ",".join(cells).encode()


class _RawNumber(str):
    """A decimal written as a JSON number with its digits (json.dumps would go through a float)."""


def _dumps(doc: dict[str, Any]) -> str:
    parts = []
    for k, v in doc.items():
        text = str(v) if isinstance(v, _RawNumber) else json.dumps(v, ensure_ascii=False)
        parts.append(f"{json.dumps(k)}:{text}")
    return "{" + ",".join(parts) + "}"


def changes(
    rng: random.Random, shape: Shape, keys: int, records: int
) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """Seeded changes: (the key's columns, the row, or None for a tombstone)."""
    pool = []
    for _ in range(keys):
        row = {n: random_value(rng, t, nullable=False) for n, t in shape.key}
        if row not in pool:
            pool.append(row)
    live: dict[int, dict[str, Any]] = {}
    out: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    for _ in range(records):
        i = rng.randrange(len(pool))
        roll = rng.random()
        if roll < 0.12:  # a tombstone: of a live key, or of one not seen yet or already deleted
            live.pop(i, None)
            out.append((pool[i], None))
            continue
        if roll < 0.22 and i in live:  # the same value again
            row = live[i]
        else:
            nullable = shape.value_format == "json"  # an empty csv field is a value at its edge
            row = {**pool[i], **{n: random_value(rng, t, nullable) for n, t in shape.values}}
        live[i] = row
        out.append((pool[i], row))
    return out


def changelog(rng: random.Random, shape: Shape, keys: int, records: int) -> list[tuple[bytes, bytes | None]]:
    """Seeded records: (key bytes, value bytes or None for a tombstone)."""
    return [
        (
            encode(shape.key_format, shape.key, key, shape.prefix),
            None if row is None else encode(shape.value_format, shape.value_columns(), row),
        )
        for key, row in changes(rng, shape, keys, records)
    ]
