"""The questions an orchestrator asks before or after running a job, answered without Spark.

- :func:`new_data`: did the job's source topics move past the offsets the job last processed? (the
  target's stored offsets, else the job's consumer group; see :mod:`upsert_kafka_ops.jobs.lag`)
- :func:`backlog`: does what waits call for a run (:class:`Backlog`: enough records, or the oldest
  one old enough)? What an event-driven schedule asks the topic.
- :func:`lag_gate`: is a job's (or a consumer group's) lag within a :class:`LagCondition`: offset
  lag, time lag, and the Burrow status over a window of earlier observations that the caller keeps
  as JSON (an Airflow trigger's kwargs, a Dagster sensor cursor)?

Both are bounded admin queries (offsets, no consumer poll loop), so they fit a Dagster sensor's time
limit and an Airflow triggerer. The Airflow sensors and the Dagster sensors and checks call these;
they hold no logic of their own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, model_validator

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.jobs.lag import job_lag
from upsert_kafka_ops.kafka.admin import Isolation
from upsert_kafka_ops.kafka.evaluation import STATUS_ORDER, EvaluationConfig, LagStatus, LagWindow, check
from upsert_kafka_ops.kafka.lag import LagReport, group_lag
from upsert_kafka_ops.pipeline import Pipeline
from upsert_kafka_ops.spec.base import SpecModel
from upsert_kafka_ops.spec.connection import KafkaConnection

BurrowStatus = Literal["OK", "WARN", "ERR", "STOP", "STALL", "REWIND"]


@dataclass(frozen=True)
class NewData:
    """Records that arrived past a job's processed offsets."""

    job: str
    new_records: int
    partitions: dict[str, dict[str, int]] = field(default_factory=dict)  # topic -> partition -> new records
    end_offsets: dict[str, dict[str, int]] = field(default_factory=dict)
    never_ran: bool = False

    @property
    def available(self) -> bool:
        return self.new_records > 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "new_records": self.new_records,
            "never_ran": self.never_ran,
            "partitions": self.partitions,
            "end_offsets": self.end_offsets,
        }


def new_data_from_report(job: str, report: LagReport) -> NewData:
    """:class:`NewData` from a job's lag report (offset lag is what arrived since the last run)."""
    parts: dict[str, dict[str, int]] = {}
    ends: dict[str, dict[str, int]] = {}
    for p in report.partitions:
        ends.setdefault(p.topic, {})[str(p.partition)] = p.end
        if p.lag > 0:  # a partition never read has all of it waiting (the report's one definition)
            parts.setdefault(p.topic, {})[str(p.partition)] = p.lag
    never = bool(report.partitions) and all(p.committed is None for p in report.partitions)
    return NewData(job, sum(n for t in parts.values() for n in t.values()), parts, ends, never)


def new_data(pipeline: Pipeline, job: str, *, timeout: float = 10.0) -> NewData:
    """What arrived in ``job``'s source topics past its processed offsets (one bounded offsets query
    per topic; no record is read). A job that never ran counts every record from the earliest."""
    return new_data_from_report(job, job_lag(pipeline, job, fetch_records=False, timeout=timeout))


class Backlog(SpecModel):
    """When a job's pending records call for a run: at least ``min_records`` wait, or the oldest of
    them waited ``max_age_s``. Pending is what the lag sensors count: the records past the offsets
    the job processed (every record, for a job that never ran)."""

    min_records: int | None = Field(
        default=None, ge=1, description="Run when at least this many records wait."
    )
    max_age_s: float | None = Field(
        default=None,
        gt=0,
        description="Run when the oldest waiting record is this many seconds old (by its timestamp), "
        "however few wait.",
    )

    @model_validator(mode="after")
    def _some_limit(self) -> Backlog:
        if self.min_records is None and self.max_age_s is None:
            raise SpecError(
                "min_records",
                "a backlog rule needs a limit.",
                "set min_records (how many records wait), max_age_s (how long the oldest waited), or both.",
            )
        return self


@dataclass(frozen=True)
class BacklogVerdict:
    """The verdict of :func:`backlog`: whether a run is due, why, what waits and how old its oldest is."""

    due: bool
    reason: str
    data: NewData
    oldest_age_s: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "due": self.due,
            "reason": self.reason,
            "oldest_age_s": self.oldest_age_s,
            **self.data.to_dict(),
        }


def judge_backlog(rule: Backlog, data: NewData, oldest_age_s: float | None) -> BacklogVerdict:
    """Pure: whether ``data`` (with its oldest record ``oldest_age_s`` old) calls for a run."""
    n = data.new_records
    age = "their age unknown" if oldest_age_s is None else f"the oldest {oldest_age_s:.0f}s old"
    if rule.min_records is not None and n >= rule.min_records:
        why = f"{n} record(s) wait ({rule.min_records} or more call for a run)"
        return BacklogVerdict(True, why, data, oldest_age_s)
    if rule.max_age_s is not None and n and oldest_age_s is not None and oldest_age_s >= rule.max_age_s:
        why = f"{n} record(s) wait, {age} ({rule.max_age_s:g}s or older calls for a run)"
        return BacklogVerdict(True, why, data, oldest_age_s)
    wanted = [f"{rule.min_records} record(s)"] if rule.min_records is not None else []
    wanted += [f"an oldest record {rule.max_age_s:g}s old"] if rule.max_age_s is not None else []
    state = f"{n} record(s) wait, {age}" if n else "nothing waits"
    return BacklogVerdict(False, f"{state}; waiting for {' or '.join(wanted)}", data, oldest_age_s)


def backlog(pipeline: Pipeline, job: str, rule: Backlog, *, timeout: float = 10.0) -> BacklogVerdict:
    """Whether ``job``'s pending records call for a run under ``rule`` (bounded offset queries, and
    with ``max_age_s`` one read of the record at each lagging partition's processed offset)."""
    report = job_lag(pipeline, job, fetch_records=rule.max_age_s is not None, timeout=timeout)
    data = new_data_from_report(job, report)
    return judge_backlog(rule, data, report.max_time_lag_s if data.new_records else None)


class LagCondition(SpecModel):
    """When a job's or group's lag passes. Unset limits are not checked; at least one must be set.
    The ``max_*`` limits wait for lag to be low; ``min_offset_lag`` waits for enough new data."""

    min_offset_lag: int | None = Field(
        default=None,
        ge=1,
        description="Lowest total offset lag that passes: wait until this many records wait.",
    )
    max_offset_lag: int | None = Field(
        default=None, ge=0, description="Highest total offset lag (records behind) that passes."
    )
    max_time_lag_s: float | None = Field(
        default=None, ge=0, description="Highest time lag in seconds (oldest unprocessed record) that passes."
    )
    max_status: BurrowStatus | None = Field(
        default=None,
        description="Worst Burrow status that passes (OK < WARN < ERR < STOP < STALL < REWIND), judged over "
        "the window of earlier observations.",
    )

    @model_validator(mode="after")
    def _some_limit(self) -> LagCondition:
        limits = (self.min_offset_lag, self.max_offset_lag, self.max_time_lag_s, self.max_status)
        if all(v is None for v in limits):
            raise SpecError(
                "max_offset_lag",
                "a lag condition needs at least one limit.",
                "set max_offset_lag, max_time_lag_s, max_status or min_offset_lag.",
            )
        low, high = self.min_offset_lag, self.max_offset_lag
        if low is not None and high is not None and low > high:
            raise SpecError(
                "min_offset_lag",
                f"{low} is above max_offset_lag {high}: nothing can pass.",
                "lower min_offset_lag or raise max_offset_lag.",
            )
        return self


@dataclass(frozen=True)
class LagGate:
    """The verdict of :func:`lag_gate`: whether the condition holds, why, and the window to keep."""

    passed: bool
    reason: str
    status: LagStatus
    window: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "reason": self.reason,
            "status": self.status.status,
            "total_lag": self.status.total_lag,
            "max_time_lag_s": self.status.max_time_lag_s,
            "summary": self.status.summary,
        }


def judge(
    report: LagReport,
    condition: LagCondition,
    window: LagWindow | Mapping[str, Any] | str | None = None,
    config: EvaluationConfig | None = None,
) -> LagGate:
    """Pure: observe ``report`` in ``window``, evaluate (Burrow) and compare with ``condition``."""
    status, updated = check(window, report, config)
    failures: list[str] = []
    lag = report.total_lag  # a partition never read counts from its earliest offset
    if condition.min_offset_lag is not None and lag < condition.min_offset_lag:
        failures.append(f"offset lag {lag} < {condition.min_offset_lag} wanted")
    if condition.max_offset_lag is not None and lag > condition.max_offset_lag:
        failures.append(f"offset lag {lag} > {condition.max_offset_lag}")
    if condition.max_time_lag_s is not None:
        known = report.max_time_lag_s
        if known is None and lag > 0:
            failures.append("time lag unknown while records are behind")
        elif known is not None and known > condition.max_time_lag_s:
            failures.append(f"time lag {known:.1f}s > {condition.max_time_lag_s:g}s")
    if condition.max_status is not None and STATUS_ORDER[status.status] > STATUS_ORDER[condition.max_status]:
        failures.append(f"status {status.status} is worse than {condition.max_status}")
    reason = "; ".join(failures) if failures else "within limits"
    return LagGate(not failures, f"{reason} ({status.summary})", status, updated.to_json())


def lag_gate(
    condition: LagCondition,
    *,
    pipeline: Pipeline | None = None,
    job: str | None = None,
    connection: KafkaConnection | None = None,
    group: str | None = None,
    topics: list[str] | None = None,
    window: LagWindow | Mapping[str, Any] | str | None = None,
    isolation: Isolation = "read_committed",
    timeout: float = 10.0,
) -> LagGate:
    """Read the lag of a job (``pipeline`` + ``job``) or of a consumer group (``connection`` + ``group``,
    optionally limited to ``topics``) and judge it against ``condition``."""
    fetch = condition.max_time_lag_s is not None
    window_json = window.to_json() if isinstance(window, LagWindow) else window
    history = LagWindow.from_json(window_json).points()
    if pipeline is not None and job is not None:
        report = job_lag(
            pipeline, job, isolation=isolation, fetch_records=fetch, history=history, timeout=timeout
        )
    elif connection is not None and group is not None:
        report = group_lag(
            connection,
            group,
            isolation=isolation,
            topics=topics,
            fetch_records=fetch,
            history=history,
            timeout=timeout,
        )
    else:
        raise SpecError("job", "nothing to measure.", "give pipeline and job, or connection and group.")
    return judge(report, condition, window_json)
