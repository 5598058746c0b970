"""Continuous runs: one job's batches, one after another, until the process is told to stop.

Each batch is an incremental run of the job (:func:`upsert_kafka_ops.jobs.run.run_context`): it
takes the target's lock, reads from the offsets the target stored, folds with the engine, commits the
rows and the end offsets in one commit, then commits the consumer group's offsets. So a process that
is stopped or killed continues, when started again, where its last commit ended, like any run. The
lock is held for one batch, so a ``maintain`` job of the same table runs between two batches.

A batch with nothing new to read is skipped: before each batch the topics' end offsets are compared
with where the last batch ended (at start, with the offsets the target stored), without Spark. A
``publish`` job's batch is its run over the Delta versions committed since the version it last
published (its state file); before each batch the table's newest version is compared with that one.
A ``topic-to-topic`` job's streaming query is started once, on a processing-time trigger of the job's
interval (``jobs.streaming.ContinuousQuery``); each look counts the micro-batches that ended and
commits their end offsets to the consumer group. A
stop (:class:`threading.Event`, set by the CLI's SIGTERM and SIGINT handlers) is seen between
batches: the current batch finishes and commits first.

While it runs, :class:`ContinuousJobs` answers what ``metrics.exporter.serve`` asks of a monitor, so
``upsert-kafka-ops run --metrics-port`` serves each job's batches at ``/metrics`` (Prometheus) and
``/status`` (JSON), and ``/healthz`` and ``/ready`` for a Deployment's probes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from upsert_kafka_ops.engine.source import DataError
from upsert_kafka_ops.engine.warehouse import TargetSchemaError
from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.jobs.core import JOB_RESULT_VERSION, JobResult, RunContext
from upsert_kafka_ops.jobs.grants import check_grants
from upsert_kafka_ops.jobs.publish import latest_version, published_version
from upsert_kafka_ops.jobs.run import run_context
from upsert_kafka_ops.jobs.sink_layout import SinkPartitionsError
from upsert_kafka_ops.jobs.streaming import ContinuousQuery
from upsert_kafka_ops.jobs.targets import target_for
from upsert_kafka_ops.jobs.topic_to_topic import start_continuous
from upsert_kafka_ops.kafka import offsets as ko
from upsert_kafka_ops.kafka.admin import TopicNotFoundError, shared_clients
from upsert_kafka_ops.metrics.exporter import WatchOptions
from upsert_kafka_ops.metrics.prometheus import continuous_exposition
from upsert_kafka_ops.metrics.run_export import export_run
from upsert_kafka_ops.pipeline import MaterializeJob, Pipeline, PublishJob, TopicToTopicJob

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("upsert_kafka_ops.jobs")

Offsets = dict[tuple[str, int], int]
#: the jobs that run continuously, and where one's input stands: its topics' offsets, or for a
#: publish job its Delta table's version
Continuous = MaterializeJob | TopicToTopicJob | PublishJob
Position = Offsets | int


def permanent(exc: BaseException) -> bool:
    """Whether no pause mends the failure ``exc``: a spec, a target schema that does not fit, a record
    that cannot be decoded, a sink topic whose partitions changed. The run then ends at the first, as a
    bounded run would, instead of after ``retries``. A topic not found is not one: a broker that is
    starting again answers so for a moment (the broker-restart trial saw it)."""
    if isinstance(exc, TopicNotFoundError):
        return False
    return isinstance(exc, SpecError | TargetSchemaError | DataError | SinkPartitionsError)


@dataclass
class ContinuousResult:
    """What a continuous job did so far: its batches, their sums, the last batch, and when it last
    looked for new records (a batch or a skipped one)."""

    job: str
    kind: str
    interval_s: float
    batches: int = 0
    idle_checks: int = 0
    records_read: int = 0
    records_written: int = 0
    rows_upserted: int = 0
    rows_deleted: int = 0
    last: JobResult | None = None
    #: Unix times of the last batch's commit and of the last look at the topic
    last_batch_at: float | None = None
    last_check_at: float | None = None
    #: failed batches since the process started, in a row now, and the last one's error
    failures: int = 0
    failing: int = 0
    last_error: str = ""
    #: the last batch's end-to-end latency: from the Kafka timestamp of the oldest record it read
    #: until its commit (a materialize job; None when unknown)
    last_latency_s: float | None = None
    duration_s: float = 0.0
    #: ``full`` once a batch rebuilt the target (the first with ``--mode full``, or one that found
    #: the table missing or its offsets unusable), with that batch's reason; else ``incremental``
    mode: str = "incremental"
    reason: str = ""
    began: float = field(default_factory=time.monotonic, repr=False)

    def add(self, batch: JobResult, batches: int = 1) -> None:
        """Count ``batch`` (the result of ``batches`` micro-batches of a streaming query)."""
        if batch.mode == "full":
            self.mode, self.reason = "full", batch.reason
        self.batches += batches
        self.records_read += batch.records_read
        self.records_written += batch.records_written
        self.rows_upserted += batch.rows_upserted
        self.rows_deleted += batch.rows_deleted
        self.last = batch
        self.last_batch_at = self.last_check_at = time.time()

    def to_dict(self) -> dict[str, Any]:
        """The CLI's result of the run (``status`` succeeded: it stopped when asked), and ``/status``."""
        last = self.last
        return {
            "job": self.job,
            "kind": self.kind,
            "status": "succeeded",
            "mode": self.mode,
            "reason": self.reason,
            "execution": "continuous",
            "interval_s": self.interval_s,
            "batches": self.batches,
            "idle_checks": self.idle_checks,
            "records_read": self.records_read,
            "records_written": self.records_written,
            "rows_upserted": self.rows_upserted,
            "rows_deleted": self.rows_deleted,
            "run": last.run if last is not None else None,
            "target": last.target if last is not None else None,
            "end_offsets": last.end_offsets if last is not None else {},
            "last_batch_s": last.duration_s if last is not None else None,
            "last_latency_s": self.last_latency_s,
            "last_batch_at": self.last_batch_at,
            "last_check_at": self.last_check_at,
            "failures": self.failures,
            "failing": self.failing,
            "last_error": self.last_error,
            "duration_s": round(self.duration_s, 3),
            "version": JOB_RESULT_VERSION,
        }


def as_offsets(ends: Mapping[str, Mapping[Any, Any]]) -> Offsets:
    """A result's ``end_offsets`` (topic -> partition -> offset) keyed by (topic, partition)."""
    return {(t, int(p)): int(o) for t, parts in ends.items() for p, o in parts.items()}


def _client_config(pipeline: Pipeline, job: Continuous, spark: SparkSession, src: Any) -> dict[str, Any]:
    """The librdkafka settings of one of the job's sources."""
    return RunContext(pipeline, job, spark).connection(src.connection, src.table).to_librdkafka()


def topic_ends(pipeline: Pipeline, job: MaterializeJob | TopicToTopicJob, spark: SparkSession) -> Offsets:
    """The end offsets (read committed, as a run's bounds take them) of the job's source topics."""
    sources = [job.source] if isinstance(job, MaterializeJob) else list(job.sources.values())
    ends: Offsets = {}
    with shared_clients():
        for src in sources:
            config = _client_config(pipeline, job, spark, src)
            parts = ko.topic_partitions(config, topics=src.table.topic, pattern=src.table.topic_pattern)
            ends.update(ko.end_offsets(config, parts, read_committed=True))
    return ends


def oldest_waiting_at(
    pipeline: Pipeline, job: MaterializeJob, spark: SparkSession, done: Offsets | None, ends: Offsets
) -> float | None:
    """When the oldest record the job's next batch reads was written (Unix time, by its Kafka
    timestamp): the first record after ``done`` (from the earliest without it) on each partition
    whose end is further; None when none has a timestamp or the broker does not answer in time."""
    from upsert_kafka_ops.kafka.lag import compute_lag

    starts = {tp: (done or {}).get(tp) for tp, end in ends.items() if end > (done or {}).get(tp, 0)}
    if not starts:
        return None
    try:
        config = _client_config(pipeline, job, spark, job.source)
        report = compute_lag(config, starts, isolation="read_committed", timeout=5.0)
    except Exception as exc:  # the latency goes unreported; the batch does not depend on it
        log.debug("job %s: the oldest waiting record's time is unknown: %s", job.name, exc)
        return None
    age = report.max_time_lag_s
    return None if age is None else report.observed_at - age


def _furthest(a: Offsets, b: Offsets) -> Offsets:
    return {tp: max(a.get(tp, 0), b.get(tp, 0)) for tp in a.keys() | b.keys()}


@dataclass
class _Live:
    """One continuous job while it runs: where its last batch ended, and when its next is due."""

    job: Continuous
    result: ContinuousResult
    done: Position | None
    mode: Literal["incremental", "full"] | None
    due: float = 0.0
    #: a topic-to-topic job's streaming query, once started
    query: ContinuousQuery | None = None


class ContinuousJobs:
    """Continuous jobs of one pipeline run batch after batch in one session (:meth:`run`); also the
    monitor ``metrics.exporter.serve`` answers from while they run."""

    #: how often the HTTP server renews its exposition (from memory: no broker call)
    options = WatchOptions(min_interval_s=1.0)

    def __init__(
        self,
        pipeline: Pipeline,
        names: Sequence[str],
        spark: SparkSession,
        *,
        mode: Literal["incremental", "full"] | None = None,
        lock_timeout_s: float = 60.0,
    ) -> None:
        """:param mode: each job's first batch's mode (``full`` rebuilds its table once); the others
        continue."""
        self.pipeline, self.spark, self.lock_timeout_s = pipeline, spark, lock_timeout_s
        self.lives = [self._live(name, mode) for name in names]
        self.failed = ""
        self._ended: BaseException | None = None  # what ended a run in_background

    def _live(self, name: str, mode: Literal["incremental", "full"] | None) -> _Live:
        job = self.pipeline.job(name)
        if not isinstance(job, Continuous) or not job.continuous or job.trigger is None:
            raise SpecError(
                "trigger.continuous",
                f"job {name!r} is not a continuous materialize, topic-to-topic or publish job.",
                "set trigger: {continuous: true} on it, or run it once.",
            )
        done: Position | None = None
        if isinstance(job, PublishJob):
            done = published_version(self.pipeline, job) if mode != "full" else None
        elif isinstance(job, MaterializeJob):
            stored = target_for(job.target, self.pipeline).read_state() if mode != "full" else None
            done = dict(stored.offsets) if stored is not None and stored.job == job.name else None
        else:
            from upsert_kafka_ops.jobs.streaming import streaming_verdict

            ok, why = streaming_verdict(self.spark, job, self.pipeline.connections)
            if not ok:
                raise SpecError(
                    "trigger.continuous",
                    f"job {name!r} cannot run continuously: {why}.",
                    "give it a schedule instead of the trigger (each run then recomputes the query), or make "
                    "its sources append-only and its query one Spark's streaming accepts.",
                )
        return _Live(job, ContinuousResult(job.name, job.kind, job.trigger.interval_s), done, mode)

    @property
    def results(self) -> list[ContinuousResult]:
        return [live.result for live in self.lives]

    @contextmanager
    def in_background(self) -> Iterator[ContinuousJobs]:
        """Run the jobs in a thread while the block runs (give them a session of their own,
        ``spark.newSession()``, when the block uses Spark too); leaving the block stops them after
        their current batch. A failure that ended them is raised here, and by :meth:`wait_committed`."""
        stop = threading.Event()

        def follow() -> None:
            try:
                self.run(stop)
            except BaseException as exc:  # raised in the caller's thread
                self._ended = exc

        thread = threading.Thread(target=follow, name="continuous-jobs", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join()
        if self._ended is not None:
            raise self._ended

    def wait_committed(self, job: str, ends: Offsets, timeout_s: float) -> None:
        """Wait until the materialize job ``job`` (running :meth:`in_background`) has committed a batch
        ending at or past ``ends`` (its batches' end offsets cover every partition of its topics);
        :class:`TimeoutError` after ``timeout_s``."""
        found = [r for r in self.results if r.job == job and r.kind == "materialize"]
        if not found:
            names = [r.job for r in self.results if r.kind == "materialize"]
            raise SpecError("job", f"{job!r} is not a materialize job of this run.", f"name one of {names}.")
        out = found[0]
        deadline = time.monotonic() + timeout_s
        while True:
            if self._ended is not None:
                raise self._ended
            last = out.last  # the job's thread replaces it after each batch
            done = as_offsets(last.end_offsets) if last is not None else {}
            if all(done.get(tp, 0) >= end for tp, end in ends.items()):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job} did not commit up to {dict(ends)} within {timeout_s:g} s.")
            time.sleep(0.05)

    def run(self, stop: threading.Event) -> list[ContinuousResult]:
        """Run the jobs until ``stop`` is set (seen between batches): the next batch is always the one
        due first, so the jobs share the session in turn, and a long batch of one delays the others."""
        for live in self.lives:
            log.info(
                "job %s: running continuously, a batch at most every %.1f s, until stopped",
                live.job.name,
                live.result.interval_s,
            )
        try:
            while True:
                live = min(self.lives, key=lambda x: x.due)
                if stop.wait(max(0.0, live.due - time.monotonic())):
                    break
                began = time.monotonic()
                live.due = began + live.result.interval_s
                try:
                    self._step(live)
                except Exception as exc:  # a failed batch committed nothing: try it again, up to a point
                    live.due = time.monotonic() + self._failed(live, exc)
        except BaseException as exc:
            self.failed = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            for live in self.lives:  # after a second signal (KeyboardInterrupt) or a failure: at once
                self._stop_query(live, wait_s=0.0 if self.failed else 300.0)
            for out in self.results:
                out.duration_s = time.monotonic() - out.began
                log.info(
                    "job %s: stopped after %d batch(es), %d records read, %d upserted, %d deleted",
                    out.job,
                    out.batches,
                    out.records_read,
                    out.rows_upserted,
                    out.rows_deleted,
                )
        return self.results

    def _failed(self, live: _Live, exc: Exception) -> float:
        """Count a failed batch of ``live``'s job; the pause before it is tried again, or raise when it
        failed more often in a row than its trigger's ``retries`` or for a reason no pause mends
        (:func:`permanent`)."""
        out, trigger = live.result, live.job.trigger
        out.failures += 1
        out.failing += 1
        out.last_error = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:500]}"
        retries = trigger.retries if trigger is not None else 0
        if permanent(exc):
            log.error("job %s: the batch failed, not to be tried again: %s", out.job, out.last_error)
            raise exc
        if out.failing > retries:
            log.error(
                "job %s: %d batches failed in a row, the last with %s", out.job, out.failing, out.last_error
            )
            raise exc
        pause = min(60.0, 2.0 ** (out.failing - 1))
        log.warning(
            "job %s: the batch failed (%d of %d tries in a row), trying again in %.0f s: %s",
            out.job,
            out.failing,
            retries + 1,
            pause,
            out.last_error,
        )
        return pause

    def _step(self, live: _Live) -> None:
        """One batch of ``live``'s job, or none when its topic holds nothing new."""
        out, job = live.result, live.job
        if isinstance(job, TopicToTopicJob):
            self._follow(live, job)
            return
        oldest = None
        with shared_clients():  # the look at the topics and the oldest record's read share a client
            ends = (
                latest_version(self.spark, self.pipeline, job)
                if isinstance(job, PublishJob)
                else topic_ends(self.pipeline, job, self.spark)
            )
            if live.done == ends:  # nothing new (a topic that went back, recreated, is a batch: its checks)
                out.failing = 0
                out.idle_checks += 1
                out.last_check_at = time.time()
                return
            if isinstance(job, MaterializeJob):  # before the batch: its records are read from there on
                assert isinstance(ends, dict) and not isinstance(live.done, int)
                oldest = oldest_waiting_at(self.pipeline, job, self.spark, live.done, ends)
        first = live.mode if out.batches == 0 else None
        batch = run_context(RunContext(self.pipeline, job, self.spark, first, self.lock_timeout_s))
        if isinstance(job, PublishJob):  # the version the batch published (its state file)
            live.done = published_version(self.pipeline, job)
        else:  # a batch reads at least what the topics held before it (a streaming query's result
            # lists only the partitions its micro-batches read)
            assert isinstance(ends, dict)
            live.done = _furthest(ends, as_offsets(batch.end_offsets))
        out.failing = 0
        out.add(batch)
        assert out.last_batch_at is not None  # add() set it
        # unknown when the oldest record's time is (never an earlier batch's figure)
        out.last_latency_s = None if oldest is None else round(max(0.0, out.last_batch_at - oldest), 3)

    def _follow(self, live: _Live, job: TopicToTopicJob) -> None:
        """A topic-to-topic job: its query started on a processing-time trigger of the job's interval
        (again after it failed), then the micro-batches it ran since the last look."""
        out = live.result
        if live.query is None:
            ctx = RunContext(self.pipeline, job, self.spark, None, self.lock_timeout_s)
            check_grants(ctx)  # a missing ACL fails here, before the query starts
            live.query = start_continuous(ctx, job, int(out.interval_s * 1000))
        error = live.query.error()
        if error is not None:  # it committed nothing of the failed micro-batch: started again after a pause
            self._stop_query(live)
            raise error
        if self._collect(live) or live.query.triggered():
            out.failing = 0  # the query (started again) ran a trigger without failing

    def _collect(self, live: _Live) -> bool:
        """Count the micro-batches the query ran since the last look; whether there were any."""
        out = live.result
        assert live.query is not None
        batch = live.query.collect()
        if batch is None:
            out.idle_checks += 1
            out.last_check_at = time.time()
            return False
        from upsert_kafka_ops.engine.session import application_id

        batch.spark_app_id = application_id(self.spark)
        export_run(self.pipeline.name, live.job.name, batch)
        out.add(batch, batches=int(batch.write.get("batches", 1)))
        return True

    def _stop_query(self, live: _Live, wait_s: float = 0.0) -> None:
        """Stop a topic-to-topic job's query, a running micro-batch first committed and reported
        (waited for up to ``wait_s``; one cut off is run again from the checkpoint by the next start)."""
        if live.query is None:
            return
        try:
            live.query.stop(wait_s)
            self._collect(live)  # the micro-batches that ended since the last look
        except Exception as exc:  # the job stops anyway; what it read is in its checkpoint
            log.warning("job %s: stopping its streaming query: %s", live.job.name, exc)
        finally:
            live.query = None

    # -- what metrics.exporter.serve asks of a monitor --------------------------------------------
    def document(self, max_age: float = 0.0) -> dict[str, Any]:
        return {
            "pipeline": self.pipeline.name,
            "failed": self.failed,
            "jobs": [r.to_dict() for r in self.results],
        }

    def ready(self) -> bool:
        """Each job has looked at its topic at least once, and none is failing."""
        return not self.failed and all(r.last_check_at is not None and not r.failing for r in self.results)

    def exposition(self) -> str:
        return continuous_exposition([r.to_dict() for r in self.results], self.pipeline.name).render()
