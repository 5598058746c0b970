"""Lag watched over time and served to Prometheus: a consumer group's lag (or, through any monitor
with the same four methods, a pipeline's jobs': ``jobs.lag_monitor``), evaluated Burrow-style over a
window kept in memory (and in a file), answered at ``/metrics`` (the exposition format), ``/status``
(JSON), ``/ready`` and ``/healthz``.

The ``upsert-kafka-ops lag --serve`` command and the Helm chart's exporter run this; stdlib only.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

from upsert_kafka_ops.errors import UpsertKafkaOpsError
from upsert_kafka_ops.kafka.admin import Isolation, KafkaAdmin
from upsert_kafka_ops.kafka.evaluation import (
    EvaluationConfig,
    LagStatus,
    LagWindow,
    check,
)
from upsert_kafka_ops.kafka.lag import LagReport, Uncommitted, group_lag
from upsert_kafka_ops.metrics.documents import lag_document
from upsert_kafka_ops.metrics.prometheus import CONTENT_TYPE, Exposition, lag_exposition
from upsert_kafka_ops.spec.connection import KafkaConnection

log = logging.getLogger("upsert_kafka_ops.lag")


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


class Monitor(Protocol):
    """What :func:`serve` asks of a monitor: its options, a JSON document, readiness, an exposition."""

    options: WatchOptions

    def document(self, max_age: float = 0.0) -> dict[str, Any]: ...

    def ready(self) -> bool: ...

    def exposition(self) -> str: ...


def serve(monitor: Monitor, host: str, port: int) -> ThreadingHTTPServer:
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

    def __init__(self, monitor: Monitor) -> None:
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
