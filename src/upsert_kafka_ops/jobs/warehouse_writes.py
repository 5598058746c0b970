"""Writing a folded read into a warehouse target with its offsets, in one commit per target kind.

Delta: a MERGE (incremental), an overwrite (full) or a snapshot replace, each a Delta commit whose
``txnAppId``/``txnVersion`` make a repeated run a no-op and whose commit info carries the offsets.
Parquet: an overwrite, then the offsets file beside it. PostgreSQL: the rows go to a stage table over
JDBC, then one transaction applies them and stores the offsets. Iceberg: a MERGE (incremental) or an
overwrite (full), each one snapshot whose summary carries the offsets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from upsert_kafka_ops.engine.warehouse import fault_point
from upsert_kafka_ops.jobs import state as st
from upsert_kafka_ops.jobs.core import ConcurrentRunError, JobResult
from upsert_kafka_ops.jobs.spec import (
    BackfillJob,
    DeltaTarget,
    IcebergTarget,
    MaterializeJob,
    ParquetTarget,
    Pipeline,
    PostgresTarget,
    source_table,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from upsert_kafka_ops.spec.table import UpsertKafkaTable


@dataclass(frozen=True)
class Write:
    """One run's write: ``df`` (the latest row per key, or an incremental run's changes) and
    ``payload`` (the offsets and run number stored with it); the counts go into ``result``.
    ``pipeline``: the run's pipeline (a target's store on S3, an Iceberg target's catalog);
    ``rows``: how many rows ``df`` holds, when the fold counted them; ``table``: the table written,
    when it is not the source's (a history table); ``close_only``: the columns a history table's
    ``close`` rows set (see :func:`upsert_kafka_ops.engine.warehouse.merge_sql`)."""

    job: MaterializeJob | BackfillJob
    df: DataFrame
    mode: str
    run: int
    payload: dict[str, Any]
    result: JobResult
    pipeline: Pipeline
    rows: int | None = None
    table: UpsertKafkaTable | None = None
    close_only: tuple[str, ...] = ()

    @property
    def written(self) -> UpsertKafkaTable:
        """The table the target holds."""
        return self.table or source_table(self.job.source)


def write_target(
    spark: SparkSession, target: DeltaTarget | PostgresTarget | ParquetTarget | IcebergTarget, w: Write
) -> None:
    """Write rows and offsets into ``target`` in one commit."""
    from upsert_kafka_ops.engine import warehouse as wh

    if isinstance(target, DeltaTarget):
        _write_delta(spark, target, w)
    elif isinstance(target, IcebergTarget):
        _write_iceberg(spark, target, w)
    elif isinstance(target, ParquetTarget):
        wh.parquet_overwrite(w.df, target.path, w.written)
        fault_point("after-data")
        st.write_parquet_state(target.path, w.payload, w.pipeline.storage_of(target))
    else:
        _write_postgres(target, w)


def _write_delta(spark: SparkSession, target: DeltaTarget, w: Write) -> None:
    from upsert_kafka_ops.engine import warehouse as wh

    job, df, mode, run, payload, result = w.job, w.df, w.mode, w.run, w.payload, w.result
    table = w.written
    path = target.path
    as_of = target.as_of_column
    result.columns_added = wh.ensure_delta_table(spark, path, table, as_of_column=as_of)
    meta = {st.MARKER: payload}
    if as_of:  # a snapshot table: only this end's rows are replaced
        counts = wh.delta_replace_snapshot(
            spark, df, path, table, as_of_column=as_of, as_of_ms=result.write["as_of_ms"],
            app_id=job.name, version=run, metadata=meta,
        )  # fmt: skip
    elif mode == "incremental":
        counts = wh.delta_merge(spark, df, path, table, app_id=job.name, version=run, metadata=meta,
                                rows=w.rows, close_only=w.close_only)  # fmt: skip
    else:
        counts = wh.delta_overwrite(spark, df, path, table, app_id=job.name, version=run, metadata=meta)
    after = st.read_delta_log(path, w.pipeline.storage_of(target), app_ids=[job.name]).state
    if after is None or after.run != run:
        raise ConcurrentRunError(
            f"{target.uri}: Delta skipped this run's commit (txnAppId {job.name!r} already at version "
            f">= {run}); another run committed first. Nothing was written by this run; rerun it."
        )
    result.rows_upserted, result.rows_deleted = counts["upserted"], counts["deleted"]


def _write_iceberg(spark: SparkSession, target: IcebergTarget, w: Write) -> None:
    from upsert_kafka_ops.engine import iceberg as ice

    table = w.written
    name, _ = w.pipeline.catalog_of(target)
    ref = ice.iceberg_ref(name, target.table)
    w.result.columns_added = ice.ensure_iceberg_table(spark, ref, table)
    if w.mode == "incremental":
        counts = ice.iceberg_merge(
            spark, w.df, ref, table, metadata=w.payload, rows=w.rows, close_only=w.close_only
        )
    else:
        counts = ice.iceberg_overwrite(spark, w.df, ref, table, metadata=w.payload)
    after = st.read_iceberg_state(w.pipeline, target)
    if after is None or after.run != w.run:  # the run holds the table's lock: another writer ignored it
        raise ConcurrentRunError(
            f"{target.uri}: the table's newest state is not this run's (run {w.run}); another writer "
            "committed without the lock. Rerun this job."
        )
    w.result.rows_upserted, w.result.rows_deleted = counts["upserted"], counts["deleted"]


def _write_postgres(target: PostgresTarget, w: Write) -> None:
    import psycopg

    from upsert_kafka_ops.engine import warehouse as wh

    job, df, mode, run, payload, result = w.job, w.df, w.mode, w.run, w.payload, w.result
    table = w.written
    info = target.conninfo()
    qualified = f"{target.schema_name}.{target.table_name}"  # never resolved through search_path
    offsets = [(t, int(p), int(o)) for t, parts in payload["offsets"].items() for p, o in parts.items()]
    incremental = mode == "incremental"
    with psycopg.connect(**info) as pg:
        with pg.transaction():
            result.columns_added = wh.pg_ensure_table(pg, qualified, table)
            wh.pg_ensure_offsets_table(pg, target.offsets_table)
        stage = wh.stage_name(qualified, job.name)
        wh.pg_create_stage(pg, stage, qualified, table, with_op=incremental)
        pg.commit()
        try:
            frame = wh.stage_frame(df, table, with_op=incremental)
            wh.jdbc_write(frame, target.jdbc_url(), wh.pg_quote(stage), target.user, info.get("password"))
            with pg.transaction():
                current = st.read_postgres_state(pg, target.offsets_table, target.table)
                if (current.run if current else 0) >= run:
                    raise ConcurrentRunError(
                        f"{target.uri}: run {run} was already committed by another run; rerun this job."
                    )
                if incremental:
                    counts = wh.pg_apply_changes(pg, stage, qualified, table, w.close_only)
                else:
                    # TRUNCATE is transactional: readers keep the old rows until COMMIT, and grants,
                    # views and foreign keys on the table stay as they are
                    pg.execute(f"TRUNCATE {wh.pg_quote(qualified)}")
                    n = wh.pg_fill_from_stage(pg, stage, qualified, table)
                    fault_point("during-swap")
                    counts = {"upserted": n, "deleted": 0}
                wh.pg_store_offsets(
                    pg,
                    target.offsets_table,
                    target.table,
                    job.name,
                    run,
                    mode,
                    offsets,
                    payload.get("topic_ids"),
                )
                fault_point("in-transaction")
        finally:
            with pg.transaction():
                pg.execute(f"DROP TABLE IF EXISTS {wh.pg_quote(stage)}")
    result.rows_upserted, result.rows_deleted = counts["upserted"], counts["deleted"]
