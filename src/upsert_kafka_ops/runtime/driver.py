"""The Spark driver entrypoint: ``python -m upsert_kafka_ops.runtime.driver job.json``.

spark-submit runs this file as the application (it provides the master and the configuration), or
it runs as is with ``python -m``. It reads the job JSON, builds the SparkSession, runs the job and
reports a versioned run result::

    {"version": 1, "status": "succeeded", "result": {...}, "error": null,
     "spark": {"master": "spark://...", "app_id": "app-...", "version": "4.0.0"}, "duration_s": 12.3}

- on stdout, as one line: :data:`RESULT_MARKER` followed by the JSON (client mode reads it back);
- with ``--result-uri URI`` (a file path or ``file://`` URI), also written to that file (cluster
  mode, where the driver's stdout stays on the cluster).

The job JSON carries secret references, never values: the job resolves them here, in the driver
(see :class:`upsert_kafka_ops.spec.connection.SecretRef`). On failure the driver prints the
traceback to stderr, reports ``status: failed`` with the error line (``ValueError: ...``) and
exits 1.

``--callable module:function`` runs ``function(spec: dict, spark) -> dict`` instead of the
project's job runner (``upsert_kafka_ops.jobs:run_spec``), for custom jobs.

Launched by Dagster Pipes (``DAGSTER_PIPES_CONTEXT`` in the environment), the driver also reports
the job's materialization metadata and a log line through Pipes
(:mod:`upsert_kafka_ops.runtime.pipes`); nothing changes anywhere else.

This module imports only the standard library at module level: run as a script, its own folder is
first on ``sys.path``, and nothing from there may shadow a top-level module.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

#: Prefix of the stdout line carrying the run result (followed by one space and the JSON).
RESULT_MARKER = "UKO_RESULT_JSON"
#: Version of the run-result JSON (the envelope; ``result`` is the job's own dict).
RESULT_VERSION = 1
#: The job runner used when ``--callable`` is not given.
DEFAULT_CALLABLE = "upsert_kafka_ops.jobs:run_spec"

JobFunction = Callable[[dict[str, Any], Any], dict[str, Any]]


def result_path(uri: str) -> Path:
    """The local file of a result URI: a plain path or ``file://`` URI.

    :raises ValueError: for another scheme (the result must be readable by the submitter).
    """
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise ValueError(f"result URI {uri!r}: a file:// URI must name a local path (file:///path).")
        return Path(unquote(parsed.path))
    if parsed.scheme == "" or (len(parsed.scheme) == 1 and os.name == "nt"):
        return Path(uri)
    raise ValueError(f"result URI {uri!r}: only a file path or a file:// URI is supported.")


def load_callable(ref: str) -> JobFunction:
    """Import ``module:function`` (the function may be a dotted attribute path)."""
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"--callable {ref!r}: expected 'module:function'.")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"--callable {ref!r} is not callable.")
    fn: JobFunction = obj
    return fn


def _error_line(exc: BaseException) -> str:
    """``Type: message`` on one line (pyspark errors carry a JVM stack trace in their message)."""
    lines = traceback.format_exception_only(type(exc), exc)
    text = "".join(lines).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return first if len(first) <= 2000 else first[:2000] + "..."


def _write_result(uri: str, payload: dict[str, Any]) -> None:
    path = result_path(uri)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


def _job_file(name: str) -> Path:
    """The job file: as given, else the copy spark-submit shipped with ``--files`` (cluster mode)."""
    path = Path(name)
    if path.is_file():
        return path
    from pyspark import SparkFiles

    shipped = Path(SparkFiles.get(path.name))
    return shipped if shipped.is_file() else path


def _spark_info(spark: Any) -> dict[str, Any]:
    sc = spark.sparkContext
    return {
        "master": sc.master,
        "app_id": sc.applicationId,
        "version": spark.version,
        "deploy_mode": sc.getConf().get("spark.submit.deployMode", "client"),
    }


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m upsert_kafka_ops.runtime.driver",
        description="Run an upsert-kafka-ops job in this Spark driver and report its run result.",
    )
    p.add_argument("job", help="the job JSON file")
    p.add_argument("--result-uri", help="also write the run result to this file path or file:// URI")
    p.add_argument(
        "--callable",
        dest="function",
        default=DEFAULT_CALLABLE,
        help="run module:function(spec, spark) -> dict instead of the job runner",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job; returns the exit code (0 succeeded, 1 failed). See the module docstring."""
    args = _parser().parse_args(argv)
    started = time.monotonic()
    payload: dict[str, Any] = {"version": RESULT_VERSION, "status": "failed", "result": None, "error": None}
    spark: Any = None
    lineage: Any = None
    code = 1
    pipes: Any = None
    with contextlib.ExitStack() as stack:  # Pipes (when Dagster launched us) closes after the run
        try:
            from upsert_kafka_ops.runtime.pipes import driver_pipes

            pipes = stack.enter_context(driver_pipes())  # None unless Dagster Pipes launched us
            function = load_callable(args.function)
            from pyspark.sql import SparkSession

            # spark-submit (or the caller's environment) provides the master and the configuration
            spark = SparkSession.builder.getOrCreate()
            payload["spark"] = _spark_info(spark)
            spec = json.loads(_job_file(args.job).read_text())
            if not isinstance(spec, dict):
                raise ValueError(f"{args.job}: the job JSON must be an object.")
            if args.function == DEFAULT_CALLABLE:
                from upsert_kafka_ops.jobs.lineage import driver_lineage

                lineage = driver_lineage(spec)  # OpenLineage START/COMPLETE/FAIL, when configured
                if lineage is not None:
                    lineage.start()
            result = function(spec, spark)
            if not isinstance(result, dict):
                raise TypeError(f"{args.function} returned {type(result).__name__}, expected a dict.")
            payload.update(status="succeeded", result=result)
            code = 0
            if pipes is not None and args.function == DEFAULT_CALLABLE:
                _report_to_pipes(pipes, result)
            if lineage is not None:
                lineage.complete(result)
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            payload["error"] = _error_line(exc)
            if pipes is not None:
                pipes.log.error(f"upsert-kafka driver: {payload['error']}")
            if lineage is not None:
                lineage.fail(payload["error"])
        finally:
            if spark is not None:
                try:
                    spark.stop()
                except Exception as exc:  # the result is known; a failing stop must not hide it
                    print(f"warning: SparkSession.stop() failed: {_error_line(exc)}", file=sys.stderr)
    payload["duration_s"] = round(time.monotonic() - started, 3)
    return _publish(payload, args.result_uri, code)


def _report_to_pipes(pipes: Any, result: dict[str, Any]) -> None:
    """The result to Dagster Pipes; a failed report only warns (the run has committed already, and
    Dagster falls back to the result line)."""
    from upsert_kafka_ops.runtime.pipes import report_result

    try:
        report_result(pipes, result)
    except Exception as exc:
        print(f"warning: Dagster Pipes report failed: {_error_line(exc)}", file=sys.stderr)


def _publish(payload: dict[str, Any], result_uri: str | None, code: int) -> int:
    """The result line on stdout (and the result file at ``result_uri``); the exit code, 1 when the
    result is not JSON or cannot be written."""
    try:
        text = json.dumps(payload, sort_keys=True)
    except (TypeError, ValueError) as exc:
        payload.update(status="failed", result=None, error=f"the job's result is not JSON: {exc}")
        text = json.dumps(payload, sort_keys=True)
        code = 1
    if result_uri:
        try:
            _write_result(result_uri, json.loads(text))
        except (OSError, ValueError) as exc:
            print(f"error: cannot write the run result to {result_uri}: {exc}", file=sys.stderr)
            code = 1
    sys.stderr.flush()
    print(f"{RESULT_MARKER} {text}", flush=True)
    return code


if __name__ == "__main__":
    # Run as a script (spark-submit): drop this file's folder from the path, it is not a root.
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if not p or str(Path(p).resolve()) != here]
    sys.exit(main())
