"""Lag watched over time and served to Prometheus: a group's or a pipeline's jobs' lag, evaluated
Burrow-style over a window kept in memory (and in a file), answered at ``/metrics`` (the exposition
format), ``/status`` (JSON) and ``/healthz``.

The ``upsert-kafka-ops lag --serve`` command and the Helm chart's exporter run this; stdlib only.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from upsert_kafka_ops.errors import SpecError, UpsertKafkaOpsError
from upsert_kafka_ops.jobs.lag import JobLag, pipeline_lag, pipeline_lag_names
from upsert_kafka_ops.kafka.admin import Isolation, KafkaAdmin
from upsert_kafka_ops.kafka.evaluation import (
    EvaluationConfig,
    LagStatus,
    LagWindow,
    Schedule,
    check,
)
from upsert_kafka_ops.kafka.lag import LagReport, Uncommitted, group_lag
from upsert_kafka_ops.metrics.documents import jobs_lag_document, lag_document, pipelines_lag_document
from upsert_kafka_ops.metrics.prometheus import CONTENT_TYPE, Exposition, lag_exposition
from upsert_kafka_ops.pipeline import AnyJob, Pipeline
from upsert_kafka_ops.spec.cadence import cron_expression
from upsert_kafka_ops.spec.connection import KafkaConnection

log = logging.getLogger("upsert_kafka_ops.lag")

#: Version of a pipeline's window file (each job's window inside is a LagWindow's JSON).
JOBS_WINDOW_VERSION = 1


@dataclass(frozen=True)
class WatchOptions:
    """How lag is read and evaluated between scrapes."""

    isolation: Isolation = "read_committed"
    #: read records to estimate each partition's time lag
    time_lag: bool = True
    #: seconds per broker call
    timeout_s: float = 10.0
    #: reuse an evaluation younger than this many seconds
    min_interval_s: float = 5.0
    #: a JSON file keeping the evaluation window between processes
    window_file: Path | None = None
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    #: where a group's partition without a commit is read from (a pipeline's jobs: always earliest)
    uncommitted: Uncommitted = "earliest"


class LagMonitor:
    """One group watched over time: a reused admin client and the window in memory (and in a file)."""

    def __init__(
        self,
        connection: KafkaConnection,
        group: str,
        topics: list[str] | None = None,
        options: WatchOptions | None = None,
    ) -> None:
        self.options = options or WatchOptions()
        self.group, self.topics = group, topics
        self.admin = KafkaAdmin(connection, timeout=self.options.timeout_s)
        self.config = self.options.evaluation
        self.window_file = self.options.window_file
        text = (
            self.window_file.read_text()
            if self.window_file is not None and self.window_file.is_file()
            else None
        )
        self.window = LagWindow.from_json(text)
        self.lock = threading.Lock()
        self.last: tuple[float, LagReport, LagStatus] | None = None
        self.errors = 0
        self.duration_s = 0.0
        self.up = False

    def evaluate(self, max_age: float = 0.0) -> tuple[LagReport, LagStatus]:
        with self.lock:
            if self.last is not None and time.monotonic() - self.last[0] < max_age:
                return self.last[1], self.last[2]
            started = time.monotonic()
            try:
                report = group_lag(
                    self.admin,
                    self.group,
                    isolation=self.options.isolation,
                    topics=self.topics,
                    fetch_records=self.options.time_lag,
                    history=self.window.points(),
                    uncommitted=self.options.uncommitted,
                )
            except UpsertKafkaOpsError:
                self.errors += 1
                raise
            status, self.window = check(self.window, report, self.config)
            if self.window_file is not None:
                self.window_file.write_text(self.window.dumps())
            self.duration_s = time.monotonic() - started
            self.last = (time.monotonic(), report, status)
            return report, status

    def document(self, max_age: float = 0.0) -> dict[str, Any]:
        report, status = self.evaluate(max_age)
        return lag_document(report, status)

    def close(self) -> None:
        self.admin.close()

    def ready(self) -> bool:
        """Whether the last evaluation read the group's lag."""
        return self.up

    def exposition(self) -> str:
        """The group's lag series, and ``lag_up{group}`` (0 while the broker cannot be read: the scrape
        still succeeds, so an alert sees the exporter's verdict, not a failed scrape)."""
        exp = Exposition()
        try:
            report, status = self.evaluate(self.options.min_interval_s)
            lag_exposition(report, status, exp)
            self.up = True
        except UpsertKafkaOpsError:
            self.up = False
        exp.add(
            "lag_up",
            "gauge",
            "1 when the lag was read at the last evaluation, else 0.",
            float(self.up),
            {"group": self.group},
        )
        exp.add("lag_scrape_errors_total", "counter", "Evaluations that failed.", self.errors)
        exp.add("lag_evaluation_duration_seconds", "gauge", "Time the last evaluation took.", self.duration_s)
        return exp.render()


def job_evaluation(config: EvaluationConfig, job: AnyJob) -> EvaluationConfig:
    """How one job of a pipeline is judged: ``config``, with the job's own ``schedule:`` as its cadence
    when it has one (a batch job is OK between runs and STOP once the run after its last is overdue,
    ``schedule_grace_s`` late), else the process's cadence, if any."""
    if job.schedule is None:
        return config
    schedule = Schedule(cron=cron_expression(job.schedule), grace_s=config.schedule_grace_s)
    return replace(config, schedule=schedule)


def rebuilt(last_run: int | None, job: JobLag) -> bool:
    """Whether ``job``'s target was rebuilt from the earliest offset (a full run or a backfill) since
    the stored run ``last_run`` its window last saw: the window starts over, as for a new job."""
    return last_run is not None and job.stored_run not in (None, last_run) and job.stored_mode == "full"


class PipelineLagMonitor:
    """A pipeline's jobs watched over time: one admin client per connection, one window per job (in
    memory, and in the window file as ``{"version": 1, "jobs": {name: window}}``)."""

    def __init__(
        self,
        pipeline: Pipeline,
        jobs: list[str] | None = None,
        options: WatchOptions | None = None,
        name: str | None = None,
    ) -> None:
        self.options = options or WatchOptions()
        self.pipeline = pipeline
        #: the ``pipeline`` label of every series (the pipeline's name: its file's, without the suffix)
        self.name = name or pipeline.name or "pipeline"
        # unknown names and publish jobs (no lag) fail here, naming the jobs there are
        self.names = pipeline_lag_names(pipeline, jobs)
        self.admins: dict[str, KafkaAdmin] = {}
        self.config = self.options.evaluation
        self.window_file = self.options.window_file
        self.windows: dict[str, LagWindow] = {}
        #: the stored run each job's window last saw (a rebuild after it starts the window over)
        self.runs: dict[str, int] = {}
        if self.window_file is not None and self.window_file.is_file():
            doc = json.loads(self.window_file.read_text() or "{}")
            if doc and (doc.get("version") != JOBS_WINDOW_VERSION or "jobs" not in doc):
                raise SpecError(
                    "window_file",
                    f"{str(self.window_file)!r} does not hold the windows of a pipeline's jobs.",
                    "give the pipeline its own window file.",
                )
            self.windows = {str(k): LagWindow.from_json(v) for k, v in doc.get("jobs", {}).items()}
            self.runs = {str(k): int(v) for k, v in doc.get("runs", {}).items()}
        self.lock = threading.Lock()
        self.last: tuple[float, list[tuple[JobLag, LagStatus | None]]] | None = None
        self.errors: dict[str, int] = dict.fromkeys(self.names, 0)
        self.duration_s = 0.0

    def evaluate(self, max_age: float = 0.0) -> list[tuple[JobLag, LagStatus | None]]:
        """Each job's lag and status (status None where the lag could not be read)."""
        with self.lock:
            if self.last is not None and time.monotonic() - self.last[0] < max_age:
                return self.last[1]
            started = time.monotonic()
            history = {n: self.windows[n].points() for n in self.names if n in self.windows}
            jobs = pipeline_lag(
                self.pipeline,
                self.names,
                isolation=self.options.isolation,
                fetch_records=self.options.time_lag,
                history=history,
                timeout=self.options.timeout_s,
                admins=self.admins,
            )
            out: list[tuple[JobLag, LagStatus | None]] = []
            for jl in jobs:
                if jl.report is None:
                    self.errors[jl.job] = self.errors.get(jl.job, 0) + 1
                    out.append((jl, None))
                    continue
                if rebuilt(self.runs.get(jl.job), jl):  # planned: its offsets may go back, no REWIND page
                    self.windows.pop(jl.job, None)
                if jl.stored_run is not None:
                    self.runs[jl.job] = jl.stored_run
                config = job_evaluation(self.config, self.pipeline.job(jl.job))
                status, self.windows[jl.job] = check(self.windows.get(jl.job), jl.report, config)
                out.append((jl, status))
            if self.window_file is not None:
                doc = {
                    "version": JOBS_WINDOW_VERSION,
                    "jobs": {n: w.to_json() for n, w in sorted(self.windows.items())},
                    "runs": dict(sorted(self.runs.items())),
                }
                self.window_file.write_text(json.dumps(doc, sort_keys=True, separators=(",", ":")))
            self.duration_s = time.monotonic() - started
            self.last = (time.monotonic(), out)
            return out

    def document(self, max_age: float = 0.0) -> dict[str, Any]:
        return jobs_lag_document(self.evaluate(max_age))

    def close(self) -> None:
        for admin in self.admins.values():
            admin.close()

    def labels(self, job: str) -> dict[str, str]:
        """A job's series labels: ``pipeline`` and ``pipeline_job`` (a ``job`` label would collide with
        the scrape target's own, which Prometheus keeps, renaming ours ``exported_job``)."""
        return {"pipeline": self.name, "pipeline_job": job}

    def ready(self) -> bool:
        """Whether the last evaluation read at least one job's lag."""
        return self.last is not None and any(jl.report is not None for jl, _ in self.last[1])

    def exposition(self) -> str:
        exp = Exposition()
        self.add_series(exp)
        return exp.render()

    def add_series(self, exp: Exposition) -> None:
        """Add this pipeline's series to ``exp`` (several pipelines share one exposition)."""
        jobs = self.evaluate(self.options.min_interval_s)
        for jl, status in jobs:
            if jl.report is not None:
                lag_exposition(jl.report, status, exp, labels=self.labels(jl.job))
        for jl, _ in jobs:
            exp.add(
                "lag_up",
                "gauge",
                "1 when the job's lag was read at the last evaluation, else 0.",
                0.0 if jl.report is None else 1.0,
                self.labels(jl.job),
            )
        for name in self.names:
            exp.add(
                "lag_scrape_errors_total",
                "counter",
                "Evaluations that failed.",
                self.errors.get(name, 0),
                self.labels(name),
            )
        exp.add(
            "lag_evaluation_duration_seconds",
            "gauge",
            "Time the last evaluation took.",
            self.duration_s,
            {"pipeline": self.name},
        )


class PipelinesMonitor:
    """Several pipeline files served from one port: each file's jobs labelled with its ``pipeline``
    name (the file's name without its suffix, unique across the files)."""

    def __init__(self, monitors: list[PipelineLagMonitor]) -> None:
        names = [m.name for m in monitors]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise SpecError(
                "pipeline",
                f"two pipeline files are named {twice[0]!r}: their series would mix.",
                "give each pipeline file its own name.",
            )
        self.monitors = monitors
        self.options = monitors[0].options

    @property
    def names(self) -> list[str]:
        return [f"{m.name}/{n}" for m in self.monitors for n in m.names]

    def evaluate(self, max_age: float = 0.0) -> list[tuple[str, list[tuple[JobLag, LagStatus | None]]]]:
        """Each pipeline's name with its jobs' lag and status."""
        return [(m.name, m.evaluate(max_age)) for m in self.monitors]

    def document(self, max_age: float = 0.0) -> dict[str, Any]:
        """``{"version", "kind": "pipelines-lag", "status", "pipelines": {name: jobs-lag document}}``."""
        return pipelines_lag_document({m.name: m.document(max_age) for m in self.monitors})

    def ready(self) -> bool:
        """Whether the last evaluation read at least one job's lag of every pipeline."""
        return all(m.ready() for m in self.monitors)

    def exposition(self) -> str:
        exp = Exposition()
        for m in self.monitors:
            m.add_series(exp)
        return exp.render()

    def close(self) -> None:
        for m in self.monitors:
            m.close()


def serve(
    monitor: LagMonitor | PipelineLagMonitor | PipelinesMonitor, host: str, port: int
) -> ThreadingHTTPServer:
    """An HTTP server (not started) answering ``/metrics``, ``/status``, ``/ready`` and ``/healthz``. A
    pipeline's monitor labels every series with ``pipeline`` and ``pipeline_job``.

    ``/metrics`` answers from the last evaluation, which a background thread renews every
    ``min_interval_s``: a scrape never waits on the broker, so while the broker is unreachable (each
    call timing out) the scrape still succeeds in time and shows ``lag_up`` 0, the series an alert
    needs, instead of a scrape that times out and leaves no series at all."""
    latest = _LatestExposition(monitor)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            try:
                if path == "/metrics":
                    self._send(200, CONTENT_TYPE, latest.text())
                elif path == "/status":
                    doc = monitor.document(monitor.options.min_interval_s)
                    self._send(200, "application/json", json.dumps(doc, sort_keys=True))
                elif path == "/healthz":  # liveness: the process answers
                    self._send(200, "text/plain; charset=utf-8", "ok\n")
                elif path == "/ready":  # the last evaluation read the broker
                    ok = monitor.ready()
                    self._send(
                        200 if ok else 503, "text/plain; charset=utf-8", "ready\n" if ok else "not ready\n"
                    )
                else:
                    self._send(
                        404, "text/plain; charset=utf-8", "try /metrics, /status, /ready or /healthz\n"
                    )
            except UpsertKafkaOpsError as exc:
                self._send(503, "text/plain; charset=utf-8", f"{exc}\n")

        def _send(self, code: int, content_type: str, body: str) -> None:
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # no access log on stderr
            return

    server = _Server((host, port), Handler, latest)
    server.daemon_threads = True
    return server


class _LatestExposition:
    """The exposition of the last evaluation, renewed by a daemon thread every ``min_interval_s``."""

    def __init__(self, monitor: LagMonitor | PipelineLagMonitor | PipelinesMonitor) -> None:
        self.monitor = monitor
        self.stopped = threading.Event()
        self.ready = threading.Event()
        self.lock = threading.Lock()
        self.latest = ""
        threading.Thread(target=self._renew, name="lag-evaluation", daemon=True).start()

    def _renew(self) -> None:
        while not self.stopped.is_set():
            try:
                text = self.monitor.exposition()
                with self.lock:
                    self.latest = text
            except Exception:  # an unexpected failure: logged, the last text stays, the loop goes on
                if not self.stopped.is_set():  # (not the clients closed under it at shutdown)
                    log.exception("lag evaluation failed")
            self.ready.set()
            self.stopped.wait(max(self.monitor.options.min_interval_s, 0.5))

    def text(self) -> str:
        self.ready.wait(timeout=120)  # the first evaluation, once
        with self.lock:
            return self.latest


class _Server(ThreadingHTTPServer):
    def __init__(self, address: tuple[str, int], handler: Any, latest: _LatestExposition) -> None:
        super().__init__(address, handler)
        self.latest = latest

    def server_close(self) -> None:
        self.latest.stopped.set()
        super().server_close()
