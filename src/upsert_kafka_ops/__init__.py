"""upsert-kafka-ops: Flink upsert-kafka semantics on Spark, for Airflow and Dagster.

The names a user starts with are importable from here; each is loaded on first use, so
``import upsert_kafka_ops`` stays cheap and needs neither Spark nor pydantic::

    from upsert_kafka_ops import KafkaConnection, UpsertKafkaTable, build_spark_session, materialize
"""

from __future__ import annotations

__version__ = "0.2.0"

import importlib
import logging as _logging
from typing import TYPE_CHECKING, Any

# A library logs, the application decides where to: no output unless the user configures logging.
_logging.getLogger("upsert_kafka_ops").addHandler(_logging.NullHandler())

#: public name -> the module that defines it
_EXPORTS = {
    "KafkaConnection": "upsert_kafka_ops.spec.connection",
    "SecretRef": "upsert_kafka_ops.spec.connection",
    "UpsertKafkaTable": "upsert_kafka_ops.spec.table",
    "KafkaTable": "upsert_kafka_ops.spec.table",
    "Pipeline": "upsert_kafka_ops.pipeline",
    "run_job": "upsert_kafka_ops.jobs.run",
    "materialize": "upsert_kafka_ops.engine.source",
    "read_changelog": "upsert_kafka_ops.engine.source",
    "write_append": "upsert_kafka_ops.engine.sink",
    "write_changelog": "upsert_kafka_ops.engine.sink",
    "write_snapshot": "upsert_kafka_ops.engine.sink",
    "build_spark_session": "upsert_kafka_ops.engine.session",
}

__all__ = [  # the keys of _EXPORTS, spelled out for linters and type checkers
    "KafkaConnection",
    "KafkaTable",
    "Pipeline",
    "SecretRef",
    "UpsertKafkaTable",
    "build_spark_session",
    "materialize",
    "read_changelog",
    "run_job",
    "write_append",
    "write_changelog",
    "write_snapshot",
]

if TYPE_CHECKING:
    from upsert_kafka_ops.engine.session import build_spark_session
    from upsert_kafka_ops.engine.sink import write_append, write_changelog, write_snapshot
    from upsert_kafka_ops.engine.source import materialize, read_changelog
    from upsert_kafka_ops.jobs.run import run_job
    from upsert_kafka_ops.pipeline import Pipeline
    from upsert_kafka_ops.spec.connection import KafkaConnection, SecretRef
    from upsert_kafka_ops.spec.table import KafkaTable, UpsertKafkaTable


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'upsert_kafka_ops' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
