"""The pipeline model: the unit that the CLI, spark-submit, Airflow, Dagster and the Helm chart all
run.

A :class:`Pipeline` (one YAML file) names its Kafka connections once and holds several jobs; each
source and sink names the connection it uses, so a job may read one cluster and write another.
Secrets stay references (``{env: VAR}`` or ``{file: /path}``) in the file, in the JSON that goes to
spark-submit and in Helm values; whoever runs the job resolves them.

Its modules: ``loading`` (environment variables, line numbers), ``tables`` (tables written inline or
defined once in ``tables`` and named), ``sources``, ``targets``, ``folders`` (a folder on some
storage), ``bounds`` (a backfill's end), ``jobs`` (the job kinds) and ``model`` (the file itself and
the references between its sections). Importing it needs no Spark.
"""

from __future__ import annotations

from upsert_kafka_ops.pipeline.bounds import Until, parse_until
from upsert_kafka_ops.pipeline.folders import Folder
from upsert_kafka_ops.pipeline.jobs import (
    AnyJob,
    BackfillJob,
    Job,
    MaintainJob,
    MaterializeJob,
    PublishJob,
    TopicToTopicJob,
    Trigger,
    WarehouseJob,
    as_backfill,
    history_start_error,
    source_table,
    target_table,
)
from upsert_kafka_ops.pipeline.loading import PIPELINE_VERSION, expand_env
from upsert_kafka_ops.pipeline.model import Pipeline
from upsert_kafka_ops.pipeline.sources import DeltaFeedSource, KafkaSource, QuerySource, Source, UpsertSource
from upsert_kafka_ops.pipeline.targets import (
    AnyTarget,
    DeltaTarget,
    IcebergTarget,
    KafkaSink,
    ParquetTarget,
    PostgresTarget,
    Sink,
    UpsertSink,
    WarehouseTarget,
)

__all__ = [
    "PIPELINE_VERSION",
    "AnyJob",
    "AnyTarget",
    "BackfillJob",
    "DeltaFeedSource",
    "DeltaTarget",
    "Folder",
    "IcebergTarget",
    "Job",
    "KafkaSink",
    "KafkaSource",
    "MaintainJob",
    "MaterializeJob",
    "ParquetTarget",
    "Pipeline",
    "PostgresTarget",
    "PublishJob",
    "QuerySource",
    "Sink",
    "Source",
    "TopicToTopicJob",
    "Trigger",
    "Until",
    "UpsertSink",
    "UpsertSource",
    "WarehouseJob",
    "WarehouseTarget",
    "as_backfill",
    "expand_env",
    "history_start_error",
    "parse_until",
    "source_table",
    "target_table",
]
