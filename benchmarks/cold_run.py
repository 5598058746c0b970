"""One cold run for ``make bench``, in a process of its own, as an orchestrated task runs: start Spark,
then either materialize the table whose Flink DDL is on stdin (``materialize``) or count
``spark.range(1)`` in a session with none of the project's settings (``bare``: the floor of any
task that starts its own Spark). Prints ``{"records_in": n}``; the caller times the whole process.
``memory`` materializes as ``materialize`` does and adds what the driver held: the JVM's peak heap,
its heap after a full collection, its peak resident memory, and this Python process's peak.
"""

from __future__ import annotations

import json
import os
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
    heap = os.environ.get("BENCH_DRIVER_MEMORY")  # e.g. 1g: the memory bench's capped run
    extra = {"spark.driver.memory": heap} if heap else None
    spark = build_spark_session(app_name="upsert-kafka-ops-bench-cold", extra=extra)
    _, result = materialize(spark, table)
    out: dict[str, float] = {"records_in": result.records_in}
    if what == "memory":
        out.update(_memory(spark))
    print(json.dumps(out))
    return 0


def _memory(spark: object) -> dict[str, float]:
    """Megabytes: the driver JVM's peak heap (every heap pool's peak), its heap after a full
    collection (what it keeps), its peak resident set (VmHWM), and this process's peak resident set."""
    import resource
    from pathlib import Path

    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    management = jvm.java.lang.management.ManagementFactory
    heap_peak = sum(
        pool.getPeakUsage().getUsed()
        for pool in management.getMemoryPoolMXBeans()
        if str(pool.getType()) == "Heap memory"
    )
    jvm.java.lang.System.gc()
    kept = management.getMemoryMXBean().getHeapMemoryUsage().getUsed()
    pid = jvm.java.lang.ProcessHandle.current().pid()
    status = Path(f"/proc/{pid}/status").read_text()
    hwm_kb = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))
    mb = 1024 * 1024
    return {
        "jvm_heap_peak_mb": heap_peak / mb,
        "jvm_heap_kept_mb": kept / mb,
        "jvm_rss_peak_mb": hwm_kb / 1024,
        "python_rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
