"""``upsert-kafka-ops lag``: a consumer group's or a pipeline's jobs' lag and Burrow status, once or as
a Prometheus endpoint.

Examples::

    upsert-kafka-ops lag --bootstrap-servers broker:9092 --group g [--topic t] [--json]
    upsert-kafka-ops lag --connection conn.yaml --group g --window state.json --fail-on WARN
    upsert-kafka-ops lag --bootstrap-servers broker:9092 --group g --serve --port 9308
    upsert-kafka-ops lag --pipeline pipelines/demo.yaml [--job NAME] [--json] [--serve --port 9308]

With ``--pipeline`` each job's committed offsets are its warehouse target's stored offsets, or its
consumer group ``upsert-kafka-ops.<job>`` (see :mod:`upsert_kafka_ops.jobs.lag`); the endpoint
labels every series with ``job``.

Exit codes: 0, or 1 when ``--fail-on`` is given and the group status (with ``--pipeline``: any
job's) is at that level or worse, 2 when the lag could not be read (of any job) or on bad usage. ``--window FILE`` keeps Burrow's window between runs (plain JSON);
without it one observation can only show lag, data loss and STOP-free statuses.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from upsert_kafka_ops.errors import SpecError, UpsertKafkaOpsError
from upsert_kafka_ops.jobs.lag import JobLag, pipeline_lag
from upsert_kafka_ops.jobs.spec import Pipeline
from upsert_kafka_ops.kafka.admin import ISOLATIONS, KafkaAdmin
from upsert_kafka_ops.kafka.evaluation import EvaluationConfig, LagStatus, LagWindow, Schedule, check
from upsert_kafka_ops.kafka.lag import LagReport, group_lag
from upsert_kafka_ops.metrics.documents import jobs_lag_document, lag_document
from upsert_kafka_ops.metrics.prometheus import CONTENT_TYPE, Exposition, lag_exposition
from upsert_kafka_ops.spec.connection import KafkaConnection


def register(subparsers: Any) -> None:
    """Add the ``lag`` command to the CLI's subparsers."""
    p = subparsers.add_parser("lag", help="consumer group lag and Burrow status; a Prometheus endpoint")
    _add_arguments(p)


def _add_arguments(p: argparse.ArgumentParser) -> None:
    conn = p.add_mutually_exclusive_group()
    conn.add_argument("--bootstrap-servers", help="host:port[,host:port] (PLAINTEXT)")
    conn.add_argument(
        "--connection", type=Path, help="a KafkaConnection as JSON or YAML (secrets as references)"
    )
    conn.add_argument("--pipeline", type=Path,
                      help="every job of this pipeline file, with its connections (instead of --group)")  # fmt: skip
    p.add_argument("--group", help="consumer group id (with --bootstrap-servers or --connection)")
    p.add_argument("--job", action="append", help="with --pipeline: only this job (repeat)")
    p.add_argument(
        "--topic", action="append", help="only this topic (repeat); default: every topic with commits"
    )
    p.add_argument("--isolation", choices=ISOLATIONS, default="read_committed",
                   help="the consumer's isolation level (default read_committed: lag against the last stable offset)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print a JSON document instead of a table")
    p.add_argument("--fail-on", choices=["WARN", "ERR"], help="exit 1 when the group status is this or worse")
    p.add_argument("--window", type=Path,
                   help="JSON file keeping the evaluation window between runs (one per job with --pipeline)")  # fmt: skip
    p.add_argument("--no-time-lag", action="store_true", help="skip reading records (no time lag)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per broker call (default 10)")
    p.add_argument("--allowed-lag", type=int, default=0, help="Burrow's allowed-lag (default 0)")
    p.add_argument("--intervals", type=int, default=10, help="window size in samples (default 10)")
    p.add_argument(
        "--schedule-interval", type=float, help="batch job cadence in seconds (schedule-aware mode)"
    )
    p.add_argument("--schedule-grace", type=float, default=0.0, help="grace after the cadence before STOP")
    p.add_argument("--serve", action="store_true", help="serve /metrics (Prometheus) and /status (JSON)")
    p.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=9308, help="port to serve on (default 9308)")
    p.add_argument("--min-interval", type=float, default=5.0,
                   help="reuse an evaluation younger than this many seconds when serving (default 5)")  # fmt: skip


def _connection(args: argparse.Namespace) -> KafkaConnection:
    if args.bootstrap_servers:
        return KafkaConnection(bootstrap_servers=args.bootstrap_servers)
    path: Path = args.connection
    try:
        text = path.read_text()
    except OSError as exc:
        raise SpecError("--connection", f"cannot read {str(path)!r}: {exc.strerror}.") from None
    if path.suffix in (".yaml", ".yml"):
        import yaml

        data = yaml.safe_load(text)
    else:
        data = json.loads(text)
    return KafkaConnection.model_validate(data)


def _config(args: argparse.Namespace) -> EvaluationConfig:
    schedule = None
    if args.schedule_interval:
        schedule = Schedule(interval_s=args.schedule_interval, grace_s=args.schedule_grace)
    return EvaluationConfig(intervals=args.intervals, allowed_lag=args.allowed_lag, schedule=schedule)


class LagMonitor:
    """One group watched over time: a reused admin client and the window in memory (and in a file)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.admin = KafkaAdmin(_connection(args), timeout=args.timeout)
        self.config = _config(args)
        self.window_file: Path | None = args.window
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

    def evaluate(self, max_age: float = 0.0) -> tuple[LagReport, LagStatus]:
        with self.lock:
            if self.last is not None and time.monotonic() - self.last[0] < max_age:
                return self.last[1], self.last[2]
            started = time.monotonic()
            try:
                report = group_lag(
                    self.admin, self.args.group, isolation=self.args.isolation, topics=self.args.topic,
                    fetch_records=not self.args.no_time_lag, history=self.window.points(),
                )  # fmt: skip
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

    def exposition(self) -> str:
        exp = Exposition()
        try:
            report, status = self.evaluate(self.args.min_interval)
            lag_exposition(report, status, exp)
        finally:
            exp.add("lag_scrape_errors_total", "counter", "Evaluations that failed.", self.errors)
            exp.add(
                "lag_evaluation_duration_seconds", "gauge", "Time the last evaluation took.", self.duration_s
            )
        return exp.render()


class PipelineLagMonitor:
    """A pipeline's jobs watched over time: one admin client per connection, one window per job (in
    memory, and in ``--window`` as ``{"version": 1, "jobs": {name: window}}``)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.pipeline = Pipeline.load(args.pipeline)
        self.names = list(args.job or [j.name for j in self.pipeline.jobs])
        for name in self.names:
            self.pipeline.job(name)  # unknown names fail here, naming the jobs there are
        self.admins: dict[str, KafkaAdmin] = {}
        self.config = _config(args)
        self.window_file: Path | None = args.window
        self.windows: dict[str, LagWindow] = {}
        if self.window_file is not None and self.window_file.is_file():
            doc = json.loads(self.window_file.read_text() or "{}")
            if doc and (doc.get("version") != JOBS_WINDOW_VERSION or "jobs" not in doc):
                raise SpecError("--window", f"{str(self.window_file)!r} does not hold the windows of a pipeline's jobs.",
                                "give --pipeline its own window file.")  # fmt: skip
            self.windows = {str(k): LagWindow.from_json(v) for k, v in doc.get("jobs", {}).items()}
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
                self.pipeline, self.names, isolation=self.args.isolation, fetch_records=not self.args.no_time_lag,
                history=history, timeout=self.args.timeout, admins=self.admins,
            )  # fmt: skip
            out: list[tuple[JobLag, LagStatus | None]] = []
            for jl in jobs:
                if jl.report is None:
                    self.errors[jl.job] = self.errors.get(jl.job, 0) + 1
                    out.append((jl, None))
                    continue
                status, self.windows[jl.job] = check(self.windows.get(jl.job), jl.report, self.config)
                out.append((jl, status))
            if self.window_file is not None:
                doc = {
                    "version": JOBS_WINDOW_VERSION,
                    "jobs": {n: w.to_json() for n, w in sorted(self.windows.items())},
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

    def exposition(self) -> str:
        exp = Exposition()
        jobs = self.evaluate(self.args.min_interval)
        for jl, status in jobs:
            if jl.report is not None:
                lag_exposition(jl.report, status, exp, labels={"job": jl.job})
        for jl, _ in jobs:
            exp.add("lag_up", "gauge", "1 when the job's lag was read at the last evaluation, else 0.",
                    0.0 if jl.report is None else 1.0, {"job": jl.job})  # fmt: skip
        for name in self.names:
            exp.add("lag_scrape_errors_total", "counter", "Evaluations that failed.", self.errors.get(name, 0),
                    {"job": name})  # fmt: skip
        exp.add("lag_evaluation_duration_seconds", "gauge", "Time the last evaluation took.", self.duration_s)
        return exp.render()


#: Version of the ``--window`` file of ``--pipeline`` (each job's window inside is a LagWindow's JSON).
JOBS_WINDOW_VERSION = 1


def _rows(status: LagStatus) -> list[str]:
    rows = [("TOPIC", "PARTITION", "COMMITTED", "END", "LAG", "TIME-LAG", "STATUS", "OWNER")]
    for ps in status.partitions:
        p = ps.lag
        time_lag = "-" if p.time_lag_s is None else f"{p.time_lag_s:.1f}s"
        if p.time_lag_method in ("extrapolated", "next-record"):
            time_lag = (">=" if p.time_lag_method == "next-record" else "~") + time_lag
        lag = "-" if p.lag is None else str(p.lag) + (" LOST" if p.data_loss else "")
        rows.append((p.topic, str(p.partition), "-" if p.committed is None else str(p.committed), str(p.end),
                     lag, time_lag, ps.status, p.owner or "-"))  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def _table(report: LagReport, status: LagStatus) -> str:
    head = f"GROUP {report.group}"
    if report.group_state is not None:
        head += f" ({report.group_state}, {report.group_members} members)"
    head += f"  status {status.status}  isolation {report.isolation}"
    return "\n".join([head, *_rows(status), status.summary]) + "\n"


def _jobs_table(jobs: Sequence[tuple[JobLag, LagStatus | None]]) -> str:
    blocks = []
    for jl, status in jobs:
        where = f"target {jl.target}" if jl.offsets_from == "target" else f"group {jl.group}"
        if jl.offsets_from == "target" and jl.stored_run is not None:
            where += f" (run {jl.stored_run})"
        if jl.report is None or status is None:
            blocks.append(f"JOB {jl.job} ({jl.kind})  offsets from {where}\n  error: {jl.error}")
            continue
        head = f"JOB {jl.job} ({jl.kind})  offsets from {where}  status {status.status}  isolation {status.isolation}"
        summary = status.summary.split(": ", 1)[-1]
        blocks.append("\n".join([head, *_rows(status), f"job {jl.job!r}: {summary}"]))
    return "\n\n".join(blocks) + "\n"


def serve(monitor: LagMonitor | PipelineLagMonitor, host: str, port: int) -> ThreadingHTTPServer:
    """An HTTP server (not started) answering ``/metrics``, ``/status`` and ``/healthz``. A pipeline's
    monitor labels every series with ``job``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            try:
                if path == "/metrics":
                    self._send(200, CONTENT_TYPE, monitor.exposition())
                elif path == "/status":
                    doc = monitor.document(monitor.args.min_interval)
                    self._send(200, "application/json", json.dumps(doc, sort_keys=True))
                elif path == "/healthz":
                    self._send(200, "text/plain; charset=utf-8", "ok\n")
                else:
                    self._send(404, "text/plain; charset=utf-8", "try /metrics, /status or /healthz\n")
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

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def _usage_error(args: argparse.Namespace) -> str | None:
    if args.pipeline is not None:
        if args.group is not None:
            return "--group and --pipeline exclude each other (a pipeline's jobs have their own groups)"
        if args.topic:
            return "--topic does not apply to --pipeline (each job's source topics are used); use --job"
        return None
    if args.job:
        return "--job needs --pipeline"
    if args.group is None:
        return "give --group (with --bootstrap-servers or --connection) or --pipeline"
    if args.bootstrap_servers is None and args.connection is None:
        return "--group needs --bootstrap-servers or --connection"
    return None


def run(args: argparse.Namespace) -> int:
    """Run ``lag`` with parsed arguments; returns the exit code."""
    problem = _usage_error(args)
    if problem is not None:
        print(f"upsert-kafka-ops lag: error: {problem}", file=sys.stderr)
        return 2
    if args.pipeline is not None:
        return _run_pipeline(args)
    try:
        monitor = LagMonitor(args)
        if args.serve:
            return _serve(monitor, args, f"group {args.group!r}")
        try:
            report, status = monitor.evaluate()
        finally:
            monitor.close()
    except UpsertKafkaOpsError as exc:
        print(f"upsert-kafka-ops: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(lag_document(report, status), sort_keys=True, indent=2))
    else:
        sys.stdout.write(_table(report, status))
    return 1 if args.fail_on and status.at_least(args.fail_on) else 0


def _serve(monitor: LagMonitor | PipelineLagMonitor, args: argparse.Namespace, what: str) -> int:
    server = serve(monitor, args.host, args.port)
    print(
        f"serving http://{args.host}:{server.server_address[1]}/metrics for {what}",
        file=sys.stderr,
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        monitor.close()
    return 0


def _run_pipeline(args: argparse.Namespace) -> int:
    try:
        monitor = PipelineLagMonitor(args)
        if args.serve:
            return _serve(monitor, args, f"{len(monitor.names)} jobs of {str(args.pipeline)!r}")
        try:
            jobs = monitor.evaluate()
        finally:
            monitor.close()
    except UpsertKafkaOpsError as exc:
        print(f"upsert-kafka-ops: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(jobs_lag_document(jobs), sort_keys=True, indent=2))
    else:
        sys.stdout.write(_jobs_table(jobs))
    failed = [jl for jl, status in jobs if status is None]
    for jl in failed:
        print(f"upsert-kafka-ops: error: job {jl.job}: {jl.error}", file=sys.stderr)
    if failed:
        return 2
    return 1 if args.fail_on and any(s is not None and s.at_least(args.fail_on) for _, s in jobs) else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m upsert_kafka_ops.cli_lag lag ...`` (the same as ``upsert-kafka-ops lag ...``)."""
    parser = argparse.ArgumentParser(prog="upsert-kafka-ops")
    register(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
