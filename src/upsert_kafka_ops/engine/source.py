"""The upsert-kafka source on Spark: a topic read as a changelog, and folded into the latest row per key.

Per partition, offset order is the truth. A key found in more than one partition (e.g. after
partitions were added) is ordered across partitions by record timestamp, where each record's
timestamp is first raised to the largest one seen before it in its partition, so that the order
inside a partition always stays offset order; ties go to the higher (topic, partition). The key is
counted, and ``strict=True`` fails.

:func:`materialize` and :func:`read_changes` decode late: they fold on the key and the
record position first, and decode only the winning values, one per live key.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from upsert_kafka_ops.engine import progress
from upsert_kafka_ops.engine.bounds import Bounds, offsets_to_json, resolve_bounds
from upsert_kafka_ops.engine.results import RunResult
from upsert_kafka_ops.engine.session import static_plans, use_krb5_conf_in_driver
from upsert_kafka_ops.errors import SpecError, UpsertKafkaOpsError
from upsert_kafka_ops.formats.columns import Decoded, parse_once
from upsert_kafka_ops.formats.registry import FORMATS
from upsert_kafka_ops.spec.connection import KafkaConnection, client_properties, for_table
from upsert_kafka_ops.spec.table import KafkaTable, ReadEnd, UpsertKafkaTable

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

POSITION = ["_topic", "_partition", "_offset", "_timestamp"]


class DataError(UpsertKafkaOpsError):
    """A record could not be decoded, or the topic breaks a rule that ``strict`` enforces."""


class Read(NamedTuple):
    """A read's DataFrame and its :class:`RunResult`.

    The DataFrame is cached in the session (its rows were counted and checked while it was built):
    release it when done with it, ``read.release()`` or ``with materialize(...) as read:``. A
    long-lived session (a notebook, a Spark Connect server) that keeps every read's cache holds their
    rows and plans until its heap fills and its JVM does little but collect garbage.
    """

    df: DataFrame
    result: RunResult

    def release(self) -> None:
        """Drop the DataFrame's cached rows (the DataFrame itself stays usable and is recomputed)."""
        self.df.unpersist()

    def __enter__(self) -> Read:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


# -- options and codecs ---------------------------------------------------------------------------
def _ignores_errors(table: UpsertKafkaTable, side: Literal["key", "value"]) -> bool:
    return table.side_options(side).get("ignore-parse-errors", "false").lower() == "true"


def _key_error(table: UpsertKafkaTable, kd: Decoded) -> Column:
    """True for a record whose key does not decode, or decodes with a NULL PRIMARY KEY column: key
    columns are NOT NULL, and Flink fails such a record (with ``ignore-parse-errors`` a bad key field
    is NULL in Flink, and then fails the same way); here it fails the read, or is skipped and counted."""
    from pyspark.sql import functions as F

    null_column = F.lit(False)
    for c in table.key_columns:
        null_column = null_column | kd.value.getField(table.key_field_name(c.name)).isNull()
    return F.col("key").isNotNull() & (kd.error | null_column)


def _value_error(table: UpsertKafkaTable, vd: Decoded) -> Column:
    """True for a value that does not decode, or (with ``value.fields-include = ALL``, where Flink's
    row takes the value's copy of the key columns) holds a NULL PRIMARY KEY column."""
    from pyspark.sql import functions as F

    error = vd.error
    if table.value_fields_include == "ALL":
        for c in table.key_columns:
            error = error | vd.value.getField(c.name).isNull()
    return F.col("value").isNotNull() & error


def resolve_connection(
    table: UpsertKafkaTable | KafkaTable, connection: KafkaConnection | None
) -> KafkaConnection:
    """The connection the table's clients use: ``connection`` (else the table's
    ``properties.bootstrap.servers``) with the security the table's WITH clause sets (see
    :func:`~upsert_kafka_ops.spec.connection.for_table`)."""
    if connection is None:
        servers = table.properties.get("bootstrap.servers")
        if not servers:
            raise SpecError(
                "connection", "no connection given and the table has no properties.bootstrap.servers."
            )
        connection = KafkaConnection(bootstrap_servers=servers)
    return for_table(connection, table.properties)


# -- reading --------------------------------------------------------------------------------------
def read_raw(
    spark: SparkSession,
    table: UpsertKafkaTable | KafkaTable,
    connection: KafkaConnection,
    bounds: Bounds,
    headers: bool = False,
) -> DataFrame:
    """The records inside ``bounds`` as Spark's Kafka source gives them (read_committed). A range of
    at most :data:`SMALL_RANGE` offsets is read in this process instead (:func:`read_small`)."""
    if 0 < bounds.span() <= SMALL_RANGE:
        small = read_small(spark, table, connection, bounds, headers)
        if small is not None:
            return small
    return read_with_spark(spark, table, connection, bounds, headers)


def read_with_spark(
    spark: SparkSession,
    table: UpsertKafkaTable | KafkaTable,
    connection: KafkaConnection,
    bounds: Bounds,
    headers: bool = False,
) -> DataFrame:
    """The records inside ``bounds`` read by Spark's Kafka source, whatever their number."""
    parts = [tp for tp in bounds.partitions() if bounds.end[tp] > bounds.start[tp]]
    options = {f"kafka.{k}": v for k, v in client_properties(table.properties).items()}
    options.update(connection.to_spark_options())
    use_krb5_conf_in_driver(spark, connection)
    options.setdefault("kafka.isolation.level", "read_committed")
    # a batch read drains whole ranges: fewer, larger polls (Kafka's default is 500 records a poll;
    # measured on 1M records over 8 partitions: Spark's scan 2.73 s -> 2.50 s). A table's own
    # 'properties.max.poll.records' wins.
    options.setdefault("kafka.max.poll.records", "10000")
    # a bounded read never waits for new data, yet Spark's reader seeks before every poll and checks
    # the partition's range when a poll comes back empty, so each fetch could sit out the broker's
    # wait (Kafka's default 500 ms). Measured on 1M records over 8 partitions, same output: Spark's
    # scan 2.6 s -> 0.6 s, materialize 5.8 s -> 3.6 s, reading 10 new records 3.6 s -> 1.9 s warm.
    options.setdefault("kafka.fetch.max.wait.ms", "10")
    if not parts:  # Spark's source needs at least one partition to assign; read an empty range instead
        t, p = bounds.partitions()[0] if bounds.partitions() else (table.topic[0] if table.topic else "", 0)
        parts, ranges = [(t, p)], {(t, p): (bounds.start.get((t, p), 0),) * 2}
    else:
        ranges = {tp: (bounds.start[tp], bounds.end[tp]) for tp in parts}
    assign: dict[str, list[int]] = {}
    for t, p in parts:
        assign.setdefault(t, []).append(p)
    reader = (
        spark.read.format("kafka")
        .options(**options)
        .option("assign", json.dumps(assign))
        .option("startingOffsets", json.dumps(offsets_to_json({tp: r[0] for tp, r in ranges.items()})))
        .option("endingOffsets", json.dumps(offsets_to_json({tp: r[1] for tp, r in ranges.items()})))
        .option("includeHeaders", str(headers).lower())
    )
    return reader.load()


#: the largest offset range :func:`read_raw` reads in this process rather than with Spark's Kafka source
SMALL_RANGE = 10_000


def read_small(
    spark: SparkSession,
    table: UpsertKafkaTable | KafkaTable,
    connection: KafkaConnection,
    bounds: Bounds,
    headers: bool = False,
) -> DataFrame | None:
    """The records inside ``bounds`` read here with librdkafka, as a DataFrame of the Kafka source's
    columns and types, or None when they could not be read here (then Spark's source reads them).

    For a few records Spark's read is mostly fixed cost: a job whose tasks each start a consumer. A
    local relation holds the same rows, so the fold after it runs the same expressions."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    from upsert_kafka_ops.kafka.records import read_range

    isolation = table.properties.get("isolation.level", "read_committed")
    ranges = {tp: (bounds.start.get(tp, 0), end) for tp, end in bounds.end.items()}
    records = read_range(connection.to_librdkafka(), ranges, isolation=isolation, headers=headers)
    if records is None:
        return None
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp_ms", LongType()),
        StructField("timestampType", IntegerType()),
    ]
    if headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    rows = [r if headers else r[:7] for r in records]
    names = [f.name for f in fields]
    df = _local_relation(spark, rows, StructType(fields))
    return df.select(
        *[
            F.timestamp_millis("timestamp_ms").alias("timestamp") if n == "timestamp_ms" else F.col(n)
            for n in names
        ]
    )


def _arrow_transfer() -> bool:
    """Whether DataFrames go to and from this process as Arrow tables: ``pyarrow`` installed and a
    Spark line with ``DataFrame.toArrow`` (4.0 on; 3.5 has none)."""
    import importlib.util

    from pyspark.sql import DataFrame

    return importlib.util.find_spec("pyarrow") is not None and hasattr(DataFrame, "toArrow")


def _local_relation(spark: SparkSession, rows: list[tuple[Any, ...]], schema: Any) -> DataFrame:
    """A DataFrame of ``rows``. Through Arrow where the Spark line takes an Arrow table (4.0 on):
    a relation built from Python rows is read through a Python worker, which costs its first job
    0.2 s on this machine against 0.06 s from Arrow (10 rows, warm session)."""
    if not _arrow_transfer():
        return spark.createDataFrame(rows, schema)
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema = to_arrow_schema(schema)
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(arrow_schema)
    data = pa.Table.from_arrays(
        [pa.array(list(c), type=f.type) for c, f in zip(columns, arrow_schema, strict=True)],
        schema=arrow_schema,
    )
    return spark.createDataFrame(data, schema)


def _metadata_sources(table: KafkaTable | UpsertKafkaTable, raw: DataFrame) -> dict[str, Column]:
    """``raw``'s columns by name for the table's metadata columns (:func:`_metadata_value`; ``headers``
    may be missing), empty when it has none: on Spark Connect, asking a DataFrame for its columns is a
    round trip to the server."""
    from pyspark.sql import functions as F

    if all(c.metadata is None for c in table.columns):
        return {}
    return {c: F.col(c) for c in raw.columns}


def _metadata_value(c: Any, raw: Mapping[str, Column]) -> Column:
    from pyspark.sql import functions as F

    source = {
        "topic": raw["topic"],
        "partition": raw["partition"],
        "offset": raw["offset"],
        "timestamp": raw["timestamp"],
        "timestamp-type": F.when(raw["timestampType"] == 1, F.lit("LogAppendTime")).otherwise(
            F.lit("CreateTime")
        ),
        "leader-epoch": F.lit(None),
        "headers": F.map_from_entries(raw["headers"]) if "headers" in raw else F.lit(None),
    }[c.metadata]
    return source.cast(c.sql_type.to_spark())


def first_error(df: DataFrame, what: str, fmt: str | None = None) -> DataError:
    """The error naming the first undecodable record of ``df`` (by topic, partition and offset: the
    ``_topic``, ``_partition``, ``_offset`` columns where it has them, else Kafka's own names)."""
    from pyspark.sql import functions as F

    names = (
        ("_topic", "_partition", "_offset") if "_topic" in df.columns else ("topic", "partition", "offset")
    )
    row = df.orderBy(*names).select(*[F.col(n).alias(n.lstrip("_")) for n in names]).first()
    assert row is not None
    where = (
        f"Cannot decode the {what} of the record at topic {row['topic']!r}, partition {row['partition']}, "
        f"offset {row['offset']}"
    )
    where += (
        ", or it holds a NULL PRIMARY KEY column (key columns are NOT NULL, as in Flink)."
        if what == "key"
        else "."
    )
    if fmt is None or "ignore-parse-errors" in FORMATS[fmt].options:
        option = f"{what}.{fmt or '<format>'}.ignore-parse-errors"
        return DataError(f"{where} Set '{option}' = 'true' to skip such records.")
    hint = (
        " For avro-confluent, the record's schema id must be registered under the table's subject "
        f"('{what}.avro-confluent.subject') and its writer schema must hold every NOT NULL column."
        if fmt == "avro-confluent"
        else ""
    )
    return DataError(
        f"{where} The {what} format {fmt!r} has no ignore-parse-errors option (as in Flink): fix the "
        f"producer of that record, or declare the columns its bytes hold.{hint}"
    )


def read_changes(
    spark: SparkSession,
    table: UpsertKafkaTable,
    connection: KafkaConnection | None = None,
    *,
    start: str | Mapping[Any, Any] = "earliest",
    until: ReadEnd = None,
    strict: bool = False,
    validation: Literal["winners", "full"] = "winners",
) -> Read:
    """The last change per key inside the bounds: ``op`` '+U' with the row, or '-D' with the key only.
    The DataFrame is cached: release it when done (:class:`Read`).

    This is what an incremental run MERGEs into its target: the range holds only part of history, so
    a tombstone is a delete even for a key the range never saw inserted (the target may hold it).
    """
    return _fold(spark, table, connection, start, until, strict, validation, keep_deletes=True)


def materialize(
    spark: SparkSession,
    table: UpsertKafkaTable,
    connection: KafkaConnection | None = None,
    *,
    start: str | Mapping[Any, Any] = "earliest",
    until: ReadEnd = None,
    strict: bool = False,
    validation: Literal["winners", "full"] = "winners",
) -> Read:
    """The latest live row per key: the table's columns, one row per key whose last record is not a
    tombstone. Deterministic whatever Spark's task layout. The DataFrame is cached: release it when
    done (:class:`Read`).

    :param start: ``"earliest"`` or stored offsets (then only the range's keys are seen: use
        :func:`read_changes` to also get the range's deletes).
    :param until: see :mod:`upsert_kafka_ops.engine.bounds`; the table's ``scan.bounded.*`` by default.
    :param strict: fail when a key is found in more than one partition.
    :param validation: ``"winners"`` decodes only the winning values; ``"full"`` decodes every value
        and fails on the first bad one (naming topic, partition and offset).
    """
    return _fold(spark, table, connection, start, until, strict, validation, keep_deletes=False)


def _fold(
    spark: SparkSession,
    table: UpsertKafkaTable,
    connection: KafkaConnection | None,
    start: str | Mapping[Any, Any],
    until: ReadEnd,
    strict: bool,
    validation: str,
    keep_deletes: bool,
) -> Read:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    began = time.monotonic()
    conn = resolve_connection(table, connection)
    bounds = resolve_bounds(table, conn.to_librdkafka(), start, until)
    headers = any(c.metadata == "headers" for c in table.metadata_columns)
    small = read_small(spark, table, conn, bounds, headers) if 0 < bounds.span() <= SMALL_RANGE else None
    if small is not None:
        folded = _fold_here(spark, table, small, bounds, strict, validation, keep_deletes, began)
        if folded is not None:
            return folded
    # a small range this process could not read is not tried here again (its wait was spent once)
    raw = small if small is not None else read_with_spark(spark, table, conn, bounds, headers)
    kcodec, vcodec = table.key_codec(), table.value_codec()
    key_names = [c.name for c in table.key_columns]
    if bounds.span() == 0:  # nothing to read (a caught-up incremental run): no Spark job at all
        return Read(
            _nothing(spark, table, raw, key_names, vcodec, keep_deletes),
            _result(keep_deletes, bounds, dict.fromkeys(_STATS, 0), 0, 0, began, folded_by=""),
        )
    # the range is scanned once for the fold and the winning values (and first for a full check)
    progress.expect(bounds.span())

    # the plans are small and fixed: adaptive execution adds a job per shuffle (see static_plans)
    with static_plans(spark):
        if validation == "full" and not _ignores_errors(table, "value"):
            progress.expect(bounds.span())
            bad = raw.where(_value_error(table, vcodec.decode(F.col("value"))))
            if not bad.isEmpty():
                raise first_error(bad, "value", table.value_format)

        per_bytes = _per_key_bytes(table, raw, kcodec, key_names).persist(StorageLevel.MEMORY_AND_DISK)
        winners = _winners(per_bytes, key_names).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            stats = _fold_stats(per_bytes, winners)
            if stats["key_errors"] and not _ignores_errors(table, "key"):
                raise first_error(per_bytes.where("key_error"), "key", table.key_format)
            if strict and stats["multi"]:
                sample = winners.where("parts > 1").select(*key_names).limit(5).collect()
                raise DataError(
                    f"{stats['multi']} key(s) appear in more than one partition (e.g. {[tuple(r) for r in sample]}); "
                    "their order across partitions is not defined by Kafka. Re-key the topic, or read with strict=False "
                    "to take the newest record by timestamp."
                )
            df, parse_skipped, records_out = _winning_rows(
                table, raw, per_bytes.select("rec.*"), winners, key_names, vcodec, keep_deletes
            )
        finally:
            winners.unpersist()
            per_bytes.unpersist()
    return Read(df, _result(keep_deletes, bounds, stats, parse_skipped, records_out, began))


def _fold_here(
    spark: SparkSession,
    table: UpsertKafkaTable,
    raw: DataFrame,
    bounds: Bounds,
    strict: bool,
    validation: str,
    keep_deletes: bool,
    began: float,
) -> Read | None:
    """The fold of a small range read here (``raw``, a local relation): Spark decodes the records (a
    projection of local rows, which runs no job), this process chooses the winners
    (:mod:`~upsert_kafka_ops.engine.fold_here`), and the result is a local relation again. None when
    the read must fold with Spark: a key type :func:`~upsert_kafka_ops.engine.fold_here.folds_here`
    refuses, a record that fails the read or needs its key folded again without it, or a Spark
    without Arrow transfer of DataFrames (3.5)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from upsert_kafka_ops.engine import fold_here as fh

    key_types = [c.sql_type.to_spark().lower() for c in table.key_columns]  # Spark's simple names
    if not _arrow_transfer() or not fh.folds_here(key_types):
        return None  # before any plan is built: Spark's fold builds its own
    import pyarrow as pa

    key_names = [c.name for c in table.key_columns]
    vcodec = table.value_codec()
    size = F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0))
    sized = raw.select("*", size.alias("_size"), F.unix_micros("timestamp").alias("_micros"))
    decoded = _rows(table, sized, vcodec, key_from_value=False, keep=("_size", "_micros"), flags=True)
    data = decoded.toArrow()
    wanted = (
        "_topic",
        "_partition",
        "_offset",
        "_micros",
        "_null_key",
        "_key_error",
        "_is_null",
        "_error",
        "_size",
    )
    cols = {n: data.column(n).to_pylist() for n in wanted}
    keys = list(zip(*[data.column(k).to_pylist() for k in key_names], strict=True))
    records = [
        fh.Decoded(key, *fields)
        for key, *fields in zip(
            keys,
            cols["_topic"],
            cols["_partition"],
            cols["_offset"],
            cols["_micros"],
            cols["_null_key"],
            cols["_key_error"],
            cols["_is_null"],
            cols["_error"],
            cols["_size"],
            strict=True,
        )
    ]
    result = fh.fold(records)
    ignores_values = _ignores_errors(table, "value")
    if (
        (result.stats["key_errors"] and not _ignores_errors(table, "key"))
        or (strict and result.stats["multi"])
        or result.bad_winners  # fails the read, or (ignored) folds the key again without it
        or (validation == "full" and not ignores_values and any(cols["_error"]))
    ):
        return None
    live = sorted(w.index for w in result.winners.values() if not w.tombstone)
    out_names = [c.name for c in table.columns]
    parts = [
        data.take(pa.array(live, pa.int64()))
        .select([*out_names, *POSITION])
        .append_column("op", pa.array(["+U"] * len(live)))
    ]
    if keep_deletes:
        dead = sorted((w.index, w.newest) for w in result.winners.values() if w.tombstone)
        gone = data.take(pa.array([i for i, _ in dead], pa.int64()))
        stamps = pa.array([n for _, n in dead], pa.int64()).cast(data.schema.field("_timestamp").type)
        columns = {
            n: gone.column(n) if n in key_names else pa.nulls(len(dead), data.schema.field(n).type)
            for n in out_names
        }
        columns.update(
            {
                "_topic": gone.column("_topic"),
                "_partition": gone.column("_partition"),
                "_offset": gone.column("_offset"),
                "_timestamp": stamps,
                "op": pa.array(["-D"] * len(dead)),
            }
        )
        parts.append(pa.table(columns))
    names = ["op", *out_names, *POSITION] if keep_deletes else out_names
    arrow_schema = pa.schema(
        [pa.field(n, pa.string() if n == "op" else data.schema.field(n).type) for n in names]
    )
    table_out = pa.concat_tables([p.select(names).cast(arrow_schema) for p in parts])
    # the Spark fold's columns, types and nullability, from the decoded rows' schema (toArrow knows it)
    schema = output_schema(table, decoded.schema, keep_deletes)
    # cached, as every read's result is (Read): the rows stay with the session, not with this process
    df = spark.createDataFrame(table_out, schema=schema).persist(StorageLevel.MEMORY_AND_DISK)
    fh.hold_rows(df, table_out)
    return Read(df, _result(keep_deletes, bounds, result.stats, 0, table_out.num_rows, began, "python"))


#: the fold's statistics (:func:`_fold_stats`)
_STATS = ("records", "bytes", "tombs", "null_keys", "key_errors", "keys", "multi")


def _result(
    keep_deletes: bool,
    bounds: Bounds,
    stats: Any,
    parse_skipped: int,
    records_out: int,
    began: float,
    folded_by: str = "spark",
) -> RunResult:
    return RunResult(
        folded_by=folded_by,
        operation="read_changes" if keep_deletes else "materialize",
        topics=sorted({t for t, _ in bounds.partitions()}),
        records_in=int(stats["records"]),
        bytes_in=int(stats["bytes"]),
        tombstones_in=int(stats["tombs"]),
        null_keys_dropped=int(stats["null_keys"]),
        parse_errors_skipped=int(stats["key_errors"]) + parse_skipped,
        distinct_keys=int(stats["keys"]),
        keys_in_several_partitions=int(stats["multi"]),
        records_out=records_out,
        start_offsets=offsets_to_json(bounds.start),
        end_offsets=offsets_to_json(bounds.end),
        duration_s=round(time.monotonic() - began, 3),
    )


def _nothing(
    spark: SparkSession,
    table: UpsertKafkaTable,
    raw: DataFrame,
    key_names: list[str],
    vcodec: Any,
    keep_deletes: bool,
) -> DataFrame:
    """An empty result with the fold's schema: the plan is only analysed, never run."""
    rows = _rows(table, raw, vcodec, key_from_value=False)
    deletes = rows.select(*key_names, *POSITION)
    return spark.createDataFrame([], _output(table, rows, deletes, keep_deletes).schema)


def _per_key_bytes(table: UpsertKafkaTable, raw: DataFrame, kcodec: Any, key_names: list[str]) -> DataFrame:
    """Step 1 of the fold: per distinct key bytes and partition, the last record (``rec``, with its
    offset and whether it is a tombstone), the largest timestamp and the counts; the key decoded once
    per distinct bytes."""
    from pyspark.sql import functions as F

    per_bytes = raw.groupBy("key", "topic", "partition").agg(
        F.max("offset").alias("offset"),
        # the last record itself, so the winners' values come from this pass, not a second scan
        F.max_by(F.struct(*[F.col(c) for c in raw.columns]), "offset").alias("rec"),
        F.max("timestamp").alias("ts"),
        F.max_by(F.col("value").isNull(), "offset").alias("tomb"),
        F.count(F.lit(1)).alias("n"),
        F.sum(F.col("value").isNull().cast("long")).alias("tombs"),
        F.sum(F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0))).alias("bytes"),
    )
    per_bytes, (kd,) = parse_once(per_bytes, [(kcodec, "key")])
    return per_bytes.select(
        *[kd.value.getField(table.key_field_name(k)).alias(k) for k in key_names],
        F.col("key").isNull().alias("null_key"),
        _key_error(table, kd).alias("key_error"),
        "topic",
        "partition",
        "offset",
        "ts",
        "tomb",
        "n",
        "tombs",
        "bytes",
        "rec",
    )


def _winners(per_bytes: DataFrame, key_names: list[str]) -> DataFrame:
    """Steps 2 and 3: per logical key and partition the last record, then per logical key the one
    with the newest timestamp (Kafka defines no order across partitions), with how many partitions
    the key is in."""
    from pyspark.sql import functions as F

    good = per_bytes.where(~F.col("null_key") & ~F.col("key_error"))
    per_part = good.groupBy(*key_names, "topic", "partition").agg(
        F.max_by(F.struct("offset", "tomb"), "offset").alias("last"), F.max("ts").alias("ts")
    )
    return (
        per_part.groupBy(*key_names)
        .agg(
            F.max_by(
                F.struct("topic", "partition", "last.offset", "last.tomb", "ts"),
                F.struct("ts", "topic", "partition"),
            ).alias("w"),
            F.count(F.lit(1)).alias("parts"),
        )
        .select(*key_names, "w.*", "parts")
    )


def _fold_stats(per_bytes: DataFrame, winners: DataFrame) -> Any:
    """The input statistics and the key counts as one row, in one Spark job (each job costs a
    scheduling round; both read only the small cached aggregates)."""
    from pyspark.sql import functions as F

    input_stats = per_bytes.agg(
        F.coalesce(F.sum("n"), F.lit(0)).alias("records"),
        F.coalesce(F.sum("bytes"), F.lit(0)).alias("bytes"),
        F.coalesce(F.sum("tombs"), F.lit(0)).alias("tombs"),
        F.coalesce(F.sum(F.when(F.col("null_key"), F.col("n"))), F.lit(0)).alias("null_keys"),
        F.coalesce(F.sum(F.when(F.col("key_error"), F.col("n"))), F.lit(0)).alias("key_errors"),
    )
    key_counts = winners.agg(
        F.count(F.lit(1)).alias("keys"),
        F.count(F.when(F.col("parts") > 1, 1)).alias("multi"),
    )
    stats = input_stats.crossJoin(key_counts).first()
    assert stats is not None
    return stats


def _winning_rows(
    table: UpsertKafkaTable,
    raw: DataFrame,
    last: DataFrame,
    winners: DataFrame,
    key_names: list[str],
    vcodec: Any,
    keep_deletes: bool,
) -> tuple[DataFrame, int, int]:
    """Decode the winning values only (from ``last``, the last record per key bytes and partition,
    already read); handle the undecodable ones (fail, or fall back to ``raw`` for the keys affected).

    Returns the rows (persisted and counted), the number of undecodable records skipped, and the
    row count."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    live_pos = winners.where(~F.col("tomb")).select("topic", "partition", "offset")
    # no broadcast hint: Spark broadcasts the positions while they are small (under
    # spark.sql.autoBroadcastJoinThreshold) and joins by shuffle past that, so the driver never holds
    # a list that grows with the keys (same speed at 100k keys: 5.72 s with the hint, 5.68 s without)
    joined = last.join(live_pos, ["topic", "partition", "offset"])
    decoded = _rows(table, joined, vcodec, key_from_value=False)
    deletes = winners.where(F.col("tomb")).select(
        *key_names,
        F.col("topic").alias("_topic"),
        F.col("partition").alias("_partition"),
        F.col("offset").alias("_offset"),
        F.col("ts").alias("_timestamp"),
    )

    # persisted: the check, the count and the result all use it (no filter on the decoded rows before
    # the cache: the optimizer would push it below the join and decode every last value). One job
    # fills it and counts the undecodable rows.
    decoded = decoded.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        tally = decoded.agg(F.count(F.when(F.col("_error"), 1)).alias("bad")).first()
        assert tally is not None
        skipped = 0
        good = decoded
        if tally["bad"]:
            bad = decoded.where("_error")
            if not _ignores_errors(table, "value"):
                raise first_error(bad, "value", table.value_format)
            # Flink drops a bad record: the key keeps its previous state. Fold the affected keys
            # again over their decodable records only.
            affected = bad.select(*key_names).distinct()
            skipped = _count_bad_records(table, raw, affected, vcodec)
            redo = _refold_without_bad(table, raw, affected, vcodec)
            good = decoded.where(~F.col("_error")).unionByName(redo)
        # materialize the result while its inputs are still cached, then let them go
        out = _output(table, good, deletes, keep_deletes).persist(StorageLevel.MEMORY_AND_DISK)
        records_out = out.count()
    finally:
        decoded.unpersist()
    return out, skipped, records_out


def _output(table: UpsertKafkaTable, good: DataFrame, deletes: DataFrame, keep_deletes: bool) -> DataFrame:
    """The fold's result from the decoded winning rows (``good``) and the winning tombstones'
    keys and positions (``deletes``): the live rows, and with ``keep_deletes`` the deletes as '-D'."""
    from pyspark.sql import functions as F

    out = good.drop("_error", "_is_null").withColumn("op", F.lit("+U"))
    if keep_deletes:
        out = out.unionByName(deletes.withColumn("op", F.lit("-D")), allowMissingColumns=True)
        return out.select("op", *[c.name for c in table.columns], *POSITION)
    return out.select(*[c.name for c in table.columns])


def output_schema(table: UpsertKafkaTable, decoded: StructType, keep_deletes: bool) -> StructType:
    """The schema of :func:`_output`'s result from the schema of the decoded rows (:func:`_rows`),
    without asking Spark (on Spark Connect each analysis is a round trip): the table's columns as
    decoded; with ``keep_deletes`` first ``op``, never null, then the value columns nullable (a '-D'
    row has none) and the position last, as Spark's ``unionByName`` gives them."""
    from pyspark.sql.types import StringType, StructField, StructType

    fields = {f.name: f for f in decoded.fields}
    names = [c.name for c in table.columns]
    if not keep_deletes:
        return StructType([fields[n] for n in names])
    keys = {c.name for c in table.key_columns}
    columns = [
        fields[n] if n in keys else StructField(n, fields[n].dataType, True, fields[n].metadata)
        for n in names
    ]
    return StructType([StructField("op", StringType(), False), *columns, *[fields[n] for n in POSITION]])


def _rows(
    table: UpsertKafkaTable,
    raw: DataFrame,
    vcodec: Any,
    key_from_value: bool,
    keep: tuple[str, ...] = (),
    flags: bool = False,
) -> DataFrame:
    """Decode keys and values of raw records into the table's columns, the position, ``_error``
    (undecodable value), ``_is_null`` (tombstone), with ``flags`` ``_null_key`` and ``_key_error``,
    and the ``keep`` columns of ``raw``. Each key and value is parsed once (:func:`parse_once`)."""
    from pyspark.sql import functions as F

    staged, (kd, vd) = parse_once(raw, [(table.key_codec(), "key"), (vcodec, "value")])
    key_flags = (
        [F.col("key").isNull().alias("_null_key"), _key_error(table, kd).alias("_key_error")] if flags else []
    )
    cols = _metadata_sources(table, raw)
    out = []
    for c in table.columns:
        if c.metadata is not None:
            out.append(_metadata_value(c, cols).alias(c.name))
        elif c.name in table.primary_key and not key_from_value:
            out.append(kd.value.getField(table.key_field_name(c.name)).alias(c.name))
        else:
            out.append(vd.value.getField(c.name).alias(c.name))
    return staged.select(
        *out,
        F.col("topic").alias("_topic"),
        F.col("partition").alias("_partition"),
        F.col("offset").alias("_offset"),
        F.col("timestamp").alias("_timestamp"),
        _value_error(table, vd).alias("_error"),
        F.col("value").isNull().alias("_is_null"),
        *key_flags,
        *keep,
    )


def _affected_records(table: UpsertKafkaTable, raw: DataFrame, affected: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    kd = table.key_codec().decode(F.col("key"))
    key_names = [c.name for c in table.key_columns]
    keyed = raw.where(F.col("key").isNotNull()).select(
        "*", *[kd.value.getField(table.key_field_name(k)).alias(f"__k_{k}") for k in key_names]
    )
    cond = [keyed[f"__k_{k}"].eqNullSafe(F.col(k)) for k in key_names]
    return keyed.join(F.broadcast(affected), cond, "left_semi").drop(*[f"__k_{k}" for k in key_names])


def _count_bad_records(table: UpsertKafkaTable, raw: DataFrame, affected: DataFrame, vcodec: Any) -> int:
    from pyspark.sql import functions as F

    recs = _affected_records(table, raw, affected)
    return int(recs.where(_value_error(table, vcodec.decode(F.col("value")))).count())


def _refold_without_bad(
    table: UpsertKafkaTable, raw: DataFrame, affected: DataFrame, vcodec: Any
) -> DataFrame:
    """For the affected keys: the last decodable record (in changelog order), if it is not a tombstone."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    recs = _affected_records(table, raw, affected)
    rows = _rows(table, recs, vcodec, key_from_value=False).where(~F.col("_error"))
    key_names = [c.name for c in table.key_columns]
    ordered = _with_changelog_order(rows, key_names)
    w = Window.partitionBy(*key_names).orderBy(F.col("_order").desc())
    last = ordered.withColumn("_rn", F.row_number().over(w)).where("_rn = 1 AND NOT _is_null")
    return last.drop("_rn", "_order", "_eff_ts")


def _with_changelog_order(df: DataFrame, key_names: list[str]) -> DataFrame:
    """Add ``_order``: the cross-partition changelog order of a key's records (see the module doc)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    running = (
        Window.partitionBy(*key_names, "_topic", "_partition")
        .orderBy("_offset")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    df = df.withColumn("_eff_ts", F.max("_timestamp").over(running))
    return df.withColumn("_order", F.struct("_eff_ts", "_topic", "_partition", "_offset"))


# -- the full changelog ---------------------------------------------------------------------------
def read_records(
    spark: SparkSession,
    table: UpsertKafkaTable,
    connection: KafkaConnection | None = None,
    *,
    start: str | Mapping[Any, Any] = "earliest",
    until: ReadEnd = None,
    strict: bool = False,
) -> Read:
    """Every record inside the bounds, decoded: the table's columns, ``_is_null`` (a tombstone),
    ``_topic``, ``_partition``, ``_offset``, ``_timestamp`` and ``_order`` (the order of a key's
    records, see the module doc). A record with a null key, or one whose format skips parse errors
    and could not be decoded, is counted and left out. The rows are cached: unpersist ``df`` after use.

    :param strict: fail when a key is found in more than one partition.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    began = time.monotonic()
    conn = resolve_connection(table, connection)
    bounds = resolve_bounds(table, conn.to_librdkafka(), start, until)
    headers = any(c.metadata == "headers" for c in table.metadata_columns)
    raw = read_raw(spark, table, conn, bounds, headers)
    progress.expect(bounds.span())  # scanned once into the cache below
    key_names = [c.name for c in table.key_columns]
    rows, stats = _decoded_records(table, raw)
    good = rows.where("NOT _null_key AND NOT _key_error AND NOT _error")
    if strict:
        spread = good.groupBy(*key_names).agg(F.countDistinct("_topic", "_partition").alias("parts"))
        if not spread.where("parts > 1").isEmpty():
            raise DataError(
                "A key appears in more than one partition; read with strict=False to order by timestamp."
            )
    ordered = _with_changelog_order(good, key_names)
    out = ordered.select(*[c.name for c in table.columns], "_is_null", *POSITION, "_order")
    out = out.persist(StorageLevel.MEMORY_AND_DISK)
    out.count()  # cached from the decoded records, which are then released
    rows.unpersist()
    result = RunResult(
        operation="read_records",
        topics=sorted({t for t, _ in bounds.partitions()}),
        records_in=int(stats["records"] or 0),
        tombstones_in=int(stats["tombs"] or 0),
        null_keys_dropped=int(stats["null_keys"] or 0),
        parse_errors_skipped=int(stats["key_errors"] or 0) + int(stats["value_errors"] or 0),
        start_offsets=offsets_to_json(bounds.start),
        end_offsets=offsets_to_json(bounds.end),
        duration_s=round(time.monotonic() - began, 3),
    )
    return Read(out, result)


def read_changelog(
    spark: SparkSession,
    table: UpsertKafkaTable,
    connection: KafkaConnection | None = None,
    *,
    start: str | Mapping[Any, Any] = "earliest",
    until: ReadEnd = None,
    mode: Literal["upsert", "retract"] = "upsert",
    strict: bool = False,
) -> Read:
    """The topic as a changelog: ``op``, the table's columns, and ``_topic``, ``_partition``,
    ``_offset``, ``_timestamp`` of the record that caused the change.

    - ``mode="upsert"``: +I for the first value of a key (or the first after a delete), +U for a
      changed value, -D with the last known row for a tombstone; never -U.
    - ``mode="retract"`` (Flink's ChangelogNormalize for retract consumers): -U with the previous row
      before each +U.
    In both modes a value identical to the key's current row emits nothing, and a tombstone for a key
    that is absent emits nothing. Every value is decoded (a changelog row carries it).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if mode not in ("upsert", "retract"):
        raise SpecError("mode", f"unknown mode {mode!r}.", "use 'upsert' or 'retract'.")
    began = time.monotonic()
    records = read_records(spark, table, connection, start=start, until=until, strict=strict)
    key_names = [c.name for c in table.key_columns]
    row_cols = [c.name for c in table.columns]
    w = Window.partitionBy(*key_names).orderBy("_order")
    ordered = records.df.withColumn("_row", F.when(~F.col("_is_null"), F.struct(*row_cols)))
    ordered = ordered.withColumn("_prev", F.lag("_row").over(w))
    out = _changelog_events(table, ordered, mode)
    result = dataclasses.replace(
        records.result, operation=f"read_changelog:{mode}", duration_s=round(time.monotonic() - began, 3)
    )
    return Read(out, result)


def _decoded_records(table: UpsertKafkaTable, raw: DataFrame) -> tuple[DataFrame, Any]:
    """Every record with its key and value decoded, cached (the checks, the counts and the changelog
    all read it: the topic is scanned once), and its counts; an undecodable key or value stops the
    read here unless the format ignores parse errors."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    rows = _rows(table, raw, table.value_codec(), key_from_value=False, flags=True)
    rows = rows.withColumn("_value_error", F.col("_error") & ~F.col("_null_key") & ~F.col("_key_error"))
    rows = rows.persist(StorageLevel.MEMORY_AND_DISK)
    stats = rows.agg(
        F.count(F.lit(1)).alias("records"),
        F.sum(F.col("_is_null").cast("long")).alias("tombs"),
        F.sum(F.col("_null_key").cast("long")).alias("null_keys"),
        F.sum(F.col("_key_error").cast("long")).alias("key_errors"),
        F.sum(F.col("_value_error").cast("long")).alias("value_errors"),
    ).first()
    assert stats is not None
    if stats["key_errors"] and not _ignores_errors(table, "key"):
        raise first_error(rows.where("_key_error"), "key", table.key_format)
    if stats["value_errors"] and not _ignores_errors(table, "value"):
        raise first_error(rows.where("_value_error"), "value", table.value_format)
    return rows, stats


def _changelog_events(table: UpsertKafkaTable, ordered: DataFrame, mode: str) -> DataFrame:
    """Each record's changelog rows from its row (``_row``, null for a tombstone) and the key's
    previous row (``_prev``): nothing, -D, +I, or +U (after -U in retract mode)."""
    from pyspark.sql import functions as F

    # compare on the data columns only (metadata such as offset differs on every record)
    data_cols = [c.name for c in table.physical_columns]
    same = F.struct(*[F.col("_row").getField(n) for n in data_cols]).eqNullSafe(
        F.struct(*[F.col("_prev").getField(n) for n in data_cols])
    )
    ev = F.struct
    empty = F.array().cast(f"array<struct<op:string,row:{ordered.schema['_row'].dataType.simpleString()}>>")
    events = (
        F.when(F.col("_is_null") & F.col("_prev").isNull(), empty)
        .when(F.col("_is_null"), F.array(ev(F.lit("-D").alias("op"), F.col("_prev").alias("row"))))
        .when(F.col("_prev").isNull(), F.array(ev(F.lit("+I").alias("op"), F.col("_row").alias("row"))))
        .when(same, empty)
    )
    update = [ev(F.lit("+U").alias("op"), F.col("_row").alias("row"))]
    if mode == "retract":
        update.insert(0, ev(F.lit("-U").alias("op"), F.col("_prev").alias("row")))
    events = events.otherwise(F.array(*update))
    return ordered.select(F.explode(events).alias("e"), *POSITION).select("e.op", "e.row.*", *POSITION)


# -- plain append-only topics ---------------------------------------------------------------------
def read_append(
    spark: SparkSession,
    table: KafkaTable,
    connection: KafkaConnection | None = None,
    *,
    start: str | Mapping[Any, Any] | None = None,
    until: ReadEnd = None,
) -> Read:
    """Every record of a plain (append-only) Kafka table inside the bounds, decoded into its columns.

    An undecodable value fails the read naming topic, partition and offset, unless the value format's
    ``ignore-parse-errors`` is set (then such records are skipped and counted). A tombstone (a null
    value) gives no row, as in Flink, and is counted in ``tombstones_in`` (with ``raw`` it is a row
    whose value column is NULL, as Flink reads it).
    """
    from pyspark.sql import functions as F

    from upsert_kafka_ops.formats.cdc_json import is_cdc

    if is_cdc(table.value_format):
        raise SpecError(
            "value.format",
            f"{table.name!r} is a {table.value_format} changelog, not an append-only table.",
            "read it with engine.cdc.read_cdc (its changes) or materialize_cdc (the table they describe).",
        )
    began = time.monotonic()
    conn = resolve_connection(table, connection)
    bounds = resolve_bounds(table, conn.to_librdkafka(), start, until)
    headers = any(c.metadata == "headers" for c in table.metadata_columns)
    raw = read_raw(spark, table, conn, bounds, headers)
    progress.expect(bounds.span())
    rows = decode_append(table, raw)
    vopts = table.side_options("value")
    stats = rows.agg(
        F.count(F.lit(1)).alias("n"),
        F.count(F.when(F.col("_bad"), 1)).alias("bad"),
        F.count(F.when(F.col("_tombstone"), 1)).alias("tombs"),
    ).first()
    assert stats is not None
    if stats["bad"] and vopts.get("ignore-parse-errors", "false").lower() != "true":
        raise first_error(rows.where("_bad"), "value", table.value_format)
    df = rows.where(~F.col("_bad") & ~F.col("_tombstone")).drop(
        "_bad", "_tombstone", "_topic", "_partition", "_offset"
    )
    result = RunResult(
        operation="read_append",
        topics=sorted({t for t, _ in bounds.partitions()}),
        records_in=int(stats["n"]),
        tombstones_in=int(stats["tombs"]),
        parse_errors_skipped=int(stats["bad"]),
        records_out=int(stats["n"]) - int(stats["bad"]) - int(stats["tombs"]),
        start_offsets=offsets_to_json(bounds.start),
        end_offsets=offsets_to_json(bounds.end),
        duration_s=round(time.monotonic() - began, 3),
    )
    return Read(df, result)


def decode_append(table: KafkaTable, raw: DataFrame) -> DataFrame:
    """Decode raw Kafka records (batch or streaming) into a plain table's columns, plus ``_bad`` (an
    undecodable value), ``_tombstone`` (a null value, which gives no row) and the record's ``_topic``,
    ``_partition`` and ``_offset`` (underscored: the table may have columns named topic, partition or
    offset).

    A null value gives no row, as in Flink: its json, csv and avro decoders return none for it (the
    record is skipped, not an error). Flink's ``raw`` format reads it as a NULL value column instead,
    so with ``raw`` it is a row like any other."""
    from pyspark.sql import functions as F

    in_key = set(table.key_fields)
    kcodec = table.key_codec()
    sides = [(table.value_codec(), "value"), *([(kcodec, "key")] if kcodec is not None else [])]
    staged, decoded = parse_once(raw, sides)
    vd = decoded[0]
    key_value = decoded[1].value if kcodec is not None else None
    cols = _metadata_sources(table, raw)
    out = []
    for c in table.columns:
        if c.metadata is not None:
            out.append(_metadata_value(c, cols).alias(c.name))
        elif c.name in in_key and key_value is not None:
            out.append(key_value.getField(c.name[len(table.key_fields_prefix) :]).alias(c.name))
        else:
            out.append(vd.value.getField(c.name).alias(c.name))
    tombstone = F.col("value").isNull() if table.value_format != "raw" else F.lit(False)
    bad = F.col("value").isNotNull() & vd.error
    position = [F.col(n).alias(f"_{n}") for n in ("topic", "partition", "offset")]
    return staged.select(*out, bad.alias("_bad"), tombstone.alias("_tombstone"), *position)
