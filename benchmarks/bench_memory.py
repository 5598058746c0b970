"""Driver memory as the topic grows (issue 20, deliverable 4): ``materialize`` in a new process over
topics of 1M and 5M JSON changes (same 100k keys, 5% tombstones), reporting the driver JVM's peak
heap, its heap after a full collection, its peak resident memory, and the Python driver's peak. The
engine collects no topic data to the driver: these stay flat while the records grow five times.

    .venv/bin/python benchmarks/bench_memory.py      (make bench runs it; BENCH_MEMORY_SIZES=1000000,5000000)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_engine import HERE, PARTITIONS, bench_table, produce

from upsert_kafka_ops import jars
from upsert_kafka_ops.local import LocalKafka

SIZES = [int(s) for s in os.environ.get("BENCH_MEMORY_SIZES", "1000000,5000000").split(",")]
OUT = Path(os.environ.get("BENCH_MEMORY_OUT", "build/bench/memory.json"))
CAPPED = os.environ.get("BENCH_MEMORY_CAPPED", "1g")


def _run(ddl: str, records: int, heap: str) -> dict[str, float | str]:
    began = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(HERE / "cold_run.py"), "memory"], input=ddl, capture_output=True, text=True,
        check=True, env={**os.environ, "BENCH_DRIVER_MEMORY": heap},
    )  # fmt: skip
    out: dict[str, float | str] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["records_in"] == records, out
    out["seconds"] = time.monotonic() - began
    out["driver_memory"] = heap or "default"
    print(
        f"bench memory: {records:>9} records, driver heap {heap or 'default':>7}: JVM heap peak "
        f"{out['jvm_heap_peak_mb']:5.0f} MB, kept after GC {out['jvm_heap_kept_mb']:4.0f} MB, JVM RSS peak "
        f"{out['jvm_rss_peak_mb']:5.0f} MB, Python RSS peak {out['python_rss_peak_mb']:3.0f} MB ({out['seconds']:.1f}s)",
        flush=True,
    )
    return out


def main() -> int:
    jars.fetch(["kafka", "spark"], log=False)
    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="uko-bench-memory-") as tmp,
        LocalKafka(Path(tmp) / "kafka", heap="2g") as kafka,
    ):
        for records in SIZES:
            topic = f"bench_memory_{records}"
            kafka.create_topic(topic, partitions=PARTITIONS)
            began = time.monotonic()
            produce(kafka.bootstrap_servers, topic, records, seed=records)
            print(f"bench memory: produced {records} records in {time.monotonic() - began:.1f}s", flush=True)
            # the session's own heap size (a quarter of the machine's memory), then a heap of CAPPED:
            # G1 lets the heap grow before collecting, so the peak follows the heap it is given
            for heap in ("", CAPPED):
                rows.append(_run(bench_table(topic, kafka.bootstrap_servers).to_flink_ddl(), records, heap))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
