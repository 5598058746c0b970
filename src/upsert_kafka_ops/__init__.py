"""upsert-kafka-ops: Flink upsert-kafka semantics on Spark, for Airflow and Dagster."""

from __future__ import annotations

__version__ = "0.1.0"

import logging as _logging

# A library logs, the application decides where to: no output unless the user configures logging.
_logging.getLogger("upsert_kafka_ops").addHandler(_logging.NullHandler())
