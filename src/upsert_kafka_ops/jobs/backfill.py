"""Backfills: a bounded read from the earliest offset to a fixed end that rebuilds the target.

A warehouse target goes through ``jobs.to_warehouse`` (full mode, with the backfill's end and its
``rewind`` rule); a topic target gets the fold at that end through ``write_snapshot``.
"""

from __future__ import annotations

from upsert_kafka_ops.jobs import sink_layout
from upsert_kafka_ops.jobs.core import (
    JobResult,
    RunContext,
    commit_group_offsets,
    topic_target,
    written_to_topic,
)
from upsert_kafka_ops.jobs.targets import is_warehouse
from upsert_kafka_ops.jobs.to_warehouse import run_to_warehouse
from upsert_kafka_ops.pipeline import BackfillJob, UpsertSink, UpsertSource


def run_backfill(ctx: RunContext, job: BackfillJob) -> JobResult:
    """Rebuild the target from the earliest offset to the backfill's end."""
    if is_warehouse(job.target):
        return run_to_warehouse(ctx, job, job.target, "full", until=job.until_bound(), rewind=job.rewind)
    source = ctx.connection(job.source.connection, job.source.table)
    before = sink_layout.recorded_in_group(source, job.consumer_group)
    sink = ctx.connection(job.target.connection, job.target.table)
    counts = sink_layout.check(job.name, job.target, sink, before)
    result = _backfill_topic(ctx, job, job.target)
    commit_group_offsets(source, job.consumer_group, result.end_offsets, metadata=sink_layout.record(counts))
    return result


def _backfill_topic(ctx: RunContext, job: BackfillJob, sink: UpsertSink) -> JobResult:
    """Bounded earliest -> end, written with write_snapshot (brings the topic to the snapshot; not
    atomic: a consumer may see some keys updated before others)."""
    from upsert_kafka_ops.engine import materialize, write_snapshot

    assert isinstance(job.source, UpsertSource)  # the spec refuses CDC sources with topic targets
    read = materialize(
        ctx.spark,
        job.source.table,
        ctx.connection(job.source.connection, job.source.table),
        until=job.until_bound(),
    )
    try:
        written = write_snapshot(read.df, sink.table, ctx.connection(sink.connection, sink.table))
    finally:
        read.release()
    r = read.result
    return ctx.result(
        mode="full",
        execution="snapshot",
        target=topic_target(sink.table),
        records_read=r.records_in,
        **written_to_topic(written),
        start_offsets=r.start_offsets,
        end_offsets=r.end_offsets,
        read=r.to_dict(),
    )
