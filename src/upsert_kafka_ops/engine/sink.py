"""The upsert-kafka sink on Spark: a changelog or a table written to a topic with upsert semantics.

The primary key columns (in declaration order) are the Kafka key; INSERT and UPDATE_AFTER become values,
DELETE (and an UPDATE_BEFORE not followed by its UPDATE_AFTER) a tombstone. As in Flink, every change is
written, in order: a key's changes go through one Spark task in their order, so they reach the key's
Kafka partition in that order whatever the task layout. With ``sink.buffer-flush.*`` set, Flink's
reducing buffer keeps only the last change per key until it flushes; here a write is one buffer (a batch
has no time to flush on), so a key's last change is written. The partition is Kafka's default
partitioner on the key bytes (murmur2), as Flink's sink leaves it. Delivery is at-least-once with an
idempotent producer.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from upsert_kafka_ops.engine import progress
from upsert_kafka_ops.engine.results import RunResult
from upsert_kafka_ops.engine.session import use_krb5_conf_in_driver
from upsert_kafka_ops.engine.source import DataError, resolve_connection
from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.spec.connection import KafkaConnection, SecretRef, client_properties
from upsert_kafka_ops.spec.table import KafkaTable, UpsertKafkaTable

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

OPS = ("+I", "+U", "-U", "-D")
_PRODUCER = {"kafka.enable.idempotence": "true", "kafka.acks": "all"}


def _sink_topic(table: UpsertKafkaTable | KafkaTable) -> str:
    if table.topic_pattern is not None or len(table.topic or []) != 1:
        raise SpecError("topic", "a sink writes to exactly one topic.", "set 'topic' to a single topic name.")
    return (table.topic or [""])[0]


def _headers(table: UpsertKafkaTable | KafkaTable) -> Column | None:
    """The record headers from a writable ``headers`` METADATA column; rejects what cannot be written."""
    from pyspark.sql import functions as F

    out = None
    for c in table.metadata_columns:
        if c.virtual:
            continue
        if c.metadata == "timestamp":
            raise SpecError(
                f"columns.{c.name}",
                "Spark 4.0's Kafka writer cannot set record timestamps, so this writable METADATA column "
                "would be lost (the producer's time is used).",
                f"declare it `{c.name} ... METADATA FROM 'timestamp' VIRTUAL` (read only), or leave it out of "
                "the sink table.",
            )
        if c.metadata == "headers":
            entries = F.map_entries(F.col(c.name))
            out = entries.cast("array<struct<key:string,value:binary>>")
    return out


def _encoded(table: UpsertKafkaTable, df: DataFrame) -> tuple[Column, Column]:
    """(key bytes, value bytes) columns of the table's rows in ``df``."""
    from pyspark.sql import functions as F

    missing = [c.name for c in table.physical_columns if c.name not in df.columns]
    if missing:
        raise SpecError("columns", f"the DataFrame lacks the table's column(s): {', '.join(missing)}.")
    key = F.struct(*[F.col(c.name).alias(table.key_field_name(c.name)) for c in table.key_columns])
    value = F.struct(*[F.col(c.name) for c in table.value_columns])
    # a primary key column is NOT NULL (Flink's sink refuses such a row): no key bytes, which the
    # write refuses before its first record (a format would otherwise encode {"id": null})
    null_key = F.lit(False)
    for c in table.key_columns:
        null_key = null_key | F.col(c.name).isNull()
    return F.when(~null_key, table.key_codec().encode(key)), table.value_codec().encode(value)


def producer_options(
    table: UpsertKafkaTable | KafkaTable, conn: KafkaConnection, spark: SparkSession | None = None
) -> dict[str, str]:
    """Spark's Kafka writer options: the table's ``properties.*`` over this sink's defaults (acks=all,
    an idempotent producer, as Flink leaves Kafka's own defaults: idempotence is on unless acks says
    otherwise), then the connection's settings.

    Spark prints a writer's options into its plan (the UI's SQL tab, event logs, the History Server).
    With ``spark`` a local session, a secret given as an environment variable the driver's JVM sees
    goes in as Kafka's ``${env:NAME}`` reference, so the plan holds its name, not its value."""
    options = {f"kafka.{k}": v for k, v in client_properties(table.properties).items()}
    options.setdefault("kafka.acks", _PRODUCER["kafka.acks"])
    idempotent = options["kafka.acks"] in ("all", "-1")
    options.setdefault(
        "kafka.enable.idempotence", _PRODUCER["kafka.enable.idempotence"] if idempotent else "false"
    )
    options.update(conn.to_spark_options(_env_reference(spark) if spark is not None else None))
    return options


def _env_reference(spark: SparkSession) -> Callable[[SecretRef], str | None] | None:
    """``${env:NAME}`` for an ``env`` secret the local driver JVM (which runs the executors too) holds
    with the same value; None elsewhere (a cluster's executors may lack the variable)."""
    master = spark.conf.get("spark.master", "") or ""
    jvm = getattr(spark, "_jvm", None)
    if not master.startswith("local") or jvm is None:
        return None

    def reference(ref: SecretRef) -> str | None:
        if ref.env is None or ref.env not in os.environ:
            return None
        seen = jvm.java.lang.System.getenv(ref.env)
        return f"${{env:{ref.env}}}" if seen is not None and seen == os.environ[ref.env] else None

    return reference


def _write(
    table: UpsertKafkaTable | KafkaTable,
    conn: KafkaConnection,
    records: DataFrame,
    order: Sequence[Column] = (),
    cluster: Sequence[str] = (),
) -> None:
    """Write (key, value[, headers]) binary rows; a NULL value is a tombstone. With ``order`` and
    ``cluster`` (columns of ``records`` that order the rows and name their primary key, dropped before
    the write), each key's rows are written by one task in that order. ``records`` come clustered by the
    key already (a window over it): then only ``sink.parallelism`` shuffles them again, and the sort is
    one Spark drops when the rows are in that order already."""
    if order:
        n = table.sink_parallelism
        records = records.repartition(n, *cluster) if n else records
        names = [c for c in records.columns if c in ("key", "value", "headers", "partition")]
        records = records.sortWithinPartitions(*cluster, *order).select(*names)
    elif table.sink_parallelism is not None:
        records = records.repartition(table.sink_parallelism)
    _save(table, conn, records)


def _save(table: UpsertKafkaTable | KafkaTable, conn: KafkaConnection, records: DataFrame) -> None:
    options = producer_options(table, conn, records.sparkSession)
    use_krb5_conf_in_driver(records.sparkSession, conn)
    writer = records.write.format("kafka").mode("append")  # Spark's V2 Kafka writer appends only
    writer.options(**options).option("topic", _sink_topic(table)).save()


#: What Kafka adds around a record's key, value and headers when it stands alone in a batch: the
#: batch header (61 bytes) and the record's own framing (attributes, timestamp and offset deltas,
#: lengths: at most about 25 bytes), rounded up.
RECORD_OVERHEAD = 100
#: The producer's ``max.request.size`` when the table sets none (Kafka's default).
DEFAULT_MAX_REQUEST_SIZE = 1_048_576


def _record_size(records: DataFrame) -> Column:
    from pyspark.sql import functions as F

    size = F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0))
    if "headers" in records.columns:
        header = F.aggregate(
            F.col("headers"),
            F.lit(0),
            lambda acc, h: (
                acc + F.coalesce(F.length(h["key"]), F.lit(0)) + F.coalesce(F.length(h["value"]), F.lit(0))
            ),
        )
        size = size + F.coalesce(header, F.lit(0))
    return size + F.lit(RECORD_OVERHEAD)


def _write_stats(records: DataFrame, last: str | None = None) -> Any:
    """Counts of the records to write, in one pass: ``last`` flags each key's last record (the keys
    are then counted without a shuffle of their own); without it each record is taken as a key of its
    own (a snapshot's one row per key; an append reports no key count). ``largest``: the largest
    record as Kafka will see it (key, value, headers and :data:`RECORD_OVERHEAD`)."""
    from pyspark.sql import functions as F

    n = F.count(F.lit(1))
    return records.agg(
        n.alias("n"),
        (F.count(F.when(F.col(last), 1)) if last else n).alias("keys"),
        F.count(F.when(F.col("value").isNull(), 1)).alias("tombs"),
        F.count(F.when(F.col("key").isNull(), 1)).alias("null_keys"),
        F.coalesce(
            F.sum(F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0))), F.lit(0)
        ).alias("bytes"),
        F.coalesce(F.max(_record_size(records)), F.lit(0)).alias("largest"),
    ).first()


def check_keys(table: UpsertKafkaTable, records: DataFrame, null_keys: int) -> None:
    """Refuse a write with a row whose primary key is NULL (or encodes to no bytes) before its first
    record, showing the first such row's value: an upsert record needs its key."""
    if not null_keys:
        return
    first = records.where("key IS NULL").select("value").limit(1).collect()
    raw = bytes(first[0]["value"]) if first and first[0]["value"] is not None else b""
    shown = raw[:300].decode("utf-8", "backslashreplace") + (" ..." if len(raw) > 300 else "")
    raise DataError(
        f"{null_keys} row(s) have a NULL primary key ({', '.join(table.primary_key)}), which an upsert-kafka "
        f"key cannot be (Flink's sink refuses them too); the first one's value: {shown or '(a deletion)'}. "
        "Nothing was written. Filter or fill those rows before writing."
    )


def check_record_sizes(
    table: UpsertKafkaTable | KafkaTable, conn: KafkaConnection, records: DataFrame, largest: int
) -> None:
    """Refuse a write before its first record when one record is larger than the topic's
    ``max.message.bytes`` or the producer's ``max.request.size`` (Kafka would refuse it in the middle
    of the write, after the records before it). Not checked when the producer compresses: a
    compressed batch may fit where its records' raw bytes do not."""
    from upsert_kafka_ops.kafka.admin import KafkaAdmin

    options = producer_options(table, conn)
    if largest == 0 or options.get("kafka.compression.type", "none") not in ("none", ""):
        return
    topic = _sink_topic(table)
    request = int(options.get("kafka.max.request.size", DEFAULT_MAX_REQUEST_SIZE))
    with KafkaAdmin(conn) as admin:
        broker = admin.topic_configs([topic])[topic].max_message_bytes
    limit, what = min(
        (request, "the producer's max.request.size (properties.max.request.size)"),
        (broker if broker is not None else request, f"topic {topic}'s max.message.bytes"),
    )
    if largest <= limit:
        return
    row = records.where(_record_size(records) > limit).select("key", _record_size(records).alias("size"))
    first = row.limit(1).collect()[0]
    key = bytes(first["key"]) if first["key"] is not None else b""
    shown = key[:200].decode("utf-8", "backslashreplace") + (" ..." if len(key) > 200 else "")
    raise DataError(
        f"the record for key {shown!r} is {first['size']} bytes as Kafka frames it, above {what} of {limit} "
        f"bytes, so Kafka would refuse it in the middle of the write; nothing was written. Make the row "
        f"smaller, or raise {what} (and the other limit with it: max.message.bytes on the topic, "
        "properties.max.request.size on the table)."
    )


def write_changelog(
    df: DataFrame,
    table: UpsertKafkaTable,
    connection: KafkaConnection | None = None,
    *,
    order_by: list[str] | str | None = None,
) -> RunResult:
    """Write a changelog DataFrame (an ``op`` column of +I, +U, -U, -D and the table's columns).

    Every change is written in the order ``order_by`` gives (default ``_topic, _partition, _offset``
    when the DataFrame has them, as :func:`~upsert_kafka_ops.engine.read_changelog` gives), as Flink's
    sink writes what it is given; an UPDATE_BEFORE directly followed by its UPDATE_AFTER is not written
    (Flink's planner sends an upsert sink none), any other UPDATE_BEFORE is a tombstone. Among changes
    with equal order, an UPDATE_BEFORE comes before an UPDATE_AFTER. With the table's
    ``sink.buffer-flush.*`` options set, only the last change per key is written (the write is one
    buffer). Several rows for one key with no order is an error.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    began = time.monotonic()
    _sink_topic(table)  # a table without exactly one topic fails here, before any Spark work
    conn = resolve_connection(table, connection)
    topic = _sink_topic(table)
    order = _changelog_order(df, order_by)
    bad_op = df.where(~F.col("op").isin(*OPS) | F.col("op").isNull()).select("op").limit(1).collect()
    if bad_op:
        raise SpecError("op", f"unknown change kind {bad_op[0]['op']!r}.", f"use one of {', '.join(OPS)}.")
    changes, in_order, clustered, last = _changes_to_write(df, table, order)
    key, value = _encoded(table, changes)
    headers = _headers(table)
    columns = [key.alias("key"), F.when(F.col("op").isin("+I", "+U"), value).alias("value")]
    if headers is not None:
        columns.append(headers.alias("headers"))
    records = changes.select(*columns, *clustered, *in_order, *last).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        stats = _write_stats(records, last[0] if last else None)
        check_keys(table, records, int(stats["null_keys"]))
        check_record_sizes(table, conn, records, int(stats["largest"]))
        _write(table, conn, records, [F.col(c).asc_nulls_first() for c in in_order], clustered)
    finally:
        records.unpersist()
    return RunResult(
        operation="write_changelog",
        topics=[topic],
        records_in=df.count(),
        distinct_keys=int(stats["keys"]),
        records_out=int(stats["n"]),
        tombstones_out=int(stats["tombs"]),
        bytes_out=int(stats["bytes"]),
        duration_s=round(time.monotonic() - began, 3),
    )


def _changelog_order(df: DataFrame, order_by: list[str] | str | None) -> list[str]:
    """The columns that order a changelog's changes: ``order_by``, else the Kafka position columns
    when the DataFrame has them, else none."""
    if "op" not in df.columns:
        raise SpecError("op", "the changelog DataFrame has no 'op' column.", "add one with +I, +U, -U or -D.")
    if order_by is None:
        order_by = [c for c in ("_topic", "_partition", "_offset") if c in df.columns]
        if "_offset" not in order_by:
            order_by = []
    order = [order_by] if isinstance(order_by, str) else list(order_by)
    missing = [c for c in order if c not in df.columns]
    if missing:
        raise SpecError("order_by", f"the changelog DataFrame has no column(s) {', '.join(missing)}.")
    return order


def _changes_to_write(
    df: DataFrame, table: UpsertKafkaTable, order: list[str]
) -> tuple[DataFrame, list[str], list[str], list[str]]:
    """The changes Flink's sink would write, and the columns the write orders them by within a key
    (``in_order``), groups a key's changes by (``clustered``) and flags each key's last change with
    (``last``, never on a dropped change: the keys' count). Without an order, a key may have one change."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    pk = table.primary_key
    if not order:
        dup = df.groupBy(*pk).count().where("count > 1").limit(1).collect()
        if dup:
            raise SpecError(
                "order_by",
                f"key {tuple(dup[0][k] for k in pk)} has {dup[0]['count']} changes and no order was given.",
                "pass order_by=... (e.g. a sequence or timestamp column) so the order of a key's changes is defined.",
            )
        return df, [], [], []
    after = F.when(F.col("op") == "-U", 0).otherwise(1)  # at equal order, UPDATE_BEFORE first
    w = Window.partitionBy(*pk).orderBy(*[F.col(c).asc_nulls_first() for c in order], after)
    is_last = F.lead(F.lit(1)).over(w).isNull()
    if table.sink_buffer_flush_max_rows > 0:  # Flink's reducing buffer, the write as one buffer
        return df.withColumn("__last", is_last).where(F.col("__last")), [], [], ["__last"]
    followed = F.coalesce((F.col("op") == "-U") & (F.lead("op").over(w) == "+U"), F.lit(False))
    changes = df.withColumn("__drop", followed).withColumn("__last", is_last).where(~F.col("__drop"))
    changes = changes.select("*", *[F.col(c).alias(f"__o{i}") for i, c in enumerate(order)])
    changes = changes.withColumn("__o_after", after)
    changes = changes.select("*", *[F.col(k).alias(f"__k{i}") for i, k in enumerate(pk)])
    in_order = [*[f"__o{i}" for i in range(len(order))], "__o_after"]
    return changes, in_order, [f"__k{i}" for i in range(len(pk))], ["__last"]


def write_snapshot(
    df: DataFrame, table: UpsertKafkaTable, connection: KafkaConnection | None = None
) -> RunResult:
    """Make the topic hold ``df`` (one row per key): compare with the topic's current state by encoded
    key and value bytes, write only keys whose bytes changed, and tombstones for keys that vanished.
    Nothing is written when nothing changed."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    began = time.monotonic()
    _sink_topic(table)  # a table without exactly one topic fails here, before any Spark work
    conn = resolve_connection(table, connection)
    topic = _sink_topic(table)
    pk = table.primary_key
    dup = df.groupBy(*pk).count().where("count > 1").limit(1).collect()
    if dup:
        raise SpecError(
            "df",
            f"key {tuple(dup[0][k] for k in pk)} appears {dup[0]['count']} times in the snapshot.",
            "give one row per key.",
        )
    key, value = _encoded(table, df)
    headers = _headers(table)
    with_headers = headers is not None
    # no headers and an empty list of them are the same record; a change of headers alone is a change
    want_h = F.when(F.size(headers) > 0, headers) if headers is not None else _no_headers()
    desired = df.select(key.alias("key"), value.alias("want"), want_h.alias("want_h"))
    diff = desired.join(_topic_state(df.sparkSession, table, conn, with_headers), "key", "full_outer")
    changed = ~F.col("want").eqNullSafe(F.col("have")) | (
        F.col("want").isNotNull() & ~F.col("want_h").eqNullSafe(F.col("have_h"))
    )
    keep = [F.col("want_h").alias("headers")] if with_headers else []
    records = diff.where(changed).select("key", F.col("want").alias("value"), *keep)
    records = records.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        stats = _write_stats(records)
        if stats["n"]:
            check_keys(table, records, int(stats["null_keys"]))
            check_record_sizes(table, conn, records, int(stats["largest"]))
            _write(table, conn, records)
    finally:
        records.unpersist()
    return RunResult(
        operation="write_snapshot",
        topics=[topic],
        records_in=df.count(),
        records_out=int(stats["n"]),
        tombstones_out=int(stats["tombs"]),
        bytes_out=int(stats["bytes"]),
        duration_s=round(time.monotonic() - began, 3),
    )


def _no_headers() -> Column:
    """A record without headers (an empty list of them is the same record)."""
    from pyspark.sql import functions as F

    return F.lit(None).cast("array<struct<key:string,value:binary>>")


def _topic_state(
    spark: SparkSession, table: UpsertKafkaTable, conn: KafkaConnection, with_headers: bool
) -> DataFrame:
    """What the topic holds now, one row per live key: ``key``, its last value ``have`` and headers
    ``have_h`` (a key in several partitions: the record written last). The topic is scanned once."""
    from pyspark.sql import functions as F

    from upsert_kafka_ops.engine.bounds import resolve_bounds
    from upsert_kafka_ops.engine.source import read_raw

    bounds = resolve_bounds(table, conn.to_librdkafka(), "earliest", "latest")
    raw = read_raw(spark, table, conn, bounds, headers=with_headers)
    progress.expect(bounds.span())
    have_h = F.when(F.size("headers") > 0, F.col("headers")) if with_headers else _no_headers()
    last = F.struct(F.col("value").alias("v"), have_h.alias("h"))
    per_part = raw.groupBy("key", "topic", "partition").agg(
        F.max_by(last, "offset").alias("last"), F.max("timestamp").alias("ts")
    )
    current = per_part.groupBy("key").agg(
        F.max_by("last", F.struct("ts", "topic", "partition")).alias("last")
    )
    current = current.select("key", F.col("last.v").alias("have"), F.col("last.h").alias("have_h"))
    return current.where(F.col("have").isNotNull() & F.col("key").isNotNull())


def write_append(df: DataFrame, table: KafkaTable, connection: KafkaConnection | None = None) -> RunResult:
    """Append ``df``'s rows to a plain ``kafka`` table's topic, as Flink's kafka sink writes an insert-only
    query: the value format over the value fields, the key format over ``key.fields`` (no key without
    one), headers from a writable ``headers`` METADATA column. ``sink.partitioner`` picks the partition:
    ``default`` leaves it to Kafka's partitioner (murmur2 of the key; records without a key spread),
    ``fixed`` sends each writing task to one partition (task index modulo the partitions, as Flink's
    subtasks), ``round-robin`` one record to each partition in turn within a task."""
    from pyspark.sql import functions as F

    from upsert_kafka_ops.kafka import offsets as ko

    began = time.monotonic()
    topic = _sink_topic(table)
    _check_appendable(table)
    conn = resolve_connection(table, connection)
    missing = [c.name for c in table.physical_columns if c.name not in df.columns]
    if missing:
        raise SpecError("columns", f"the DataFrame lacks the table's column(s): {', '.join(missing)}.")
    value = table.value_codec().encode(F.struct(*[F.col(c.name) for c in table.value_fields]))
    key_codec = table.key_codec()
    if key_codec is not None:
        prefix = len(table.key_fields_prefix)
        key = key_codec.encode(F.struct(*[F.col(k).alias(k[prefix:]) for k in table.key_fields]))
    else:
        key = F.lit(None).cast("binary")
    headers = _headers(table)
    rows = df.repartition(table.sink_parallelism) if table.sink_parallelism else df
    columns = [
        key.alias("key"),
        value.alias("value"),
        *([headers.alias("headers")] if headers is not None else []),
    ]
    if table.sink_partitioner != "default":
        partitions = len(ko.topic_partitions(conn.to_librdkafka(), topics=[topic]))
        spread = (
            F.spark_partition_id() if table.sink_partitioner == "fixed" else F.monotonically_increasing_id()
        )
        columns.append(F.pmod(spread, F.lit(partitions)).cast("int").alias("partition"))
    from pyspark import StorageLevel

    records = rows.select(*columns).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        stats = _write_stats(records)
        check_record_sizes(table, conn, records, int(stats["largest"]))
        _save(table, conn, records)  # already spread over sink.parallelism tasks, as 'fixed' needs
    finally:
        records.unpersist()
    return RunResult(
        operation="write_append",
        topics=[topic],
        records_in=int(stats["n"]),
        records_out=int(stats["n"]),
        bytes_out=int(stats["bytes"]),
        duration_s=round(time.monotonic() - began, 3),
    )


def _check_appendable(table: KafkaTable) -> None:
    """Refuse what a plain kafka sink cannot write: a changelog envelope format, read-only metadata."""
    from upsert_kafka_ops.formats.registry import FORMATS

    if not FORMATS[table.value_format].insert_only:
        raise SpecError(
            "value.format",
            f"writing {table.value_format} (a changelog envelope) is not implemented; write_append writes rows.",
            "write the rows with json, csv, raw or avro, or the table they describe to an upsert-kafka table.",
        )
    read_only = [
        c.name for c in table.metadata_columns if not c.virtual and c.metadata not in ("headers", "timestamp")
    ]
    if read_only:
        raise SpecError(
            f"columns.{read_only[0]}",
            "is read-only metadata, which a sink cannot write (Flink refuses it too).",
            "declare it VIRTUAL, or leave it out of the sink table.",
        )
