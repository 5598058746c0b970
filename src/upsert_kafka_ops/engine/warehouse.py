"""What the warehouse targets share on Spark: a table's columns as the target stores them, the
columns a run adds to an existing table, the MERGE statement of the Spark SQL targets (Delta, Iceberg),
Spark SQL string literals, and session settings that hold for one commit.

Change DataFrames have an ``op`` column: ``+U`` (upsert the row) or ``-D`` (delete the key).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from upsert_kafka_ops.errors import UpsertKafkaOpsError
from upsert_kafka_ops.spec.table import UpsertKafkaTable
from upsert_kafka_ops.spec.types import SqlType, parse_type, quote_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class TargetSchemaError(UpsertKafkaOpsError):
    """The target table does not fit the spec (a type changed)."""


def target_columns(table: UpsertKafkaTable) -> list[tuple[str, SqlType]]:
    """The columns a warehouse target holds: the table's columns in declaration order."""
    return [(c.name, parse_type(c.type)) for c in table.columns]


def columns_to_add(
    existing: dict[str, Any], table: UpsertKafkaTable, where: str, fix: str, same: Any = None
) -> list[str]:
    """The ``name TYPE`` definitions of the spec's columns a target's schema lacks; a column whose
    Spark type differs from the spec's is an error (before any write).

    :param existing: the target's column name -> Spark ``DataType``.
    :param same: ``(have, want) -> bool`` where the target stores a type as another (default ``==``).
    """
    from pyspark.sql.types import _parse_datatype_string

    added = []
    for name, t in target_columns(table):
        want = _parse_datatype_string(t.to_spark())
        if name not in existing:
            added.append(f"{quote_name(name)} {t.to_spark()}")
        elif not (same(existing[name], want) if same is not None else existing[name] == want):
            raise TargetSchemaError(
                f"{where}: column {name!r} is {existing[name].simpleString()} but the spec says "
                f"{t.to_spark()}. {fix}"
            )
    return added


def merge_sql(target: str, view: str, table: UpsertKafkaTable, close_only: Sequence[str] = ()) -> str:
    """The ``MERGE INTO target`` of the last change per key in ``view`` (``op`` +U/-D): delete,
    update or insert by the primary key. With ``close_only`` (a history table), a row whose ``op``
    is ``close`` sets only those columns of the row it matches."""
    names = [c for c, _ in target_columns(table)]
    on = " AND ".join(f"t.{quote_name(k)} = s.{quote_name(k)}" for k in table.primary_key)
    cols = ", ".join(quote_name(c) for c in names)
    sets = ", ".join(f"t.{quote_name(c)} = s.{quote_name(c)}" for c in names)
    close = ""
    upsert = "s.op <> '-D'"
    if close_only:
        close = (
            "WHEN MATCHED AND s.op = 'close' THEN UPDATE SET "
            + ", ".join(f"t.{quote_name(c)} = s.{quote_name(c)}" for c in close_only)
            + " "
        )
        upsert = "s.op NOT IN ('-D', 'close')"
    return (
        f"MERGE INTO {target} AS t USING {view} AS s ON {on} "
        "WHEN MATCHED AND s.op = '-D' THEN DELETE "
        f"{close}"
        f"WHEN MATCHED AND {upsert} THEN UPDATE SET {sets} "
        f"WHEN NOT MATCHED AND {upsert} THEN INSERT ({cols}) "
        f"VALUES ({', '.join(f's.{quote_name(c)}' for c in names)})"
    )


#: the key types whose values a filter on the table may name (values that compare as they are
#: stored, in Spark and in delta-rs: integers and strings, not CHAR's padding)
VALUE_FILTERED_KEY_TYPES = frozenset({"TINYINT", "SMALLINT", "INT", "BIGINT", "STRING", "VARCHAR"})


#: Delta and Iceberg read a commit's transaction id and metadata (the stored offsets) from the
#: session's conf, which every thread of the process shares: two jobs committing at once in one
#: session would each take the other's offsets. One commit at a time per process.
_COMMIT_CONF_LOCK = threading.RLock()


@contextmanager
def commit_confs(spark: SparkSession, confs: dict[str, str]) -> Iterator[None]:
    """Session confs that the next commit reads, set for the ``with`` block only (one block at a
    time in this process)."""
    with _COMMIT_CONF_LOCK:
        for k, v in confs.items():
            spark.conf.set(k, v)
        try:
            yield
        finally:  # session-wide: the next write in this session must not reuse them
            for k in confs:
                spark.conf.unset(k)


def sql_string(value: str) -> str:
    """``value`` as a Spark SQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
