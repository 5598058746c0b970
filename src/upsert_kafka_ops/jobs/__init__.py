"""Jobs: pipeline files, job specs, the runner, and the state targets keep with their data.

Importing this package needs no Spark; running a job does.
"""

from __future__ import annotations

from typing import Any

from upsert_kafka_ops.jobs.spec import (
    AppendSink,
    AppendSource,
    BackfillJob,
    DeltaFeedSource,
    DeltaTarget,
    IcebergTarget,
    MaterializeJob,
    ParquetTarget,
    Pipeline,
    PostgresTarget,
    PublishJob,
    QuerySource,
    TopicSink,
    TopicToTopicJob,
    UpsertSource,
)
from upsert_kafka_ops.jobs.state import StoredState
from upsert_kafka_ops.jobs.targets import read_stored_offsets


def run_job(*args: Any, **kwargs: Any) -> Any:
    """See :func:`upsert_kafka_ops.jobs.run.run_job`."""
    from upsert_kafka_ops.jobs.run import run_job as _run_job

    return _run_job(*args, **kwargs)


def run_spec(spec: Any, spark: Any) -> dict[str, Any]:
    """See :func:`upsert_kafka_ops.jobs.run.run_spec` (the spark-submit driver's entry)."""
    from upsert_kafka_ops.jobs.run import run_spec as _run_spec

    return _run_spec(spec, spark)


__all__ = [
    "AppendSink",
    "AppendSource",
    "BackfillJob",
    "DeltaFeedSource",
    "DeltaTarget",
    "IcebergTarget",
    "MaterializeJob",
    "ParquetTarget",
    "Pipeline",
    "PostgresTarget",
    "PublishJob",
    "QuerySource",
    "StoredState",
    "TopicSink",
    "TopicToTopicJob",
    "UpsertSource",
    "read_stored_offsets",
    "run_job",
    "run_spec",
]
