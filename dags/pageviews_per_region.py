"""pageviews -> PV and UV per region, an upsert topic refreshed every 5 minutes (only the regions that
changed are written; COUNT DISTINCT makes each run a recompute, see docs/semantics.md)."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG

from upsert_kafka_ops.airflow.operators import UpsertKafkaTopicToTopicOperator

PIPELINE = (
    Path(os.environ.get("UKO_PIPELINES_DIR") or Path(__file__).resolve().parents[1] / "pipelines")
    / "demo.yaml"
)

with DAG(
    dag_id="pageviews_per_region",
    schedule=timedelta(minutes=5),
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=1)},
    tags=["upsert-kafka-ops", "demo"],
    doc_md=__doc__,
):
    UpsertKafkaTopicToTopicOperator(
        task_id="pageviews_per_region",
        pipeline_file=str(PIPELINE),
        job_name="pageviews-per-region",
        kafka_config_ids={"local": "kafka_default"},
    )
