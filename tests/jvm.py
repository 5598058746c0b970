"""The heaps of the suite's long-lived JVMs, and the shuffle partitions of its sessions.

The suites run side by side in 24 GiB with no swap, and a JVM without ``-Xmx`` may grow to a quarter of
the machine (6 GiB); five sessions with 3 GB heaps beside the Flink process ran a CI run out of memory
(the kernel's OOM killer ended a session mid-suite). Spark's drivers get their heap from
``spark.driver.memory``: :data:`SESSION_HEAP` for a suite's own session (the monitoring and storage
suites, which run few jobs, take 1 GB), and ``SPARK_DRIVER_MEMORY`` (``scripts/run-suites.sh``) for the
drivers tests start as processes; the PyFlink process from :func:`with_heap`.

Every JVM, long-lived or not, compiles with C1 only (``tests/conftest.py``). Both tiers for the
long-lived ones were tried and measured worse: the Spark and Flink code a test run executes is mostly
generated per query, so C2 compiles code that runs once (the quick tier's slice took 301 CPU s with
C2 in its sessions against 195 with C1, and the whole suite was no faster).
"""

from __future__ import annotations

import os

ENV = "JDK_JAVA_OPTIONS"
#: the heap of a suite's own SparkSession: it runs hundreds of small jobs one after another, and the heap
#: a job keeps after a full GC stays under 200 MB up to millions of records (make bench's memory table)
SESSION_HEAP = "2g"
#: the shuffle partitions of every suite's own session: its runs are tens to thousands of records, where
#: each shuffle partition is a task per stage that does nearly nothing; two still split every shuffle
#: (the product's default is twice the cores). Measured on eight warm incremental Delta runs: 34 CPU s
#: with 4 partitions, 30 with 2, 28 with 1.
SESSION_SHUFFLE_PARTITIONS = 2


def with_heap(max_heap: str) -> dict[str, str]:
    """This process's environment for a JVM whose heap stops at ``max_heap`` (``"1g"``): the java
    launcher reads ``JDK_JAVA_OPTIONS``, after the C1 option the suite sets there."""
    return {**os.environ, ENV: f"{os.environ.get(ENV, '')} -Xmx{max_heap}".strip()}
