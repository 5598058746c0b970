"""The ``upsert-kafka-ops`` command line.

Commands:

- ``jars fetch [--dir D] [--group G] [--spark-version V | --spark-submit PATH]``: resolve the JVM jars
  from Maven Central for the installed pyspark's Spark, or a cluster's.
- ``jars path [--group G]``: print a group's folder (for scripts).
- ``run PIPELINE [--job NAME] [--mode full|incremental] [--json] [--remote sc://HOST:PORT]``: run a
  pipeline's jobs (on a Spark Connect server with ``--remote``, its token from ``--token REF``).
- ``backfill PIPELINE --job NAME [--until latest|MILLIS|OFFSETS_JSON] [--rewind] [--json]``: a bounded
  earliest -> end rebuild of a job's target.
- ``verify PIPELINE --job NAME [--show N] [--json]``: compare a job's warehouse table with the fold of
  its topic up to the offsets stored with it; exit 1 when they differ.
- ``reset-checkpoint PIPELINE --job NAME``: forget a topic-to-topic job's streaming checkpoint.
- ``describe-topic TOPIC (--bootstrap-servers S | --pipeline FILE [--connection NAME]) [--json]``.
- ``lag ...``: consumer lag and Burrow status (see ``upsert-kafka-ops lag --help``).
- ``local kafka|postgres start|stop|status [--dir D]``: the embedded broker and warehouse; ``local
  registry [--dir D]``: a Schema-Registry-compatible server in the foreground.
- ``import-flink-sql SCRIPT [--name N]``: a Flink SQL script (CREATE TABLE, INSERT INTO ... SELECT, SET)
  as a pipeline file on stdout; what has no equivalent is reported with its line and column.
- ``docs config``: print the configuration reference (docs/configuration.md); ``docs helm-schema``:
  the Helm chart's values.schema.json.
- ``spark-connect [--host H] [--port P] [--master M] [--conf K=V] [--token REF | --insecure-no-token]``:
  a Spark Connect server with the project's jars and Delta, in the foreground (the Helm chart's
  ``sparkConnect``); it requires a token, generated into a file only its user reads unless given.
- ``demo [--keep [--port P]]``: the main job on the embedded default (local broker, local Spark); with
  ``--keep``, the demo's broker and data left running for Airflow and Dagster.

``-v`` (before or after the command) brings back Spark's INFO logs, the JVM's start-up notices and
this package's debug lines; without it a run prints its progress, its results and its errors only.

Exit codes: 0 success; 1 a job failed (``verify``: the table differs); 2 bad input or a service error; 3 ``status`` of a stopped
service.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from upsert_kafka_ops.cli import demo, docs, flink_sql, jobs, lag, local
from upsert_kafka_ops.errors import UpsertKafkaOpsError


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser (the Helm chart's tests parse its container arguments with it)."""
    p = argparse.ArgumentParser(prog="upsert-kafka-ops", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=_version())
    sub = p.add_subparsers(dest="command", required=True)
    for commands in (local, jobs, flink_sql, lag, docs, demo):
        commands.register(sub)
    verbose = "Spark's INFO logs, the JVM's notices and debug lines (default: progress, results, errors)"
    p.add_argument("-v", "--verbose", action="store_true", help=verbose)
    for command in sub.choices.values():  # also after the command; SUPPRESS keeps the top level's value
        command.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=verbose)
    return p


def _version() -> str:
    from importlib.metadata import version

    from upsert_kafka_ops import spark_lines

    __version__ = version("upsert-kafka-ops")  # the distribution's: upsert_kafka_ops.__version__
    try:
        pyspark = spark_lines.installed_version()
    except UpsertKafkaOpsError:
        pyspark = "not installed"
    return f"upsert-kafka-ops {__version__} (pyspark {pyspark}; runs on Spark {spark_lines.supported()})"


def configure_output(verbose: bool) -> None:
    """What a command prints: this package's progress lines (INFO; DEBUG with ``verbose``) on stderr,
    and Spark's logs at ERROR (INFO with ``verbose``) in every session the process builds. An
    explicit ``$UPSERT_KAFKA_OPS_SPARK_LOG_LEVEL`` wins over the quiet default."""
    from upsert_kafka_ops.engine.session import ENV_LOG_LEVEL

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
        return int(args.handler(args))
    except UpsertKafkaOpsError as exc:
        print(f"upsert-kafka-ops: error: {exc}", file=sys.stderr)
        return 2
