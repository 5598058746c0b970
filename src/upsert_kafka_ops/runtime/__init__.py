"""Running jobs: the SparkSession builder (local or cluster) and the spark-submit runtime.

Imports pyspark lazily.
"""

from __future__ import annotations

from upsert_kafka_ops.engine.session import build_spark_session, spark_conf
from upsert_kafka_ops.runtime.execute import (
    ConnectRuntime,
    LocalRuntime,
    RunHandle,
    Runtime,
    SubmittedRun,
    execute_job,
    externalize_secrets,
    finish_job,
    submit_job,
)
from upsert_kafka_ops.runtime.submit import (
    SparkSubmitRuntime,
    SubmitHandle,
    check_master_reachable,
    submit_command,
    submit_driver,
)

__all__ = [
    "ConnectRuntime",
    "LocalRuntime",
    "RunHandle",
    "Runtime",
    "SparkSubmitRuntime",
    "SubmitHandle",
    "SubmittedRun",
    "build_spark_session",
    "check_master_reachable",
    "execute_job",
    "externalize_secrets",
    "finish_job",
    "spark_conf",
    "submit_command",
    "submit_driver",
    "submit_job",
]
