"""``upsert-kafka-ops lag``: a consumer group's or a pipeline's jobs' lag and Burrow status, once or as
a Prometheus endpoint.

Examples::

    upsert-kafka-ops lag --bootstrap-servers broker:9092 --group g [--topic t] [--json]
    upsert-kafka-ops lag --connection conn.yaml --group g --window state.json --fail-on WARN
    upsert-kafka-ops lag --bootstrap-servers broker:9092 --group g --serve --port 9308
    upsert-kafka-ops lag --pipeline pipelines/demo.yaml [--job NAME] [--json] [--serve --port 9308]
    upsert-kafka-ops lag --pipeline a.yaml --pipeline b.yaml --window /var/lib/uko --serve

With ``--pipeline`` each job's committed offsets are its warehouse target's stored offsets, or its
consumer group ``upsert-kafka-ops.<job>`` (see :mod:`upsert_kafka_ops.jobs.lag`); the endpoint
labels every series with ``pipeline`` and ``pipeline_job``.

Exit codes: 0, or 1 when ``--fail-on`` is given and the group status (with ``--pipeline``: any
job's) is at that level or worse, 2 when the lag could not be read (of any job) or on bad usage. ``--window FILE`` keeps Burrow's window between runs (plain JSON);
without it one observation can only show lag, data loss and STOP-free statuses.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from upsert_kafka_ops.errors import SpecError, UpsertKafkaOpsError
from upsert_kafka_ops.jobs.lag import JobLag
from upsert_kafka_ops.jobs.lag_monitor import PipelineLagMonitor, PipelinesMonitor
from upsert_kafka_ops.kafka.admin import ISOLATIONS
from upsert_kafka_ops.kafka.evaluation import EvaluationConfig, LagStatus, Schedule
from upsert_kafka_ops.kafka.lag import LagReport
from upsert_kafka_ops.metrics.documents import jobs_lag_document, lag_document, pipelines_lag_document
from upsert_kafka_ops.metrics.exporter import LagMonitor, WatchOptions, serve
from upsert_kafka_ops.pipeline import Pipeline
from upsert_kafka_ops.spec.connection import KafkaConnection

Monitor = LagMonitor | PipelineLagMonitor | PipelinesMonitor


def register(subparsers: Any) -> None:
    """Add the ``lag`` command to the CLI's subparsers."""
    p = subparsers.add_parser("lag", help="consumer group lag and Burrow status; a Prometheus endpoint")
    add_arguments(p)
    p.set_defaults(handler=run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``lag`` command's options."""
    conn = p.add_mutually_exclusive_group()
    conn.add_argument("--bootstrap-servers", help="host:port[,host:port] (PLAINTEXT)")
    conn.add_argument(
        "--connection", type=Path, help="a KafkaConnection as JSON or YAML (secrets as references)"
    )
    conn.add_argument(
        "--pipeline",
        type=Path,
        action="append",
        help="every job of this pipeline file, with its connections (instead of --group); "
        "repeat to serve several files from one port",
    )
    p.add_argument("--group", help="consumer group id (with --bootstrap-servers or --connection)")
    p.add_argument("--job", action="append", help="with --pipeline: only this job (repeat)")
    p.add_argument(
        "--topic", action="append", help="only this topic (repeat); default: every topic with commits"
    )
    p.add_argument(
        "--isolation",
        choices=ISOLATIONS,
        default="read_committed",
        help="the consumer's isolation level (default read_committed: lag against the last stable offset)",
    )
    p.add_argument(
        "--uncommitted",
        choices=["earliest", "latest"],
        default="earliest",
        help="with --group: where a partition without a commit is read from, as the consumer's "
        "auto.offset.reset (default earliest: all its records wait)",
    )
    p.add_argument("--json", action="store_true", help="print a JSON document instead of a table")
    p.add_argument("--fail-on", choices=["WARN", "ERR"], help="exit 1 when the group status is this or worse")
    p.add_argument(
        "--allow-missing-group",
        action="store_true",
        help="report a group the cluster does not know as NOTFOUND (default: an error, exit 2)",
    )
    p.add_argument(
        "--window",
        type=Path,
        help="JSON file keeping the evaluation window between runs (one per job with --pipeline); "
        "a directory (one file per pipeline, PIPELINE.json) with several --pipeline",
    )
    p.add_argument("--no-time-lag", action="store_true", help="skip reading records (no time lag)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per broker call (default 10)")
    p.add_argument("--allowed-lag", type=int, default=0, help="Burrow's allowed-lag (default 0)")
    p.add_argument("--intervals", type=int, default=10, help="window size in samples (default 10)")
    p.add_argument(
        "--schedule-interval",
        type=float,
        help="batch job cadence in seconds (schedule-aware mode); a pipeline job's own schedule: wins",
    )
    p.add_argument(
        "--schedule-grace",
        type=float,
        default=0.0,
        help="seconds a scheduled run may be late before STOP (a job's schedule: or --schedule-interval)",
    )
    p.add_argument("--serve", action="store_true", help="serve /metrics (Prometheus) and /status (JSON)")
    p.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=9308, help="port to serve on (default 9308)")
    p.add_argument(
        "--min-interval",
        type=float,
        default=5.0,
        help="reuse an evaluation younger than this many seconds when serving (default 5)",
    )


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


def watch_options(args: argparse.Namespace) -> WatchOptions:
    """The monitors' options from the ``lag`` command's arguments."""
    schedule = None
    if args.schedule_interval:
        schedule = Schedule(interval_s=args.schedule_interval, grace_s=args.schedule_grace)
    evaluation = EvaluationConfig(
        intervals=args.intervals,
        allowed_lag=args.allowed_lag,
        schedule=schedule,
        schedule_grace_s=args.schedule_grace,
    )
    return WatchOptions(
        isolation=args.isolation,
        time_lag=not args.no_time_lag,
        timeout_s=args.timeout,
        min_interval_s=args.min_interval,
        window_file=args.window,
        evaluation=evaluation,
        uncommitted=args.uncommitted,
    )


def group_monitor(args: argparse.Namespace) -> LagMonitor:
    """The monitor of ``--group`` (with ``--bootstrap-servers`` or ``--connection``)."""
    return LagMonitor(_connection(args), args.group, args.topic, watch_options(args))


def pipeline_monitor(args: argparse.Namespace) -> PipelineLagMonitor | PipelinesMonitor:
    """The monitor of ``--pipeline``'s jobs (``--job`` to choose); of several files' jobs, each file's
    windows in ``--window``'s directory as ``<pipeline>.json``."""
    options = watch_options(args)
    files: list[Path] = args.pipeline
    folder = args.window if args.window is not None and (len(files) > 1 or args.window.is_dir()) else None
    if folder is not None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SpecError(
                "--window",
                f"cannot create the folder {str(folder)!r}: {exc.strerror}.",
                "with several --pipeline, --window names a folder (one file per pipeline).",
            ) from None
    monitors = []
    for file in files:
        own = replace(options, window_file=folder / f"{file.stem}.json") if folder is not None else options
        monitors.append(PipelineLagMonitor(Pipeline.load(file), args.job, own))
    return monitors[0] if len(monitors) == 1 else PipelinesMonitor(monitors)


def _rows(status: LagStatus) -> list[str]:
    rows = [("TOPIC", "PARTITION", "COMMITTED", "END", "LAG", "TIME-LAG", "STATUS", "OWNER")]
    for ps in status.partitions:
        p = ps.lag
        time_lag = "-" if p.time_lag_s is None else f"{p.time_lag_s:.1f}s"
        if p.time_lag_method in ("extrapolated", "next-record"):
            time_lag = (">=" if p.time_lag_method == "next-record" else "~") + time_lag
        lag = "-" if p.lag is None else str(p.lag) + (" LOST" if p.data_loss else "")
        rows.append(
            (
                p.topic,
                str(p.partition),
                "-" if p.committed is None else str(p.committed),
                str(p.end),
                lag,
                time_lag,
                ps.status,
                p.owner or "-",
            )
        )
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


def _usage_error(args: argparse.Namespace) -> str | None:
    if args.pipeline is not None:
        if args.group is not None:
            return "--group and --pipeline exclude each other (a pipeline's jobs have their own groups)"
        if args.topic:
            return "--topic does not apply to --pipeline (each job's source topics are used); use --job"
        if args.job and len(args.pipeline) > 1:
            return "--job needs a single --pipeline (job names belong to one file)"
        if args.uncommitted != "earliest":
            return (
                "--uncommitted does not apply to --pipeline (upsert-kafka jobs read from the earliest offset)"
            )
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
    report_status, code = _evaluate(group_monitor, args)
    if report_status is None:
        return code
    report, status = report_status
    unknown = report.group_state == "DEAD" and all(p.committed is None for p in report.partitions)
    if unknown and not args.allow_missing_group:  # most likely a typo: never a silent NOTFOUND that passes
        where = args.bootstrap_servers or str(args.connection)
        print(
            f"upsert-kafka-ops lag: error: consumer group {args.group!r} does not exist on {where} (no member, "
            "no committed offset). Check its name, or give --allow-missing-group to report it as NOTFOUND.",
            file=sys.stderr,
        )
        return 2
    if args.json:
        print(json.dumps(lag_document(report, status), sort_keys=True, indent=2))
    else:
        sys.stdout.write(_table(report, status))
    return 1 if args.fail_on and status.at_least(args.fail_on) else 0


def _evaluate(build: Callable[[argparse.Namespace], Monitor], args: argparse.Namespace) -> tuple[Any, int]:
    """Build the monitor, then serve it (``(None, exit code)``) or evaluate it once (``(evaluation, 0)``);
    an error reading the lag is ``(None, 2)``, printed."""
    try:
        monitor = build(args)
        if args.serve:
            return None, _serve(monitor, args)
        try:
            return monitor.evaluate(), 0
        finally:
            monitor.close()
    except UpsertKafkaOpsError as exc:
        print(f"upsert-kafka-ops: error: {exc}", file=sys.stderr)
        return None, 2


def _serve(monitor: Monitor, args: argparse.Namespace) -> int:
    server = serve(monitor, args.host, args.port)
    if isinstance(monitor, PipelineLagMonitor | PipelinesMonitor):
        what = f"{len(monitor.names)} jobs of {', '.join(repr(str(f)) for f in args.pipeline)}"
    else:
        what = f"group {args.group!r}"
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
    evaluation, code = _evaluate(pipeline_monitor, args)
    if evaluation is None:
        return code
    several = len(args.pipeline) > 1
    by_file: list[tuple[str, list[tuple[JobLag, LagStatus | None]]]] = (
        evaluation if several else [(Path(args.pipeline[0]).stem, evaluation)]
    )
    if args.json:
        docs = {name: jobs_lag_document(jobs) for name, jobs in by_file}
        doc = pipelines_lag_document(docs) if several else next(iter(docs.values()))
        print(json.dumps(doc, sort_keys=True, indent=2))
    else:
        for name, jobs in by_file:
            sys.stdout.write((f"PIPELINE {name}\n" if several else "") + _jobs_table(jobs))
    jobs = [pair for _, pairs in by_file for pair in pairs]
    failed = [jl for jl, status in jobs if status is None]
    for jl in failed:
        print(f"upsert-kafka-ops: error: job {jl.job}: {jl.error}", file=sys.stderr)
    if failed:
        return 2
    return 1 if args.fail_on and any(s is not None and s.at_least(args.fail_on) for _, s in jobs) else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m upsert_kafka_ops.cli.lag lag ...`` (the same as ``upsert-kafka-ops lag ...``)."""
    parser = argparse.ArgumentParser(prog="upsert-kafka-ops")
    register(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
