"""Apache Iceberg targets on Spark: the catalog in the run's session, the table, MERGE and overwrite.

Every write is one Iceberg commit (a snapshot) whose summary carries the run's state under the
property ``upsert_kafka_ops`` (Iceberg 1.11's ``spark.sql.iceberg.snapshot-property.*`` session
confs on Spark 4, which SQL ``MERGE`` and ``writeTo`` both honour; ``CommitMetadata`` on 3.5), so
rows and offsets land together or not at all. Tables are format version 2 with merge-on-read updates and deletes: an incremental run writes
its changes and position deletes, not a copy of every file it touches.

Change DataFrames have an ``op`` column: ``+U`` (upsert the row) or ``-D`` (delete the key).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from upsert_kafka_ops import spark_compat
from upsert_kafka_ops.engine.fold_here import held_rows
from upsert_kafka_ops.engine.warehouse import (
    VALUE_FILTERED_KEY_TYPES,
    columns_to_add,
    commit_confs,
    merge_sql,
    sql_string,
    target_columns,
)
from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.spec.iceberg import IcebergCatalog, split_table_name
from upsert_kafka_ops.spec.storage import S3Storage, split_s3
from upsert_kafka_ops.spec.table import UpsertKafkaTable
from upsert_kafka_ops.spec.types import quote_name

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

#: the snapshot summary property holding a run's state (see ``jobs.state``)
SNAPSHOT_PROPERTY = "upsert_kafka_ops"
_PROPERTY_CONF = f"spark.sql.iceberg.snapshot-property.{SNAPSHOT_PROPERTY}"
_TABLE_PROPERTIES = {
    "format-version": "2",
    "write.merge.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.delete.mode": "merge-on-read",
}


def use_catalog(spark: SparkSession, name: str, catalog: IcebergCatalog, storage: S3Storage | None) -> None:
    """Register ``catalog`` as ``name`` in the session (its warehouse's store first). Spark loads a
    catalog once per session: the same name with another warehouse or database is an error here,
    not a write into the wrong catalog. The Iceberg runtime must be on the class path (the
    ``iceberg`` jar group)."""
    from upsert_kafka_ops.engine.session import use_storage

    if storage is not None:
        use_storage(spark, storage, split_s3(catalog.warehouse)[0])
    conf = catalog.spark_conf(name)
    prefix = f"spark.sql.catalog.{name}"
    for key in (f"{prefix}.type", f"{prefix}.warehouse", f"{prefix}.uri"):
        current = spark.conf.get(key, None)
        if current is not None and current != conf.get(key):
            raise SpecError(
                "catalog_name",
                f"Iceberg catalog {name!r}: this Spark session already has a catalog of that name with "
                f"{key.rsplit('.', 1)[1]} {current!r}, not {conf.get(key)!r}.",
                "give one of the catalogs another catalog_name.",
            )
    for key, value in conf.items():
        spark.conf.set(key, value)


def iceberg_ref(name: str, table: str) -> str:
    """The SQL name of ``namespace.table`` in catalog ``name``, each part quoted."""
    return ".".join(quote_name(p) for p in (name, *split_table_name(table)))


def iceberg_schema(spark: SparkSession, ref: str) -> StructType | None:
    """The table's schema, or None when there is no such table."""
    from pyspark.errors import AnalysisException

    try:
        return spark.table(ref).schema
    except AnalysisException:
        return None


def _stored_as(have: DataType, want: DataType) -> bool:
    """Whether Iceberg stores ``want`` as ``have``: it has no TINYINT or SMALLINT (they widen to INT)."""
    from pyspark.sql.types import ByteType, IntegerType, ShortType

    return have == want or (isinstance(want, ByteType | ShortType) and isinstance(have, IntegerType))


def ensure_iceberg_table(spark: SparkSession, ref: str, table: UpsertKafkaTable) -> list[str]:
    """Create the table (and its namespace) from the spec when missing; add columns the spec
    gained. Returns the names of added columns. A column whose type changed is an error."""
    have = iceberg_schema(spark, ref)
    if have is None:
        namespace = ref.rsplit(".", 1)[0]
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
        columns = [
            f"{quote_name(n)} {t.to_spark()}{' NOT NULL' if n in table.primary_key else ''}"
            for n, t in target_columns(table)
        ]
        properties = {**_TABLE_PROPERTIES, "upsert_kafka_ops.primary_key": ",".join(table.primary_key)}
        props = ", ".join(f"{sql_string(k)} = {sql_string(v)}" for k, v in properties.items())
        spark.sql(
            f"CREATE TABLE IF NOT EXISTS {ref} ({', '.join(columns)}) USING iceberg TBLPROPERTIES ({props})"
        )
        return []
    added = columns_to_add(
        {f.name: f.dataType for f in have.fields},
        table,
        f"Iceberg table {ref}",
        "Rebuild the target as a new table (mode full), or change the spec back.",
        same=_stored_as,
    )
    if added:
        spark.sql(f"ALTER TABLE {ref} ADD COLUMNS ({', '.join(added)})")
    return [a.split(" ")[0].strip("`") for a in added]


def _run_sql(spark: SparkSession, statement: str) -> None:
    spark.sql(statement)


def _committing(spark: SparkSession, metadata: dict[str, Any], write: Callable[[], None]) -> None:
    """``write`` (one commit) with the run's state in its snapshot summary, as the Spark line's
    Iceberg runtime takes it (:mod:`upsert_kafka_ops.spark_compat`)."""
    state = json.dumps(metadata, sort_keys=True)
    if spark_compat.iceberg_session_properties():
        with commit_confs(spark, {_PROPERTY_CONF: state}):
            write()
    else:
        spark_compat.iceberg_commit(spark, {SNAPSHOT_PROPERTY: state}, write)


def iceberg_merge(
    spark: SparkSession,
    changes: DataFrame,
    ref: str,
    table: UpsertKafkaTable,
    *,
    metadata: dict[str, Any],
    rows: int | None = None,
    close_only: Sequence[str] = (),
) -> dict[str, int]:
    """MERGE the last change per key (``op`` +U/-D) into the table; one commit with the state.
    With no changes, an empty append commits the state alone.

    :param rows: the number of changes, when known (spares a Spark job that finds out).
    :param close_only: see :func:`~upsert_kafka_ops.engine.warehouse.merge_sql`."""
    from pyspark.sql import functions as F

    names = [c for c, _ in target_columns(table)]
    src = changes.select("op", *names)
    if rows == 0 if rows is not None else src.isEmpty():
        empty = spark.createDataFrame([], spark.table(ref).schema)
        _committing(spark, metadata, lambda: empty.writeTo(ref).append())
        return {"upserted": 0, "deleted": 0}
    # Iceberg's MERGE returns no counts: every +U row updates or inserts one row; a -D row deletes
    # one when its key is in the table (counted before the MERGE takes it out)
    held = held_rows(changes)  # the fold's own rows, when it folded them in this process: no Spark job
    if held is not None:
        ops = held.column("op").to_pylist()
        counts = {"u": len(ops) - ops.count("-D"), "d": ops.count("-D")}
    else:
        found = src.agg(
            F.count(F.when(F.col("op") != "-D", 1)).alias("u"),
            F.count(F.when(F.col("op") == "-D", 1)).alias("d"),
        ).first()
        assert found is not None
        counts = {"u": found["u"], "d": found["d"]}
    deleted = _deleted_count(spark, src, ref, table, held) if counts["d"] else 0
    view = f"upsert_kafka_ops_changes_{uuid.uuid4().hex[:12]}"
    src.createOrReplaceTempView(view)
    try:
        _committing(spark, metadata, lambda: _run_sql(spark, merge_sql(ref, view, table, close_only)))
    finally:
        spark.catalog.dropTempView(view)
    return {"upserted": int(counts["u"]), "deleted": int(deleted)}


#: the most deleted keys counted by a filter on their values (more: a join)
FILTERED_DELETES = 1000


def _deleted_count(spark: SparkSession, src: DataFrame, ref: str, table: UpsertKafkaTable, held: Any) -> int:
    """How many of the run's deleted keys the table holds (counted before the MERGE takes them out):
    its rows with one of those keys. When the fold here holds its rows and the key is one integer or
    string column, the deleted values are a filter on the table's scan (no join). Otherwise the
    table's keys are semi-joined with the broadcast deleted keys: the table is scanned, not shuffled.
    Measured on a warm session, 5 deleted keys: 1.03 s (a semi-join of the deleted keys with the table,
    as before) -> 0.49 s (broadcast) or 0.25 s (filter) at 1,000,000 keys; 0.49 -> 0.42 or 0.24 s at
    100,000."""
    from pyspark.sql import functions as F

    names = list(table.primary_key)
    mine = spark.table(ref).select(*[F.col(quote_name(k)) for k in names])  # quoted: a name may hold a dot
    kinds = dict(target_columns(table))
    if held is not None and len(names) == 1 and kinds[names[0]].name in VALUE_FILTERED_KEY_TYPES:
        import pyarrow.compute as pc

        gone = held.filter(pc.equal(held.column("op"), "-D")).column(names[0]).to_pylist()
        if len(gone) <= FILTERED_DELETES:
            return int(mine.where(F.col(quote_name(names[0])).isin(gone)).count())
    gone_df = src.filter(F.col("op") == "-D").select(*[F.col(quote_name(k)) for k in names])
    return int(mine.join(F.broadcast(gone_df), names, "left_semi").count())


def iceberg_overwrite(
    spark: SparkSession, rows: DataFrame, ref: str, table: UpsertKafkaTable, *, metadata: dict[str, Any]
) -> dict[str, int]:
    """Replace the table's rows with ``rows`` in one commit (readers see the old or the new)."""
    from pyspark.sql import functions as F

    names = [c for c, _ in target_columns(table)]
    _committing(spark, metadata, lambda: rows.select(*names).writeTo(ref).overwrite(F.lit(True)))
    summary = spark.sql(f"SELECT summary FROM {ref}.snapshots ORDER BY committed_at DESC LIMIT 1").first()
    added = (summary["summary"] or {}).get("added-records", "0") if summary is not None else "0"
    return {"upserted": int(added), "deleted": 0}


def iceberg_maintain(
    spark: SparkSession, catalog: str, table: str, *, compact: bool, expire_before_ms: int | None
) -> dict[str, int]:
    """Iceberg's maintenance procedures on ``catalog``'s ``namespace.table``: ``compact`` runs
    ``rewrite_data_files`` (small files and the position deletes of merge-on-read MERGEs into
    large files) then ``rewrite_position_delete_files``; ``expire_before_ms`` runs
    ``expire_snapshots`` of the snapshots older than it (the current one is always kept) and deletes
    the files only they held. Each procedure is its own commit (the session needs Iceberg's SQL
    extensions: :func:`upsert_kafka_ops.engine.session.spark_conf` adds them with the iceberg jars).
    ``table => ...`` the table as the catalog names it (``namespace.table``)."""
    name = sql_string(table)
    proc = f"{quote_name(catalog)}.system"

    def call(procedure: str, *args: str) -> dict[str, Any]:
        row = spark.sql(f"CALL {proc}.{procedure}(table => {', '.join((name, *args))})").first()
        return row.asDict() if row is not None else {}

    def snapshots() -> int:
        row = spark.sql(f"SELECT count(*) AS n FROM {iceberg_ref(catalog, table)}.snapshots").first()
        return int(row["n"]) if row is not None else 0

    done: dict[str, int] = {"snapshots_before": snapshots()}
    if compact:
        found = call("rewrite_data_files")
        done["files_compacted"] = int(found.get("rewritten_data_files_count") or 0)
        done["files_written"] = int(found.get("added_data_files_count") or 0)
        found = call("rewrite_position_delete_files")
        done["delete_files_compacted"] = int(found.get("rewritten_delete_files_count") or 0)
    if expire_before_ms is not None:
        when = sql_string(_utc_timestamp(expire_before_ms))
        found = call("expire_snapshots", f"older_than => TIMESTAMP {when}", "retain_last => 1")
        done["files_deleted"] = sum(int(v or 0) for k, v in found.items() if k.startswith("deleted_"))
    done["snapshots_after"] = snapshots()
    return done


def _utc_timestamp(ms: int) -> str:
    """A Spark SQL timestamp literal's text for ``ms`` since the epoch (the session runs in UTC)."""
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
