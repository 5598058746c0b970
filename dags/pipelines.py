"""One DAG per pipeline file (``upsert_kafka_<file>``): every job once per run, upstream jobs first."""

from __future__ import annotations

import os
from pathlib import Path

from upsert_kafka_ops.airflow.factory import pipeline_dags

PIPELINES = Path(os.environ.get("UKO_PIPELINES_DIR") or Path(__file__).resolve().parents[1] / "pipelines")

# `airflow` and `DAG` appear in this file so that Airflow's safe-mode parser reads it.
globals().update(pipeline_dags(PIPELINES, kafka_config_id="kafka_default"))
