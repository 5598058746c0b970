"""The runner core every job kind shares: what a run is given (:class:`RunContext`), what it reports
(:class:`JobResult`), its errors, and the consumer-group commit that lets Kafka's tools see a job.

Each job kind (``to_warehouse``, ``topic_to_topic``, ``publish``, ``backfill``) is a function
``(ctx, job) -> JobResult`` over this core; ``jobs.run`` picks one per job and times it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from upsert_kafka_ops.errors import SpecError, UpsertKafkaOpsError
from upsert_kafka_ops.pipeline import (
    AnyJob,
    Pipeline,
)
from upsert_kafka_ops.spec.connection import KafkaConnection, for_table
from upsert_kafka_ops.spec.table import KafkaTable, UpsertKafkaTable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from upsert_kafka_ops.engine.results import RunResult

log = logging.getLogger("upsert_kafka_ops.jobs")
JOB_RESULT_VERSION = 1
_SHOWN = 16  # partitions of a topic listed in a result's Markdown summary


class ConcurrentRunError(UpsertKafkaOpsError):
    """Another run of the same target holds it (or committed first)."""


class OffsetsError(UpsertKafkaOpsError):
    """Stored offsets do not fit the topic (recreated, truncated or past retention)."""


@dataclass
class JobResult:
    """What a job run did. JSON-serializable, versioned, no secrets."""

    job: str
    kind: str
    status: str = "succeeded"
    mode: str = "incremental"
    execution: str = "batch"
    reason: str = ""
    run: int = 0
    target: str = ""
    records_read: int = 0
    rows_upserted: int = 0
    rows_deleted: int = 0
    records_written: int = 0
    tombstones_written: int = 0
    columns_added: list[str] = field(default_factory=list)
    start_offsets: dict[str, dict[str, int]] = field(default_factory=dict)
    end_offsets: dict[str, dict[str, int]] = field(default_factory=dict)
    read: dict[str, Any] = field(default_factory=dict)
    write: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0
    #: the Spark application the run ran in (its driver's, or the Spark Connect server's): the key of
    #: its page in the Spark History Server
    spark_app_id: str = ""
    version: int = JOB_RESULT_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_markdown(self) -> str:
        """The run as a short Markdown summary (a table of its figures, the offsets per topic): what an
        orchestrator shows in its task view."""
        why = f" ({self.reason})" if self.reason else ""
        rows = [
            ("status", self.status),
            ("mode", f"{self.mode}{why}"),
            ("execution", self.execution),
            ("run", str(self.run)),
            ("target", f"`{self.target}`" if self.target else ""),
            ("records read", f"{self.records_read:,}"),
            ("rows upserted", f"{self.rows_upserted:,}"),
            ("rows deleted", f"{self.rows_deleted:,}"),
            ("records written", f"{self.records_written:,}"),
            ("tombstones written", f"{self.tombstones_written:,}"),
            ("columns added", ", ".join(self.columns_added)),
            ("duration", f"{self.duration_s:.1f} s"),
            ("Spark application", f"`{self.spark_app_id}`" if self.spark_app_id else ""),
        ]
        lines = [f"### {self.kind} job `{self.job}`", "", "| | |", "|---|---|"]
        lines += ["| " + name + " | " + value.replace("|", "\\|") + " |" for name, value in rows if value]
        for topic in sorted(set(self.start_offsets) | set(self.end_offsets)):
            start, end = self.start_offsets.get(topic, {}), self.end_offsets.get(topic, {})
            parts = sorted(set(start) | set(end), key=int)
            ranges = ", ".join(f"{p}: {start.get(p, '-')} → {end.get(p, '-')}" for p in parts[:_SHOWN])
            more = f" and {len(parts) - _SHOWN} more" if len(parts) > _SHOWN else ""
            lines += ["", f"`{topic}` offsets (partition: start → end): {ranges}{more}"]
        return "\n".join(lines) + "\n"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobResult:
        if data.get("version") != JOB_RESULT_VERSION:
            raise ValueError(f"job result version {data.get('version')!r} is not {JOB_RESULT_VERSION}")
        return cls(**dict(data))


@dataclass
class RunContext:
    """One run of one job: its pipeline (for connections), the session, and the caller's overrides."""

    pipeline: Pipeline
    job: AnyJob
    spark: SparkSession
    mode_override: str | None = None
    lock_timeout_s: float = 60.0
    began: float = field(default_factory=time.monotonic)

    def connection(self, name: str, table: UpsertKafkaTable | KafkaTable | None = None) -> KafkaConnection:
        """The pipeline's connection ``name``; for a ``table``, with the security its WITH clause sets."""
        conn = self.pipeline.connections[name]
        return conn if table is None else for_table(conn, table.properties)

    def result(self, **fields: Any) -> JobResult:
        """A result of this run's job."""
        return JobResult(job=self.job.name, kind=self.job.kind, **fields)


def written_to_topic(written: RunResult | None) -> dict[str, Any]:
    """A result's write fields from the sink's result (rows, tombstones and the sink's own record)."""
    if written is None:
        return {"records_written": 0, "tombstones_written": 0, "write": {}}
    return {
        "records_written": written.records_out - written.tombstones_out,
        "tombstones_written": written.tombstones_out,
        "write": written.to_dict(),
    }


def topic_target(table: UpsertKafkaTable | KafkaTable) -> str:
    """How a result names a topic target."""
    return f"kafka-topic:{','.join(table.topic or [])}"


def conform(df: DataFrame, table: UpsertKafkaTable | KafkaTable, what: str) -> DataFrame:
    """Columns by position to the sink's names and types (Flink's INSERT INTO rule)."""
    from pyspark.sql import functions as F

    cols = [c for c in table.columns if not c.virtual]
    if len(df.columns) != len(cols):
        raise SpecError(
            what,
            f"the query gives {len(df.columns)} columns ({', '.join(df.columns)}) but the sink table has "
            f"{len(cols)} ({', '.join(c.name for c in cols)}).",
            "select the sink's columns, in order.",
        )
    return df.select(
        *[
            F.col(f"`{src}`").cast(c.sql_type.to_spark()).alias(c.name)
            for src, c in zip(df.columns, cols, strict=True)
        ]
    )


def commit_group_offsets(
    conn: KafkaConnection,
    group: str,
    offsets: Mapping[str, Mapping[str, int]],
    timeout: float = 30.0,
    metadata: str = "",
) -> None:
    """Commit ``offsets`` to ``group`` (for monitoring: Kafka's lag tools then see the job), each with
    ``metadata`` (a job writing a topic records its partition count there: ``jobs.sink_layout``)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    tps = [
        TopicPartition(t, int(p), int(o), metadata=metadata)
        for t, parts in offsets.items()
        for p, o in parts.items()
    ]
    if not tps:
        return
    consumer = Consumer({**conn.to_librdkafka(), "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=tps, asynchronous=False)
    except KafkaException as exc:
        log.warning("could not commit offsets to consumer group %s (monitoring only): %s", group, exc)
    finally:
        consumer.close()
