"""History tables on Spark (SCD type 2): a key's records folded into its versions.

A key's records, in order (the topic's order, see :mod:`upsert_kafka_ops.engine.source`; or the
``sequence_by`` column's, the topic's order breaking ties), make its versions:

- a value whose tracked columns differ from the current version's, or that finds no current
  version, opens a version; the current one ends where the new one begins;
- a value equal to the current version on the tracked columns opens nothing: its other columns
  update the current version in place (an identical re-update changes nothing);
- a tombstone ends the current version; when there is none it changes nothing.

Times: in the topic's order a version begins at its opening record's Kafka timestamp and ends at
the closing record's. With ``sequence_by`` it begins at its opening record's value of that column;
a tombstone, which carries no value, and a value whose sequence is NULL take the largest sequence of
the key's records before them in the topic (they land where they arrived), so a delete seen after a
late update still deletes it.

An incremental run continues each key it touches from the key's current version (a *seed*: the
version's opening record, its start and its tracked columns' hash) with the records after the stored
offsets. That is the history one run over the whole topic gives as long as the new records come
after the key's history: in the same partition, and with ``sequence_by`` at no smaller sequence than
the key's largest so far. :func:`late_keys` finds the keys for which that fails; the run then
rebuilds the table from the earliest offset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from upsert_kafka_ops.engine.hashing import quoted, row_hash
from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.spec.history import CLOSED, HASH, OPENED, SEEN, HistorySpec
from upsert_kafka_ops.spec.table import UpsertKafkaTable
from upsert_kafka_ops.spec.types import parse_type

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: the op of a row that only ends a stored version: its closing columns are written, nothing else
CLOSE = "close"


def _time_type(table: UpsertKafkaTable, history: HistorySpec) -> str:
    return parse_type(history.time_type(table)).to_spark()


def events(records: DataFrame, table: UpsertKafkaTable, history: HistorySpec) -> DataFrame:
    """``read_records``' rows as the history's events: the table's columns, ``_is_null``, the
    position, ``_arrival`` (the topic's order), ``_s`` (the event's time, NULL where it is taken
    from the key's earlier records), ``_m`` (its share of the key's largest sequence), ``_hash``
    (of the tracked columns) and ``_seed`` (false)."""
    from pyspark.sql import functions as F

    tt = _time_type(table, history)
    seq = history.sequence_by
    value = ~F.col("_is_null")
    t = F.col(quoted(seq)) if seq else F.col("_timestamp")
    return records.select(
        *[F.col(quoted(c.name)) for c in table.columns],
        "_is_null",
        "_partition",
        "_offset",
        F.struct(F.lit(1).alias("n"), F.col("_order").alias("o")).alias("_arrival"),
        (F.when(value, t) if seq else t).cast(tt).alias("_s"),
        (F.when(value, t) if seq else F.lit(None)).cast(tt).alias("_m"),
        F.when(value, row_hash(history.tracked(table))).alias("_hash"),
        F.lit(False).alias("_seed"),
    )


def seeds(current: DataFrame, table: UpsertKafkaTable, history: HistorySpec, like: DataFrame) -> DataFrame:
    """The stored current versions (``current``: rows of the history table) as events that come
    before every new record of their key; ``like``: the new events, whose columns they take."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    keys = set(table.primary_key)
    cols = []
    for field in like.schema.fields:
        name = field.name
        if name in keys:
            c = F.col(quoted(name)).cast(field.dataType)
        elif name == "_is_null":
            c = F.lit(False)
        elif name in ("_partition", "_offset"):
            c = F.col(OPENED[0] if name == "_partition" else OPENED[1])
        elif name == "_arrival":
            order = like.schema["_arrival"].dataType
            assert isinstance(order, StructType)
            # not cast: the read's struct is NOT NULL, the seed's position is none
            cols.append(
                F.struct(F.lit(0).alias("n"), F.lit(None).cast(order["o"].dataType).alias("o")).alias(name)
            )
            continue
        elif name == "_s":
            c = F.col(quoted(history.valid_from))
        elif name == "_m":
            c = F.col(SEEN) if history.sequence_by else F.lit(None)
        elif name == "_hash":
            c = F.col(HASH)
        elif name == "_seed":
            c = F.lit(True)
        else:  # the version's values: a seed carries none (a row it ends keeps its own)
            c = F.lit(None)
        cols.append(c.cast(field.dataType).alias(name))
    return current.select(*cols)


def versions(ev: DataFrame, table: UpsertKafkaTable, history: HistorySpec) -> DataFrame:
    """The versions the events make: rows of the history table (``history.table(table)``) with
    ``op`` '+U' (the whole row), or ``close`` for a seed version that only ended. A seed that
    neither ended nor took new values gives no row."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    keys = [quoted(k) for k in table.primary_key]
    data = [c.name for c in table.columns if c.name not in table.primary_key]
    by_key = Window.partitionBy(*keys)
    if history.sequence_by:
        before = by_key.orderBy("_arrival").rowsBetween(Window.unboundedPreceding, -1)
        ev = ev.withColumn("_s", F.coalesce(F.col("_s"), F.max("_m").over(before)))
        order: list[str | Column] = ["_s", "_arrival"]
    else:
        order = ["_arrival"]
    w = by_key.orderBy(*order)
    was_value = F.coalesce(F.lag(~F.col("_is_null")).over(w), F.lit(False))
    same = was_value & F.coalesce(F.lag("_hash").over(w) == F.col("_hash"), F.lit(False))
    boundary = F.when(F.col("_is_null"), was_value).otherwise(~same)
    ev = ev.withColumn("_grp", F.sum(boundary.cast("int")).over(w.rowsBetween(Window.unboundedPreceding, 0)))
    ev = ev.where(F.col("_grp") > 0)  # tombstones before any value change nothing
    rank = F.struct(*[F.col(c) if isinstance(c, str) else c for c in order])
    opening = F.struct("_is_null", "_partition", "_offset", "_s", "_hash")
    groups = ev.groupBy(*keys, "_grp").agg(
        F.min_by(opening, rank).alias("_first"),
        F.max_by(F.struct(*[F.col(quoted(c)) for c in data]) if data else F.lit(None), rank).alias("_last"),
        F.sum((~F.col("_seed")).cast("int")).alias("_new"),
        F.max("_m").alias("_m"),
    )
    per_key = Window.partitionBy(*keys).orderBy("_grp")
    groups = groups.withColumn("_next", F.lead("_first").over(per_key))
    groups = groups.withColumn("_seen", F.max("_m").over(Window.partitionBy(*keys)))
    groups = groups.where(~F.col("_first._is_null"))
    ended = F.col("_next").isNotNull()
    op = F.when(F.col("_new") > 0, F.lit("+U")).otherwise(F.lit(CLOSE))
    groups = groups.where((F.col("_new") > 0) | ended)
    tt = _time_type(table, history)
    out = [
        *[F.col(k) for k in keys],
        *[F.col("_last").getField(c).alias(c) for c in data],
        F.col("_first._s").cast(tt).alias(history.valid_from),
        F.col("_next._s").cast(tt).alias(history.valid_to),
        (~ended).alias(history.is_current),
        F.col("_first._partition").cast("int").alias(OPENED[0]),
        F.col("_first._offset").cast("long").alias(OPENED[1]),
        F.col("_next._partition").cast("int").alias(CLOSED[0]),
        F.col("_next._offset").cast("long").alias(CLOSED[1]),
        F.col("_first._hash").alias(HASH),
    ]
    if history.sequence_by:
        out.append(F.col("_seen").cast(tt).alias(SEEN))
    names = [c.name for c in history.table(table).columns]
    return groups.select(op.alias("op"), *out).select("op", *[quoted(n) for n in names])


def closing_columns(history: HistorySpec) -> tuple[str, ...]:
    """What a ``close`` row writes into the version it ends."""
    return (history.valid_to, history.is_current, *CLOSED)


def late_keys(
    records: DataFrame, stored: DataFrame, table: UpsertKafkaTable, history: HistorySpec
) -> DataFrame:
    """The keys whose new records (``records``: ``read_records``' rows after the stored offsets) do
    not come after their stored history (``stored``: the history table's rows of those keys, keys
    typed as in ``records``): a record in another partition than the key's versions, or with
    ``sequence_by`` a value below the key's largest sequence so far (or none: its place follows the
    key's earlier records). Such keys need a rebuild."""
    from pyspark.sql import functions as F

    keys = [quoted(k) for k in table.primary_key]
    stored = stored.select(
        *keys,
        *[F.col(c) for c in (*OPENED, *CLOSED)],
        *([F.col(SEEN)] if history.sequence_by else []),
    )
    parts = stored.select(*keys, F.explode(F.array(OPENED[0], CLOSED[0])).alias("_p")).unionByName(
        records.select(*keys, F.col("_partition").cast("int").alias("_p"))
    )
    spread = parts.where(F.col("_p").isNotNull()).groupBy(*keys).agg(F.countDistinct("_p").alias("_n"))
    late = spread.where("_n > 1").select(*keys)
    if history.sequence_by:
        seen = stored.groupBy(*keys).agg(F.max(SEEN).alias("_seen"))
        tt = _time_type(table, history)
        low = (
            records.where(~F.col("_is_null"))
            .select(*keys, F.col(quoted(history.sequence_by)).cast(tt).alias("_v"))
            .join(seen, table.primary_key)
            .where(F.col("_v").isNull() | (F.col("_v") < F.col("_seen")))
            .select(*keys)
        )
        late = late.unionByName(low)
    return late.distinct()


def as_of(
    versions: DataFrame,
    table: UpsertKafkaTable,
    history: HistorySpec,
    *,
    at: object = None,
    offsets: dict[str, dict[str, int]] | None = None,
) -> DataFrame:
    """The latest-state table as it was at a point of the history: the source's columns of the
    versions valid then, one row per live key.

    :param versions: the history table's rows.
    :param at: a time (a ``datetime``, or epoch milliseconds) or, with ``sequence_by``, a value of
        that column: the versions with ``valid_from <= at < valid_to`` (or still current).
    :param offsets: a run's end offsets (``{topic: {partition: offset}}``, as a run result holds
        them): the versions opened by a record before them and not closed by one. The topic's order
        only: with ``sequence_by`` a late record reorders versions, so use ``at``.
    """
    from pyspark.sql import functions as F

    if (at is None) == (offsets is None):
        raise SpecError(
            "as_of", "needs one point: at= or offsets=.", "give a time (or sequence value), or offsets."
        )
    names = [quoted(c.name) for c in table.columns]
    start, end = F.col(quoted(history.valid_from)), F.col(quoted(history.valid_to))
    if at is not None:
        if isinstance(at, int) and history.sequence_by is None:
            point = F.timestamp_millis(F.lit(at))
        else:
            point = F.lit(at).cast(_time_type(table, history))
        # a version opened by a value with a NULL sequence and nothing before it began at the start
        began = start.isNull() | (start <= point)
        return versions.where(began & (end.isNull() | (end > point))).select(*names)
    if history.sequence_by is not None:
        raise SpecError(
            "as_of.offsets",
            f"versions ordered by {history.sequence_by!r} are not in the topic's "
            "order, so offsets do not cut them.",
            "ask for a point of sequence_by with at=.",
        )
    assert offsets is not None
    (topic_offsets,) = offsets.values() if len(offsets) == 1 else (None,)
    if topic_offsets is None:
        raise SpecError(
            "as_of.offsets",
            f"names {len(offsets)} topics; a history table reads one.",
            "give the offsets of its topic.",
        )
    ends = F.create_map(*[F.lit(v) for p, o in sorted(topic_offsets.items()) for v in (int(p), int(o))])
    opened = F.col(OPENED[1]) < F.coalesce(ends[F.col(OPENED[0])], F.lit(0))
    closed = F.col(CLOSED[1]).isNotNull() & (F.col(CLOSED[1]) < F.coalesce(ends[F.col(CLOSED[0])], F.lit(0)))
    return versions.where(opened & ~closed).select(*names)
