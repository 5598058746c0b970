"""Table -> topic: publish a query's result, or a Delta table's state and then its change data feed.

A Delta source's first run publishes the table as of its latest version as a snapshot; later runs
send the change data feed since the version the last run stored (a small JSON file beside the table,
or in ``state``, that also records the sink topic's partition count: ``jobs.sink_layout``). The
table and the state file may be on S3 (``jobs.folders``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from upsert_kafka_ops.engine.session import use_storage
from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.jobs import sink_layout
from upsert_kafka_ops.jobs.core import JobResult, RunContext, conform, topic_target, written_to_topic
from upsert_kafka_ops.jobs.faults import fault_point
from upsert_kafka_ops.jobs.folders import read_text, write_text
from upsert_kafka_ops.pipeline import DeltaFeedSource, Pipeline, PublishJob, QuerySource
from upsert_kafka_ops.spec.storage import split_s3

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from upsert_kafka_ops.engine.results import RunResult


_CDF_OPS = {"insert": "+I", "update_postimage": "+U", "update_preimage": "-U", "delete": "-D"}


def _state_name(job: PublishJob) -> str:
    return f"_upsert_kafka_ops_publish_{job.name}.json"


def _read_state(pipeline: Pipeline, job: PublishJob) -> dict[str, Any]:
    """The job's state: the last published Delta version and the sink's partition count (in
    ``state``, else beside the Delta source; a query's publish keeps one only in ``state``)."""
    folder, storage = pipeline.publish_state_of(job)
    text = read_text(folder, _state_name(job), storage) if folder is not None else None
    return json.loads(text) if text is not None else {}


def _write_state(ctx: RunContext, job: PublishJob, document: dict[str, Any]) -> None:
    folder, storage = ctx.pipeline.publish_state_of(job)
    if folder is not None:
        write_text(folder, _state_name(job), json.dumps(document), storage)


def published_version(pipeline: Pipeline, job: PublishJob) -> int | None:
    """The Delta version the job's last run published up to (None before its first run)."""
    version = _read_state(pipeline, job).get("version")
    return int(version) if version is not None else None


def latest_version(spark: SparkSession, pipeline: Pipeline, job: PublishJob) -> int:
    """The newest version of the job's Delta source (a continuous publish's look for new commits)."""
    from upsert_kafka_ops.engine.delta import delta_last_commit

    assert isinstance(job.source, DeltaFeedSource), job.source
    storage = pipeline.storage_of(job.source)
    if storage is not None:  # the session's S3A settings for the table's bucket
        use_storage(spark, storage, split_s3(job.source.path)[0])
    last = delta_last_commit(spark, job.source.path)
    if last is None:
        raise SpecError(
            "source.path", f"{job.source.path} has no Delta commit.", "publish an existing Delta table."
        )
    return int(last["version"])


def run_publish(ctx: RunContext, job: PublishJob) -> JobResult:
    """Send the source's rows (a query) or its new Delta versions to the sink topic."""
    if isinstance(job.source, QuerySource):
        return _publish_query(ctx, job, job.source)
    return _publish_delta(ctx, job, job.source.path)


def _publish_query(ctx: RunContext, job: PublishJob, source: QuerySource) -> JobResult:
    from upsert_kafka_ops.engine import write_snapshot

    sink = job.sink
    conn = ctx.connection(sink.connection, sink.table)
    counts = sink_layout.check(job.name, sink, conn, sink_layout.recorded(_read_state(ctx.pipeline, job)))
    df = conform(ctx.spark.sql(source.query), sink.table, "source.query")
    snapshot = write_snapshot(df, sink.table, conn)
    _write_state(ctx, job, {sink_layout.KEY: counts})
    return ctx.result(
        mode="full",
        execution="snapshot",
        target=topic_target(sink.table),
        records_read=snapshot.records_in,
        **written_to_topic(snapshot),
    )


def _publish_delta(ctx: RunContext, job: PublishJob, path: str) -> JobResult:
    from upsert_kafka_ops.engine import write_snapshot

    spark = ctx.spark
    sink = job.sink
    conn = ctx.connection(sink.connection, sink.table)
    latest = latest_version(spark, ctx.pipeline, job)  # with the session's S3A settings for its bucket
    stored = _read_state(ctx.pipeline, job)
    last = stored.get("version")
    counts = sink_layout.check(job.name, sink, conn, sink_layout.recorded(stored))
    written: RunResult | None = None
    if last is None:
        # first run: publish the table as of `latest` as a snapshot, then follow its change feed
        snap = spark.read.format("delta").option("versionAsOf", latest).load(path)
        written = write_snapshot(conform(snap, sink.table, "source"), sink.table, conn)
        reason, records = f"first run: snapshot of version {latest}", written.records_in
    elif last >= latest:
        reason, records = f"no new Delta version after {last}", 0
    else:
        written = _publish_change_feed(ctx, job, path, last + 1, latest)
        reason, records = f"change data feed of versions {last + 1}..{latest}", written.records_in
    fault_point("after-publish-write")
    _write_state(ctx, job, {"version": latest, sink_layout.KEY: counts})
    return ctx.result(
        mode="incremental" if last is not None else "full",
        execution="batch",
        reason=reason,
        target=topic_target(sink.table),
        records_read=records,
        **written_to_topic(written),
    )


def _publish_change_feed(ctx: RunContext, job: PublishJob, path: str, first: int, last: int) -> RunResult:
    """Delta's change data feed of versions ``first..last`` as a changelog, in commit order."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from upsert_kafka_ops.engine import write_changelog

    sink = job.sink
    feed = (
        ctx.spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", first)
        .option("endingVersion", last)
        .load(path)
    )
    names = [c.name for c in sink.table.columns if not c.virtual]
    changes = feed.select(
        F.col("_change_type").alias("_ct"),
        F.col("_commit_version").alias("_commit_version"),
        *[F.col(f"`{n}`") for n in names],
    )
    mapping = F.create_map(*[x for k, v in _CDF_OPS.items() for x in (F.lit(k), F.lit(v))])
    post = F.col("_ct").isin("insert", "update_postimage").cast("int")
    changes = changes.withColumn("op", mapping[F.col("_ct")]).withColumn("_post", post).drop("_ct")
    # a commit is atomic: its last image of a key is the change (an overwrite's delete and re-insert of
    # a row is no change to send as a tombstone and a value)
    in_commit = Window.partitionBy(*sink.table.primary_key, "_commit_version").orderBy(F.col("_post").desc())
    changes = changes.withColumn("_n", F.row_number().over(in_commit)).where("_n = 1").drop("_n")
    return write_changelog(
        changes,
        sink.table,
        ctx.connection(sink.connection, sink.table),
        order_by=["_commit_version", "_post"],
    )
