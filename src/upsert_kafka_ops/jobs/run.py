"""Run a job of a pipeline: read, write the target with its offsets, report a versioned result.

``run_job(pipeline, "name")`` runs in this process (the local runtime: it uses the active
SparkSession, or builds one and stops it afterwards). ``run_spec(spec, spark)`` is what the
spark-submit driver calls with the JSON form of a one-job pipeline.

Every run of a target is serialized (a lock file beside a local table, a PostgreSQL advisory lock),
and a target stores its processed offsets atomically with its data; after a successful run the
offsets are also committed to the consumer group ``upsert-kafka-ops.<job>`` (monitoring only).
"""

from __future__ import annotations

import fcntl
import logging
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from upsert_kafka_ops.engine.warehouse import fault_point
from upsert_kafka_ops.errors import SpecError, UpsertKafkaOpsError
from upsert_kafka_ops.jobs import state as st
from upsert_kafka_ops.jobs.spec import (
    AppendSource,
    BackfillJob,
    DeltaTarget,
    MaterializeJob,
    ParquetTarget,
    Pipeline,
    PostgresTarget,
    PublishJob,
    TopicSink,
    TopicToTopicJob,
    UpsertSource,
    source_table,
)
from upsert_kafka_ops.spec.connection import KafkaConnection

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("upsert_kafka_ops.jobs")
JOB_RESULT_VERSION = 1
AnyJob = MaterializeJob | BackfillJob | TopicToTopicJob | PublishJob


class ConcurrentRunError(UpsertKafkaOpsError):
    """Another run of the same target holds it (or committed first)."""


class OffsetsError(UpsertKafkaOpsError):
    """Stored offsets do not fit the topic (recreated, truncated or past retention)."""


@dataclass
class JobResult:
    """What a job run did. JSON-serializable, versioned, no secrets."""

    job: str
    kind: str
    status: str = "succeeded"
    mode: str = "incremental"
    execution: str = "batch"
    reason: str = ""
    run: int = 0
    target: str = ""
    records_read: int = 0
    rows_upserted: int = 0
    rows_deleted: int = 0
    records_written: int = 0
    tombstones_written: int = 0
    columns_added: list[str] = field(default_factory=list)
    start_offsets: dict[str, dict[str, int]] = field(default_factory=dict)
    end_offsets: dict[str, dict[str, int]] = field(default_factory=dict)
    read: dict[str, Any] = field(default_factory=dict)
    write: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0
    version: int = JOB_RESULT_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobResult:
        if data.get("version") != JOB_RESULT_VERSION:
            raise ValueError(f"job result version {data.get('version')!r} is not {JOB_RESULT_VERSION}")
        return cls(**dict(data))


# -- entry points ----------------------------------------------------------------------------------
def run_job(
    pipeline: Pipeline,
    job: str | None = None,
    *,
    mode: Literal["incremental", "full"] | None = None,
    spark: SparkSession | None = None,
    lock_timeout_s: float = 60.0,
) -> JobResult:
    """Run one job of ``pipeline`` in this process.

    :param job: the job's name (optional when the pipeline has one job).
    :param mode: override a materialize job's mode (``full`` rebuilds from the earliest offset).
    :param spark: the session to use; default: the active one, else a new one that is stopped after.
    :param lock_timeout_s: how long to wait for another run of the same target to finish.
    """
    if job is None:
        if len(pipeline.jobs) != 1:
            raise SpecError("job", "the pipeline has several jobs.", "name the one to run.")
        job = pipeline.jobs[0].name
    spec = pipeline.job(job)
    if spark is not None:
        return _Runner(pipeline, spec, spark, mode, lock_timeout_s).run()
    from upsert_kafka_ops.runtime.session import session_for

    with session_for(job) as session:
        return _Runner(pipeline, spec, session, mode, lock_timeout_s).run()


def run_spec(spec: Mapping[str, Any], spark: SparkSession) -> dict[str, Any]:
    """The driver's entry: ``{"pipeline": {...}, "job": name, "mode": ...}`` -> the result as a dict."""
    pipeline = Pipeline.model_validate(spec["pipeline"])
    result = run_job(pipeline, spec.get("job"), mode=spec.get("mode"), spark=spark)
    return result.to_dict()


# -- locks -----------------------------------------------------------------------------------------
@contextmanager
def _file_lock(path: Path, timeout: float, what: str) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise ConcurrentRunError(
                        f"{what} is being written by another run (lock {path} held for {timeout:.0f} s). "
                        "Runs of one target are serialized: wait for the other run, or raise lock_timeout_s."
                    ) from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextmanager
def _pg_lock(conn: Any, key: int, timeout: float, what: str) -> Iterator[None]:
    deadline = time.monotonic() + timeout
    while not conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
        if time.monotonic() >= deadline:
            raise ConcurrentRunError(
                f"{what} is being written by another run (PostgreSQL advisory lock {key} held for "
                f"{timeout:.0f} s). Runs of one target are serialized: wait for the other run."
            )
        time.sleep(0.2)
    try:
        yield
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (key,))


def fold_source(
    spark: SparkSession,
    source: UpsertSource | AppendSource,
    conn: KafkaConnection,
    *,
    until: Any = None,
    strict: bool = False,
    validation: Literal["winners", "full"] = "winners",
) -> Any:
    """The latest row per key of a warehouse job's source from the earliest offset to ``until``: an
    upsert table's fold, or a CDC table's changes folded per its key (an engine ``Read``)."""
    from upsert_kafka_ops.engine import materialize
    from upsert_kafka_ops.engine.cdc import materialize_cdc

    if isinstance(source, AppendSource):
        return materialize_cdc(spark, source.table, conn, key=source.key, until=until)
    return materialize(
        spark, source.table, conn, start="earliest", until=until, strict=strict, validation=validation
    )


# -- the runner ------------------------------------------------------------------------------------
class _Runner:
    def __init__(
        self, pipeline: Pipeline, job: AnyJob, spark: SparkSession, mode: str | None, lock_timeout_s: float
    ) -> None:
        self.pipeline = pipeline
        self.job = job
        self.spark = spark
        self.mode_override = mode
        self.lock_timeout_s = lock_timeout_s
        self.began = time.monotonic()

    def connection(self, name: str) -> KafkaConnection:
        return self.pipeline.connections[name]

    def run(self) -> JobResult:
        from upsert_kafka_ops.engine.progress import ReadProgress

        log.info("job %s (%s): starting", self.job.name, self.job.kind)
        with ReadProgress(self.spark, f"job {self.job.name}"):
            return self._run()

    def _run(self) -> JobResult:
        job = self.job
        if isinstance(job, MaterializeJob):
            mode = self.mode_override or job.mode
            result = self._warehouse(job, job.target, mode, until="latest", rewind=True)
        elif isinstance(job, BackfillJob):
            if isinstance(job.target, TopicSink):
                from upsert_kafka_ops.jobs.flows import run_backfill_topic

                result = run_backfill_topic(self, job, job.target)
                commit_group_offsets(
                    self.connection(job.source.connection), job.consumer_group, result.end_offsets
                )
            else:
                result = self._warehouse(job, job.target, "full", until=job.until_bound(), rewind=job.rewind)
        elif isinstance(job, TopicToTopicJob):
            from upsert_kafka_ops.jobs.flows import run_topic_to_topic

            result = run_topic_to_topic(self, job)
            for src in job.sources.values():  # each source's offsets go to its own cluster
                topics = set(src.table.topic or []) | {
                    t
                    for t in result.end_offsets
                    if src.table.topic_pattern and re.fullmatch(src.table.topic_pattern, t)
                }
                mine = {t: o for t, o in result.end_offsets.items() if t in topics}
                commit_group_offsets(self.connection(src.connection), job.consumer_group, mine)
        else:
            from upsert_kafka_ops.jobs.flows import run_publish

            result = run_publish(self, job)
        result.duration_s = round(time.monotonic() - self.began, 3)
        log.info(
            "job %s: %s, run %s, %s records read, %s upserted, %s deleted, %s written in %.1f s",
            job.name,
            result.mode,
            result.run,
            result.records_read,
            result.rows_upserted,
            result.rows_deleted,
            result.records_written,
            result.duration_s,
        )
        return result

    # -- topic -> warehouse ------------------------------------------------------------------------
    def _warehouse(
        self,
        job: MaterializeJob | BackfillJob,
        target: DeltaTarget | PostgresTarget | ParquetTarget,
        mode: str,
        until: Any,
        rewind: bool,
    ) -> JobResult:
        conn = self.connection(job.source.connection)
        result = JobResult(job=job.name, kind=job.kind, target=target.uri)
        if isinstance(target, PostgresTarget):
            import psycopg

            from upsert_kafka_ops.engine.warehouse import pg_lock_key

            with (
                psycopg.connect(**target.conninfo(), autocommit=True) as lock_conn,
                _pg_lock(lock_conn, pg_lock_key(target.uri), self.lock_timeout_s, target.uri),
            ):
                stored = st.read_postgres_state(lock_conn, target.offsets_table, target.table)
                self._read_and_write(job, target, conn, stored, None, mode, until, rewind, result)
        else:
            if "://" in target.path and not target.path.startswith("file:"):
                raise SpecError(
                    "target.path",
                    f"{target.path!r}: remote paths are not supported yet (the stored offsets and the run lock "
                    "live beside the table and are read through the local file system).",
                    "use a local or mounted path (e.g. a volume mounted at /lake).",
                )
            local = st.local_path(target.path)
            with _file_lock(
                local.parent / f".{local.name}.upsert-kafka-ops.lock", self.lock_timeout_s, target.uri
            ):
                txns: dict[str, int] = {}
                if isinstance(target, DeltaTarget):
                    log_state = st.read_delta_log(target.path)
                    stored, txns = log_state.state, log_state.txn_versions
                else:
                    stored = st.read_parquet_state(target.path)
                self._read_and_write(job, target, conn, stored, txns, mode, until, rewind, result)
        fault_point("after-commit")
        self._commit_group(job, conn, result)
        return result

    def _read_and_write(
        self,
        job: MaterializeJob | BackfillJob,
        target: DeltaTarget | PostgresTarget | ParquetTarget,
        conn: KafkaConnection,
        stored: st.StoredState | None,
        txns: dict[str, int] | None,
        mode: str,
        until: Any,
        rewind: bool,
        result: JobResult,
    ) -> None:
        from upsert_kafka_ops.engine import read_changes, resolve_bounds
        from upsert_kafka_ops.engine.cdc import last_changes

        table = source_table(job.source)
        if isinstance(target, ParquetTarget):
            mode = "full"
        if mode == "incremental" and stored is None:
            mode, result.reason = (
                "full",
                "no stored offsets: first run builds the target from the earliest offset",
            )
        if mode == "incremental":
            missing = self._target_gaps(target, table)
            if missing:
                mode, result.reason = "full", missing
        result.mode = mode
        run = (stored.run if stored else 0) + 1
        if txns:
            run = max(run, txns.get(job.name, 0) + 1)
        result.run = run
        strict = getattr(job, "strict", False)
        validation: Literal["winners", "full"] = getattr(job, "validation", "winners")

        if mode == "incremental":
            assert stored is not None
            horizon = self._check_stored(table, conn, stored)
            if horizon:
                mode = result.mode = "full"
                result.reason = horizon
        if mode == "incremental":
            assert stored is not None
            if isinstance(job.source, AppendSource):  # a CDC source: the last change per key
                read = last_changes(
                    self.spark, job.source.table, conn, key=job.source.key, start=stored.offsets, until=until
                )
            else:
                read = read_changes(
                    self.spark,
                    table,
                    conn,
                    start=stored.offsets,
                    until=until,
                    strict=strict,
                    validation=validation,
                )
        else:
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
                    sample = ", ".join(
                        f"{t}[{p}] {e} < stored {o}" for (t, p), (o, e) in sorted(behind.items())[:3]
                    )
                    raise OffsetsError(
                        f"the backfill's end is older than what {target.uri} already holds ({sample}). "
                        "Set rewind: true to take the target back to that point."
                    )
            read = fold_source(
                self.spark, job.source, conn, until=bounds.end, strict=strict, validation=validation
            )
        r = read.result
        result.records_read = r.records_in
        result.read = r.to_dict()
        result.start_offsets, result.end_offsets = r.start_offsets, r.end_offsets
        end = {(t, int(p)): int(o) for t, parts in r.end_offsets.items() for p, o in parts.items()}
        payload = st.state_payload(
            job.name, run, end, mode, topic_ids=self._topic_ids(conn, sorted(r.end_offsets))
        )
        fault_point("after-read")
        try:
            self._write(job, target, read.df, mode, run, payload, txns, result)
        finally:
            read.df.unpersist()

    def _write(
        self,
        job: MaterializeJob | BackfillJob,
        target: DeltaTarget | PostgresTarget | ParquetTarget,
        df: DataFrame,
        mode: str,
        run: int,
        payload: dict[str, Any],
        txns: dict[str, int] | None,
        result: JobResult,
    ) -> None:
        from upsert_kafka_ops.engine import warehouse as wh

        table = source_table(job.source)
        if isinstance(target, DeltaTarget):
            path = target.path
            as_of = target.as_of_column
            result.columns_added = wh.ensure_delta_table(self.spark, path, table, as_of_column=as_of)
            meta = {st.MARKER: payload}
            if as_of:  # a snapshot table: only this end's rows are replaced
                counts = wh.delta_replace_snapshot(
                    self.spark, df, path, table, as_of_column=as_of, as_of_ms=result.write["as_of_ms"],
                    app_id=job.name, version=run, metadata=meta,
                )  # fmt: skip
            elif mode == "incremental":
                counts = wh.delta_merge(
                    self.spark, df, path, table, app_id=job.name, version=run, metadata=meta
                )
            else:
                counts = wh.delta_overwrite(
                    self.spark, df, path, table, app_id=job.name, version=run, metadata=meta
                )
            after = st.read_delta_log(path).state
            if after is None or after.run != run:
                raise ConcurrentRunError(
                    f"{target.uri}: Delta skipped this run's commit (txnAppId {job.name!r} already at version "
                    f">= {run}); another run committed first. Nothing was written by this run; rerun it."
                )
            result.rows_upserted, result.rows_deleted = counts["upserted"], counts["deleted"]
        elif isinstance(target, ParquetTarget):
            wh.parquet_overwrite(df, target.path, table)
            st.write_parquet_state(target.path, payload)
        else:
            self._write_postgres(job, target, df, mode, run, payload, result)

    def _write_postgres(
        self,
        job: MaterializeJob | BackfillJob,
        target: PostgresTarget,
        df: DataFrame,
        mode: str,
        run: int,
        payload: dict[str, Any],
        result: JobResult,
    ) -> None:
        import psycopg

        from upsert_kafka_ops.engine import warehouse as wh

        table = source_table(job.source)
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
                frame = wh._stage_frame(df, table, with_op=incremental)
                wh.jdbc_write(frame, target.jdbc_url(), _quote_pg(stage), target.user, info.get("password"))
                with pg.transaction():
                    current = st.read_postgres_state(pg, target.offsets_table, target.table)
                    if (current.run if current else 0) >= run:
                        raise ConcurrentRunError(
                            f"{target.uri}: run {run} was already committed by another run; rerun this job."
                        )
                    if incremental:
                        counts = wh.pg_apply_changes(pg, stage, qualified, table)
                    else:
                        # TRUNCATE is transactional: readers keep the old rows until COMMIT, and grants,
                        # views and foreign keys on the table stay as they are
                        pg.execute(f"TRUNCATE {_quote_pg(qualified)}")
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
                    pg.execute(f"DROP TABLE IF EXISTS {_quote_pg(stage)}")
        result.rows_upserted, result.rows_deleted = counts["upserted"], counts["deleted"]

    # -- checks and monitoring ---------------------------------------------------------------------
    def _target_gaps(self, target: DeltaTarget | PostgresTarget | ParquetTarget, table: Any) -> str:
        """Why an incremental run cannot continue the target (it must be rebuilt), or ''."""
        wanted = [c.name for c in table.columns]
        if isinstance(target, DeltaTarget):
            from delta.tables import DeltaTable

            if not DeltaTable.isDeltaTable(self.spark, target.path):
                return "the Delta table is missing: it is rebuilt from the earliest offset"
            have = set(self.spark.read.format("delta").load(target.path).columns)
        elif isinstance(target, PostgresTarget):
            import psycopg

            with psycopg.connect(**target.conninfo(), autocommit=True) as pg:
                rows = pg.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s",
                    (target.schema_name, target.table_name),
                ).fetchall()
            if not rows:
                return "the PostgreSQL table is missing: it is rebuilt from the earliest offset"
            have = {r[0] for r in rows}
        else:
            return ""
        added = [c for c in wanted if c not in have]
        if added:
            return (
                f"column(s) {', '.join(added)} added to the spec: rows outside one run's range need them too, "
                "so the target is rebuilt from the earliest offset"
            )
        return ""

    def _topic_ids(self, conn: KafkaConnection, topics: list[str]) -> dict[str, str]:
        from upsert_kafka_ops.kafka.admin import KafkaAdmin

        if not topics:
            return {}
        with KafkaAdmin(conn) as admin:
            return admin.topic_ids(topics)

    def _check_stored(self, table: Any, conn: KafkaConnection, stored: st.StoredState) -> str:
        """Fail when the stored offsets cannot continue; return why the run must rebuild instead
        (a tombstone may have been compacted away since the last run), or ''."""
        import datetime as dt

        from upsert_kafka_ops.kafka import offsets as ko
        from upsert_kafka_ops.kafka.admin import KafkaAdmin

        topics = sorted({t for t, _ in stored.offsets})
        with KafkaAdmin(conn) as admin:
            ids = admin.topic_ids(topics) if topics else {}
            configs = admin.topic_configs(topics) if topics else {}
        for t, old in sorted(dict(stored.extra.get("topic_ids", {})).items()):
            if t in ids and ids[t] != old:
                raise OffsetsError(
                    f"topic {t} was deleted and created again (topic id {old} is now {ids[t]}): the stored offsets "
                    "belong to the old topic. Rebuild the target: run with mode full."
                )

        config = conn.to_librdkafka()
        parts = ko.topic_partitions(config, topics=table.topic, pattern=table.topic_pattern)
        earliest = ko.earliest_offsets(config, parts)
        latest = ko.end_offsets(config, parts, read_committed=False)
        for tp, off in sorted(stored.offsets.items()):
            t, p = tp
            if tp not in latest:
                raise OffsetsError(
                    f"stored offsets name {t}[{p}], which the topic no longer has (deleted or recreated). "
                    "Rebuild the target: run with mode full."
                )
            if off > latest[tp]:
                raise OffsetsError(
                    f"stored offset {off} of {t}[{p}] is beyond its end offset {latest[tp]}: the topic was "
                    "recreated or truncated. Rebuild the target: run with mode full."
                )
            if off < earliest[tp]:
                raise OffsetsError(
                    f"stored offset {off} of {t}[{p}] is below its log start offset {earliest[tp]}: records were "
                    "deleted (retention or DeleteRecords) before this job read them. Rebuild the target from the "
                    "topic: run with mode full."
                )
        if stored.committed_at:
            age_ms = (
                dt.datetime.now(dt.UTC) - dt.datetime.fromisoformat(stored.committed_at)
            ).total_seconds() * 1000
            for t, cfg in sorted(configs.items()):
                if cfg.compacted and cfg.delete_retention_ms is not None and age_ms > cfg.delete_retention_ms:
                    return (
                        f"the last run was {age_ms / 3_600_000:.1f} h ago, longer than {t}'s delete.retention.ms "
                        f"({cfg.delete_retention_ms / 3_600_000:.1f} h): tombstones may have been compacted away, so "
                        "the target is rebuilt from the earliest offset"
                    )
        return ""

    def _commit_group(self, job: AnyJob, conn: KafkaConnection, result: JobResult) -> None:
        commit_group_offsets(conn, job.consumer_group, result.end_offsets)


@contextmanager
def _null_lock() -> Iterator[None]:
    yield


def _quote_pg(qualified: str) -> str:
    return ".".join('"' + p.replace('"', '""') + '"' for p in qualified.split("."))


def commit_group_offsets(
    conn: KafkaConnection, group: str, offsets: Mapping[str, Mapping[str, int]], timeout: float = 30.0
) -> None:
    """Commit ``offsets`` to ``group`` (monitoring only: Kafka's lag tools then see the job)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    tps = [TopicPartition(t, int(p), int(o)) for t, parts in offsets.items() for p, o in parts.items()]
    if not tps:
        return
    consumer = Consumer({**conn.to_librdkafka(), "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=tps, asynchronous=False)
    except KafkaException as exc:
        log.warning("could not commit offsets to consumer group %s (monitoring only): %s", group, exc)
    finally:
        consumer.close()
