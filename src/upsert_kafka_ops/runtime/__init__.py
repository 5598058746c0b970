"""Running jobs: the runtimes (:data:`Runtime`; :func:`runtime_for` picks one), the one entry point
that runs a job on one (:func:`execute_job`), the SparkSession builder and spark-submit.

Imports pyspark lazily.
"""

from __future__ import annotations

from upsert_kafka_ops.engine.session import build_spark_session, spark_conf
from upsert_kafka_ops.runtime.execute import (
    RunHandle,
    SubmittedRun,
    execute_job,
    externalize_secrets,
    finish_job,
    submit_job,
)
from upsert_kafka_ops.runtime.factory import Runtime, RuntimeKind, runtime_for, runtime_kind
from upsert_kafka_ops.runtime.models import ConnectRuntime, LocalRuntime
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
    "RuntimeKind",
    "SparkSubmitRuntime",
    "SubmitHandle",
    "SubmittedRun",
    "build_spark_session",
    "check_master_reachable",
    "execute_job",
    "externalize_secrets",
    "finish_job",
    "runtime_for",
    "runtime_kind",
    "spark_conf",
    "submit_command",
    "submit_driver",
    "submit_job",
]
