"""The JIT the suite's JVMs run with.

Most JVMs the suite starts are short-lived (CLI runs, spark-submit drivers, restarted brokers, Maven):
most of their CPU would go to the C2 compiler, so ``tests/conftest.py`` gives them the C1 compiler
only (``JDK_JAVA_OPTIONS``). A pytest process's own SparkSession and the conformance suite's Flink
process live for the whole suite and run hundreds of jobs: C2's code pays for itself there. Measured
on this 2-core machine, 30 pairs of a full and an incremental Delta run in one session: 288 CPU s with
C1 only against 229 CPU s with both tiers, the pairs at the end taking 9.8 against 5.5 CPU s each.

A JVM that lives long needs a bounded heap: the suites run side by side in 24 GiB, and a JVM without
``-Xmx`` may grow to a quarter of the machine (6 GiB). Spark's drivers get theirs from
``spark.driver.memory``: :data:`SESSION_HEAP` for a suite's own session, and ``SPARK_DRIVER_MEMORY``
(``scripts/run-suites.sh``) for the drivers tests start as processes; any other JVM (the Flink
process) from ``max_heap``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

ENV = "JDK_JAVA_OPTIONS"
C1_ONLY = "-XX:TieredStopAtLevel=1"
#: the heap of a suite's own SparkSession: it runs hundreds of small jobs one after another, and the heap
#: a job keeps after a full GC stays under 200 MB up to millions of records (make bench's memory table);
#: five of them with 3 GB heaps and C2's code ran the machine out of memory
SESSION_HEAP = "2g"


@contextmanager
def long_lived(max_heap: str | None = None) -> Iterator[None]:
    """A JVM started inside this block (it inherits the environment) compiles with both tiers, and
    with ``max_heap`` (``"1536m"``) its heap stops there."""
    saved = os.environ.get(ENV)
    options = [o for o in (saved or "").split() if o != C1_ONLY] + ([f"-Xmx{max_heap}"] if max_heap else [])
    if options:
        os.environ[ENV] = " ".join(options)
    else:
        os.environ.pop(ENV, None)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = saved
