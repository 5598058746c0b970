"""The service commands of the CLI: ``jars fetch|path`` and ``local kafka|postgres|registry``."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from upsert_kafka_ops import jars, spark_lines
from upsert_kafka_ops.errors import LocalServiceError, SpecError, UpsertKafkaOpsError


def register(sub: Any) -> None:
    """Add ``jars`` and ``local``."""
    pj = sub.add_parser("jars", help="JVM artifacts from Maven Central")
    pj.set_defaults(handler=_jars)
    jsub = pj.add_subparsers(dest="jars_command", required=True)
    for name, text in (("fetch", "resolve the jars (a no-op when up to date)"), ("path", "print folders")):
        sp = jsub.add_parser(name, help=text)
        sp.add_argument(
            "--dir",
            type=Path,
            default=None,
            help=f"cache folder (default: ${jars.ENV_JARS_DIR} or the user cache directory)",
        )
        sp.add_argument("--group", action="append", choices=sorted(jars.GROUP_NAMES), help="only this group")
        which = sp.add_mutually_exclusive_group()
        which.add_argument(
            "--spark-version",
            default=None,
            help="the jars for this Spark release (a cluster's, "
            "e.g. 3.5.6-amzn-1) instead of the installed pyspark's",
        )
        which.add_argument(
            "--spark-submit",
            default=None,
            help="the jars for the Spark this spark-submit runs (read from its --version)",
        )

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
    pk.set_defaults(handler=_local_kafka)
    pp = lsub.add_parser("postgres", help="a PostgreSQL server on 127.0.0.1 (the local warehouse)")
    pp.add_argument("action", choices=["start", "stop", "status"])
    pp.add_argument("--dir", type=Path, default=None, help="state folder")
    pp.set_defaults(handler=_local_postgres)
    pg = lsub.add_parser(
        "registry",
        help="a Schema-Registry-compatible server on 127.0.0.1 (Apicurio, Confluent API), in the "
        "foreground until interrupted; prints its URL as JSON",
    )
    pg.add_argument("--dir", type=Path, default=None, help="folder for its log (default: a temp folder)")
    pg.add_argument("--jars-dir", type=Path, default=None, help="jar cache folder (the build lands there)")
    pg.set_defaults(handler=_local_registry)

    pc = sub.add_parser(
        "spark-connect",
        help="a Spark Connect server with the project's jars and Delta, in the foreground until stopped "
        "(runs connect to it with --remote / ConnectRuntime); prints its URL as JSON",
    )
    pc.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0 in a container)")
    pc.add_argument(
        "--port", type=int, default=None, help="gRPC port (default: 15002, or a free one on loopback)"
    )
    pc.add_argument("--master", default="local[*]", help="the server's Spark master (default: local[*])")
    pc.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="Spark configuration (repeat)"
    )
    pc.add_argument("--dir", type=Path, default=None, help="folder for its log and uploaded artifacts")
    pc.add_argument(
        "--token",
        metavar="env:VAR|file:PATH",
        default=None,
        help="the token clients must send (default: a new one, written to --token-file)",
    )
    pc.add_argument(
        "--token-file",
        type=Path,
        default=None,
        help="where a generated token is written, readable by its owner only (default: DIR/token)",
    )
    pc.add_argument(
        "--insecure-no-token",
        action="store_true",
        help="run without a token: any local process can run code in the server (loopback only)",
    )
    pc.add_argument(
        "--group",
        action="append",
        default=[],
        choices=["s3", "iceberg"],
        help="a fetched jar group more on the server's class path: s3 (tables on S3), iceberg (repeat)",
    )
    pc.set_defaults(handler=_spark_connect)


def _jars(args: argparse.Namespace) -> int:
    version = args.spark_version
    if args.spark_submit:
        version = spark_lines.cluster_version(args.spark_submit)
        print(f"jars: {args.spark_submit} runs Spark {version}", file=sys.stderr)
    if args.jars_command == "fetch":
        jars.fetch(groups=args.group, jars_dir=args.dir, spark_version=version)
        # the local driver's class archive: for the installed Spark's own jars only
        fetched_spark = "spark" in (args.group or jars.DEFAULT_GROUPS) and "spark" not in jars.provided()
        if version is None and fetched_spark:
            from upsert_kafka_ops.engine import class_archive
            from upsert_kafka_ops.engine.session import spark_conf

            class_archive.build(spark_conf(jars_dir=args.dir))
    else:
        for name in args.group or jars.DEFAULT_GROUPS:
            print(jars.group_dir(jars.group(name, version), args.dir))
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
        print(
            json.dumps(
                {
                    "jdbc_url": server.jdbc_url,
                    "port": server.port,
                    "user": server.user,
                    "password_file": str(server.password_file),
                    "dir": str(state_dir),
                }
            )
        )
    elif args.action == "stop":
        print("stopped" if lp.stop_detached(state_dir) else "not running")
    else:
        status = lp.detached_status(state_dir)
        print(json.dumps(status))
        return 0 if status["running"] else 3
    return 0


def _spark_connect(args: argparse.Namespace) -> int:
    import signal
    import tempfile

    from upsert_kafka_ops import spark_lines
    from upsert_kafka_ops.local import LocalSparkConnect

    spark_lines.check_declared()  # the chart's image.sparkVersion against this image's pyspark
    conf = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UpsertKafkaOpsError(f"--conf {item!r}: write KEY=VALUE.")
        conf[key] = value
    work = args.dir or Path(tempfile.mkdtemp(prefix="uko-connect-"))
    stop = {"now": False}

    def _stop(signum: int, frame: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, _stop)
    token, where = _server_token(args, work)
    server = LocalSparkConnect(
        work,
        master=args.master,
        port=args.port,
        conf=conf,
        host=args.host,
        jar_groups=tuple(args.group),
        token=token,
        insecure_no_token=args.insecure_no_token,
    )
    if server.token is not None and where is None:  # generated: written where only its owner reads it
        where = {"file": str(_write_private(args.token_file or work / "token", server.token))}
    with server:
        print(json.dumps({"url": server.url, "log": str(server.log_file), "token": where}), flush=True)
        try:
            while not stop["now"] and server.running():
                time.sleep(1)
        except KeyboardInterrupt:
            pass
        if not server.running():
            raise LocalServiceError(f"The Spark Connect server stopped.\n{server.log_tail()}")
    return 0


def _server_token(args: argparse.Namespace, work: Path) -> tuple[str | None, dict[str, str] | None]:
    """The token ``--token`` references and its reference (printed instead of the value), or
    (None, None) for a token to generate."""
    from upsert_kafka_ops.spec.connection import SecretRef

    if args.token is None:
        return None, None
    if args.insecure_no_token:
        raise SpecError("--insecure-no-token", "is given with --token.", "give one of them.")
    try:
        ref = SecretRef.model_validate(args.token)
    except SpecError as exc:
        raise SpecError("--token", exc.message, "write env:VAR or file:PATH.") from None
    return ref.resolve(), ref.model_dump(mode="json")


def _write_private(path: Path, value: str) -> Path:
    """``value`` in ``path``, created readable and writable by its owner only (mode 0600)."""
    path = path.resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        os.fchmod(out.fileno(), 0o600)  # an existing file keeps its mode through O_CREAT
        out.write(value + "\n")
    return path


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
