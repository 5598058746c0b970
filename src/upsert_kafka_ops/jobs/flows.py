"""Topic-to-topic, publishing and topic backfills.

Topic-to-topic picks its execution path from what Spark can compute incrementally and exactly
(``research/flink-sql-on-spark.md``): when every source is append-only and Spark's streaming checker
accepts the query in update mode, it runs with Structured Streaming (``Trigger.AvailableNow``, a
checkpoint, ``foreachBatch`` into the upsert sink). Otherwise (an upsert source, COUNT DISTINCT, an
aggregation of an aggregation, ...) each run is a bounded recompute written with ``write_snapshot``.
The result says which path ran and why.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from upsert_kafka_ops.engine.warehouse import fault_point
from upsert_kafka_ops.errors import SpecError, UpsertKafkaOpsError
from upsert_kafka_ops.jobs.spec import (
    AppendSource,
    BackfillJob,
    PublishJob,
    QuerySource,
    TopicSink,
    TopicToTopicJob,
    UpsertSource,
)
from upsert_kafka_ops.spec.connection import KafkaConnection
from upsert_kafka_ops.spec.table import UpsertKafkaTable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from upsert_kafka_ops.engine.results import RunResult
    from upsert_kafka_ops.jobs.run import JobResult, _Runner

log = logging.getLogger("upsert_kafka_ops.jobs")
QUERY_FILE = "_upsert_kafka_ops_query.json"


class CheckpointMismatch(UpsertKafkaOpsError):
    """The streaming checkpoint was written by a different query or sources."""


def _conform(df: DataFrame, table: UpsertKafkaTable, what: str) -> DataFrame:
    """Columns by position to the sink's names and types (Flink's INSERT INTO rule)."""
    from pyspark.sql import functions as F

    cols = [c for c in table.columns if not c.virtual]
    if len(df.columns) != len(cols):
        raise SpecError(
            what,
            f"the query gives {len(df.columns)} columns ({', '.join(df.columns)}) but the sink table has "
            f"{len(cols)} ({', '.join(c.name for c in cols)}).",
            "select the sink's columns, in order.",
        )
    return df.select(
        *[
            F.col(f"`{src}`").cast(c.sql_type.to_spark()).alias(c.name)
            for src, c in zip(df.columns, cols, strict=True)
        ]
    )


def _result(runner: _Runner, job: Any, **kw: Any) -> JobResult:
    from upsert_kafka_ops.jobs.run import JobResult

    return JobResult(job=job.name, kind=job.kind, **kw)


# -- backfill into a topic ------------------------------------------------------------------------
def run_backfill_topic(runner: _Runner, job: BackfillJob, sink: TopicSink) -> JobResult:
    """Bounded earliest -> end, written with write_snapshot (brings the topic to the snapshot; not
    atomic: a consumer may see some keys updated before others)."""
    from upsert_kafka_ops.engine import materialize, write_snapshot

    assert isinstance(job.source, UpsertSource)  # the spec refuses CDC sources with topic targets
    read = materialize(
        runner.spark, job.source.table, runner.connection(job.source.connection), until=job.until_bound()
    )
    try:
        written = write_snapshot(read.df, sink.table, runner.connection(sink.connection))
    finally:
        read.df.unpersist()
    r = read.result
    return _result(
        runner,
        job,
        mode="full",
        execution="snapshot",
        target=f"kafka-topic:{','.join(sink.table.topic or [])}",
        records_read=r.records_in,
        records_written=written.records_out - written.tombstones_out,
        tombstones_written=written.tombstones_out,
        start_offsets=r.start_offsets,
        end_offsets=r.end_offsets,
        read=r.to_dict(),
        write=written.to_dict(),
    )


# -- topic -> topic -------------------------------------------------------------------------------
def streaming_verdict(
    spark: SparkSession, job: TopicToTopicJob, connections: Mapping[str, KafkaConnection]
) -> tuple[bool, str]:
    """Whether the query can run incrementally and exactly, and why (or why not)."""
    from upsert_kafka_ops.formats.cdc_json import is_cdc

    changelogs = [
        n for n, s in job.sources.items() if isinstance(s, AppendSource) and is_cdc(s.table.value_format)
    ]
    if changelogs:
        return False, (
            f"source(s) {', '.join(changelogs)} are CDC changelogs (updates and deletes): an incremental query "
            "over them needs retractions, which Spark's streaming does not have; each run recomputes the snapshot"
        )
    upserts = [name for name, s in job.sources.items() if not isinstance(s, AppendSource)]
    if upserts:
        return False, (
            f"source(s) {', '.join(upserts)} are upsert tables: an incremental query over an updating input "
            "needs retractions, which Spark's streaming does not have; each run recomputes the snapshot"
        )
    views = _register_streams(spark, job, connections)
    try:
        df = spark.sql(job.query)
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        checker = jvm.org.apache.spark.sql.catalyst.analysis.UnsupportedOperationChecker
        mode = jvm.org.apache.spark.sql.streaming.OutputMode.Update()
        try:
            checker.checkForStreaming(df._jdf.queryExecution().analyzed(), mode)
        except Exception as exc:  # py4j wraps the AnalysisException
            text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            reason = text.split(":", 1)[-1].strip() if "Exception" in text else text
            return (
                False,
                f"Spark cannot run this query incrementally ({_short(reason)}); each run recomputes it",
            )
        return True, "append-only sources and a query Spark runs incrementally in update mode"
    except Exception as exc:
        if isinstance(exc, UpsertKafkaOpsError):
            raise
        return False, f"Spark cannot run this query as a stream ({_short(str(exc))}); each run recomputes it"
    finally:
        for v in views:
            spark.catalog.dropTempView(v)


def _short(text: str) -> str:
    first = text.strip().splitlines()[0] if text.strip() else text
    return first[:300]


def _register_streams(
    spark: SparkSession, job: TopicToTopicJob, connections: Mapping[str, KafkaConnection]
) -> list[str]:
    from pyspark.sql import functions as F

    from upsert_kafka_ops.engine.source import decode_append

    views = []
    for name, src in job.sources.items():
        assert isinstance(src, AppendSource)
        raw = _stream_reader(spark, src, connections[src.connection]).load()
        decoded = decode_append(src.table, raw)
        vopts = {k.split(".", 2)[2]: v for k, v in src.table.format_options.items() if k.startswith("value.")}
        if vopts.get("ignore-parse-errors", "false").lower() == "true":
            decoded = decoded.where("NOT _bad")
        else:  # as read_append: an undecodable record stops the run, naming its position
            decoded = decoded.where(
                F.when(
                    F.col("_bad"),
                    F.raise_error(
                        F.concat(
                            F.lit("Cannot decode the value of the record at topic "), F.col("topic"),
                            F.lit(", partition "), F.col("partition").cast("string"), F.lit(", offset "),
                            F.col("offset").cast("string"),
                            F.lit(". Set 'value.<format>.ignore-parse-errors' = 'true' to skip such records."),
                        )
                    ),
                ).otherwise(F.lit(True))
            )  # fmt: skip
        decoded = decoded.drop("_bad", "topic", "partition", "offset")
        decoded.createOrReplaceTempView(name)
        views.append(name)
    return views


def _stream_reader(spark: SparkSession, src: AppendSource, conn: KafkaConnection) -> Any:
    table = src.table
    options = {f"kafka.{k}": v for k, v in table.properties.items() if k != "bootstrap.servers"}
    options.update(conn.to_spark_options())
    options.setdefault("kafka.isolation.level", "read_committed")
    reader = spark.readStream.format("kafka").options(**options).option("startingOffsets", "earliest")
    if table.topic_pattern is not None:
        return reader.option("subscribePattern", table.topic_pattern)
    return reader.option("subscribe", ",".join(table.topic or []))


def _fingerprint(job: TopicToTopicJob, connections: Mapping[str, KafkaConnection]) -> dict[str, Any]:
    """What a checkpoint is tied to: the query, the sources and the sink, and their clusters."""
    sources = {
        k: {
            "table": json.loads(v.table.model_dump_json()),
            "cluster": connections[v.connection].bootstrap_servers,
        }
        for k, v in sorted(job.sources.items())
    }
    sink = {"table": json.loads(job.sink.table.model_dump_json()),
            "cluster": connections[job.sink.connection].bootstrap_servers}  # fmt: skip
    text = json.dumps(
        {"query": " ".join(job.query.split()), "sources": sources, "sink": sink}, sort_keys=True
    )
    return {"sha256": hashlib.sha256(text.encode()).hexdigest(), "query": job.query}


def _checkpoint(job: TopicToTopicJob) -> str:
    if not job.checkpoint_location:
        raise SpecError(
            "checkpoint_location",
            f"job {job.name!r} runs as a stream and needs a checkpoint folder.",
            "set checkpoint_location (a folder that persists between runs), or execution: snapshot.",
        )
    if "://" in job.checkpoint_location and not job.checkpoint_location.startswith("file:"):
        raise SpecError(
            "checkpoint_location",
            f"{job.checkpoint_location!r}: remote checkpoint folders are not supported yet (the query fingerprint "
            "beside the checkpoint is read through the local file system).",
            "use a local or mounted folder.",
        )
    return job.checkpoint_location


def _check_fingerprint(
    job: TopicToTopicJob, location: str, connections: Mapping[str, KafkaConnection]
) -> None:
    folder = Path(location)
    file = folder / QUERY_FILE
    want = _fingerprint(job, connections)
    if file.exists():
        have = json.loads(file.read_text())
        if have.get("sha256") != want["sha256"]:
            raise CheckpointMismatch(
                f"job {job.name!r}: the query, its sources or its sink changed since the checkpoint {location} was written; "
                "Spark cannot continue a stream whose state no longer matches. Reset it with "
                f"`upsert-kafka-ops reset-checkpoint PIPELINE --job {job.name}` (the next run reprocesses the "
                "sources from the earliest offset; upserts make the re-sent rows harmless)."
            )
    else:
        folder.mkdir(parents=True, exist_ok=True)
        file.write_text(json.dumps(want, sort_keys=True))


def reset_checkpoint(job: TopicToTopicJob) -> bool:
    """Delete the streaming checkpoint of ``job``; the next run starts from the earliest offset."""
    import shutil

    location = _checkpoint(job)
    if not Path(location).exists():
        return False
    shutil.rmtree(location)
    return True


def run_topic_to_topic(runner: _Runner, job: TopicToTopicJob) -> JobResult:
    spark = runner.spark
    if job.execution == "snapshot":
        ok, reason = False, "execution: snapshot was requested"
    else:
        ok, reason = streaming_verdict(spark, job, runner.pipeline.connections)
        if job.execution == "streaming" and not ok:
            raise SpecError(
                "execution", f"job {job.name!r} cannot stream: {reason}.", "use execution: auto or snapshot."
            )
    if ok:
        return _run_streaming(runner, job, reason)
    return _run_snapshot(runner, job, reason)


def _run_snapshot(runner: _Runner, job: TopicToTopicJob, reason: str) -> JobResult:
    from upsert_kafka_ops.engine import materialize, read_append, write_snapshot
    from upsert_kafka_ops.engine.cdc import materialize_cdc
    from upsert_kafka_ops.formats.cdc_json import is_cdc

    spark = runner.spark
    reads = []
    records = 0
    starts: dict[str, dict[str, int]] = {}
    ends: dict[str, dict[str, int]] = {}
    try:
        for name, src in job.sources.items():
            conn = runner.connection(src.connection)
            if isinstance(src, AppendSource) and is_cdc(src.table.value_format):
                read = materialize_cdc(spark, src.table, conn, key=src.key or None)
            elif isinstance(src, AppendSource):
                read = read_append(spark, src.table, conn)
            else:
                read = materialize(spark, src.table, conn)
            reads.append(read)
            read.df.createOrReplaceTempView(name)
            records += read.result.records_in
            starts.update(read.result.start_offsets)
            ends.update(read.result.end_offsets)
        df = _conform(spark.sql(job.query), job.sink.table, "query")
        written = write_snapshot(df, job.sink.table, runner.connection(job.sink.connection))
    finally:
        for name in job.sources:
            spark.catalog.dropTempView(name)
        for read in reads:
            read.df.unpersist()
    return _result(
        runner,
        job,
        mode="full",
        execution="snapshot",
        reason=reason,
        target=f"kafka-topic:{','.join(job.sink.table.topic or [])}",
        records_read=records,
        records_written=written.records_out - written.tombstones_out,
        tombstones_written=written.tombstones_out,
        start_offsets=starts,
        end_offsets=ends,
        write=written.to_dict(),
    )


def _run_streaming(runner: _Runner, job: TopicToTopicJob, reason: str) -> JobResult:
    from pyspark.sql import functions as F

    from upsert_kafka_ops.engine import write_changelog

    spark = runner.spark
    location = _checkpoint(job)
    _check_fingerprint(job, location, runner.pipeline.connections)
    sink_table = job.sink.table
    sink_conn = runner.connection(job.sink.connection)
    totals = {"batches": 0, "rows": 0, "tombstones": 0}

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        # A projection may give a key several rows in one micro-batch. Without a shuffle each Spark
        # partition is one Kafka partition's range in offset order, so the generated id orders them.
        rows = _conform(batch, sink_table, "query").withColumn("op", F.lit("+U"))
        rows = rows.withColumn("_seq", F.monotonically_increasing_id()).persist()
        try:
            res = write_changelog(rows, sink_table, sink_conn, order_by="_seq")
        finally:
            rows.unpersist()
        totals["batches"] += 1
        totals["rows"] += res.records_out - res.tombstones_out
        totals["tombstones"] += res.tombstones_out
        fault_point("in-foreach-batch")

    views = _register_streams(spark, job, runner.pipeline.connections)
    try:
        query = (
            spark.sql(job.query)
            .writeStream.outputMode("update")
            .option("checkpointLocation", location)
            .trigger(availableNow=True)
            .foreachBatch(write_batch)
            .queryName(f"uko_{job.name}".replace("-", "_").replace(".", "_"))
            .start()
        )
        try:
            query.awaitTermination()
        except Exception as exc:
            text = str(exc)
            if "state" in text.lower() and ("schema" in text.lower() or "incompatible" in text.lower()):
                raise CheckpointMismatch(
                    f"job {job.name!r}: Spark cannot continue from checkpoint {location}: {_short(text)}. Reset it "
                    f"with `upsert-kafka-ops reset-checkpoint PIPELINE --job {job.name}`."
                ) from None
            raise
        progress = [p for p in query.recentProgress if p]
        records = sum(int(p.get("numInputRows", 0)) for p in progress) if progress else 0
        ends: dict[str, dict[str, int]] = {}
        for p in progress:
            for s in p.get("sources", []):
                end = s.get("endOffset")
                if isinstance(end, str):
                    end = json.loads(end)
                if isinstance(end, dict):
                    for t, parts in end.items():
                        ends.setdefault(t, {}).update({str(k): int(v) for k, v in parts.items()})
    finally:
        for v in views:
            spark.catalog.dropTempView(v)
    return _result(
        runner,
        job,
        mode="incremental",
        execution="streaming",
        reason=reason,
        target=f"kafka-topic:{','.join(sink_table.topic or [])}",
        records_read=records,
        records_written=totals["rows"],
        tombstones_written=totals["tombstones"],
        end_offsets=ends,
        write={"batches": totals["batches"]},
    )


# -- publish --------------------------------------------------------------------------------------
_CDF_OPS = {"insert": "+I", "update_postimage": "+U", "update_preimage": "-U", "delete": "-D"}


def _publish_state_file(job: PublishJob, table_path: str) -> Path:
    base = Path(job.state_path) if job.state_path else Path(table_path)
    return base / f"_upsert_kafka_ops_publish_{job.name}.json"


def run_publish(runner: _Runner, job: PublishJob) -> JobResult:
    from pyspark.sql import functions as F

    from upsert_kafka_ops.engine import write_changelog, write_snapshot

    spark = runner.spark
    sink = job.sink
    conn = runner.connection(sink.connection)
    target = f"kafka-topic:{','.join(sink.table.topic or [])}"
    if isinstance(job.source, QuerySource):
        df = _conform(spark.sql(job.source.query), sink.table, "source.query")
        snapshot = write_snapshot(df, sink.table, conn)
        return _result(
            runner,
            job,
            mode="full",
            execution="snapshot",
            target=target,
            records_read=snapshot.records_in,
            records_written=snapshot.records_out - snapshot.tombstones_out,
            tombstones_written=snapshot.tombstones_out,
            write=snapshot.to_dict(),
        )

    from delta.tables import DeltaTable

    path = job.source.path
    state_file = _publish_state_file(job, path)
    latest_row = DeltaTable.forPath(spark, path).history(1).select("version").first()
    assert latest_row is not None
    latest = int(latest_row["version"])
    last = json.loads(state_file.read_text())["version"] if state_file.exists() else None
    written: RunResult | None = None
    if last is None:
        # first run: publish the table as of `latest` as a snapshot, then follow its change feed
        snap = spark.read.format("delta").option("versionAsOf", latest).load(path)
        written = write_snapshot(_conform(snap, sink.table, "source"), sink.table, conn)
        reason, records = f"first run: snapshot of version {latest}", written.records_in
    elif last >= latest:
        reason, records = f"no new Delta version after {last}", 0
    else:
        feed = (
            spark.read.format("delta")
            .option("readChangeFeed", "true")
            .option("startingVersion", last + 1)
            .option("endingVersion", latest)
            .load(path)
        )
        names = [c.name for c in sink.table.columns if not c.virtual]
        changes = feed.select(
            F.col("_change_type").alias("_ct"),
            F.col("_commit_version").alias("_commit_version"),
            *[F.col(f"`{n}`") for n in names],
        )
        mapping = F.create_map(*[x for k, v in _CDF_OPS.items() for x in (F.lit(k), F.lit(v))])
        # inside one commit an overwrite gives a key both a delete and an insert: the post-image wins
        post = F.col("_ct").isin("insert", "update_postimage").cast("int")
        changes = changes.withColumn("op", mapping[F.col("_ct")]).withColumn("_post", post).drop("_ct")
        written = write_changelog(changes, sink.table, conn, order_by=["_commit_version", "_post"])
        reason, records = f"change data feed of versions {last + 1}..{latest}", written.records_in
    fault_point("after-publish-write")
    tmp = state_file.with_suffix(".tmp")
    tmp.write_text(json.dumps({"version": latest}))
    tmp.replace(state_file)
    return _result(
        runner,
        job,
        mode="incremental" if last is not None else "full",
        execution="batch",
        reason=reason,
        target=target,
        records_read=records,
        records_written=(written.records_out - written.tombstones_out) if written else 0,
        tombstones_written=written.tombstones_out if written else 0,
        write=written.to_dict() if written else {},
    )
