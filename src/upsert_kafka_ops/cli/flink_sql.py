"""``upsert-kafka-ops import-flink-sql SCRIPT``: a Flink SQL script as a pipeline file, on stdout."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from upsert_kafka_ops.errors import SpecError


def register(sub: Any) -> None:
    """Add ``import-flink-sql``."""
    p = sub.add_parser(
        "import-flink-sql",
        help="a Flink SQL script (CREATE TABLE, INSERT INTO ... SELECT, SET) as a pipeline file on stdout",
    )
    p.add_argument("script", help="the .sql file ('-' reads stdin)")
    p.add_argument("--name", help="the pipeline's name (default: SET 'pipeline.name', else the file's stem)")
    p.set_defaults(handler=_command)


def _command(args: argparse.Namespace) -> int:
    import yaml

    from upsert_kafka_ops.jobs.flink_sql import import_flink_sql

    if args.script == "-":
        text, stem = sys.stdin.read(), None
    else:
        try:
            text, stem = Path(args.script).read_text(), Path(args.script).stem
        except OSError as exc:
            raise SpecError("script", f"cannot read {args.script!r}: {exc.strerror}.") from None
    imported = import_flink_sql(text, args.name)
    if "name" not in imported.pipeline and stem:
        imported.pipeline = {"version": 1, "name": stem, **imported.pipeline}
    for note in imported.notes:
        print(f"upsert-kafka-ops: note: {note}", file=sys.stderr)
    sys.stdout.write(f"# imported from {args.script} by upsert-kafka-ops import-flink-sql\n")
    sys.stdout.write(yaml.dump(imported.pipeline, Dumper=_dumper(), sort_keys=False, width=110))
    return 0


def _block(dumper: Any, value: str) -> Any:
    """Statements and queries as YAML block literals (``|``), the way a person writes them."""
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


def _dumper() -> Any:
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    Dumper.add_representer(str, _block)
    return Dumper
