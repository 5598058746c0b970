"""Manual backfill: rebuild a materialized table from the earliest offset up to a fixed end.

Trigger with params: ``job`` (a materialize or backfill job of the pipeline), ``end`` (``latest``,
an ISO-8601 time such as ``2026-11-22T10:00:00Z``, epoch milliseconds, or offsets JSON) and
``rewind``. An end older than the offsets the table already holds fails with that explanation
unless ``rewind`` is true (the table then goes back to that point). A repeated run with the same end
rebuilds the same table. Then ``verify`` compares the rebuilt table with the fold of its topic up to
the offsets it now holds, key by key; a difference fails the run and names the keys.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG, Param

from upsert_kafka_ops.airflow.operators import UpsertKafkaBackfillOperator, UpsertKafkaVerifyOperator

PIPELINE = (
    Path(os.environ.get("UKO_PIPELINES_DIR") or Path(__file__).resolve().parents[1] / "pipelines")
    / "demo.yaml"
)

with DAG(
    dag_id="upsert_kafka_backfill",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["upsert-kafka-ops", "backfill"],
    doc_md=__doc__,
    params={
        "job": Param(
            "users-to-delta", type="string", description="The materialize or backfill job to rebuild."
        ),
        "end": Param(
            "latest", type="string", description="latest, an ISO-8601 time, epoch ms, or offsets JSON."
        ),
        "rewind": Param(False, type="boolean", description="Allow an end older than the table's offsets."),
    },
):
    backfill = UpsertKafkaBackfillOperator(
        task_id="backfill",
        pipeline_file=str(PIPELINE),
        job_name="{{ params.job }}",
        until="{{ params.end }}",
        rewind="{{ params.rewind }}",
        kafka_config_ids={"local": "kafka_default"},
    )
    verify = UpsertKafkaVerifyOperator(
        task_id="verify",
        pipeline_file=str(PIPELINE),
        job_name="{{ params.job }}",
        kafka_config_ids={"local": "kafka_default"},
    )
    backfill >> verify
