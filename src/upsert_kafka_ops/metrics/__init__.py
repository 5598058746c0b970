"""Metrics as Prometheus text and JSON documents, and each run's metrics handed to Prometheus.

Stdlib only: importing this package needs neither pyspark nor prometheus_client (a Pushgateway push
imports it). OpenLineage run events are :mod:`upsert_kafka_ops.jobs.lineage`; the lag exporter is
:mod:`upsert_kafka_ops.metrics.exporter` (a pipeline's jobs watched by :mod:`upsert_kafka_ops.jobs.lag_monitor`).
"""

from __future__ import annotations

from upsert_kafka_ops.metrics.documents import (
    jobs_lag_document,
    lag_document,
    pipelines_lag_document,
    run_document,
)
from upsert_kafka_ops.metrics.prometheus import (
    CONTENT_TYPE,
    Exposition,
    lag_exposition,
    run_result_exposition,
)

__all__ = [
    "CONTENT_TYPE",
    "Exposition",
    "jobs_lag_document",
    "lag_document",
    "lag_exposition",
    "pipelines_lag_document",
    "run_document",
    "run_result_exposition",
]
