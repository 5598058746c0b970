"""CDC changelog topics (``debezium-json``, ``canal-json``, ``maxwell-json`` values of a plain
``kafka`` table): the changes they carry, and the table they describe.

- :func:`read_cdc` gives every change: ``op`` (+I, -U, +U, -D), the table's columns, the record's
  position and ``_seq`` (the change's place inside its record: a -U comes before its +U).
- :func:`materialize_cdc` folds the changes into the table. Without a key it applies them as
  Flink does to a changelog without a primary key: a multiset of rows where +I/+U add a row and
  -U/-D remove an equal one (order does not matter; a compacted topic that lost the insert of a
  row it later deletes cannot be folded this way). With ``key`` (the source database's primary
  key) the last change of each key wins, in the engine's changelog order (timestamp raised to the
  largest seen before it in its partition, then topic, partition, offset and ``_seq``), so a
  compacted topic folds too.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from upsert_kafka_ops.engine import progress
from upsert_kafka_ops.engine.bounds import offsets_to_json, resolve_bounds
from upsert_kafka_ops.engine.results import RunResult
from upsert_kafka_ops.engine.source import POSITION, Read, first_error, read_raw, resolve_connection
from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.formats.cdc_json import decode_cdc, is_cdc
from upsert_kafka_ops.spec.table import KafkaTable, ReadEnd

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from upsert_kafka_ops.spec.connection import KafkaConnection


def _options(table: KafkaTable) -> dict[str, str]:
    head = f"value.{table.value_format}."
    return {k[len(head) :]: v for k, v in table.format_options.items() if k.startswith(head)}


def _check(table: KafkaTable) -> None:
    if not is_cdc(table.value_format):
        raise SpecError(
            "value.format",
            f"{table.value_format!r} is not a changelog format.",
            "read it with read_append, or use debezium-json, canal-json or maxwell-json.",
        )


def decode_changes(table: KafkaTable, raw: DataFrame) -> DataFrame:
    """Raw records -> changes with the table's columns (metadata columns are not supported on CDC
    tables yet), ``op``, the position, ``_seq`` and ``_bad``."""
    _check(table)
    if table.metadata_columns:
        raise SpecError(
            "columns",
            f"metadata column {table.metadata_columns[0].name!r} on a {table.value_format} table is not supported yet.",
            "remove it; the changes carry _topic, _partition, _offset and _timestamp.",
        )
    fields = [(c.name, c.sql_type) for c in table.physical_columns]
    return decode_cdc(table.value_format, fields, _options(table), raw)


def read_cdc(
    spark: SparkSession,
    table: KafkaTable,
    connection: KafkaConnection | None = None,
    *,
    start: str | Mapping[Any, Any] | None = None,
    until: ReadEnd = None,
) -> Read:
    """Every change of a CDC topic inside the bounds (see the module docstring). A record that does
    not decode fails the read naming topic, partition and offset, unless the format's
    ``ignore-parse-errors`` is set (then it is skipped and counted). The result is cached; unpersist
    it when done."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    began = time.monotonic()
    _check(table)
    conn = resolve_connection(table, connection)
    bounds = resolve_bounds(table, conn.to_librdkafka(), start, until)
    raw = read_raw(spark, table, conn, bounds, False)
    progress.expect(2 * bounds.span())  # the statistics job scans it for the counts and the changes
    changes = decode_changes(table, raw).persist(StorageLevel.MEMORY_AND_DISK)
    stats = (
        raw.agg(
            F.count(F.lit(1)).alias("records"), F.count(F.when(F.col("value").isNull(), 1)).alias("tombs")
        )
        .crossJoin(
            changes.agg(
                F.count(F.when(~F.col("_bad"), 1)).alias("changes"),
                F.countDistinct(F.when(F.col("_bad"), F.struct("_topic", "_partition", "_offset"))).alias(
                    "bad"
                ),
            )
        )
        .first()
    )
    assert stats is not None
    if stats["bad"] and _options(table).get("ignore-parse-errors", "false").lower() != "true":
        error = first_error(changes.where("_bad"), "value", table.value_format)
        changes.unpersist()
        raise error
    good = changes.where(~F.col("_bad")).drop("_bad")
    result = RunResult(
        operation=f"read_cdc:{table.value_format}",
        topics=sorted({t for t, _ in bounds.partitions()}),
        records_in=int(stats["records"]),
        tombstones_in=int(stats["tombs"]),
        parse_errors_skipped=int(stats["bad"]),
        records_out=int(stats["changes"]),
        start_offsets=offsets_to_json(bounds.start),
        end_offsets=offsets_to_json(bounds.end),
        duration_s=round(time.monotonic() - began, 3),
    )
    return Read(good, result)


def fold_changes(changes: DataFrame, columns: Sequence[str], key: Sequence[str] | None) -> DataFrame:
    """The table the changes describe (see the module docstring): ``columns``, one row per live row."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    cols = list(columns)
    if key:
        running = (
            Window.partitionBy(*key, "_topic", "_partition")
            .orderBy("_offset", "_seq")
            .rowsBetween(Window.unboundedPreceding, Window.currentRow)
        )
        ordered = changes.withColumn("_eff_ts", F.max("_timestamp").over(running))
        order = F.struct("_eff_ts", "_topic", "_partition", "_offset", "_seq")
        last = ordered.groupBy(*key).agg(F.max_by(F.struct("op", *cols), order).alias("_last"))
        live = last.where(F.col("_last.op").isin("+I", "+U"))
        return live.select(*[F.col("_last").getField(c).alias(c) for c in cols])
    sign = F.when(F.col("op").isin("+I", "+U"), F.lit(1)).otherwise(F.lit(-1))
    counted = changes.groupBy(*cols).agg(F.sum(sign).alias("_n")).where("_n > 0")
    return counted.select(
        F.explode(F.array_repeat(F.struct(*cols), F.col("_n").cast("int"))).alias("_r")
    ).select("_r.*")


def materialize_cdc(
    spark: SparkSession,
    table: KafkaTable,
    connection: KafkaConnection | None = None,
    *,
    key: Sequence[str] | None = None,
    start: str | Mapping[Any, Any] | None = None,
    until: ReadEnd = None,
) -> Read:
    """The rows of the table a CDC topic describes, up to ``until`` (cached, counted)."""
    from pyspark import StorageLevel

    began = time.monotonic()
    names = {c.name for c in table.physical_columns}
    for k in key or []:
        if k not in names:
            raise SpecError(
                "key",
                f"{k!r} is not a column of {table.name!r}.",
                f"use some of: {', '.join(sorted(names))}.",
            )
    read = read_cdc(spark, table, connection, start=start, until=until)
    try:
        rows = fold_changes(read.df, [c.name for c in table.physical_columns], key)
        rows = rows.persist(StorageLevel.MEMORY_AND_DISK)
        n = rows.count()
    finally:
        read.release()
    result = read.result
    result.operation = f"materialize_cdc:{table.value_format}"
    result.records_out = n
    result.distinct_keys = n if key else 0
    result.duration_s = round(time.monotonic() - began, 3)
    return Read(rows, result)


def last_changes(
    spark: SparkSession,
    table: KafkaTable,
    connection: KafkaConnection | None = None,
    *,
    key: Sequence[str],
    start: str | Mapping[Any, Any] | None = None,
    until: ReadEnd = None,
) -> Read:
    """The last change per key inside the bounds, as :func:`~upsert_kafka_ops.engine.read_changes`
    gives it for upsert topics: ``op`` '+U' with the row, or '-D' with the key only, and the
    position of the change. What an incremental run MERGEs into its target (cached, counted)."""
    from pyspark import StorageLevel
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    began = time.monotonic()
    if not key:
        raise SpecError(
            "key", "is required to fold changes per key.", "give the table's primary key columns."
        )
    read = read_cdc(spark, table, connection, start=start, until=until)
    cols = [c.name for c in table.physical_columns]
    try:
        running = (
            Window.partitionBy(*key, "_topic", "_partition")
            .orderBy("_offset", "_seq")
            .rowsBetween(Window.unboundedPreceding, Window.currentRow)
        )
        ordered = read.df.withColumn("_eff_ts", F.max("_timestamp").over(running))
        order = F.struct("_eff_ts", "_topic", "_partition", "_offset", "_seq")
        last = ordered.groupBy(*key).agg(
            F.max_by(F.struct("op", *cols, *POSITION), order).alias("_l"),
            F.countDistinct("_topic", "_partition").alias("_parts"),
        )
        live = F.col("_l.op").isin("+I", "+U")
        out = last.select(
            F.when(live, F.lit("+U")).otherwise(F.lit("-D")).alias("op"),
            *[(F.col(f"_l.{c}") if c in key else F.when(live, F.col(f"_l.{c}"))).alias(c) for c in cols],
            *[F.col(f"_l.{p}").alias(p) for p in POSITION],
            "_parts",
        ).persist(StorageLevel.MEMORY_AND_DISK)
        counts = out.agg(
            F.count(F.lit(1)).alias("keys"), F.count(F.when(F.col("_parts") > 1, 1)).alias("multi")
        ).first()
        assert counts is not None
    finally:
        read.release()
    result = read.result
    result.operation = f"last_changes:{table.value_format}"
    result.distinct_keys = int(counts["keys"])
    result.keys_in_several_partitions = int(counts["multi"])
    result.records_out = int(counts["keys"])
    result.duration_s = round(time.monotonic() - began, 3)
    return Read(out.drop("_parts"), result)


__all__ = ["POSITION", "decode_changes", "fold_changes", "last_changes", "materialize_cdc", "read_cdc"]
