"""Topic -> warehouse: materialize and warehouse backfills.

A run locks its target (a lock file beside a local table, a lease object beside a table on S3, a
PostgreSQL advisory lock), reads the offsets the target stored with its data, decides whether it can continue from them (else it rebuilds
from the earliest offset and says why), folds the changelog and writes rows and offsets in one commit
(``jobs.warehouse_writes``). After a successful run the offsets also go to the consumer group
``upsert-kafka-ops.<job>``, for monitoring only.
"""

from __future__ import annotations

import dataclasses
import fcntl
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from upsert_kafka_ops.engine.hashing import quoted
from upsert_kafka_ops.engine.history import closing_columns
from upsert_kafka_ops.engine.warehouse import fault_point
from upsert_kafka_ops.jobs import state as st
from upsert_kafka_ops.jobs.continuity import check_stored, target_gaps, topic_ids
from upsert_kafka_ops.jobs.core import (
    ConcurrentRunError,
    JobResult,
    OffsetsError,
    RunContext,
    commit_group_offsets,
)
from upsert_kafka_ops.jobs.folders import local_path
from upsert_kafka_ops.jobs.object_lock import object_lock
from upsert_kafka_ops.jobs.spec import (
    AppendSource,
    BackfillJob,
    DeltaTarget,
    IcebergTarget,
    MaterializeJob,
    ParquetTarget,
    PostgresTarget,
    UpsertSource,
    source_table,
    target_table,
)
from upsert_kafka_ops.jobs.warehouse_writes import Write, write_target
from upsert_kafka_ops.spec.connection import KafkaConnection
from upsert_kafka_ops.spec.history import HistorySpec
from upsert_kafka_ops.spec.storage import S3Storage, split_s3

log = logging.getLogger("upsert_kafka_ops.jobs")

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from upsert_kafka_ops.engine.source import Read
    from upsert_kafka_ops.jobs.spec import Pipeline
    from upsert_kafka_ops.spec.table import UpsertKafkaTable

WarehouseJob = MaterializeJob | BackfillJob
WarehouseTarget = DeltaTarget | PostgresTarget | ParquetTarget | IcebergTarget


def run_materialize(ctx: RunContext, job: MaterializeJob) -> JobResult:
    """Bring the target up to the topic's latest offsets (incremental unless it must rebuild)."""
    return run_to_warehouse(ctx, job, job.target, ctx.mode_override or job.mode, until="latest", rewind=True)


def run_to_warehouse(
    ctx: RunContext, job: WarehouseJob, target: WarehouseTarget, mode: str, until: Any, rewind: bool
) -> JobResult:
    """Hold the target's lock, read what it stored, fold and write; commit the group's offsets."""
    conn = ctx.connection(job.source.connection, job.source.table)
    result = ctx.result(target=target.uri)
    if isinstance(target, PostgresTarget):
        import psycopg

        from upsert_kafka_ops.engine.warehouse import pg_lock_key

        with (
            psycopg.connect(**target.conninfo(), autocommit=True) as lock_conn,
            _pg_lock(lock_conn, pg_lock_key(target.uri), ctx.lock_timeout_s, target.uri),
        ):
            stored = st.read_postgres_state(lock_conn, target.offsets_table, target.table)
            _read_and_write(ctx, job, target, conn, stored, None, mode, until, rewind, result)
    else:
        storage = ctx.pipeline.storage_of(target)
        if isinstance(target, IcebergTarget):
            from upsert_kafka_ops.engine.iceberg import use_catalog

            use_catalog(ctx.spark, *ctx.pipeline.catalog_of(target), storage)
        with _table_lock(ctx, target, storage):
            txns: dict[str, int] = {}
            if isinstance(target, DeltaTarget):
                log_state = st.read_delta_log(target.path, storage, app_ids=[job.name])
                stored, txns = log_state.state, log_state.txn_versions
            elif isinstance(target, IcebergTarget):
                stored = st.read_iceberg_state(ctx.pipeline, target)
            else:
                stored = st.read_parquet_state(target.path, storage)
            _read_and_write(ctx, job, target, conn, stored, txns, mode, until, rewind, result)
    fault_point("after-commit")
    commit_group_offsets(conn, job.consumer_group, result.end_offsets)
    return result


def fold_source(
    spark: SparkSession,
    source: UpsertSource | AppendSource,
    conn: KafkaConnection,
    *,
    until: Any = None,
    strict: bool = False,
    validation: Literal["winners", "full"] = "winners",
) -> Read:
    """The latest row per key of a warehouse job's source from the earliest offset to ``until``: an
    upsert table's fold, or a CDC table's changes folded per its key (an engine ``Read``)."""
    from upsert_kafka_ops.engine import materialize
    from upsert_kafka_ops.engine.cdc import materialize_cdc

    if isinstance(source, AppendSource):
        return materialize_cdc(spark, source.table, conn, key=source.key, until=until)
    return materialize(
        spark, source.table, conn, start="earliest", until=until, strict=strict, validation=validation
    )


def read_target(
    spark: SparkSession, pipeline: Pipeline, target: DeltaTarget | ParquetTarget | IcebergTarget
) -> DataFrame:
    """A Delta, Parquet or Iceberg target's rows (on S3 through its store, an Iceberg table through
    its catalog: ``spark`` is given their settings)."""
    from upsert_kafka_ops.engine.session import use_storage

    storage = pipeline.storage_of(target)
    if isinstance(target, IcebergTarget):
        from upsert_kafka_ops.engine.iceberg import iceberg_ref, use_catalog

        name, catalog = pipeline.catalog_of(target)
        use_catalog(spark, name, catalog, storage)
        return spark.table(iceberg_ref(name, target.table))
    if storage is not None:
        use_storage(spark, storage, split_s3(target.path)[0])
    return spark.read.format(target.kind).load(target.path)


# -- one locked run -------------------------------------------------------------------------------
def _read_and_write(
    ctx: RunContext,
    job: WarehouseJob,
    target: WarehouseTarget,
    conn: KafkaConnection,
    stored: st.StoredState | None,
    txns: dict[str, int] | None,
    mode: str,
    until: Any,
    rewind: bool,
    result: JobResult,
) -> None:
    table = source_table(job.source)
    history = job.history if isinstance(job, MaterializeJob) else None
    written = target_table(job)
    mode = _choose_mode(ctx, target, written, conn, stored, mode, result)
    run = (stored.run if stored else 0) + 1
    if txns:
        run = max(run, txns.get(job.name, 0) + 1)
    result.run = run
    why = f" ({result.reason})" if result.reason else ""
    log.info("job %s: run %d, %s into %s%s", job.name, run, mode, target.uri, why)
    if history is not None:
        assert isinstance(job, MaterializeJob) and not isinstance(target, ParquetTarget)
        read = _read_history(ctx, job, target, conn, stored if mode == "incremental" else None, until, result)
        mode = result.mode
    elif mode == "incremental":
        assert stored is not None
        read = _read_since(ctx, job, table, conn, stored, until)
    else:
        read = _read_from_earliest(ctx, job, target, table, conn, stored, until, rewind, result)
    r = read.result
    span = sum(int(o) for parts in r.end_offsets.values() for o in parts.values()) - sum(
        int(o) for parts in r.start_offsets.values() for o in parts.values()
    )
    log.info("job %s: read %s of %s records in the offset range (%d row(s) to write) at %.1f s",
             job.name, f"{r.records_in:,}", f"{max(span, r.records_in):,}", r.records_out,
             time.monotonic() - ctx.began)  # fmt: skip
    result.records_read = r.records_in
    result.read = r.to_dict()
    result.start_offsets, result.end_offsets = r.start_offsets, r.end_offsets
    end = {(t, int(p)): int(o) for t, parts in r.end_offsets.items() for p, o in parts.items()}
    payload = st.state_payload(job.name, run, end, mode, topic_ids=topic_ids(conn, sorted(r.end_offsets)))
    fault_point("after-read")
    try:
        close = closing_columns(history) if history is not None else ()
        write = Write(job, read.df, mode, run, payload, result, ctx.pipeline, r.records_out, written, close)
        write_target(ctx.spark, target, write)
    finally:
        read.release()


def _choose_mode(
    ctx: RunContext,
    target: WarehouseTarget,
    table: Any,
    conn: KafkaConnection,
    stored: st.StoredState | None,
    mode: str,
    result: JobResult,
) -> str:
    """``incremental`` when the stored offsets can be continued, else ``full`` with the reason."""
    if isinstance(target, ParquetTarget):
        mode = "full"
    if mode == "incremental" and stored is None:
        mode, result.reason = (
            "full",
            "no stored offsets: first run builds the target from the earliest offset",
        )
    if mode == "incremental":
        missing = target_gaps(ctx.spark, target, table, ctx.pipeline)
        if missing:
            mode, result.reason = "full", missing
    result.mode = mode
    if mode == "incremental":
        assert stored is not None
        horizon = check_stored(table, conn, stored, getattr(ctx.job, "on_reset", "fail"))
        if horizon:
            mode = result.mode = "full"
            result.reason = horizon
    return mode


def _read_since(
    ctx: RunContext, job: WarehouseJob, table: Any, conn: KafkaConnection, stored: st.StoredState, until: Any
) -> Read:
    """The changes after the stored offsets: the last change per key."""
    from upsert_kafka_ops.engine import read_changes
    from upsert_kafka_ops.engine.cdc import last_changes

    if isinstance(job.source, AppendSource):  # a CDC source: the last change per key
        return last_changes(
            ctx.spark, job.source.table, conn, key=job.source.key, start=stored.offsets, until=until
        )
    return read_changes(
        ctx.spark,
        table,
        conn,
        start=stored.offsets,
        until=until,
        strict=getattr(job, "strict", False),
        validation=getattr(job, "validation", "winners"),
    )


def _read_history(
    ctx: RunContext,
    job: MaterializeJob,
    target: DeltaTarget | PostgresTarget | IcebergTarget,
    conn: KafkaConnection,
    stored: st.StoredState | None,
    until: Any,
    result: JobResult,
) -> Read:
    """A history table's rows to write: every version of the keys the read touched. Incremental
    (``stored``): the records after the stored offsets continue each key's current version, unless a
    key's new records come before its stored history; then the run rebuilds from the earliest offset
    and says why."""
    from upsert_kafka_ops.engine import history as hist
    from upsert_kafka_ops.engine.source import Read, read_records

    assert isinstance(job.source, UpsertSource) and job.history is not None
    table, spec = job.source.table, job.history
    keys = list(table.primary_key)
    start = stored.offsets if stored is not None else "earliest"
    records = read_records(ctx.spark, table, conn, start=start, until=until, strict=job.strict)
    ev = hist.events(records.df, table, spec)
    if stored is not None:
        from pyspark.sql import functions as F

        types = {f.name: f.dataType for f in records.df.schema.fields}
        have = _stored_versions(ctx.spark, ctx.pipeline, target, table, spec)
        have = have.select(*[F.col(quoted(c)).cast(types[c]).alias(c) if c in keys else F.col(quoted(c))
                             for c in have.columns])  # fmt: skip
        have = have.join(records.df.select(*[quoted(k) for k in keys]).distinct(), keys, "left_semi")
        have = have.persist()  # read once (over JDBC for PostgreSQL), for the check and the seeds
        late = hist.late_keys(records.df, have, table, spec).count()
        if late:
            have.unpersist()
            records.release()
            result.mode = "full"
            result.reason = (
                f"{late} key(s) got records that come before their stored history (another partition"
                + (f", or {spec.sequence_by} below the key's largest" if spec.sequence_by else "")
                + "): the history is rebuilt from the earliest offset"
            )
            log.info("job %s: %s", job.name, result.reason)
            return _read_history(ctx, job, target, conn, None, until, result)
        ev = ev.unionByName(hist.seeds(have.where(F.col(quoted(spec.is_current))), table, spec, ev))
    from pyspark import StorageLevel

    rows = hist.versions(ev, table, spec).persist(StorageLevel.MEMORY_AND_DISK)
    count = rows.count()
    records.release()
    if stored is not None:
        have.unpersist()
    return Read(rows, dataclasses.replace(records.result, operation="history", records_out=count))


def _stored_versions(
    spark: SparkSession,
    pipeline: Pipeline,
    target: DeltaTarget | PostgresTarget | IcebergTarget,
    table: UpsertKafkaTable,
    spec: HistorySpec,
) -> DataFrame:
    """A history table's key, history and bookkeeping columns (not the source's values): what an
    incremental run continues from."""
    from upsert_kafka_ops.engine import warehouse as wh

    names = [*table.primary_key, *[c.name for c in spec.table(table).columns[len(table.columns) :]]]
    if isinstance(target, PostgresTarget):
        select = ", ".join(wh.pg_name(n) for n in names)
        qualified = f"{target.schema_name}.{target.table_name}"
        return wh.jdbc_read(spark, target.jdbc_url(), f"SELECT {select} FROM {wh.pg_quote(qualified)}",
                            target.user, target.conninfo().get("password"))  # fmt: skip
    return read_target(spark, pipeline, target).select(*[quoted(n) for n in names])


def _read_from_earliest(
    ctx: RunContext,
    job: WarehouseJob,
    target: WarehouseTarget,
    table: Any,
    conn: KafkaConnection,
    stored: st.StoredState | None,
    until: Any,
    rewind: bool,
    result: JobResult,
) -> Read:
    """The fold from the earliest offset to ``until``; a backfill may not take the target back in
    time unless it says ``rewind``."""
    from upsert_kafka_ops.engine import resolve_bounds

    snapshot = isinstance(job, BackfillJob) and job.snapshot
    if snapshot:  # the snapshot's time: the end's, else when the end offsets are fixed
        as_of = until.get("timestamp_ms") if isinstance(until, dict) else None
        result.write["as_of_ms"] = int(as_of if as_of is not None else time.time() * 1000)
    bounds = resolve_bounds(table, conn.to_librdkafka(), "earliest", until)
    if stored is not None and not rewind and not snapshot:
        behind = {
            tp: (off, bounds.end.get(tp, 0))
            for tp, off in stored.offsets.items()
            if bounds.end.get(tp, 0) < off
        }
        if behind:
            sample = ", ".join(f"{t}[{p}] {e} < stored {o}" for (t, p), (o, e) in sorted(behind.items())[:3])
            raise OffsetsError(
                f"the backfill's end is older than what {target.uri} already holds ({sample}). "
                "Set rewind: true to take the target back to that point."
            )
    return fold_source(
        ctx.spark,
        job.source,
        conn,
        until=bounds.end,
        strict=getattr(job, "strict", False),
        validation=getattr(job, "validation", "winners"),
    )


# -- locks ----------------------------------------------------------------------------------------
def _wait_for(take: Callable[[], bool], timeout: float, what: str, lock: str, hint: str) -> None:
    """Call ``take`` until it returns True, at most ``timeout`` seconds; the wait is logged when it
    starts, every 10 s while it lasts, and when it ends (a task waiting on another run says so)."""
    if take():
        return
    start = time.monotonic()
    log.info("%s is being written by another run: waiting for %s (at most %.0f s)", what, lock, timeout)
    said = start
    while not take():
        now = time.monotonic()
        if now - start >= timeout:
            raise ConcurrentRunError(
                f"{what} is being written by another run ({lock} held for {timeout:.0f} s). "
                f"Runs of one target are serialized: {hint}"
            )
        if now - said >= 10:
            log.info("%s: still waiting for %s after %.0f s", what, lock, now - start)
            said = now
        time.sleep(0.2)
    log.info("%s: took %s after waiting %.1f s", what, lock, time.monotonic() - start)


@contextmanager
def _file_lock(path: Path, timeout: float, what: str) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:

        def take() -> bool:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            return True

        _wait_for(take, timeout, what, f"lock {path}", "wait for the other run, or raise lock_timeout_s.")
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextmanager
def _table_lock(
    ctx: RunContext, target: DeltaTarget | ParquetTarget | IcebergTarget, storage: S3Storage | None
) -> Iterator[None]:
    """The run's hold on a table in a folder (an Iceberg table: its location in the catalog's
    warehouse): a lease object on S3 (its session given the store's settings first), else ``flock``
    on a file beside the folder."""
    path = ctx.pipeline.location_of(target)
    assert path is not None
    if storage is None:
        local = local_path(path)
        with _file_lock(
            local.parent / f".{local.name}.upsert-kafka-ops.lock", ctx.lock_timeout_s, target.uri
        ):
            yield
        return
    from upsert_kafka_ops.engine.session import use_storage

    use_storage(ctx.spark, storage, split_s3(path)[0])

    def wait(take: Callable[[], bool], timeout: float, lock: str) -> None:
        _wait_for(
            take, timeout, target.uri, f"lock {lock}", "wait for the other run, or raise lock_timeout_s."
        )

    with object_lock(path, storage, ctx.lock_timeout_s, wait):
        yield


@contextmanager
def _pg_lock(conn: Any, key: int, timeout: float, what: str) -> Iterator[None]:
    def take() -> bool:
        return bool(conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0])

    _wait_for(take, timeout, what, f"PostgreSQL advisory lock {key}", "wait for the other run.")
    try:
        yield
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
