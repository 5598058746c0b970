"""Topic-to-topic as a Structured Streaming query: ``Trigger.AvailableNow`` over a checkpoint,
``foreachBatch`` into the sink (an upsert table in update mode, a plain kafka table in append mode).

It runs when every source is append-only and Spark's streaming checker accepts the query in the sink's
mode (:func:`streaming_verdict`); the checkpoint is tied to the query, its sources and its sink by a
fingerprint kept beside it, so a changed query is refused instead of continuing from foreign state.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from upsert_kafka_ops import spark_compat
from upsert_kafka_ops.engine.session import use_krb5_conf_in_driver, use_storage
from upsert_kafka_ops.errors import SpecError, UpsertKafkaOpsError
from upsert_kafka_ops.jobs.core import JobResult, RunContext, conform, topic_target
from upsert_kafka_ops.jobs.faults import fault_point
from upsert_kafka_ops.jobs.folders import delete_folder, file_names, has_files, read_text, write_text
from upsert_kafka_ops.pipeline import KafkaSource, TopicToTopicJob
from upsert_kafka_ops.spec.connection import KafkaConnection, client_properties, for_table
from upsert_kafka_ops.spec.storage import S3Storage, split_s3
from upsert_kafka_ops.spec.table import KafkaTable, UpsertKafkaTable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger("upsert_kafka_ops.jobs")

QUERY_FILE = "_upsert_kafka_ops_query.json"


class CheckpointMismatch(UpsertKafkaOpsError):
    """The streaming checkpoint was written by a different query or sources."""


def streaming_verdict(
    spark: SparkSession, job: TopicToTopicJob, connections: Mapping[str, KafkaConnection]
) -> tuple[bool, str]:
    """Whether the query can run incrementally and exactly, and why (or why not)."""
    from upsert_kafka_ops.formats.cdc_json import is_cdc

    changelogs = [
        n for n, s in job.sources.items() if isinstance(s, KafkaSource) and is_cdc(s.table.value_format)
    ]
    if changelogs:
        return False, (
            f"source(s) {', '.join(changelogs)} are CDC changelogs (updates and deletes): an incremental query "
            "over them needs retractions, which Spark's streaming does not have; each run recomputes the snapshot"
        )
    bounded = [
        n for n, s in job.sources.items() if isinstance(s, KafkaSource) and s.table.end_position() != "latest"
    ]
    if bounded:
        return False, (
            f"source(s) {', '.join(bounded)} set scan.bounded.*: a stream reads on to the end of its topics, "
            "so each run recomputes the snapshot up to the bound"
        )
    upserts = [name for name, s in job.sources.items() if not isinstance(s, KafkaSource)]
    if upserts:
        return False, (
            f"source(s) {', '.join(upserts)} are upsert tables: an incremental query over an updating input "
            "needs retractions, which Spark's streaming does not have; each run recomputes the snapshot"
        )
    # the streams only to analyze the query: where they would start does not matter here
    views = _register_streams(spark, job, connections, fresh=False)
    try:
        df = spark.sql(job.query)
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        checker = jvm.org.apache.spark.sql.catalyst.analysis.UnsupportedOperationChecker
        append = job.sink.appends
        modes = jvm.org.apache.spark.sql.streaming.OutputMode
        mode = modes.Append() if append else modes.Update()
        try:
            checker.checkForStreaming(df._jdf.queryExecution().analyzed(), mode)
        except Exception as exc:  # py4j wraps the AnalysisException
            text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            reason = text.split(":", 1)[-1].strip() if "Exception" in text else text
            return (
                False,
                f"Spark cannot run this query incrementally ({_short(reason)}); each run recomputes it",
            )
        return (
            True,
            f"append-only sources and a query Spark runs incrementally in {'append' if append else 'update'} mode",
        )
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
    spark: SparkSession, job: TopicToTopicJob, connections: Mapping[str, KafkaConnection], fresh: bool
) -> list[str]:
    from pyspark.sql import functions as F

    from upsert_kafka_ops.engine.source import decode_append

    views = []
    for name, src in job.sources.items():
        assert isinstance(src, KafkaSource)
        raw = _stream_reader(spark, src, connections[src.connection], fresh).load()
        decoded = decode_append(src.table, raw).where("NOT _tombstone")  # no row, as in Flink
        vopts = {k.split(".", 2)[2]: v for k, v in src.table.format_options.items() if k.startswith("value.")}
        if vopts.get("ignore-parse-errors", "false").lower() == "true":
            decoded = decoded.where("NOT _bad")
        else:  # as read_append: an undecodable record stops the run, naming its position
            decoded = decoded.where(
                F.when(
                    F.col("_bad"),
                    F.raise_error(
                        F.concat(
                            F.lit("Cannot decode the value of the record at topic "),
                            F.col("_topic"),
                            F.lit(", partition "),
                            F.col("_partition").cast("string"),
                            F.lit(", offset "),
                            F.col("_offset").cast("string"),
                            F.lit(
                                ". Set 'value.<format>.ignore-parse-errors' = 'true' to skip such records."
                            ),
                        )
                    ),
                ).otherwise(F.lit(True))
            )
        decoded = decoded.drop("_bad", "_tombstone", "_topic", "_partition", "_offset")
        decoded.createOrReplaceTempView(name)
        views.append(name)
    return views


def _fresh(location: str, storage: S3Storage | None) -> bool:
    """Whether the checkpoint holds no progress yet (then its sources' start applies)."""
    return not has_files(location.rstrip("/") + "/offsets", storage)


def _stream_reader(spark: SparkSession, src: KafkaSource, conn: KafkaConnection, fresh: bool) -> Any:
    table = src.table
    options = {f"kafka.{k}": v for k, v in client_properties(table.properties).items()}
    table_conn = for_table(conn, table.properties)
    options.update(table_conn.to_spark_options())
    use_krb5_conf_in_driver(spark, table_conn)
    options.setdefault("kafka.isolation.level", "read_committed")
    reader = spark.readStream.format("kafka").options(**options)
    reader = reader.option("startingOffsets", _starting_offsets(table, conn, fresh))
    if table.topic_pattern is not None:
        return reader.option("subscribePattern", table.topic_pattern)
    return reader.option("subscribe", ",".join(table.topic or []))


def _starting_offsets(table: KafkaTable, conn: KafkaConnection, fresh: bool) -> str:
    """Spark's ``startingOffsets`` for the table's ``scan.startup.*``: where a new checkpoint starts,
    as Flink's start applies to a job started without state (a checkpoint's offsets win after)."""
    from upsert_kafka_ops.engine.bounds import offsets_to_json, resolve_bounds

    start = table.start_position()
    if isinstance(start, str) or not fresh:  # with progress in the checkpoint Spark ignores the start
        return start if isinstance(start, str) else "earliest"
    bounds = resolve_bounds(table, for_table(conn, table.properties).to_librdkafka(), start, "latest")
    return json.dumps(offsets_to_json(bounds.start))


def _fingerprint(job: TopicToTopicJob, connections: Mapping[str, KafkaConnection]) -> dict[str, Any]:
    """What a checkpoint is tied to: the query, the sources and the sink, and their clusters."""
    sources = {
        k: {
            "table": json.loads(v.table.model_dump_json()),
            "cluster": connections[v.connection].bootstrap_servers,
        }
        for k, v in sorted(job.sources.items())
    }
    sink = {
        "table": json.loads(job.sink.table.model_dump_json()),
        "cluster": connections[job.sink.connection].bootstrap_servers,
    }
    text = json.dumps(
        {"query": " ".join(job.query.split()), "sources": sources, "sink": sink}, sort_keys=True
    )
    return {"sha256": hashlib.sha256(text.encode()).hexdigest(), "query": job.query}


def _checkpoint(job: TopicToTopicJob) -> str:
    if job.checkpoint is None:
        raise SpecError(
            "checkpoint",
            f"job {job.name!r} runs as a stream and needs a checkpoint folder.",
            "set checkpoint: {path: ...} (a folder that persists between runs), or execution: snapshot.",
        )
    return job.checkpoint.path


def _check_fingerprint(
    job: TopicToTopicJob, location: str, connections: Mapping[str, KafkaConnection], storage: S3Storage | None
) -> None:
    want = _fingerprint(job, connections)
    text = read_text(location, QUERY_FILE, storage)
    if text is not None:
        have = json.loads(text)
        if have.get("sha256") != want["sha256"]:
            raise CheckpointMismatch(
                f"job {job.name!r}: the query, its sources or its sink changed since the checkpoint {location} was written; "
                "Spark cannot continue a stream whose state no longer matches. Reset it with "
                f"`upsert-kafka-ops reset-checkpoint PIPELINE --job {job.name}` (the next run reprocesses the "
                "sources from where their scan.startup.mode says, the earliest offset by default; upserts make "
                "the re-sent rows harmless)."
            )
    else:
        write_text(location, QUERY_FILE, json.dumps(want, sort_keys=True), storage)


def reset_checkpoint(job: TopicToTopicJob, storage: S3Storage | None = None) -> bool:
    """Delete the streaming checkpoint of ``job``; the next run starts where its sources'
    ``scan.startup.mode`` says (the earliest offset by default).

    :param storage: the store of a checkpoint on S3 (``Pipeline.checkpoint_storage_of``)."""
    return delete_folder(_checkpoint(job), storage)


def _open(
    ctx: RunContext, job: TopicToTopicJob
) -> tuple[str, dict[str, int], Callable[[DataFrame, int], None], list[str]]:
    """What a run of the job's query needs: its checkpoint (checked against the query's fingerprint),
    the micro-batches' counts, their writer into the sink, and the sources' views (the caller drops
    them)."""
    location = _checkpoint(job)
    storage = ctx.pipeline.checkpoint_storage_of(job)
    if storage is not None:  # the session's S3A settings for the checkpoint's bucket
        use_storage(ctx.spark, storage, split_s3(location)[0])
    _check_fingerprint(job, location, ctx.pipeline.connections, storage)
    totals = {"batches": 0, "rows": 0, "tombstones": 0}
    write_batch = _batch_writer(job.sink.table, ctx.connection(job.sink.connection, job.sink.table), totals)
    views = _register_streams(ctx.spark, job, ctx.pipeline.connections, _fresh(location, storage))
    return location, totals, write_batch, views


def run_streaming(ctx: RunContext, job: TopicToTopicJob, reason: str) -> JobResult:
    spark = ctx.spark
    sink_table = job.sink.table
    location, totals, write_batch, views = _open(ctx, job)

    def start() -> StreamingQuery:
        return (
            spark.sql(job.query)
            .writeStream.outputMode("append" if isinstance(sink_table, KafkaTable) else "update")
            .option("checkpointLocation", location)
            .trigger(availableNow=True)
            .foreachBatch(write_batch)
            .queryName(f"uko_{job.name}".replace("-", "_").replace(".", "_"))
            .start()
        )

    replayed: dict[str, dict[str, int]] = {}
    try:
        query = start()
        try:
            _await(query, job, location)
        except Exception as exc:
            if not spark_compat.is_replayed_batch_progress_bug(exc):
                raise
            # Spark 4.1.0-4.1.1 (SPARK-55271): the replayed batch is written and committed; the next
            # start continues after it. Its end offsets are the checkpoint's; its record count is lost.
            replayed = _last_batch_ends(location, ctx.pipeline.checkpoint_storage_of(job))
            log.warning(
                "job %s: Spark %s failed reporting the progress of the batch it replayed from its "
                "checkpoint (SPARK-55271), after committing it; continuing after it (the run's "
                "records_read leaves that batch out)",
                job.name,
                spark.version,
            )
            query = start()
            _await(query, job, location)
        records, ends = _progress_totals(query.recentProgress)
        for topic, parts in replayed.items():
            ends[topic] = {**parts, **ends.get(topic, {})}
    finally:
        for v in views:
            spark.catalog.dropTempView(v)
    return ctx.result(
        mode="incremental",
        execution="streaming",
        reason=reason,
        target=topic_target(sink_table),
        records_read=records,
        records_written=totals["rows"],
        tombstones_written=totals["tombstones"],
        end_offsets=ends,
        write={"batches": totals["batches"]},
    )


class ContinuousQuery:
    """A topic-to-topic job's streaming query on a processing-time trigger: a continuous job's, started
    once over the job's checkpoint (the same rules as its bounded runs) and left running. Spark starts
    a micro-batch each ``interval_ms`` when its sources hold new records; :meth:`collect` reports the
    micro-batches that ended since it was last called (from the query's progress) and commits their
    end offsets to the job's consumer group; :meth:`stop` lets a running micro-batch end first."""

    def __init__(
        self,
        ctx: RunContext,
        job: TopicToTopicJob,
        reason: str,
        interval_ms: int,
        commit: Callable[[dict[str, dict[str, int]]], None],
    ) -> None:
        spark = ctx.spark
        self.ctx, self.job, self.reason, self.commit = ctx, job, reason, commit
        sink_table = job.sink.table
        location, self.totals, write_batch, views = _open(ctx, job)
        self._counted = dict(self.totals)
        try:  # the query's plan holds the streams: the views can go once it started
            self.query = (
                spark.sql(job.query)
                .writeStream.outputMode("append" if isinstance(sink_table, KafkaTable) else "update")
                .option("checkpointLocation", location)
                .trigger(processingTime=f"{interval_ms} milliseconds")
                .foreachBatch(write_batch)
                .queryName(f"uko_{job.name}".replace("-", "_").replace(".", "_"))
                .start()
            )
        finally:
            for v in views:
                spark.catalog.dropTempView(v)
        self._seen = -1  # the last micro-batch collect() reported
        self._ends: dict[str, dict[str, int]] = {}

    def error(self) -> Exception | None:
        """Why the query stopped, when it did (it committed nothing of the micro-batch it failed in)."""
        if self.query.isActive:
            return None
        exc = self.query.exception()
        if exc is not None:
            return exc
        return SpecError(
            "trigger.continuous",
            f"the streaming query of job {self.job.name!r} was stopped outside this process.",
            "start the job again; it continues from its checkpoint.",
        )

    def collect(self) -> JobResult | None:
        """The micro-batches that read records since the last call, as one result, their end offsets
        committed to the consumer group; None when none did."""
        # only micro-batches that read records: Spark also reports an idle query now and then, under
        # the id of the batch it will run next
        progress = spark_compat.progress_documents(self.query.recentProgress)
        new = [
            p for p in progress if int(p.get("batchId", -1)) > self._seen and int(p.get("numInputRows", 0))
        ]
        if not new:
            return None
        self._seen = max(int(p["batchId"]) for p in new)
        records, ends = _progress_totals(new)
        for topic, parts in ends.items():
            self._ends.setdefault(topic, {}).update(parts)
        self.commit(self._ends)
        totals, counted = dict(self.totals), self._counted
        self._counted = totals
        seconds = sum(float((p.get("durationMs") or {}).get("triggerExecution", 0)) for p in new) / 1000
        return self.ctx.result(
            duration_s=round(seconds, 3),
            mode="incremental",
            execution="streaming",
            reason=self.reason,
            target=topic_target(self.job.sink.table),
            records_read=records,
            records_written=totals["rows"] - counted["rows"],
            tombstones_written=totals["tombstones"] - counted["tombstones"],
            end_offsets={t: dict(p) for t, p in self._ends.items()},
            write={"batches": len(new)},
        )

    def triggered(self) -> bool:
        """Whether the query ran a trigger since it started (one with nothing to read included)."""
        return bool(self.query.recentProgress)

    def stop(self, timeout_s: float = 300.0) -> None:
        """Stop the query once no micro-batch runs (one that is running ends and commits first, for up
        to ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        while (
            self.query.isActive and self.query.status.get("isTriggerActive") and time.monotonic() < deadline
        ):
            time.sleep(0.05)
        self.query.stop()


def _batch_writer(
    sink_table: UpsertKafkaTable | KafkaTable, sink_conn: KafkaConnection, totals: dict[str, int]
) -> Callable[[DataFrame, int], None]:
    """The ``foreachBatch`` function: each micro-batch written to the sink (appended to a plain kafka
    table, else as upserts in their order), counted into ``totals``."""
    from pyspark.sql import functions as F

    from upsert_kafka_ops.engine import write_append, write_changelog

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        if isinstance(sink_table, KafkaTable):  # an append-only query into a plain kafka table
            res = write_append(conform(batch, sink_table, "query"), sink_table, sink_conn)
            totals["batches"] += 1
            totals["rows"] += res.records_out
            fault_point("in-foreach-batch")
            return
        # A projection may give a key several rows in one micro-batch. Without a shuffle each Spark
        # partition is one Kafka partition's range in offset order, so the generated id orders them.
        rows = conform(batch, sink_table, "query").withColumn("op", F.lit("+U"))
        rows = rows.withColumn("_seq", F.monotonically_increasing_id()).persist()
        try:
            res = write_changelog(rows, sink_table, sink_conn, order_by="_seq")
        finally:
            rows.unpersist()
        totals["batches"] += 1
        totals["rows"] += res.records_out - res.tombstones_out
        totals["tombstones"] += res.tombstones_out
        fault_point("in-foreach-batch")

    return write_batch


def _await(query: StreamingQuery, job: TopicToTopicJob, location: str) -> None:
    """Wait for the query's last batch; a checkpoint whose state the query cannot continue from is a
    :class:`CheckpointMismatch` naming the reset command."""
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


def _last_batch_ends(location: str, storage: S3Storage | None) -> dict[str, dict[str, int]]:
    """The end offsets of the last batch in the checkpoint's offset log (``offsets/<N>``: a version
    line, the batch's metadata, then one line of ``{"topic": {"partition": offset}}`` per source)."""
    folder = location.rstrip("/") + "/offsets"
    batches = [int(n) for n in file_names(folder, storage) if n.isdigit()]
    text = read_text(folder, str(max(batches)), storage) if batches else None
    ends: dict[str, dict[str, int]] = {}
    for line in (text or "").splitlines()[2:]:
        doc = json.loads(line) if line.strip().startswith("{") else {}
        for topic, parts in doc.items():
            if isinstance(parts, dict):
                ends.setdefault(topic, {}).update({str(p): int(o) for p, o in parts.items()})
    return ends


def _progress_totals(progress: list[Any]) -> tuple[int, dict[str, dict[str, int]]]:
    """The records a query's batches read and the end offsets they reached, from its progress."""
    batches = spark_compat.progress_documents(progress)
    records = sum(int(p.get("numInputRows", 0)) for p in batches)
    ends: dict[str, dict[str, int]] = {}
    for p in batches:
        for source in p.get("sources", []):
            end = source.get("endOffset")
            if isinstance(end, str):
                end = json.loads(end)
            if isinstance(end, dict):
                for t, parts in end.items():
                    ends.setdefault(t, {}).update({str(k): int(v) for k, v in parts.items()})
    return records, ends
