"""Jobs: pipeline files, job specs, the runner, and the state targets keep with their data.

Importing this package needs no Spark; running a job does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from upsert_kafka_ops.jobs.state import StoredState
from upsert_kafka_ops.jobs.targets import read_stored_offsets
from upsert_kafka_ops.pipeline import (
    BackfillJob,
    DeltaFeedSource,
    DeltaTarget,
    IcebergTarget,
    KafkaSink,
    KafkaSource,
    MaterializeJob,
    ParquetTarget,
    Pipeline,
    PostgresTarget,
    PublishJob,
    QuerySource,
    TopicToTopicJob,
    UpsertSink,
    UpsertSource,
)

#: the names these models had before they were named by their kind (upsert-kafka or kafka), kept so
#: that code written for 0.2 imports them still
AppendSource, AppendSink, TopicSink = KafkaSource, KafkaSink, UpsertSink

if TYPE_CHECKING:  # type checkers see the functions themselves; importing them is deferred below
    from upsert_kafka_ops.jobs.run import run_job, run_spec

#: names loaded from :mod:`upsert_kafka_ops.jobs.run` on first use (it imports every job kind's run)
_FROM_RUN = ("run_job", "run_spec")


def __getattr__(name: str) -> Any:
    """``run_job`` and ``run_spec``: :mod:`upsert_kafka_ops.jobs.run`'s own functions, imported when
    first asked for."""
    if name not in _FROM_RUN:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from upsert_kafka_ops.jobs import run

    value = getattr(run, name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


__all__ = [
    "AppendSink",
    "AppendSource",
    "BackfillJob",
    "DeltaFeedSource",
    "DeltaTarget",
    "IcebergTarget",
    "KafkaSink",
    "KafkaSource",
    "MaterializeJob",
    "ParquetTarget",
    "Pipeline",
    "PostgresTarget",
    "PublishJob",
    "QuerySource",
    "StoredState",
    "TopicSink",
    "TopicToTopicJob",
    "UpsertSink",
    "UpsertSource",
    "read_stored_offsets",
    "run_job",
    "run_spec",
]
