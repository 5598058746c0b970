"""Topic -> warehouse: materialize and warehouse backfills.

A run holds its target (a lock file beside a local table, a lease object beside a table on S3, a
PostgreSQL advisory lock), reads the offsets the target stored with its data, decides whether it can
continue from them (else it rebuilds from the earliest offset and says why), folds the changelog and
writes rows and offsets in one commit. Holding, reading and writing are the target's own
(``jobs.targets``): this module never asks which kind of target it holds. After a successful run the
offsets also go to the consumer group ``upsert-kafka-ops.<job>``, for monitoring only.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING, Literal

from upsert_kafka_ops.engine.hashing import quoted
from upsert_kafka_ops.engine.history import closing_columns
from upsert_kafka_ops.jobs import state as st
from upsert_kafka_ops.jobs.continuity import check_stored, topic_ids
from upsert_kafka_ops.jobs.core import JobResult, OffsetsError, RunContext, commit_group_offsets
from upsert_kafka_ops.jobs.faults import fault_point
from upsert_kafka_ops.jobs.targets import Stored, WarehouseTable, Write, target_for
from upsert_kafka_ops.pipeline import (
    BackfillJob,
    KafkaSource,
    MaterializeJob,
    UpsertSource,
    WarehouseJob,
    WarehouseTarget,
    source_table,
    target_table,
)
from upsert_kafka_ops.spec.connection import KafkaConnection

log = logging.getLogger("upsert_kafka_ops.jobs")

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from upsert_kafka_ops.engine.source import Read
    from upsert_kafka_ops.spec.table import ReadEnd, UpsertKafkaTable


def run_materialize(ctx: RunContext, job: MaterializeJob) -> JobResult:
    """Bring the target up to the topic's latest offsets (incremental unless it must rebuild)."""
    return run_to_warehouse(ctx, job, job.target, ctx.mode_override or job.mode, until="latest", rewind=True)


def run_to_warehouse(
    ctx: RunContext, job: WarehouseJob, target: WarehouseTarget, mode: str, until: ReadEnd, rewind: bool
) -> JobResult:
    """Hold the target's lock, read what it stored, fold and write; commit the group's offsets."""
    conn = ctx.connection(job.source.connection, job.source.table)
    result = ctx.result(target=target.uri)
    table = target_for(target, ctx.pipeline)
    with table.hold(ctx.spark, ctx.lock_timeout_s):
        _read_and_write(ctx, job, table, conn, table.stored(job.name), mode, until, rewind, result)
    fault_point("after-commit")
    commit_group_offsets(conn, job.consumer_group, result.end_offsets)
    return result


def fold_source(
    spark: SparkSession,
    source: UpsertSource | KafkaSource,
    conn: KafkaConnection,
    *,
    until: ReadEnd = None,
    strict: bool = False,
    validation: Literal["winners", "full"] = "winners",
) -> Read:
    """The latest row per key of a warehouse job's source from the earliest offset to ``until``: an
    upsert table's fold, or a CDC table's changes folded per its key (an engine ``Read``)."""
    from upsert_kafka_ops.engine import materialize
    from upsert_kafka_ops.engine.cdc import materialize_cdc

    if isinstance(source, KafkaSource):
        return materialize_cdc(spark, source.table, conn, key=source.key, until=until)
    return materialize(
        spark, source.table, conn, start="earliest", until=until, strict=strict, validation=validation
    )


# -- one locked run -------------------------------------------------------------------------------
def _read_and_write(
    ctx: RunContext,
    job: WarehouseJob,
    target: WarehouseTable,
    conn: KafkaConnection,
    held: Stored,
    mode: str,
    until: ReadEnd,
    rewind: bool,
    result: JobResult,
) -> None:
    table = source_table(job.source)
    history = job.history if isinstance(job, MaterializeJob) else None
    written = target_table(job)
    stored = held.state
    mode = _choose_mode(ctx, target, written, conn, stored, mode, result)
    run = max(stored.run if stored else 0, held.last_run) + 1
    result.run = run
    why = f" ({result.reason})" if result.reason else ""
    log.info("job %s: run %d, %s into %s%s", job.name, run, mode, target.uri, why)
    if history is not None:
        assert isinstance(job, MaterializeJob) and not target.full_only
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
    log.info(
        "job %s: read %s of %s records in the offset range (%d row(s) to write) at %.1f s",
        job.name,
        f"{r.records_in:,}",
        f"{max(span, r.records_in):,}",
        r.records_out,
        time.monotonic() - ctx.began,
    )
    result.records_read = r.records_in
    result.read = r.to_dict()
    result.start_offsets, result.end_offsets = r.start_offsets, r.end_offsets
    end = {(t, int(p)): int(o) for t, parts in r.end_offsets.items() for p, o in parts.items()}
    payload = st.state_payload(job.name, run, end, mode, topic_ids=topic_ids(conn, sorted(r.end_offsets)))
    fault_point("after-read")
    try:
        close = closing_columns(history) if history is not None else ()
        target.write(
            ctx.spark, Write(job, read.df, mode, run, payload, result, r.records_out, written, close)
        )
    finally:
        read.release()


def _choose_mode(
    ctx: RunContext,
    target: WarehouseTable,
    table: UpsertKafkaTable,
    conn: KafkaConnection,
    stored: st.StoredState | None,
    mode: str,
    result: JobResult,
) -> str:
    """``incremental`` when the stored offsets can be continued, else ``full`` with the reason."""
    if target.full_only:
        mode = "full"
    if mode == "incremental" and stored is None:
        mode, result.reason = (
            "full",
            "no stored offsets: first run builds the target from the earliest offset",
        )
    if mode == "incremental":
        missing = target.gaps(ctx.spark, table)
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
    ctx: RunContext,
    job: WarehouseJob,
    table: UpsertKafkaTable,
    conn: KafkaConnection,
    stored: st.StoredState,
    until: ReadEnd,
) -> Read:
    """The changes after the stored offsets: the last change per key."""
    from upsert_kafka_ops.engine import read_changes
    from upsert_kafka_ops.engine.cdc import last_changes

    if isinstance(job.source, KafkaSource):  # a CDC source: the last change per key
        return last_changes(
            ctx.spark, job.source.table, conn, key=job.source.key, start=stored.offsets, until=until
        )
    return read_changes(
        ctx.spark,
        table,
        conn,
        start=stored.offsets,
        until=until,
        strict=job.strict,
        validation=job.validation,
    )


def _read_history(
    ctx: RunContext,
    job: MaterializeJob,
    target: WarehouseTable,
    conn: KafkaConnection,
    stored: st.StoredState | None,
    until: ReadEnd,
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
        names = [*table.primary_key, *[c.name for c in spec.table(table).columns[len(table.columns) :]]]
        have = target.rows(ctx.spark, names)  # the key, history and bookkeeping columns
        have = have.select(
            *[
                F.col(quoted(c)).cast(types[c]).alias(c) if c in keys else F.col(quoted(c))
                for c in have.columns
            ]
        )
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


def _read_from_earliest(
    ctx: RunContext,
    job: WarehouseJob,
    target: WarehouseTable,
    table: UpsertKafkaTable,
    conn: KafkaConnection,
    stored: st.StoredState | None,
    until: ReadEnd,
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
        strict=job.strict,
        validation=job.validation,
    )
