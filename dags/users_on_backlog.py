"""users topic -> Delta table, started by the topic: a run begins when enough records wait past what
the job processed, or when the oldest of them waited long enough, not on a clock.

The DAG is scheduled on an asset whose ``AssetWatcher`` holds a ``BacklogTrigger``: the triggerer
asks the broker every ``UKO_BACKLOG_POLL_S`` seconds (the same pending count as the lag sensors) and
fires once per set of end offsets when ``UKO_BACKLOG_MIN_RECORDS`` records wait or the oldest one is
``UKO_BACKLOG_MAX_AGE_S`` seconds old. It runs the same job as ``users_to_delta``: unpause one of the
two (runs of one job are serialized by its target's lock either way).
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG, Asset, AssetWatcher

from upsert_kafka_ops.airflow.operators import UpsertKafkaMaterializeOperator
from upsert_kafka_ops.airflow.triggers import BacklogTrigger

PIPELINE = (
    Path(os.environ.get("UKO_PIPELINES_DIR") or Path(__file__).resolve().parents[1] / "pipelines")
    / "demo.yaml"
)
JOB = {
    "pipeline_file": str(PIPELINE),
    "job_name": "users-to-delta",
    "kafka_config_ids": {"local": "kafka_default"},
}
BACKLOG = Asset(
    "upsert_kafka_users_to_delta_backlog",
    watchers=[
        AssetWatcher(
            name="users_to_delta_backlog",
            trigger=BacklogTrigger(
                JOB,
                min_records=int(os.environ.get("UKO_BACKLOG_MIN_RECORDS", "1000")),
                max_age_s=float(os.environ.get("UKO_BACKLOG_MAX_AGE_S", "900")),
                poll_interval=float(os.environ.get("UKO_BACKLOG_POLL_S", "30")),
            ),
        )
    ],
)

with DAG(
    dag_id="users_to_delta_on_backlog",
    schedule=[BACKLOG],
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,  # events while a run reads are consumed by the next run
    tags=["upsert-kafka-ops", "demo"],
    doc_md=__doc__,
):
    UpsertKafkaMaterializeOperator(task_id="users_to_delta", **JOB)
