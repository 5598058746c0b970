"""Running jobs: the SparkSession builder (local or cluster) and the spark-submit runtime.

Imports pyspark lazily.
"""

from __future__ import annotations

from upsert_kafka_ops.runtime.session import build_spark_session, spark_conf
from upsert_kafka_ops.runtime.submit import (
    SparkSubmitRuntime,
    check_master_reachable,
    submit_command,
    submit_driver,
)

__all__ = [
    "SparkSubmitRuntime",
    "build_spark_session",
    "check_master_reachable",
    "spark_conf",
    "submit_command",
    "submit_driver",
]
