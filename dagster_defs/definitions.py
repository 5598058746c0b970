"""Dagster definitions over the pipeline files in ``pipelines/`` (``UKO_PIPELINES_DIR`` to use another
folder): the same files as the Airflow DAGs in ``dags/``.

- Assets: every job's outputs (``upsert_kafka_assets``), external source topics, blocking checks; one
  asset group per pipeline file (``demo`` for ``pipelines/demo.yaml``).
- Checks: ``lag_within_threshold`` on every output (``UKO_MAX_OFFSET_LAG``, ``UKO_MAX_TIME_LAG_S``);
  ``matches_topic`` on every warehouse table (the table compared with the fold of its topic).
- Schedules (stopped by default): ``upsert_kafka_schedule_<job>`` for each job with a ``schedule:``;
  its outputs carry a freshness policy from the same schedule.
- Jobs: ``upsert_kafka_<job>`` for each maintain job (compaction and cleanup of a table: no asset of
  its own), on its ``schedule:`` like the others.
- Sensors (stopped by default): ``upsert_kafka_new_data_<job>`` for each job that reads topics, and
  ``upsert_kafka_lag_status_<job>``, which records an observation on the job's outputs each time the
  Burrow status of its lag changes. A continuous job (``users-live``) runs outside Dagster, as a
  Deployment: no new-data sensor, and ``upsert_kafka_commits_<job>`` (running by default) reports
  each of its commits as a materialization of its table.
- Executor: in-process (a run's steps one after another in its process, sharing one Spark driver).
- Resources: ``kafka`` (every connection of the files) from ``UKO_BOOTSTRAP_SERVERS``,
  ``UKO_SECURITY_PROTOCOL``, ``UKO_SASL_MECHANISM``, ``UKO_KAFKA_USERNAME`` and the password
  ``UKO_KAFKA_PASSWORD`` (read by Dagster at run time through ``dg.EnvVar``); ``spark_runtime`` from
  ``UKO_SPARK_RUNTIME`` (local or spark-submit) and ``UKO_SPARK_MASTER``.

Check it with ``dagster definitions validate -f dagster_defs/definitions.py``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import dagster as dg
from upsert_kafka_ops.dagster import (
    SparkRuntimeResource,
    UpsertKafkaResource,
    continuous_commits_sensor,
    lag_status_sensor,
    new_data_sensor,
    upsert_kafka_assets,
    upsert_kafka_lag_checks,
    upsert_kafka_maintenance_jobs,
    upsert_kafka_maintenance_schedules,
    upsert_kafka_schedules,
    upsert_kafka_verify_checks,
)
from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.jobs import Pipeline
from upsert_kafka_ops.jobs.gates import LagCondition
from upsert_kafka_ops.pipeline import MaterializeJob

PIPELINES = Path(os.environ.get("UKO_PIPELINES_DIR") or Path(__file__).resolve().parents[1] / "pipelines")
LAG = LagCondition(
    max_offset_lag=int(os.environ.get("UKO_MAX_OFFSET_LAG", "10000")),
    max_time_lag_s=float(os.environ.get("UKO_MAX_TIME_LAG_S", "3600")),
)


def _kafka_resource() -> UpsertKafkaResource:
    env = os.environ
    return UpsertKafkaResource(
        bootstrap_servers=dg.EnvVar("UKO_BOOTSTRAP_SERVERS"),
        security_protocol=env.get("UKO_SECURITY_PROTOCOL", "PLAINTEXT"),
        sasl_mechanism=env.get("UKO_SASL_MECHANISM"),
        username=env.get("UKO_KAFKA_USERNAME"),
        password=dg.EnvVar("UKO_KAFKA_PASSWORD") if "UKO_KAFKA_PASSWORD" in env else None,
    )


def build_definitions(folder: Path = PIPELINES) -> dg.Definitions:
    assets: list[dg.AssetsDefinition] = []
    external: dict[dg.AssetKey, dg.AssetSpec] = {}  # a source topic read by several files: once
    checks: list[dg.AssetChecksDefinition] = []
    sensors: list[dg.SensorDefinition] = []
    schedules: list[dg.ScheduleDefinition] = []
    jobs: list[dg.JobDefinition] = []
    files: dict[str, str] = {}  # job name -> its file: job names are op names, unique in a location
    for file in sorted(folder.glob("*.yaml")):
        pipeline = Pipeline.load(file)
        for job in pipeline.jobs:
            if job.name in files:
                raise SpecError(
                    f"{file.name}: jobs.{job.name}",
                    f"is also a job of {files[job.name]}; job names become Dagster op names, unique per code "
                    "location.",
                    "rename one of the jobs, or load the files in separate code locations.",
                )
            files[job.name] = file.name
        kafka = {name: "kafka" for name in pipeline.connections}
        group = re.sub(r"\W", "_", file.stem)  # one group per file: the graph reads as its flow
        for a in upsert_kafka_assets(
            pipeline=pipeline, kafka_resources=kafka, spark_runtime="spark_runtime", group_name=group
        ):
            if isinstance(a, dg.AssetSpec):
                external.setdefault(a.key, a)
            else:
                assets.append(a)
        checks += upsert_kafka_lag_checks(condition=LAG, pipeline=pipeline, kafka_resources=kafka)
        checks += upsert_kafka_verify_checks(pipeline=pipeline, kafka_resources=kafka)
        schedules += upsert_kafka_schedules(pipeline=pipeline)
        jobs += upsert_kafka_maintenance_jobs(
            pipeline=pipeline, kafka_resources=kafka, spark_runtime="spark_runtime"
        )
        schedules += upsert_kafka_maintenance_schedules(pipeline=pipeline)
        for job in pipeline.jobs:
            if job.continuous and isinstance(job, MaterializeJob):  # it runs outside Dagster
                sensors.append(continuous_commits_sensor(job=job.name, pipeline=pipeline))
            if job.reads_topics:
                if not job.continuous:  # a continuous job is never run by Dagster
                    sensors.append(new_data_sensor(job=job.name, pipeline=pipeline, kafka_resources=kafka))
                sensors.append(lag_status_sensor(job=job.name, pipeline=pipeline, kafka_resources=kafka))
    written = {key for a in assets for key in a.keys}  # written by a job of another file: not external
    return dg.Definitions(
        # a run's steps (the assets, then their checks) in its own process, one after another: each step
        # in a process of its own (Dagster's default) started a Spark driver JVM for the asset and another
        # for its matches_topic check
        executor=dg.in_process_executor,
        assets=[*(spec for key, spec in external.items() if key not in written), *assets],
        asset_checks=checks,
        sensors=sensors,
        schedules=schedules,
        jobs=jobs,
        resources={
            "kafka": _kafka_resource(),
            "spark_runtime": SparkRuntimeResource(
                runtime=os.environ.get("UKO_SPARK_RUNTIME", "local"),
                master=os.environ.get("UKO_SPARK_MASTER", "local[*]"),
            ),
        },
    )


defs = build_definitions()
