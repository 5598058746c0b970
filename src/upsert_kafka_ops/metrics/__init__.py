"""Metrics export: Prometheus exposition, JSON documents, OpenLineage dataset names and run events.

Stdlib only: importing this package needs neither pyspark nor prometheus_client.
"""

from __future__ import annotations

from upsert_kafka_ops.jobs.datasets import (
    Dataset,
    job_datasets,
    kafka_dataset,
    postgres_dataset,
    table_dataset,
)
from upsert_kafka_ops.metrics.documents import jobs_lag_document, lag_document, run_document
from upsert_kafka_ops.metrics.lineage import RunLineage, run_event, transport_from_env
from upsert_kafka_ops.metrics.prometheus import (
    CONTENT_TYPE,
    Exposition,
    lag_exposition,
    run_result_exposition,
)

__all__ = [
    "CONTENT_TYPE",
    "Dataset",
    "Exposition",
    "RunLineage",
    "job_datasets",
    "jobs_lag_document",
    "kafka_dataset",
    "lag_document",
    "lag_exposition",
    "postgres_dataset",
    "run_document",
    "run_event",
    "run_result_exposition",
    "table_dataset",
    "transport_from_env",
]
