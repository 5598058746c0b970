"""The engine's side of a conformance case: ``materialize``'s rows for the table a Flink DDL creates,
each cell in :func:`values.canon`'s form, as the Flink runner gives Flink's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.conformance.values import canon, time_text, timestamp_text

from upsert_kafka_ops import UpsertKafkaTable, materialize
from upsert_kafka_ops.errors import UpsertKafkaOpsError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_AS_TEXT = ("DATE", "TIMESTAMP", "TIMESTAMP_LTZ")  # collected as text: Python's dates end at year 9999


def cell(value: Any, type_name: str) -> Any:
    """One cell of a column of SQL type ``type_name`` (``DATE``, ``TIME``, ...) in canon's form."""
    if value is None:
        return None
    if type_name == "TIME":
        return time_text(value)  # TIME is text here (Spark 4.0 has no TIME type)
    if type_name == "DATE":
        return f"date:{value}"
    if type_name in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        return timestamp_text(value)
    return canon(value)


def rows(spark: SparkSession, ddl: str) -> list[list[Any]]:
    """``materialize``'s rows of the table ``ddl`` creates, in canon's form."""
    table = UpsertKafkaTable.from_flink_ddl(ddl)
    names = [c.sql_type.name for c in table.columns]
    with materialize(spark, table) as read:  # its cached rows released after the collect
        df = read.df
        picked = [
            df[c.name].cast("string") if n in _AS_TEXT else df[c.name]
            for c, n in zip(table.columns, names, strict=True)
        ]
        return [[cell(v, n) for v, n in zip(r, names, strict=True)] for r in df.select(*picked).collect()]


def outcome(spark: SparkSession, ddl: str) -> list[list[Any]] | str:
    """:func:`rows`, sorted, or ``"error: <message>"`` when the engine refuses the read."""
    try:
        return sorted(rows(spark, ddl), key=repr)
    except UpsertKafkaOpsError as exc:
        return f"error: {exc}"
