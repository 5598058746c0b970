"""Progress of long reads: Kafka records read so far, of the offset ranges a run scans.

A caller that wants progress (the CLI, through the job runner) wraps a run in :class:`ReadProgress`;
the engine announces each scan of an offset range with :func:`expect` before the Spark action that
reads it. While the run lasts, a thread logs ``<label>: N of M records read (P%), Ts`` every few
seconds. N comes from Spark's own task metrics (input records of the run's stages, updated by the
executors' heartbeats while tasks run); M is the sum of the announced ranges, from offsets (a
compacted topic has gaps, so the last figure may stay below M). A run shorter than one interval
logs nothing. Without a :class:`ReadProgress` around it, :func:`expect` does nothing.

On a Spark Connect session the driver is the server's and its task metrics are out of reach; the
server reports the stages of the query in flight instead (tasks done of all, bytes read), and the
line says that: ``<label>: D of T tasks done, B MB read (a range of M records; Spark Connect), Ts``.

Only stages that read records without reading bytes count: Spark's DataSource V2 Kafka reader
reports records and no bytes, while file sources (Delta, Parquet) and cached data report both, so a
MERGE's scan of the target table is not counted as Kafka records. Spark's older (V1) Kafka reader
reports nothing; sessions built by :func:`upsert_kafka_ops.runtime.build_spark_session` use V2
(``spark.sql.sources.useV1SourceList`` without ``kafka``), and in a session that reads Kafka with V1
no progress line is logged.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
import uuid
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("upsert_kafka_ops.progress")
_current: contextvars.ContextVar[ReadProgress | None] = contextvars.ContextVar("uko_progress", default=None)


def expect(records: int) -> None:
    """The engine is about to scan an offset range of ``records`` (end minus start offsets)."""
    progress = _current.get()
    if progress is not None:
        progress.expected += max(0, int(records))


class ReadProgress:
    """Log a run's Kafka reading every ``every`` seconds while it lasts (see the module's text).

    :param label: what runs, e.g. the job's name; it starts each line.
    :param every: seconds between lines (the first comes after one interval).
    """

    def __init__(self, spark: SparkSession, label: str, every: float = 10.0) -> None:
        self.spark = spark
        self.label = label
        self.every = every
        self.expected = 0
        self.lines: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._token: contextvars.Token[ReadProgress | None] | None = None
        self._own_group: str | None = None
        self._group = ""
        self._began = 0.0
        self._connect: _StageProgress | None = None

    def __enter__(self) -> ReadProgress:
        from upsert_kafka_ops.engine.session import is_connect

        self._token = _current.set(self)
        self._began = time.monotonic()
        if is_connect(self.spark):  # the driver is the server's: it reports stages, not records
            self._connect = _StageProgress()
            self.spark.registerProgressHandler(self._connect)
            self._thread = threading.Thread(target=self._loop, name=f"progress-{self.label}", daemon=True)
            self._thread.start()
            return self
        sc = self.spark.sparkContext
        group = sc.getLocalProperty("spark.jobGroup.id")
        if group is None:  # runs inside a caller's group keep it (cancellation uses it)
            group = self._own_group = f"upsert-kafka-ops-progress-{uuid.uuid4().hex[:12]}"
            sc.setJobGroup(group, f"upsert-kafka-ops {self.label}")
        self._group = group
        v1 = str(self.spark.conf.get("spark.sql.sources.useV1SourceList") or "").lower()
        if "kafka" in (name.strip() for name in v1.split(",")):
            log.debug("no progress for %s: this session reads Kafka with Spark's V1 reader", self.label)
            return self
        self._thread = threading.Thread(target=self._loop, name=f"progress-{self.label}", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._token is not None:
            _current.reset(self._token)
        if self._connect is not None:
            self.spark.removeProgressHandler(self._connect)
        if self._own_group is not None:
            for prop in ("spark.jobGroup.id", "spark.job.description"):
                self.spark.sparkContext.setLocalProperty(prop, None)  # type: ignore[arg-type]

    def _connect_line(self) -> str | None:
        """The running query's stages as the Spark Connect server last reported them (tasks and bytes:
        the server sends no record counts), or None when no query of this run is in flight."""
        assert self._connect is not None
        stages = self._connect.running()
        if not stages:
            return None
        tasks = sum(st.num_tasks for st in stages)
        done = sum(st.num_completed_tasks for st in stages)
        read = sum(st.num_bytes_read for st in stages)
        return (
            f"{self.label}: {done:,} of {tasks:,} tasks done, {read / 1e6:,.1f} MB read "
            f"(a range of {self.expected:,} records; Spark Connect), {time.monotonic() - self._began:.0f}s"
        )

    def records_read(self) -> int:
        """Records read so far by the run's stages that read no file bytes (see the module's text)."""
        sc = self.spark.sparkContext
        tracker = sc.statusTracker()
        store = sc._jsc.sc().statusStore()
        total = 0
        for job_id in tracker.getJobIdsForGroup(self._group):
            info = tracker.getJobInfo(job_id)
            for stage_id in info.stageIds if info is not None else ():
                try:
                    stage = store.lastStageAttempt(stage_id)
                except Exception:  # a stage that never ran (skipped): nothing read
                    continue
                if stage.inputBytes() == 0:
                    total += int(stage.inputRecords())
        return total

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            if self.expected <= 0:
                continue
            if self._connect is not None:
                line = self._connect_line()
                if line is None:
                    continue
            else:
                try:
                    done = min(self.records_read(), self.expected)
                except Exception as exc:  # never let a progress line break a run
                    log.debug("progress of %s unavailable: %s", self.label, exc)
                    continue
                line = (
                    f"{self.label}: {done:,} of {self.expected:,} records read "
                    f"({100 * done / self.expected:.0f}%), {time.monotonic() - self._began:.0f}s"
                )
            self.lines.append(line)
            log.info("%s", line)


class _StageProgress:
    """A Spark Connect progress handler: the stages of the query in flight, as the server last
    reported them (every ``spark.connect.progress.reportInterval``, 2 s by default)."""

    def __init__(self) -> None:
        self._stages: tuple[Any, ...] = ()

    def __call__(self, stages: Any, inflight_tasks: int, operation_id: str | None, done: bool) -> None:
        self._stages = () if done else tuple(stages or ())

    def running(self) -> tuple[Any, ...]:
        return self._stages
