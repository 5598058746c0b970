"""The ``upsert-kafka-ops`` command line.

Commands:

- ``jars fetch [--dir D] [--group kafka|spark]``: resolve the JVM jars from Maven Central.
- ``jars path [--group G]``: print a group's folder (for scripts).
- ``run PIPELINE [--job NAME] [--mode full|incremental] [--json]``: run a pipeline's jobs.
- ``backfill PIPELINE --job NAME [--until latest|MILLIS|OFFSETS_JSON] [--rewind] [--json]``: a bounded
  earliest -> end rebuild of a job's target.
- ``reset-checkpoint PIPELINE --job NAME``: forget a topic-to-topic job's streaming checkpoint.
- ``describe-topic TOPIC (--bootstrap-servers S | --pipeline FILE [--connection NAME]) [--json]``.
- ``lag ...``: consumer lag and Burrow status (see ``upsert-kafka-ops lag --help``).
- ``local kafka|postgres start|stop|status [--dir D]``: the embedded broker and warehouse.
- ``docs config``: print the configuration reference (docs/configuration.md); ``docs helm-schema``:
  the Helm chart's values.schema.json.
- ``demo``: the main job on the embedded default (local broker, local Spark).

``-v`` (before or after the command) brings back Spark's INFO logs, the JVM's start-up notices and
this package's debug lines; without it a run prints its progress, its results and its errors only.

Exit codes: 0 success; 1 a job failed; 2 bad input or a service error; 3 ``status`` of a stopped
service.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from upsert_kafka_ops import jars
from upsert_kafka_ops.errors import UpsertKafkaOpsError


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser (the Helm chart's tests parse its container arguments with it)."""
    p = argparse.ArgumentParser(prog="upsert-kafka-ops", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    pj = sub.add_parser("jars", help="JVM artifacts from Maven Central")
    jsub = pj.add_subparsers(dest="jars_command", required=True)
    for name, text in (("fetch", "resolve the jars (a no-op when up to date)"), ("path", "print folders")):
        sp = jsub.add_parser(name, help=text)
        sp.add_argument("--dir", type=Path, default=None, help=f"cache folder (default: ${jars.ENV_JARS_DIR} "
                        "or the user cache directory)")  # fmt: skip
        sp.add_argument("--group", action="append", choices=sorted(jars.GROUPS), help="only this group")

    pl = sub.add_parser("local", help="local services for development and tests")
    lsub = pl.add_subparsers(dest="service", required=True)
    pk = lsub.add_parser("kafka", help="a single-node KRaft broker on 127.0.0.1")
    pk.add_argument("action", choices=["start", "stop", "status"])
    pk.add_argument("--dir", type=Path, default=None, help="state folder (default: under the user state dir)")
    pk.add_argument("--jars-dir", type=Path, default=None, help="jar cache folder")
    pk.add_argument("--port", type=int, default=None, help="start: the listener's port (default: a free one)")
    pk.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="NAME[:PARTITIONS]",
        help="start: create this compacted topic (repeat; 1 partition unless given)",
    )
    pp = lsub.add_parser("postgres", help="a PostgreSQL server on 127.0.0.1 (the local warehouse)")
    pp.add_argument("action", choices=["start", "stop", "status"])
    pp.add_argument("--dir", type=Path, default=None, help="state folder")
    pg = lsub.add_parser(
        "registry",
        help="a Schema-Registry-compatible server on 127.0.0.1 (Apicurio, Confluent API), in the "
        "foreground until interrupted; prints its URL as JSON",
    )
    pg.add_argument("--dir", type=Path, default=None, help="folder for its log (default: a temp folder)")
    pg.add_argument("--jars-dir", type=Path, default=None, help="jar cache folder (the build lands there)")

    pr = sub.add_parser("run", help="run a pipeline's jobs (all, in file order, or one)")
    pr.add_argument("pipeline", type=Path, help="pipeline file (YAML or JSON)")
    pr.add_argument("--job", action="append", help="only this job (repeat)")
    pr.add_argument("--mode", choices=["incremental", "full"], help="override materialize jobs' mode")
    pr.add_argument("--json", action="store_true", help="print the results as JSON")
    pr.add_argument("--lock-timeout", type=float, default=60.0, help="seconds to wait for a running run")

    pb = sub.add_parser("backfill", help="bounded earliest -> end rebuild of a job's target")
    pb.add_argument("pipeline", type=Path, help="pipeline file (YAML or JSON)")
    pb.add_argument("--job", required=True, help="a backfill or materialize job")
    pb.add_argument("--until", default=None,
                    help="'latest' (default), epoch milliseconds, or offsets JSON {topic: {partition: offset}}")  # fmt: skip
    pb.add_argument("--rewind", action="store_true", help="allow an end older than the target's offsets")
    pb.add_argument("--json", action="store_true", help="print the result as JSON")

    pc = sub.add_parser("reset-checkpoint", help="delete a topic-to-topic job's streaming checkpoint")
    pc.add_argument("pipeline", type=Path)
    pc.add_argument("--job", required=True)

    pt = sub.add_parser("describe-topic", help="partitions, offsets and the config that matters for upserts")
    pt.add_argument("topic")
    where = pt.add_mutually_exclusive_group(required=True)
    where.add_argument("--bootstrap-servers", help="host:port[,host:port] (PLAINTEXT)")
    where.add_argument("--pipeline", type=Path, help="take the connection from this pipeline file")
    pt.add_argument("--connection", help="connection name in the pipeline (default: the only one)")
    pt.add_argument("--json", action="store_true")

    from upsert_kafka_ops import cli_lag

    cli_lag.register(sub)

    pdoc = sub.add_parser("docs", help="generated documentation")
    pdoc.add_argument(
        "what",
        choices=["config", "helm-schema"],
        help="config: the configuration reference (Markdown); helm-schema: the chart's values.schema.json",
    )

    pd = sub.add_parser("demo", help="run the main job on the embedded default")
    pd.add_argument("--jars-dir", type=Path, default=None, help="jar cache folder")
    pd.add_argument("--dir", type=Path, default=None,
                    help="folder for the demo's tables and broker, kept afterwards (default: build/demo)")  # fmt: skip

    verbose = "Spark's INFO logs, the JVM's notices and debug lines (default: progress, results, errors)"
    p.add_argument("-v", "--verbose", action="store_true", help=verbose)
    for command in sub.choices.values():  # also after the command; SUPPRESS keeps the top level's value
        command.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=verbose)
    return p


def configure_output(verbose: bool) -> None:
    """What a command prints: this package's progress lines (INFO; DEBUG with ``verbose``) on stderr,
    and Spark's logs at ERROR (INFO with ``verbose``) in every session the process builds. An
    explicit ``$UPSERT_KAFKA_OPS_SPARK_LOG_LEVEL`` wins over the quiet default."""
    from upsert_kafka_ops.runtime.session import ENV_LOG_LEVEL

    if verbose:
        os.environ[ENV_LOG_LEVEL] = "info"
    else:
        os.environ.setdefault(ENV_LOG_LEVEL, "error")
    logger = logging.getLogger("upsert_kafka_ops")
    if not any(getattr(h, "name", None) == "upsert-kafka-ops-cli" for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.set_name("upsert-kafka-ops-cli")
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
        logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if verbose else logging.INFO)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_output(args.verbose)
    try:
        if args.command == "jars":
            return _jars(args)
        if args.command == "local":
            if args.service == "registry":
                return _local_registry(args)
            return _local_kafka(args) if args.service == "kafka" else _local_postgres(args)
        if args.command in ("run", "backfill", "reset-checkpoint", "describe-topic"):
            from upsert_kafka_ops import cli_jobs

            return int(getattr(cli_jobs, args.command.replace("-", "_"))(args))
        if args.command == "lag":
            from upsert_kafka_ops import cli_lag

            return cli_lag.run(args)
        if args.command == "docs":
            if args.what == "helm-schema":
                from upsert_kafka_ops.deploy.helm_values import values_schema_json

                sys.stdout.write(values_schema_json())
                return 0
            from upsert_kafka_ops.spec.reference import render

            sys.stdout.write(render())
            return 0
        if args.command == "demo":
            from upsert_kafka_ops.demo import DEFAULT_DIR, run_demo

            run_demo(jars_dir=args.jars_dir, folder=args.dir or DEFAULT_DIR)
            return 0
    except UpsertKafkaOpsError as exc:
        print(f"upsert-kafka-ops: error: {exc}", file=sys.stderr)
        return 2
    return 1


def _jars(args: argparse.Namespace) -> int:
    if args.jars_command == "fetch":
        jars.fetch(groups=args.group, jars_dir=args.dir)
    else:
        for name in args.group or sorted(jars.GROUPS):
            print(jars.group_dir(name, args.dir))
    return 0


def _local_kafka(args: argparse.Namespace) -> int:
    from upsert_kafka_ops.local import kafka as lk

    state_dir = args.dir or lk.default_state_dir()
    if args.action == "start":
        topics = dict(_topic_arg(t) for t in args.topic)
        broker = lk.start_detached(state_dir, jars_dir=args.jars_dir, port=args.port, topics=topics)
        print(
            json.dumps(
                {"bootstrap_servers": broker.bootstrap_servers, "pid": broker.pid, "dir": str(state_dir)}
            )
        )
    elif args.action == "stop":
        stopped = lk.stop_detached(state_dir)
        print("stopped" if stopped else "not running")
    else:
        status = lk.detached_status(state_dir)
        print(json.dumps(status))
        return 0 if status["running"] else 3
    return 0


def _topic_arg(text: str) -> tuple[str, int]:
    name, sep, count = text.partition(":")
    if not name or (sep and not count.isdigit()) or count == "0":
        raise UpsertKafkaOpsError(f"--topic {text!r}: write NAME or NAME:PARTITIONS (a positive number).")
    return name, int(count or 1)


def _local_postgres(args: argparse.Namespace) -> int:
    from upsert_kafka_ops.local import postgres as lp

    state_dir = args.dir or lp.default_state_dir()
    if args.action == "start":
        server = lp.start_detached(state_dir)
        print(json.dumps({"jdbc_url": server.jdbc_url, "port": server.port, "user": server.user,
                          "password_file": str(server.password_file), "dir": str(state_dir)}))  # fmt: skip
    elif args.action == "stop":
        print("stopped" if lp.stop_detached(state_dir) else "not running")
    else:
        status = lp.detached_status(state_dir)
        print(json.dumps(status))
        return 0 if status["running"] else 3
    return 0


def _local_registry(args: argparse.Namespace) -> int:
    import signal
    import tempfile

    from upsert_kafka_ops.local.schema_registry import LocalSchemaRegistry, build

    build(args.jars_dir, log=True)  # its lines go to stderr: stdout is the JSON below
    work = args.dir or Path(tempfile.mkdtemp(prefix="uko-registry-"))
    stop = {"now": False}

    def _stop(signum: int, frame: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, _stop)
    with LocalSchemaRegistry(work, jars_dir=args.jars_dir) as registry:
        print(json.dumps({"url": registry.url, "log": str(registry.log_file)}), flush=True)
        try:
            while not stop["now"]:
                signal.pause()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
