"""Real Flink's reading of tables, for the conformance tests. Runs inside PyFlink's own virtualenv
(``.venv-flink``), never the project's: ``.venv-flink/bin/python flink_runner.py < job.json`` runs one
job; ``flink_runner.py --serve`` runs one job per line of stdin, each in a new table environment of the
same JVM, and prints ``{"done": true}`` after each (the conformance suite keeps one such process for its
whole run: one JVM start instead of one per job).

The job (JSON on stdin): ``{"jars": [paths], "parallelism": 2, "cases": [{"name", "table", "ddl",
"more", "insert"}]}``, its jars the job's ``pipeline.jars`` (none when they are on the JVM's class
path, as in the suite's process: ``flink.py``). For each case Flink runs the DDL (and ``more`` DDL)
and ``SELECT * FROM table`` in streaming mode (the DDL bounds the read, e.g.
``'scan.bounded.mode' = 'latest-offset'``) and this prints one JSON line on stdout:
``{"name", "columns", "changes": [[row kind, [cells]], ...]}`` or ``{"name", "error"}`` when Flink
fails the query; a case with ``insert`` runs that statement to its
end instead and prints ``{"name", "written": true, "seconds"}`` (submit to end, mini-cluster start
included: ``make bench`` times Flink's job with it). Cells are in :func:`values.canon`'s form.
Lines do not come in the cases' order (a failed submission's at once, reads as they are finished). Flink's own logs go to stderr.

Up to ``READS_IN_FLIGHT`` reads run at once (each bounded read is its own job, mostly waiting on the
broker and on job scheduling: on 2 cores four at a time take half the time of one at a time); an insert
waits for the reads before it and runs alone, so a read after it sees what it wrote.

A job run alone (``make bench``'s) starts a mini-cluster of its own, as Flink's local execution does.
``--serve`` starts one mini-cluster for the process and submits every job to it, as to a remote
cluster: the same runtime and operators, without a cluster's start per job (measured, 20 small reads
in one PyFlink process: 26.3 -> 5.0 CPU s).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import traceback
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from values import canon, time_text, timestamp_text

READS_IN_FLIGHT = 4
#: the shared mini-cluster's task slots: four reads in flight at parallelism 2, an insert at 4, room left
SHARED_SLOTS = 16


def _error(exc: BaseException) -> str:
    """The innermost cause's first line: what Flink says went wrong, not the wrappers' lines."""
    lines = [line.strip().lstrip(": ") for line in str(exc).splitlines() if line.strip()]
    causes = [line for line in lines if line.startswith("Caused by:")]
    thrown = [line for line in lines if re.match(r"^[\w.$]+(Exception|Error)\b", line)]
    return (causes or thrown or lines or [type(exc).__name__])[-1 if causes else 0][:2000]


def _text_kind(sql_type: str) -> str:
    """How a column crosses to Python where PyFlink's own conversion would lose or break it:
    ``timestamp``, ``time`` and ``date`` as Flink's text (PyFlink rounds times, and Python's dates
    end at year 9999), ``float`` widened to DOUBLE (PyFlink cannot convert a FLOAT NaN); else ''."""
    if sql_type.startswith(("TIMESTAMP", "LOCALZONEDTIMESTAMP")):  # LTZ: its text in the session zone, UTC
        return "timestamp"
    if sql_type.startswith("TIME"):
        return "time"
    if sql_type.startswith("DATE"):
        return "date"
    if sql_type.startswith(("ARRAY", "ROW", "MAP")):
        return "map" if sql_type.startswith("MAP") else "nested"
    return "float" if sql_type.startswith("FLOAT") else ""


_SELECT = {"timestamp": "CAST({} AS STRING)",
           # Flink's CAST of TIME to STRING drops the milliseconds it holds: add them back
           "time": "CONCAT(CAST({0} AS STRING), '.', LPAD(CAST(MOD(EXTRACT(MILLISECOND FROM {0}), 1000) AS STRING), 3, '0'))", "date": "CAST({} AS STRING)",
           "float": "CAST({} AS DOUBLE)", "nested": "JSON_STRING({})", "map": "JSON_STRING({})", "": "{}"}  # fmt: skip


def _rows_as_lists(value: object) -> object:
    """JSON of a nested value with each ROW (a JSON object) as the list of its field values."""
    if isinstance(value, dict):
        return [_rows_as_lists(v) for v in value.values()]
    if isinstance(value, list):
        return [_rows_as_lists(v) for v in value]
    return value


def _cell(value: object, kind: str) -> object:
    if value is None or kind in ("", "float"):
        return canon(value)
    if kind == "date":
        return f"date:{value}"
    if kind in ("nested", "map"):  # nested values cross as JSON (PyFlink 2.2.1 fails to convert some)
        data = json.loads(str(value))
        return canon(data if kind == "map" else _rows_as_lists(data))
    return timestamp_text(str(value)) if kind == "timestamp" else time_text(str(value))


def _start_cluster() -> tuple[str, int]:
    """A mini-cluster in this process's JVM, started once; where its REST endpoint listens."""
    from pyflink.java_gateway import get_gateway

    jvm = get_gateway().jvm
    conf = jvm.org.apache.flink.configuration.Configuration()
    conf.setString("rest.bind-address", "127.0.0.1")
    conf.setString("rest.bind-port", "0")
    built = (
        jvm.org.apache.flink.runtime.minicluster.MiniClusterConfiguration.Builder()
        .setConfiguration(conf)
        .setNumTaskManagers(1)
        .setNumSlotsPerTaskManager(SHARED_SLOTS)
        .build()
    )
    cluster = jvm.org.apache.flink.runtime.minicluster.MiniCluster(built)
    cluster.start()
    uri = cluster.getRestAddress().get()
    return str(uri.getHost()), int(uri.getPort())


def main() -> int:
    if sys.argv[1:] == ["--serve"]:
        cluster = _start_cluster()
        for line in sys.stdin:
            if line.strip():
                try:
                    run_job(json.loads(line), cluster)
                except Exception:  # the job's cases without a line are reported missing, with this log
                    traceback.print_exc()
                print(json.dumps({"done": True}), flush=True)
        return 0
    run_job(json.load(sys.stdin))
    return 0


def run_job(job: dict[str, Any], cluster: tuple[str, int] | None = None) -> None:
    """Run a job's cases in a new table environment, printing one line per case; on ``cluster`` (its
    REST address) when given, else each on a mini-cluster of its own."""
    from pyflink.table import EnvironmentSettings, TableEnvironment

    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = env.get_config()
    if cluster is not None:
        config.set("execution.target", "remote")
        config.set("rest.address", cluster[0])
        config.set("rest.port", str(cluster[1]))
    if job["jars"]:  # else they are on the JVM's class path (the suite's process: flink.py)
        config.set("pipeline.jars", ";".join(f"file://{jar}" for jar in job["jars"]))
    config.set("parallelism.default", str(job.get("parallelism", 2)))
    config.set("restart-strategy.type", "none")  # a failing read fails at once, with its cause
    config.set("classloader.check-leaked-classloader", "false")
    config.set("table.local-time-zone", "UTC")  # as the engine's Spark session
    pending: list[tuple[dict[str, object], object, list[str]]] = []

    def finish(read: tuple[dict[str, object], object, list[str]]) -> None:
        out, result, kinds = read
        try:
            with result.collect() as rows:  # type: ignore[attr-defined]
                out["changes"] = [
                    [str(r.get_row_kind()), [_cell(v, k) for v, k in zip(r, kinds, strict=True)]]
                    for r in rows
                ]
        except Exception as exc:  # py4j wraps Flink's exception; report it and go on
            out["error"] = _error(exc)
        print(json.dumps(out), flush=True)

    for case in job["cases"]:
        out: dict[str, object] = {"name": case["name"]}
        try:
            for ddl in [case["ddl"], *case.get("more", [])]:
                env.execute_sql(ddl)
            if case.get("insert"):
                while pending:  # what the insert writes must not reach a read submitted before it
                    finish(pending.pop(0))
                began = time.monotonic()
                env.execute_sql(case["insert"]).wait()
                out["written"] = True
                out["seconds"] = time.monotonic() - began  # make bench's figure of Flink's job
                print(json.dumps(out), flush=True)
                continue
            schema = env.from_path(f"`{case['table']}`").get_resolved_schema()
            names = list(schema.get_column_names())
            kinds = [_text_kind(str(t)) for t in schema.get_column_data_types()]
            # times go through Flink's own text: PyFlink's conversion to Python objects rounds them
            select = ", ".join(_SELECT[k].format(f"`{n}`") for n, k in zip(names, kinds, strict=True))
            result = env.execute_sql(f"SELECT {select} FROM `{case['table']}`")  # submitted, not waited for
            out["columns"] = names
        except Exception as exc:  # py4j wraps Flink's exception; report it and go on with the next case
            out["error"] = _error(exc)
            print(json.dumps(out), flush=True)
            continue
        pending.append((out, result, kinds))
        if len(pending) >= READS_IN_FLIGHT:
            finish(pending.pop(0))
    for read in pending:
        finish(read)


if __name__ == "__main__":
    sys.exit(main())
