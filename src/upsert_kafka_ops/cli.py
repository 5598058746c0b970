"""The ``upsert-kafka-ops`` command line.

Commands:

- ``jars fetch [--dir D] [--group kafka|spark]``: resolve the JVM jars from Maven Central.
- ``jars path [--group G]``: print a group's folder (for scripts).
- ``local kafka start|stop|status [--dir D]``: the embedded single-node KRaft broker.
- ``docs config``: print the configuration reference (docs/configuration.md).
- ``demo``: the main job on the embedded default (local broker, local Spark).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from upsert_kafka_ops import jars
from upsert_kafka_ops.errors import UpsertKafkaOpsError


def _parser() -> argparse.ArgumentParser:
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

    pdoc = sub.add_parser("docs", help="generated documentation")
    pdoc.add_argument("what", choices=["config"], help="config: the configuration reference (Markdown)")

    pd = sub.add_parser("demo", help="run the main job on the embedded default")
    pd.add_argument("--jars-dir", type=Path, default=None, help="jar cache folder")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "jars":
            return _jars(args)
        if args.command == "local":
            return _local_kafka(args)
        if args.command == "docs":
            from upsert_kafka_ops.spec.reference import render

            sys.stdout.write(render())
            return 0
        if args.command == "demo":
            from upsert_kafka_ops.demo import run_demo

            run_demo(jars_dir=args.jars_dir)
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
        broker = lk.start_detached(state_dir, jars_dir=args.jars_dir)
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


if __name__ == "__main__":
    sys.exit(main())
