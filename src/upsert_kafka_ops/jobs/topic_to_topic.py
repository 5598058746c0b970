"""Topic -> topic: a Spark SQL query over Kafka sources into an upsert sink.

The path is chosen from what Spark can compute incrementally and exactly (Flink's retractions have
no Spark equivalent): append-only sources and a query Spark's streaming checker accepts run as a
stream (``jobs.streaming``); otherwise (an upsert or CDC source, COUNT DISTINCT, an aggregation of an
aggregation, ...) each run recomputes the result and ``write_snapshot`` sends only what changed.
The result says which path ran and why.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.jobs import sink_layout
from upsert_kafka_ops.jobs.core import (
    JobResult,
    RunContext,
    commit_group_offsets,
    conform,
    topic_target,
    written_to_topic,
)
from upsert_kafka_ops.jobs.streaming import ContinuousQuery, run_streaming, streaming_verdict
from upsert_kafka_ops.pipeline import KafkaSource, TopicToTopicJob, history_start_error
from upsert_kafka_ops.spec.table import UpsertKafkaTable


def run_topic_to_topic(ctx: RunContext, job: TopicToTopicJob) -> JobResult:
    """Run the query as a stream when Spark can, else recompute it; commit each source's offsets."""
    ok, reason, counts = _path(ctx, job)
    result = run_streaming(ctx, job, reason) if ok else _run_snapshot(ctx, job, reason)
    commit_sources(ctx, job, result.end_offsets, counts)
    return result


def start_continuous(ctx: RunContext, job: TopicToTopicJob, interval_ms: int) -> ContinuousQuery:
    """Start the job's streaming query on a processing-time trigger (a continuous job's): refused
    with the reason when the query cannot stream."""
    ok, reason, counts = _path(ctx, job)
    if not ok:
        raise SpecError(
            "trigger.continuous",
            f"job {job.name!r} cannot run continuously: {reason}.",
            "give it a schedule instead of the trigger (each run then recomputes the query), or make its "
            "sources append-only and its query one Spark's streaming accepts.",
        )
    return ContinuousQuery(ctx, job, reason, interval_ms, lambda ends: commit_sources(ctx, job, ends, counts))


def _path(ctx: RunContext, job: TopicToTopicJob) -> tuple[bool, str, dict[str, int]]:
    """Whether the query streams and why; the sink's partition counts, checked against the last run's."""
    if job.execution == "snapshot":
        ok, reason = False, "execution: snapshot was requested"
    else:
        ok, reason = streaming_verdict(ctx.spark, job, ctx.pipeline.connections)
        if job.execution == "streaming" and not ok:
            raise SpecError(
                "execution", f"job {job.name!r} cannot stream: {reason}.", "use execution: auto or snapshot."
            )
    if not ok and job.sink.appends:
        raise SpecError(
            "sink",
            f"job {job.name!r} appends to the plain kafka table {job.sink.table.name!r}, which takes an "
            f"append-only stream of rows, but it cannot stream: {reason}. A recompute would append its "
            "whole result again each run (and an updating query is one Flink's kafka sink refuses too).",
            "write to an upsert-kafka table (sink kind: upsert-kafka), or make the query append-only.",
        )
    if not ok:
        for name, src in job.sources.items():
            error = history_start_error(
                f"sources.{name}", src, f"job {job.name!r} recomputes its query each run ({reason})"
            )
            if error is not None:
                raise error
    first = next(iter(job.sources.values()))
    before = sink_layout.recorded_in_group(ctx.connection(first.connection, first.table), job.consumer_group)
    counts = sink_layout.check(
        job.name, job.sink, ctx.connection(job.sink.connection, job.sink.table), before
    )
    return ok, reason, counts


def commit_sources(
    ctx: RunContext, job: TopicToTopicJob, ends: Mapping[str, Mapping[str, int]], counts: dict[str, int]
) -> None:
    """Commit the offsets the job read up to, each source's to the job's group on its own cluster."""
    for src in job.sources.values():
        topics = set(src.table.topic or []) | {
            t for t in ends if src.table.topic_pattern and re.fullmatch(src.table.topic_pattern, t)
        }
        mine = {t: o for t, o in ends.items() if t in topics}
        commit_group_offsets(
            ctx.connection(src.connection, src.table),
            job.consumer_group,
            mine,
            metadata=sink_layout.record(counts),
        )


def _run_snapshot(ctx: RunContext, job: TopicToTopicJob, reason: str) -> JobResult:
    from upsert_kafka_ops.engine import materialize, read_append, write_snapshot
    from upsert_kafka_ops.engine.cdc import materialize_cdc
    from upsert_kafka_ops.formats.cdc_json import is_cdc

    spark = ctx.spark
    reads = []
    records = 0
    starts: dict[str, dict[str, int]] = {}
    ends: dict[str, dict[str, int]] = {}
    try:
        for name, src in job.sources.items():
            conn = ctx.connection(src.connection, src.table)
            if isinstance(src, KafkaSource) and is_cdc(src.table.value_format):
                read = materialize_cdc(spark, src.table, conn, key=src.key or None)
            elif isinstance(src, KafkaSource):
                read = read_append(spark, src.table, conn)
            else:
                read = materialize(spark, src.table, conn)
            reads.append(read)
            read.df.createOrReplaceTempView(name)
            records += read.result.records_in
            starts.update(read.result.start_offsets)
            ends.update(read.result.end_offsets)
        sink = job.sink.table
        assert isinstance(sink, UpsertKafkaTable)  # an append sink never takes the snapshot path (above)
        df = conform(spark.sql(job.query), sink, "query")
        written = write_snapshot(df, sink, ctx.connection(job.sink.connection, job.sink.table))
    finally:
        for name in job.sources:
            spark.catalog.dropTempView(name)
        for read in reads:
            read.release()
    return ctx.result(
        mode="full",
        execution="snapshot",
        reason=reason,
        target=topic_target(job.sink.table),
        records_read=records,
        **written_to_topic(written),
        start_offsets=starts,
        end_offsets=ends,
    )
