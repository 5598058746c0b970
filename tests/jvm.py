"""The JIT the suite's JVMs run with.

Most JVMs the suite starts are short-lived (CLI runs, spark-submit drivers, restarted brokers, Maven):
most of their CPU would go to the C2 compiler, so ``tests/conftest.py`` gives them the C1 compiler
only (``JDK_JAVA_OPTIONS``). A pytest process's own SparkSession and the conformance suite's Flink
process live for the whole suite and run hundreds of jobs: C2's code pays for itself there. Measured
on this 2-core machine, 30 pairs of a full and an incremental Delta run in one session: 288 CPU s with
C1 only against 229 CPU s with both tiers, the pairs at the end taking 9.8 against 5.5 CPU s each.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

ENV = "JDK_JAVA_OPTIONS"
C1_ONLY = "-XX:TieredStopAtLevel=1"


@contextmanager
def long_lived() -> Iterator[None]:
    """A JVM started inside this block (it inherits the environment) compiles with both tiers."""
    saved = os.environ.get(ENV)
    if saved == C1_ONLY:
        del os.environ[ENV]
    try:
        yield
    finally:
        if saved == C1_ONLY:
            os.environ[ENV] = saved
