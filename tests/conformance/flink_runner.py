"""Real Flink's reading of tables, for the conformance tests. Runs inside PyFlink's own virtualenv
(``.venv-flink``), never the project's: ``.venv-flink/bin/python flink_runner.py < job.json``.

The job (JSON on stdin): ``{"jars": [paths], "parallelism": 2, "cases": [{"name", "table", "ddl"}]}``.
For each case Flink runs the DDL and ``SELECT * FROM table`` in streaming mode (the DDL bounds the
read, e.g. ``'scan.bounded.mode' = 'latest-offset'``) and this prints one JSON line on stdout:
``{"name", "columns", "changes": [[row kind, [cells]], ...]}`` or ``{"name", "error"}`` when
Flink fails the query. Cells are in :func:`values.canon`'s form. Flink's own logs go to stderr.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from values import canon, time_text, timestamp_text


def _error(exc: BaseException) -> str:
    """The innermost cause's first line: what Flink says went wrong, not the wrappers' lines."""
    text = str(exc)
    causes = [line.strip() for line in text.splitlines() if line.strip().startswith("Caused by:")]
    return (causes[-1] if causes else text.strip().splitlines()[0] if text.strip() else type(exc).__name__)[
        :2000
    ]


def _text_kind(sql_type: str) -> str:
    """``timestamp`` or ``time`` for the types read as text, else ''."""
    if sql_type.startswith("TIMESTAMP") and "LOCAL TIME ZONE" not in sql_type:
        return "timestamp"
    return "time" if sql_type.startswith("TIME") and not sql_type.startswith("TIMESTAMP") else ""


def _cell(value: object, kind: str) -> object:
    if value is None or not kind:
        return canon(value)
    return timestamp_text(str(value)) if kind == "timestamp" else time_text(str(value))


def main() -> int:
    job = json.load(sys.stdin)
    from pyflink.table import EnvironmentSettings, TableEnvironment

    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = env.get_config()
    config.set("pipeline.jars", ";".join(f"file://{jar}" for jar in job["jars"]))
    config.set("parallelism.default", str(job.get("parallelism", 2)))
    config.set("restart-strategy.type", "none")  # a failing read fails at once, with its cause
    config.set("classloader.check-leaked-classloader", "false")
    for case in job["cases"]:
        out: dict[str, object] = {"name": case["name"]}
        try:
            env.execute_sql(case["ddl"])
            schema = env.from_path(f"`{case['table']}`").get_resolved_schema()
            names = list(schema.get_column_names())
            kinds = [_text_kind(str(t)) for t in schema.get_column_data_types()]
            # times go through Flink's own text: PyFlink's conversion to Python objects rounds them
            select = ", ".join(
                f"CAST(`{n}` AS STRING)" if k else f"`{n}`" for n, k in zip(names, kinds, strict=True)
            )
            result = env.execute_sql(f"SELECT {select} FROM `{case['table']}`")
            out["columns"] = names
            with result.collect() as rows:
                out["changes"] = [
                    [str(r.get_row_kind()), [_cell(v, k) for v, k in zip(r, kinds, strict=True)]]
                    for r in rows
                ]
        except Exception as exc:  # py4j wraps Flink's exception; report it and go on with the next case
            out["error"] = _error(exc)
        print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
