"""The peer's figure for ``make bench``: Flink's bounded upsert-kafka job over the bench topic, run in
PyFlink's own virtualenv (``.venv-flink``), never the project's:
``.venv-flink/bin/python benchmarks/flink_job.py < job.json``.

The job (JSON on stdin): ``{"jars": [paths], "parallelism": 2, "ddl": "CREATE TABLE ...", "table": name}``;
the DDL bounds the read (``'scan.bounded.mode' = 'latest-offset'``). Flink reads the table into a
``blackhole`` sink (the fold is Flink's ChangelogNormalize, the state the upsert source needs) and this
prints ``{"job_s": seconds}``: from submitting the INSERT to the job's end, mini-cluster start
included, as a user's bounded job pays it. The caller times the whole process.
"""

from __future__ import annotations

import json
import sys
import time


def main() -> int:
    job = json.load(sys.stdin)
    from pyflink.table import EnvironmentSettings, TableEnvironment

    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = env.get_config()
    config.set("pipeline.jars", ";".join(f"file://{jar}" for jar in job["jars"]))
    config.set("parallelism.default", str(job.get("parallelism", 2)))
    config.set("restart-strategy.type", "none")
    config.set("table.local-time-zone", "UTC")
    env.execute_sql(job["ddl"])
    env.execute_sql(
        f"CREATE TABLE `bench_blackhole` WITH ('connector' = 'blackhole') LIKE `{job['table']}` (EXCLUDING ALL)"
    )
    began = time.monotonic()
    env.execute_sql(f"INSERT INTO `bench_blackhole` SELECT * FROM `{job['table']}`").wait()
    print(json.dumps({"job_s": time.monotonic() - began}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
