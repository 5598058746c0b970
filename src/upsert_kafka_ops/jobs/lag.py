"""Lag of a pipeline's jobs: where each job's committed offsets come from, and its LagReport.

- A materialize or backfill job with a warehouse target: the offsets the target stores with its data
  (:func:`~upsert_kafka_ops.jobs.targets.read_stored_offsets`, read without Spark). They are the
  authoritative ones: the consumer group is only committed after the target's commit. A table on
  S3 is read there too, through the store the pipeline names.
- Every other job (topic-to-topic, publish, a backfill into a topic): the job's consumer group
  ``upsert-kafka-ops.<job>``.

The report covers every partition of the job's source topics (every source of a topic-to-topic
job), those without a committed offset too. The pipeline's connections are used; their secret
references are resolved here, in this process.

Example::

    from upsert_kafka_ops.jobs import Pipeline
    from upsert_kafka_ops.jobs.lag import job_lag

    report = job_lag(Pipeline.load("pipelines/demo.yaml"), "users-to-delta")
    print(report.total_lag)
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from upsert_kafka_ops.errors import SpecError, UpsertKafkaOpsError
from upsert_kafka_ops.jobs.state import StoredState
from upsert_kafka_ops.jobs.targets import read_stored_offsets, readable_here
from upsert_kafka_ops.kafka.admin import Isolation, KafkaAdmin, TopicPartitionKey
from upsert_kafka_ops.kafka.lag import LagReport, Points, compute_lag, group_lag
from upsert_kafka_ops.pipeline import (
    AnyJob,
    BackfillJob,
    KafkaSource,
    MaterializeJob,
    Pipeline,
    PublishJob,
    TopicToTopicJob,
    UpsertSource,
)
from upsert_kafka_ops.spec.connection import for_table

#: Where a job's committed offsets come from.
OffsetsFrom = Literal["target", "consumer-group"]


@dataclass(frozen=True)
class JobLag:
    """One job's lag, or the error that kept it from being read."""

    job: str
    kind: str
    offsets_from: OffsetsFrom
    group: str
    target: str | None
    report: LagReport | None
    error: str | None = None
    stored_run: int | None = None
    #: the stored run's mode: ``full`` for a rebuild from the earliest offset (a backfill, mode full)
    stored_mode: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "kind": self.kind,
            "offsets_from": self.offsets_from,
            "group": self.group,
            "target": self.target,
            "stored_run": self.stored_run,
            "stored_mode": self.stored_mode,
            "error": self.error,
            "report": None if self.report is None else self.report.to_dict(),
        }


def offsets_from(job: AnyJob) -> OffsetsFrom:
    """``target`` for a warehouse target's stored offsets (on disk, S3 or PostgreSQL), else
    ``consumer-group``."""
    if isinstance(job, MaterializeJob | BackfillJob) and readable_here(job):
        return "target"
    return "consumer-group"


def source_topics(job: AnyJob) -> dict[str, list[UpsertSource | KafkaSource]]:
    """The job's Kafka sources by connection name (a publish job has none)."""
    if isinstance(job, MaterializeJob | BackfillJob):
        return {job.source.connection: [job.source]}
    if isinstance(job, TopicToTopicJob):
        out: dict[str, list[UpsertSource | KafkaSource]] = {}
        for s in job.sources.values():
            out.setdefault(s.connection, []).append(s)
        return out
    return {}


def _topics(admin: KafkaAdmin, sources: Iterable[UpsertSource | KafkaSource]) -> list[str]:
    """The topics of the sources: named ones, and the existing topics a ``topic_pattern`` matches
    (Java and Python regexes agree on the patterns topic names use)."""
    named: set[str] = set()
    patterns: list[str] = []
    for s in sources:
        named.update(s.table.topic or [])
        if s.table.topic_pattern is not None:
            patterns.append(s.table.topic_pattern)
    if patterns:
        client = admin.client  # connection errors come typed from here
        try:
            existing = client.list_topics(timeout=admin.timeout).topics
        except Exception as exc:
            raise admin.failure(exc, "list topics") from None
        for name in existing:
            if not name.startswith("__") and any(re.fullmatch(p, name) for p in patterns):
                named.add(name)
    return sorted(named)


def job_lag(
    pipeline: Pipeline,
    job: str,
    *,
    isolation: Isolation = "read_committed",
    fetch_records: bool = True,
    history: Mapping[TopicPartitionKey, Points] | None = None,
    now: float | None = None,
    timeout: float = 10.0,
    admins: dict[str, KafkaAdmin] | None = None,
) -> LagReport:
    """The lag of ``job``: its committed offsets (see the module docstring) against every partition
    of its source topics.

    :param isolation: ``read_committed`` by default, as the jobs read.
    :param history: recorded ``(end offset, time)`` points (``LagWindow.points()``), for time lag
        when the record at a committed offset is gone.
    :param admins: admin clients by connection name to reuse (filled in when given); without it the
        clients are closed before returning.
    :raises TopicNotFoundError: when a named source topic does not exist.
    """
    report, _ = _job_lag(pipeline, pipeline.job(job), isolation, fetch_records, history, now, timeout, admins)
    return report


def _job_lag(
    pipeline: Pipeline,
    spec: AnyJob,
    isolation: Isolation,
    fetch_records: bool,
    history: Mapping[TopicPartitionKey, Points] | None,
    now: float | None,
    timeout: float,
    admins: dict[str, KafkaAdmin] | None,
) -> tuple[LagReport, StoredState | None]:
    pool = admins if admins is not None else {}

    by_conn = source_topics(spec)

    def admin(name: str) -> KafkaAdmin:
        if name not in pool:  # with the security the sources' WITH clauses set
            conn = pipeline.connections[name]
            for source in by_conn.get(name, []):
                conn = for_table(conn, source.table.properties)
            pool[name] = KafkaAdmin(conn, timeout=timeout)
        return pool[name]

    try:
        if offsets_from(spec) == "target":
            stored = read_stored_offsets(spec, pipeline)  # read before the end offsets, on purpose
            (conn, sources), *_ = by_conn.items()
            a = admin(conn)
            held = stored.offsets if stored is not None else {}
            wanted = _topics(a, sources)
            found = a.describe_topics(wanted)
            found.update(a.describe_topics({t for t, _ in held} - set(wanted), missing_ok=True))
            committed: dict[TopicPartitionKey, int | None] = {
                (t, p): held.get((t, p)) for t, info in sorted(found.items()) for p in range(info.partitions)
            }
            missing = tuple(sorted({t for t, _ in held} - set(found)))
            report = compute_lag(
                a,
                committed,
                isolation=isolation,
                group=None,
                fetch_records=fetch_records,
                history=history,
                now=now,
            )
            report = dataclasses.replace(report, missing_topics=missing)
            return report, stored
        if not by_conn:  # a publish job reads no topic: whatever its group committed (normally nothing)
            sink = spec.sink if isinstance(spec, PublishJob | TopicToTopicJob) else None
            conn = sink.connection if sink is not None else next(iter(pipeline.connections))
            return group_lag(
                admin(conn),
                spec.consumer_group,
                isolation=isolation,
                fetch_records=fetch_records,
                history=history,
                now=now,
            ), None
        reports = []
        for conn, sources in by_conn.items():
            a = admin(conn)
            reports.append(
                group_lag(
                    a,
                    spec.consumer_group,
                    isolation=isolation,
                    topics=_topics(a, sources),
                    fetch_records=fetch_records,
                    history=history,
                    now=now,
                )
            )
        return _merge(reports), None
    finally:
        if admins is None:
            for a in pool.values():
                a.close()


def _merge(reports: list[LagReport]) -> LagReport:
    """One report from several connections' (a topic-to-topic job reading two clusters)."""
    if len(reports) == 1:
        return reports[0]
    first = reports[0]
    return dataclasses.replace(
        first,
        partitions=tuple(p for r in reports for p in r.partitions),
        topics={t: i for r in reports for t, i in r.topics.items()},
        configs={t: c for r in reports for t, c in r.configs.items()},
        missing_topics=tuple(sorted({t for r in reports for t in r.missing_topics})),
    )


def lag_jobs(pipeline: Pipeline) -> list[str]:
    """The jobs of ``pipeline`` that have a lag: those that read topics (a publish job reads a table's
    change feed and a maintain job no data, so no consumer group of theirs ever exists)."""
    return [j.name for j in pipeline.jobs if j.reads_topics]


def pipeline_lag_names(pipeline: Pipeline, jobs: Iterable[str] | None = None) -> list[str]:
    """The jobs :func:`pipeline_lag` reports: ``jobs`` (checked: known, jobs that read topics), else
    every job with a lag."""
    if jobs is None:
        return lag_jobs(pipeline)
    names = list(jobs) or lag_jobs(pipeline)
    for name in names:
        spec = pipeline.job(name)  # unknown names fail here too
        if not spec.reads_topics:
            raise SpecError(
                "job",
                f"{name!r} is a {spec.kind} job: it reads no topic, so it has no lag.",
                f"leave it out; the jobs with a lag are: {', '.join(lag_jobs(pipeline)) or 'none'}.",
            )
    return names


def pipeline_lag(
    pipeline: Pipeline,
    jobs: Iterable[str] | None = None,
    *,
    isolation: Isolation = "read_committed",
    fetch_records: bool = True,
    history: Mapping[str, Mapping[TopicPartitionKey, Points]] | None = None,
    now: float | None = None,
    timeout: float = 10.0,
    admins: dict[str, KafkaAdmin] | None = None,
) -> list[JobLag]:
    """Every job's lag (or the named jobs', in the order given), one :class:`JobLag` each; publish jobs
    read no topic and have none (naming one is an error). A job whose lag cannot be read carries the
    error instead of a report; the others are still read.

    :param history: points per job name (each job's ``LagWindow.points()``).
    """
    names = pipeline_lag_names(pipeline, jobs)
    specs = [pipeline.job(n) for n in names]  # unknown names fail before any broker call
    pool = admins if admins is not None else {}
    out: list[JobLag] = []
    try:
        for spec in specs:
            target = getattr(spec, "target", None)
            base = JobLag(
                job=spec.name,
                kind=spec.kind,
                offsets_from=offsets_from(spec),
                group=spec.consumer_group,
                target=getattr(target, "uri", None),
                report=None,
            )
            try:
                report, stored = _job_lag(
                    pipeline,
                    spec,
                    isolation,
                    fetch_records,
                    (history or {}).get(spec.name),
                    now,
                    timeout,
                    pool,
                )
            except UpsertKafkaOpsError as exc:
                out.append(dataclasses.replace(base, error=str(exc)))
                continue
            out.append(
                dataclasses.replace(
                    base,
                    report=report,
                    stored_run=stored.run if stored else None,
                    stored_mode=stored.mode if stored else None,
                )
            )
    finally:
        if admins is None:
            for a in pool.values():
                a.close()
    return out
