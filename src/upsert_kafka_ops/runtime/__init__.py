"""Running jobs: the SparkSession builder (local or cluster). Imports pyspark lazily."""

from __future__ import annotations

from upsert_kafka_ops.runtime.session import build_spark_session, spark_conf

__all__ = ["build_spark_session", "spark_conf"]
