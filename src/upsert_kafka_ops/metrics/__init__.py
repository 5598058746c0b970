"""Metrics export: Prometheus exposition, JSON documents and OpenLineage dataset names.

Stdlib only: importing this package needs neither pyspark nor prometheus_client.
"""

from __future__ import annotations

from upsert_kafka_ops.metrics.documents import lag_document, run_document
from upsert_kafka_ops.metrics.lineage import Dataset, kafka_dataset, postgres_dataset, table_dataset
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
    "kafka_dataset",
    "lag_document",
    "lag_exposition",
    "postgres_dataset",
    "run_document",
    "run_result_exposition",
    "table_dataset",
]
