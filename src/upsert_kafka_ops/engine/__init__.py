"""The upsert-kafka engine on PySpark: changelog source, materialization, sink writes.

Needs the ``spark`` jars (``upsert-kafka-ops jars fetch``); pyspark is imported inside the functions.
"""

from __future__ import annotations

from upsert_kafka_ops.engine.bounds import Bounds, resolve_bounds
from upsert_kafka_ops.engine.cdc import materialize_cdc, read_cdc
from upsert_kafka_ops.engine.results import RunResult
from upsert_kafka_ops.engine.sink import write_append, write_changelog, write_snapshot
from upsert_kafka_ops.engine.source import (
    DataError,
    Read,
    materialize,
    read_append,
    read_changelog,
    read_changes,
)

__all__ = [
    "Bounds",
    "DataError",
    "Read",
    "RunResult",
    "materialize",
    "materialize_cdc",
    "read_append",
    "read_cdc",
    "read_changelog",
    "read_changes",
    "resolve_bounds",
    "write_append",
    "write_changelog",
    "write_snapshot",
]
