"""users topic -> Delta table, hourly and incremental, gated by new data in the topic."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG

from upsert_kafka_ops.airflow.operators import UpsertKafkaMaterializeOperator
from upsert_kafka_ops.airflow.sensors import NewDataSensor
from upsert_kafka_ops.jobs import Pipeline

PIPELINE = (
    Path(os.environ.get("UKO_PIPELINES_DIR") or Path(__file__).resolve().parents[1] / "pipelines")
    / "demo.yaml"
)
JOB = {
    "pipeline_file": str(PIPELINE),
    "job_name": "users-to-delta",
    "kafka_config_ids": {"local": "kafka_default"},
}

with DAG(
    dag_id="users_to_delta",
    schedule=Pipeline.load(PIPELINE).job(JOB["job_name"]).schedule,  # the file's: @hourly
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 1, "retry_delay": timedelta(minutes=2)},
    tags=["upsert-kafka-ops", "demo"],
    doc_md=__doc__,
):
    new_users = NewDataSensor(
        task_id="new_users",
        **JOB,
        deferrable=True,  # waits in the triggerer, not in a worker slot
        poke_interval=float(os.environ.get("UKO_NEW_DATA_POLL_S", "60")),  # how often the triggerer looks
        timeout=50 * 60,  # within the hour; the next run looks again
        soft_fail=True,  # no new data in this hour: skip the run, do not fail it
    )
    users_to_delta = UpsertKafkaMaterializeOperator(task_id="users_to_delta", **JOB)
    new_users >> users_to_delta
