"""Dagster integration: resources, an asset factory with a translator, asset checks, sensors.

::

    import dagster as dg
    from upsert_kafka_ops.dagster import UpsertKafkaResource, upsert_kafka_assets

    defs = dg.Definitions(
        assets=upsert_kafka_assets(pipeline_file="pipelines/demo.yaml", kafka_resources={"local": "kafka"}),
        resources={"kafka": UpsertKafkaResource(bootstrap_servers=dg.EnvVar("UKO_BOOTSTRAP_SERVERS"))},
    )

Every run goes through the core (:func:`upsert_kafka_ops.runtime.execute_job`), as the CLI and the
Airflow operators do; the sensors and checks call :mod:`upsert_kafka_ops.jobs.gates`.
"""

from upsert_kafka_ops.dagster.assets import (
    KEYS_CHECK,
    ROW_COUNT_CHECK,
    UpsertKafkaRunConfig,
    op_name,
    pool_name,
    upsert_kafka_assets,
)
from upsert_kafka_ops.dagster.checks import VERIFY_CHECK, upsert_kafka_verify_checks
from upsert_kafka_ops.dagster.component import UpsertKafkaPipelineComponent
from upsert_kafka_ops.dagster.maintenance import (
    upsert_kafka_maintenance_jobs,
    upsert_kafka_maintenance_schedules,
)
from upsert_kafka_ops.dagster.resources import SparkRuntimeResource, UpsertKafkaResource
from upsert_kafka_ops.dagster.schedules import upsert_kafka_freshness_checks, upsert_kafka_schedules
from upsert_kafka_ops.dagster.sensors import (
    LAG_CHECK,
    consumer_lag_sensor,
    continuous_commits_sensor,
    lag_status_sensor,
    new_data_sensor,
    upsert_kafka_lag_checks,
)
from upsert_kafka_ops.dagster.translator import DagsterUpsertKafkaTranslator, UpsertKafkaDataset

__all__ = [
    "KEYS_CHECK",
    "LAG_CHECK",
    "ROW_COUNT_CHECK",
    "VERIFY_CHECK",
    "DagsterUpsertKafkaTranslator",
    "SparkRuntimeResource",
    "UpsertKafkaDataset",
    "UpsertKafkaPipelineComponent",
    "UpsertKafkaResource",
    "UpsertKafkaRunConfig",
    "consumer_lag_sensor",
    "continuous_commits_sensor",
    "lag_status_sensor",
    "new_data_sensor",
    "op_name",
    "pool_name",
    "upsert_kafka_assets",
    "upsert_kafka_freshness_checks",
    "upsert_kafka_lag_checks",
    "upsert_kafka_maintenance_jobs",
    "upsert_kafka_maintenance_schedules",
    "upsert_kafka_schedules",
    "upsert_kafka_verify_checks",
]
