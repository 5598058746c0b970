"""One cold run for ``make bench``, in a process of its own, as an orchestrated task runs: start Spark,
then either materialize the table whose Flink DDL is on stdin (``materialize``) or count
``spark.range(1)`` in a session with none of the project's settings (``bare``: the floor of any
task that starts its own Spark). Prints ``{"records_in": n}``; the caller times the whole process.
"""

from __future__ import annotations

import json
import sys


def main(what: str) -> int:
    if what == "bare":
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.master("local[*]").getOrCreate()
        spark.range(1).count()
        print(json.dumps({"records_in": 0}))
        return 0
    from upsert_kafka_ops.engine import materialize
    from upsert_kafka_ops.runtime import build_spark_session
    from upsert_kafka_ops.spec.table import UpsertKafkaTable

    table = UpsertKafkaTable.from_flink_ddl(sys.stdin.read())
    spark = build_spark_session(app_name="upsert-kafka-ops-bench-cold")
    _, result = materialize(spark, table)
    print(json.dumps({"records_in": result.records_in}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
