"""pageviews -> PV and UV per region, an upsert topic refreshed every 5 minutes, and at once when a task
of another DAG writes one of its source topics (the `users` topic, published by `upsert_kafka_demo`):
the operator's inlets are Airflow Assets, so the DAG is scheduled on them. Only the regions that
changed are written; COUNT DISTINCT makes each run a recompute, see docs/semantics.md."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG, AssetAny
from airflow.timetables.assets import AssetOrTimeSchedule
from airflow.timetables.trigger import DeltaTriggerTimetable

from upsert_kafka_ops.airflow.assets import pipeline_job_assets
from upsert_kafka_ops.airflow.operators import UpsertKafkaTopicToTopicOperator

PIPELINE = (
    Path(os.environ.get("UKO_PIPELINES_DIR") or Path(__file__).resolve().parents[1] / "pipelines")
    / "demo.yaml"
)

JOB = {"job_name": "pageviews-per-region", "kafka_config_ids": {"local": "kafka_default"}}
sources, _ = pipeline_job_assets(str(PIPELINE), **JOB)  # the topics the task reads, as Assets

with DAG(
    dag_id="pageviews_per_region",
    schedule=AssetOrTimeSchedule(
        timetable=DeltaTriggerTimetable(timedelta(minutes=5)), assets=AssetAny(*sources)
    ),
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
        **JOB,
    )
