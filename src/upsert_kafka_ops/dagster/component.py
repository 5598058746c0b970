"""A YAML-configurable Component: a pipeline file's assets, lag checks, new-data sensors and the
schedules of its jobs' ``schedule:``; for each continuous job, the sensor that reports its commits.

::

    # defs/upsert_kafka/defs.yaml
    type: upsert_kafka_ops.dagster.UpsertKafkaPipelineComponent
    attributes:
      pipeline_file: "{{ project_root }}/pipelines/demo.yaml"
      bootstrap_servers: "{{ env.UKO_BOOTSTRAP_SERVERS }}"
      security_protocol: SASL_SSL
      sasl_mechanism: SCRAM-SHA-512
      username: etl
      password_env: KAFKA_PASSWORD      # read at run time (dg.EnvVar)
      max_offset_lag: 10000
      sensors: true

With ``bootstrap_servers`` the component binds an ``UpsertKafkaResource`` under ``kafka`` for every
connection of the file; without it, map connections to resources bound elsewhere with
``kafka_resources``.
"""

from collections.abc import Sequence

from pydantic import Field

import dagster as dg
from upsert_kafka_ops.dagster._plan import is_maintenance
from upsert_kafka_ops.dagster.assets import upsert_kafka_assets
from upsert_kafka_ops.dagster.maintenance import (
    upsert_kafka_maintenance_jobs,
    upsert_kafka_maintenance_schedules,
)
from upsert_kafka_ops.dagster.resources import UpsertKafkaResource
from upsert_kafka_ops.dagster.schedules import upsert_kafka_schedules
from upsert_kafka_ops.dagster.sensors import (
    continuous_commits_sensor,
    new_data_sensor,
    upsert_kafka_lag_checks,
)
from upsert_kafka_ops.jobs import Pipeline
from upsert_kafka_ops.jobs.gates import LagCondition
from upsert_kafka_ops.pipeline import MaterializeJob


class UpsertKafkaPipelineComponent(dg.Component, dg.Model, dg.Resolvable):
    """Assets, checks and sensors of an upsert-kafka-ops pipeline file."""

    pipeline_file: str = Field(description="Path of the pipeline YAML file.")
    jobs: Sequence[str] | None = Field(default=None, description="Only these jobs (default: all).")
    kafka_resources: dict[str, str] = Field(
        default_factory=dict,
        description="Pipeline connection name -> resource key of an UpsertKafkaResource.",
    )
    spark_runtime: str | None = Field(default=None, description="Resource key of a SparkRuntimeResource.")
    row_count_check: bool = Field(default=True, description="Blocking row count check on Delta targets.")
    max_offset_lag: int | None = Field(default=None, description="lag_within_threshold: highest offset lag.")
    max_time_lag_s: float | None = Field(default=None, description="lag_within_threshold: highest time lag.")
    sensors: bool = Field(default=False, description="A new-data sensor per job that reads topics.")
    bootstrap_servers: str | None = Field(
        default=None, description="Bind a 'kafka' resource for this cluster."
    )
    security_protocol: str = Field(default="PLAINTEXT", description="With bootstrap_servers.")
    sasl_mechanism: str | None = Field(default=None, description="With bootstrap_servers.")
    username: str | None = Field(default=None, description="With bootstrap_servers.")
    password_env: str | None = Field(default=None, description="Environment variable of the SASL password.")
    ssl_ca_location: str | None = Field(default=None, description="With bootstrap_servers.")

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        pipeline = Pipeline.load(self.pipeline_file)
        kres = dict(self.kafka_resources)
        resources: dict[str, UpsertKafkaResource] = {}
        if self.bootstrap_servers is not None:
            kres = {name: kres.get(name, "kafka") for name in pipeline.connections}
            resources["kafka"] = UpsertKafkaResource(
                bootstrap_servers=self.bootstrap_servers,
                security_protocol=self.security_protocol,
                sasl_mechanism=self.sasl_mechanism,
                username=self.username,
                password=dg.EnvVar(self.password_env) if self.password_env else None,
                ssl_ca_location=self.ssl_ca_location,
            )
        # maintain jobs make no asset: a Dagster job each (upsert_kafka_maintenance_jobs)
        maintained = [j.name for j in pipeline.jobs if is_maintenance(j)]
        kept = None if self.jobs is None else [j for j in self.jobs if j not in maintained]
        picked = None if self.jobs is None else [j for j in self.jobs if j in maintained]
        assets = upsert_kafka_assets(
            pipeline=pipeline,
            jobs=kept,
            kafka_resources=kres,
            spark_runtime=self.spark_runtime,
            row_count_check=self.row_count_check,
        )
        checks: list[dg.AssetChecksDefinition] = []
        if self.max_offset_lag is not None or self.max_time_lag_s is not None:
            condition = LagCondition(max_offset_lag=self.max_offset_lag, max_time_lag_s=self.max_time_lag_s)
            checks = upsert_kafka_lag_checks(
                condition=condition, pipeline=pipeline, jobs=kept, kafka_resources=kres
            )
        selected = set(self.jobs) if self.jobs is not None else None
        chosen = [j for j in pipeline.jobs if selected is None or j.name in selected]
        # a continuous job runs outside Dagster: never a run requested; a materialize job's commits
        # (its target stores them) are reported
        sensors = [
            continuous_commits_sensor(job=j.name, pipeline=pipeline)
            for j in chosen
            if j.continuous and isinstance(j, MaterializeJob)
        ]
        if self.sensors:
            sensors += [
                new_data_sensor(job=j.name, pipeline=pipeline, kafka_resources=kres)
                for j in chosen
                if j.reads_topics and not j.continuous
            ]
        maintenance = upsert_kafka_maintenance_jobs(
            pipeline=pipeline, jobs=picked, kafka_resources=kres, spark_runtime=self.spark_runtime
        )
        schedules = [  # stopped until turned on
            *upsert_kafka_schedules(pipeline=pipeline, jobs=kept),
            *upsert_kafka_maintenance_schedules(pipeline=pipeline, jobs=picked),
        ]
        return dg.Definitions(
            assets=assets,
            asset_checks=checks,
            sensors=sensors,
            schedules=schedules,
            jobs=maintenance,
            resources=resources,
        )
