"""The job commands of the CLI: ``run``, ``backfill``, ``verify``, ``reset-checkpoint``,
``describe-topic``.

Progress goes to stderr (one line per job start and end, Spark's own logs stay quiet); results go to
stdout, as a table or, with ``--json``, one JSON document. A failed job exits 1 with its error on
stderr (``verify``: a table that differs from its topic); bad input exits 2. ``run`` of a continuous
job (``trigger.continuous``) runs its batches until SIGTERM or SIGINT, then finishes the current batch
and exits 0 (a second signal stops it at once; the batch's commit is all or nothing).
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from upsert_kafka_ops.errors import SpecError, UpsertKafkaOpsError
from upsert_kafka_ops.pipeline import Pipeline, TopicToTopicJob, as_backfill
from upsert_kafka_ops.spec.connection import KafkaConnection

if TYPE_CHECKING:
    from upsert_kafka_ops.runtime import Runtime
    from upsert_kafka_ops.runtime.execute import Mode


def register(sub: Any) -> None:
    """Add ``run``, ``backfill``, ``verify``, ``reset-checkpoint`` and ``describe-topic``."""
    pr = sub.add_parser("run", help="run a pipeline's jobs (all, in file order, or one)")
    pr.add_argument("pipeline", type=Path, help="pipeline file (YAML or JSON)")
    pr.add_argument("--job", action="append", help="only this job (repeat)")
    pr.add_argument("--mode", choices=["incremental", "full"], help="override materialize jobs' mode")
    pr.add_argument("--json", action="store_true", help="print the results as JSON")
    pr.add_argument("--lock-timeout", type=float, default=60.0, help="seconds to wait for a running run")
    pr.add_argument(
        "--once", action="store_true", help="run a continuous job's one batch, as a scheduler would, and exit"
    )
    pr.add_argument(
        "--metrics-port",
        type=int,
        help="continuous jobs: serve /metrics (Prometheus), /status (JSON), /healthz and /ready on this port",
    )
    pr.add_argument(
        "--metrics-host", default="127.0.0.1", help="--metrics-port's address (default 127.0.0.1)"
    )
    _remote_arguments(pr)
    pr.set_defaults(handler=run)

    pb = sub.add_parser("backfill", help="bounded earliest -> end rebuild of a job's target")
    pb.add_argument("pipeline", type=Path, help="pipeline file (YAML or JSON)")
    pb.add_argument("--job", required=True, help="a backfill or materialize job")
    pb.add_argument(
        "--until",
        default=None,
        help="'latest' (default), epoch milliseconds, or offsets JSON {topic: {partition: offset}}",
    )
    pb.add_argument("--rewind", action="store_true", help="allow an end older than the target's offsets")
    pb.add_argument("--json", action="store_true", help="print the result as JSON")
    _remote_arguments(pb)
    pb.set_defaults(handler=backfill)

    pv = sub.add_parser(
        "verify", help="compare a job's warehouse table with the fold of its topic up to the table's offsets"
    )
    pv.add_argument("pipeline", type=Path, help="pipeline file (YAML or JSON)")
    pv.add_argument("--job", required=True, help="a materialize or backfill job")
    pv.add_argument("--show", type=int, default=10, help="keys listed per kind of difference (default 10)")
    pv.add_argument("--json", action="store_true", help="print the outcome as JSON")
    pv.set_defaults(handler=verify)

    pc = sub.add_parser("reset-checkpoint", help="delete a topic-to-topic job's streaming checkpoint")
    pc.add_argument("pipeline", type=Path)
    pc.add_argument("--job", required=True)
    pc.set_defaults(handler=reset_checkpoint)

    pt = sub.add_parser("describe-topic", help="partitions, offsets and the config that matters for upserts")
    pt.add_argument("topic")
    where = pt.add_mutually_exclusive_group(required=True)
    where.add_argument("--bootstrap-servers", help="host:port[,host:port] (PLAINTEXT)")
    where.add_argument("--pipeline", type=Path, help="take the connection from this pipeline file")
    pt.add_argument("--connection", help="connection name in the pipeline (default: the only one)")
    pt.add_argument("--json", action="store_true")
    pt.set_defaults(handler=describe_topic)


def results_table(results: list[dict[str, Any]]) -> str:
    """Job results as an aligned text table (one row per job), with each job's reason below it."""
    head = [
        "job",
        "status",
        "mode",
        "execution",
        "run",
        "read",
        "upserted",
        "deleted",
        "written",
        "tombstones",
        "seconds",
    ]
    rows = [
        [
            r["job"],
            r["status"],
            r.get("mode", ""),
            r.get("execution", ""),
            str(r.get("run") or "-"),
            str(r.get("records_read", "")),
            str(r.get("rows_upserted", "")),
            str(r.get("rows_deleted", "")),
            str(r.get("records_written", "")),
            str(r.get("tombstones_written", "")),
            f"{r.get('duration_s', 0):.1f}",
        ]
        for r in results
    ]
    rows = [[cell or "-" for cell in row] for row in rows]  # no empty cell: columns split on spaces
    widths = [max(len(x) for x in col) for col in zip(head, *rows, strict=True)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) for line in [head, *rows]]
    notes = [f"  {r['job']}: {r['reason']}" for r in results if r.get("reason")]
    return "\n".join(lines + notes) + "\n"


def _emit(results: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        print(json.dumps({"version": 1, "results": results}, sort_keys=True, indent=2))
    else:
        sys.stdout.write(results_table(results))


def _remote_arguments(parser: Any) -> None:
    parser.add_argument(
        "--remote", metavar="sc://HOST:PORT", help="run on this Spark Connect server (a warm driver)"
    )
    parser.add_argument(
        "--token",
        metavar="env:VAR|file:PATH",
        help="--remote: the server's token (default: the SPARK_CONNECT_AUTHENTICATE_TOKEN variable)",
    )
    parser.add_argument(
        "--ca-cert",
        metavar="file:PATH|env:VAR",
        help="--remote: the CA bundle (PEM) of the server's TLS certificate; turns TLS on "
        "(default, with use_ssl=true: the file UKO_SPARK_CONNECT_CA_CERT names)",
    )


def runtime_of(args: argparse.Namespace) -> Runtime:
    """Where ``run`` and ``backfill`` run their jobs: the Spark Connect server ``--remote`` (with its
    ``--token`` and ``--ca-cert`` references), else local Spark in this process."""
    from upsert_kafka_ops.runtime import runtime_for

    if args.remote is None:
        for option in ("token", "ca_cert"):
            if getattr(args, option) is not None:
                raise SpecError(
                    f"--{option.replace('_', '-')}",
                    "is given without --remote.",
                    "add --remote sc://HOST:PORT, or drop it.",
                )
        return runtime_for()
    refs = {"token": args.token, "ca_cert": args.ca_cert}
    try:
        return runtime_for(args.remote, kind="connect", **{k: v for k, v in refs.items() if v is not None})
    except SpecError as exc:
        field = {"remote": "--remote", "token": "--token", "ca_cert": "--ca-cert"}.get(
            exc.field.split(".")[0]
        )
        raise SpecError(field or exc.field, exc.message, exc.fix) from None


def _run_many(
    pipeline: Pipeline,
    names: list[str],
    mode: Mode | None,
    lock_timeout: float,
    runtime: Runtime,
) -> list[dict[str, Any]]:
    """Run ``names`` one after the other on ``runtime``, in one session (stopped at the end)."""
    from upsert_kafka_ops.jobs.lineage import RunLineage
    from upsert_kafka_ops.runtime.execute import execute_job, open_session

    spark = open_session(runtime, app_name="upsert-kafka-ops", jar_groups=pipeline.jar_groups(*names))
    results = []
    try:
        for name in names:
            began = time.monotonic()
            lineage = RunLineage.from_env(pipeline, name)  # OpenLineage events: the CLI's, not run_job's
            if lineage is not None:
                lineage.start()
            try:
                r = execute_job(
                    pipeline,
                    name,
                    mode=mode,
                    runtime=runtime,
                    spark=spark,
                    lock_timeout_s=lock_timeout,
                )
                results.append(r.to_dict())
                if lineage is not None:
                    lineage.complete(results[-1])
            except UpsertKafkaOpsError as exc:
                if lineage is not None:
                    lineage.fail(str(exc))
                job = pipeline.job(name)
                results.append(
                    {
                        "job": name,
                        "kind": job.kind,
                        "status": "failed",
                        "error": str(exc),
                        "duration_s": round(time.monotonic() - began, 3),
                        "version": 1,
                    }
                )
                print(f"upsert-kafka-ops: job {name} failed: {exc}", file=sys.stderr)
                break
            except Exception as exc:  # Spark's own errors propagate; lineage still sees the failure
                if lineage is not None:
                    lineage.fail(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
                raise
    finally:
        spark.stop()
    return results


def run(args: argparse.Namespace) -> int:
    pipeline = Pipeline.load(args.pipeline)
    names = args.job or [j.name for j in pipeline.jobs]
    continuous = [n for n in names if pipeline.job(n).continuous]  # unknown names fail before Spark starts
    from upsert_kafka_ops.runtime.execute import as_mode

    mode = as_mode(args.mode, "--mode")
    if continuous and not args.once:
        bounded = [n for n in names if n not in continuous]
        if bounded:
            raise SpecError(
                "--job",
                f"job {continuous[0]!r} runs until it is stopped (trigger.continuous), and job {bounded[0]!r} "
                "is a bounded run that would wait for it.",
                "run the continuous jobs alone (--job NAME for each), or run every job once with --once.",
            )
        where = (args.metrics_host, args.metrics_port) if args.metrics_port is not None else None
        results = _run_continuous(pipeline, names, mode, args.lock_timeout, runtime_of(args), where)
    else:
        if args.metrics_port is not None:
            raise SpecError(
                "--metrics-port",
                "serves the metrics of continuous jobs; none of these jobs is one.",
                "drop it.",
            )
        results = _run_many(pipeline, names, mode, args.lock_timeout, runtime_of(args))
    _emit(results, args.json)
    return 1 if any(r["status"] != "succeeded" for r in results) else 0


def _run_continuous(
    pipeline: Pipeline,
    names: list[str],
    mode: Mode | None,
    lock_timeout: float,
    runtime: Runtime,
    serve_at: tuple[str, int] | None,
) -> list[dict[str, Any]]:
    """Run the continuous jobs ``names`` in one session until SIGTERM or SIGINT (serving their
    metrics at ``serve_at``); their results, or the failure that ended them."""
    from upsert_kafka_ops.jobs.continuous import ContinuousJobs
    from upsert_kafka_ops.metrics.exporter import serve
    from upsert_kafka_ops.runtime.execute import open_session

    spark = open_session(runtime, app_name="upsert-kafka-ops", jar_groups=pipeline.jar_groups(*names))
    stop = threading.Event()
    began = time.monotonic()
    server = None
    try:
        jobs = ContinuousJobs(pipeline, names, spark, mode=mode, lock_timeout_s=lock_timeout)
        if serve_at is not None:
            server = serve(jobs, *serve_at)
            threading.Thread(target=server.serve_forever, name="continuous-metrics", daemon=True).start()
            logging.getLogger("upsert_kafka_ops.jobs").info(
                "serving /metrics, /status, /healthz and /ready on http://%s:%d", *server.server_address[:2]
            )
        with _stopped_by_signals(stop):
            return [r.to_dict() for r in jobs.run(stop)]
    except UpsertKafkaOpsError as exc:
        print(f"upsert-kafka-ops: continuous run of {', '.join(names)} failed: {exc}", file=sys.stderr)
        return [
            {
                "job": name,
                "kind": pipeline.job(name).kind,
                "status": "failed",
                "execution": "continuous",
                "error": str(exc),
                "duration_s": round(time.monotonic() - began, 3),
                "version": 1,
            }
            for name in names
        ]
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
        spark.stop()


@contextmanager
def _stopped_by_signals(stop: threading.Event) -> Iterator[None]:
    """SIGTERM and SIGINT set ``stop`` (the current batch finishes and commits); a second one raises
    KeyboardInterrupt at once."""
    log = logging.getLogger("upsert_kafka_ops.jobs")

    def handle(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        log.info("%s: stopping after the current batch (again to stop at once)", signal.Signals(signum).name)
        stop.set()

    previous = {s: signal.signal(s, handle) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def backfill(args: argparse.Namespace) -> int:
    pipeline = Pipeline.load(args.pipeline)
    job = as_backfill(pipeline.job(args.job), args.until, args.rewind or None)
    single = Pipeline(connections=pipeline.connections, jobs=[job])
    results = _run_many(single, [job.name], None, 60.0, runtime_of(args))
    _emit(results, args.json)
    return 1 if any(r["status"] != "succeeded" for r in results) else 0


def verify(args: argparse.Namespace) -> int:
    from upsert_kafka_ops.jobs.verify import verify_job
    from upsert_kafka_ops.runtime import build_spark_session

    pipeline = Pipeline.load(args.pipeline)
    pipeline.job(args.job)  # an unknown name fails before Spark starts
    if args.show < 0:
        raise SpecError("--show", f"{args.show} is negative.", "list 0 or more keys per difference.")
    spark = build_spark_session(app_name="upsert-kafka-ops:verify", jar_groups=pipeline.jar_groups(args.job))
    try:
        outcome = verify_job(spark, pipeline, args.job, show=args.show)
    except UpsertKafkaOpsError:
        raise
    except Exception as exc:  # Spark's, the JDBC driver's: a service error (2), never "different" (1)
        first = (str(exc).strip().splitlines() or [""])[0][:500]
        print(
            f"upsert-kafka-ops: error: verify of job {args.job!r} failed: {type(exc).__name__}: {first}",
            file=sys.stderr,
        )
        return 2
    finally:
        spark.stop()
    print(json.dumps(outcome.to_dict(), indent=2, default=str) if args.json else outcome.summary())
    return 0 if outcome.ok else 1


def reset_checkpoint(args: argparse.Namespace) -> int:
    from upsert_kafka_ops.jobs.streaming import reset_checkpoint as reset

    pipeline = Pipeline.load(args.pipeline)
    job = pipeline.job(args.job)
    if not isinstance(job, TopicToTopicJob):
        raise SpecError(
            "--job", f"{job.name!r} is a {job.kind} job; only topic-to-topic jobs have checkpoints."
        )
    print("deleted" if reset(job, pipeline.checkpoint_storage_of(job)) else "no checkpoint")
    return 0


def describe_topic(args: argparse.Namespace) -> int:
    from upsert_kafka_ops.kafka.admin import KafkaAdmin

    if args.pipeline is not None:
        pipeline = Pipeline.load(args.pipeline)
        name = args.connection or (
            next(iter(pipeline.connections)) if len(pipeline.connections) == 1 else None
        )
        if name is None or name not in pipeline.connections:
            raise SpecError(
                "--connection",
                "name one of the pipeline's connections.",
                f"use {sorted(pipeline.connections)}.",
            )
        conn = pipeline.connections[name]
    else:
        conn = KafkaConnection(bootstrap_servers=args.bootstrap_servers)
    with KafkaAdmin(conn) as admin:
        info = admin.describe_topics([args.topic])[args.topic]
        config = admin.topic_configs([args.topic])[args.topic]
        parts = admin.partitions([args.topic])
        earliest = admin.earliest_offsets(parts)
        committed_end = admin.end_offsets(parts, isolation="read_committed")
    partitions = [
        {"partition": p, "earliest": earliest[(t, p)], "end": committed_end[(t, p)]} for t, p in sorted(parts)
    ]
    warnings = []
    if not config.compacted:
        warnings.append(
            f"cleanup.policy is {','.join(config.cleanup_policy)!r}: an upsert source should be compacted "
            "(cleanup.policy=compact), or old keys vanish with retention."
        )
    doc = {
        "topic": args.topic,
        "topic_id": info.topic_id,
        "partitions": partitions,
        "config": config.to_dict(),
        "warnings": warnings,
    }
    if args.json:
        print(json.dumps(doc, sort_keys=True, indent=2, default=str))
    else:
        print(f"topic {args.topic}  ({len(partitions)} partitions)")
        for k, v in sorted(config.to_dict().items()):
            print(f"  {k}: {v}")
        for p in partitions:
            print(f"  partition {p['partition']}: earliest {p['earliest']}, end {p['end']}")
        for w in warnings:
            print(f"warning: {w}", file=sys.stderr)
    return 0
