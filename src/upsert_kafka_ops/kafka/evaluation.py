"""Burrow's consumer status rules over a sliding window of observed samples; pure functions.

The admin API returns committed offsets without commit timestamps, so the window holds *observed*
samples ``(offset, lag, time)``: :meth:`LagWindow.observe` adds one when the committed offset moved,
or when it stayed put while an active group member owns the partition (the consumer is alive and
committing the same offset; with no owner an unchanged offset is no evidence of a commit, which is
what lets Burrow's STOP rule fire). The window is plain JSON (:meth:`LagWindow.to_json`) that the
caller keeps: an Airflow trigger's kwargs, a Dagster cursor, the exporter's memory.

:func:`evaluate_partition` is Burrow's ``calculatePartitionStatus`` (linkedin/Burrow
``core/internal/evaluator/caching.go``) with the deviations listed in docs/lag.md:

1. Samples are observations, not commits (above); ``min_distance_s`` merges samples as Burrow's
   ``min-distance`` merges commits.
2. STALL and WARN need at least two samples (Burrow finds them vacuously true for one).
3. A partition whose committed offset is below the earliest offset (data loss) is at least WARN.
4. Schedule-aware mode for batch jobs: between runs the partition is OK when the last run ended
   caught up and the next run is not overdue; an overdue run is STOP.
5. A topic whose id changed (deleted and recreated) starts a new window.
6. A partition with no commit and records to read (a job that never ran) is judged by how long they
   have waited (:func:`evaluate_waiting`); one with nothing to read is reported, not judged.
7. The "recent broker offsets" escape of the STOP rule looks at end offsets observed since the last
   sample only: observations can be minutes apart, so a ring of them reaches further back than
   Burrow's (refreshed every 10 s).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from upsert_kafka_ops.kafka.admin import Isolation, TopicPartitionKey
from upsert_kafka_ops.kafka.lag import LagReport, PartitionLag
from upsert_kafka_ops.spec.cadence import next_run

Status = Literal["NOTFOUND", "OK", "WARN", "ERR", "STOP", "STALL", "REWIND"]
#: Burrow's order (``core/protocol/evaluator.go``): a higher number is worse.
STATUS_ORDER: dict[str, int] = {
    "NOTFOUND": 0,
    "OK": 1,
    "WARN": 2,
    "ERR": 3,
    "STOP": 4,
    "STALL": 5,
    "REWIND": 6,
}
WINDOW_VERSION = 1


@dataclass(frozen=True)
class Sample:
    """One observed committed offset, the lag when it was observed (None: unknown), and when (epoch s)."""

    offset: int
    lag: int | None
    ts: float


@dataclass(frozen=True)
class Schedule:
    """A batch job's cadence: the next run is overdue ``grace_s`` after it was due: ``interval_s``
    after the last one, or with ``cron`` (a job's ``schedule:``) at the schedule's next tick after it.

    :param caught_up_lag: the lag at which a run counts as having ended caught up (at least the
        evaluation's ``allowed_lag``).
    """

    interval_s: float = 0.0
    grace_s: float = 0.0
    caught_up_lag: int = 0
    cron: str | None = None

    def due(self, last_ts: float, waiting_since: float | None = None) -> float:
        """When the run after one observed at ``last_ts`` is overdue; with ``waiting_since`` (records
        first seen waiting after it), the first run after they arrived: a run that found nothing new
        commits no new offset, so records that came after it wait for the next tick, not for this one."""
        since = last_ts if waiting_since is None else max(last_ts, waiting_since)
        if self.cron is not None:
            return next_run(self.cron, since) + self.grace_s
        ticks = max(1, math.ceil((since - last_ts) / self.interval_s)) if self.interval_s > 0 else 1
        return last_ts + ticks * self.interval_s + self.grace_s


@dataclass(frozen=True)
class EvaluationConfig:
    """Burrow's settings (``intervals``, ``allowed-lag``, ``minimum-complete``, ``min-distance``,
    ``expire-group``) plus the schedule-aware mode and the size of the time-lag lookup table."""

    intervals: int = 10
    allowed_lag: int = 0
    minimum_complete: float = 0.0
    min_distance_s: float = 0.0
    expire_s: float = 7 * 24 * 3600.0
    lookup_size: int = 60
    schedule: Schedule | None = None
    #: how late a job's own scheduled run may be (a pipeline job's ``schedule:``; ``schedule`` has its own)
    schedule_grace_s: float = 0.0

    def __post_init__(self) -> None:
        if self.intervals < 1 or self.lookup_size < 2:
            raise ValueError("intervals must be >= 1 and lookup_size >= 2")


@dataclass(frozen=True)
class Verdict:
    status: Status
    reason: str
    complete: float


# -- Burrow's rules ------------------------------------------------------------------------------------
def _lag_always_not_zero(samples: Sequence[Sample], allowed_lag: int) -> bool:
    return not any(s.lag is not None and s.lag <= allowed_lag for s in samples)


def _rewind_index(samples: Sequence[Sample]) -> int:
    for i in range(1, len(samples)):
        if samples[i].offset < samples[i - 1].offset:
            return i
    return -1


def _rewind_recovered(samples: Sequence[Sample], i: int) -> bool:
    return any(s.offset >= samples[i - 1].offset for s in samples[i:])


def _stopped(samples: Sequence[Sample], now: float) -> bool:
    first, last = samples[0], samples[-1]
    return now - last.ts > last.ts - first.ts


def _stalled(samples: Sequence[Sample]) -> bool:
    return all(samples[i].offset == samples[i - 1].offset for i in range(1, len(samples)))


def _lag_not_decreasing(samples: Sequence[Sample]) -> bool:
    lags = [s.lag for s in samples if s.lag is not None]
    return not any(lags[i] < lags[i - 1] for i in range(1, len(lags)))


def _recent_lag_zero(samples: Sequence[Sample], broker_offsets: Sequence[int]) -> bool:
    return any(b <= samples[-1].offset for b in broker_offsets)


def evaluate_partition(
    samples: Sequence[Sample],
    broker_offsets: Sequence[int],
    current_lag: int,
    now: float,
    *,
    allowed_lag: int = 0,
    intervals: int | None = None,
    minimum_complete: float = 0.0,
    schedule: Schedule | None = None,
    waiting_since: float | None = None,
) -> Verdict:
    """Burrow's status of one partition.

    :param samples: the window, oldest first (at most ``intervals``).
    :param broker_offsets: recent end offsets of the partition (Burrow's broker offset ring).
    :param current_lag: end offset minus the last committed offset now.
    :param now: evaluation time, epoch seconds (the samples' clock).
    :param intervals: window size; ``complete`` = samples / intervals (default: a full window).
    :param waiting_since: when the partition was first seen behind since it was last seen caught up
        (schedule-aware mode: records that arrived after a run wait for the next tick).
    """
    size = intervals or max(1, len(samples))
    if not samples:
        return Verdict("OK", "no samples yet", 0.0)
    complete = min(1.0, len(samples) / size)
    if complete < minimum_complete:
        return Verdict("OK", f"window {complete:.0%} complete, below the minimum", complete)
    if current_lag <= allowed_lag:
        return Verdict("OK", f"lag {current_lag} within the allowed {allowed_lag}", complete)
    last = samples[-1]
    if schedule is not None:
        due = schedule.due(last.ts, waiting_since)
        if now > due:
            return Verdict("STOP", f"the next scheduled run is overdue by {now - due:.0f}s", complete)
        if last.lag is not None and last.lag <= max(allowed_lag, schedule.caught_up_lag):
            return Verdict("OK", "between scheduled runs; the last run ended caught up", complete)
    elif _stopped(samples, now) and not _recent_lag_zero(samples, broker_offsets):
        idle = now - last.ts
        return Verdict("STOP", f"no commit for {idle:.0f}s, longer than the window spans", complete)
    i = _rewind_index(samples)
    if i > 0 and not _rewind_recovered(samples, i):
        return Verdict(
            "REWIND", f"offset went back from {samples[i - 1].offset} to {samples[i].offset}", complete
        )
    if len(samples) >= 2 and _lag_always_not_zero(samples, allowed_lag):
        if _stalled(samples):
            return Verdict(
                "STALL", f"offset {last.offset} unchanged over {len(samples)} samples with lag", complete
            )
        if _lag_not_decreasing(samples):
            return Verdict("WARN", "offsets move but lag is not decreasing", complete)
    return Verdict("OK", "consuming", complete)


def evaluate_waiting(
    waiting_since: float,
    observations: int,
    pending: int,
    now: float,
    *,
    intervals: int,
    schedule: Schedule | None = None,
) -> Verdict:
    """The status of a partition with ``pending`` records and no committed offset (its consumer never
    committed: a job that never ran), first seen so at ``waiting_since`` and observed ``observations``
    times since. A scheduled job is OK until its next run after that is overdue, then STOP; any other
    consumer is WARN until a full window of observations saw no commit, then STOP."""
    waited = now - waiting_since
    complete = min(1.0, observations / intervals)
    if schedule is not None:
        due = schedule.due(waiting_since)
        if now > due:
            return Verdict(
                "STOP",
                f"{pending} records wait and no run committed an offset; the run due after they "
                f"were first seen is overdue by {now - due:.0f}s",
                complete,
            )
        return Verdict("OK", f"{pending} records wait for the first scheduled run", complete)
    if observations >= intervals:
        return Verdict(
            "STOP",
            f"{pending} records waited {waited:.0f}s over {observations} observations and nothing was committed",
            complete,
        )
    return Verdict("WARN", f"{pending} records wait and nothing was committed yet", complete)


# -- the window ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PartitionWindow:
    """Per partition: Burrow's sample window, its broker offset ring, and the (end offset, time) points
    kafka-lag-exporter interpolates time lag over."""

    samples: tuple[Sample, ...] = ()
    broker_offsets: tuple[tuple[int, float], ...] = ()  # (end offset, observed at)
    points: tuple[tuple[int, float], ...] = ()
    #: first seen behind (lag above the allowed) since last seen caught up; with no commit: since
    #: first seen with records to read
    waiting_since: float | None = None

    def recent_broker_offsets(self) -> list[int]:
        """End offsets observed since the last sample (Burrow's ring covers only the recent past)."""
        since = self.samples[-1].ts if self.samples else float("-inf")
        return [o for o, t in self.broker_offsets if t >= since]


def _add_point(
    points: tuple[tuple[int, float], ...], offset: int, ts: float, size: int
) -> tuple[tuple[int, float], ...]:
    """kafka-lag-exporter's ``addPoint``: drop out-of-order and non-monotonic points; a flat run keeps
    only its first and latest point."""
    if points:
        last_offset, last_ts = points[-1]
        if ts <= last_ts or offset < last_offset:
            return points
        if len(points) >= 2 and points[-2][0] == offset and last_offset == offset:
            return (*points[:-1], (offset, ts))
    return (*points, (offset, ts))[-size:]


@dataclass(frozen=True)
class LagWindow:
    """What an evaluation remembers between observations, as plain JSON (:meth:`to_json`)."""

    group: str | None = None
    topic_ids: Mapping[str, str] = field(default_factory=dict)
    partitions: Mapping[TopicPartitionKey, PartitionWindow] = field(default_factory=dict)
    recreated: tuple[str, ...] = ()

    def points(self) -> dict[TopicPartitionKey, tuple[tuple[int, float], ...]]:
        """The recorded ``(end offset, time)`` points: the ``history`` argument of the lag functions."""
        return {tp: w.points for tp, w in self.partitions.items() if w.points}

    def observe(self, report: LagReport, config: EvaluationConfig | None = None) -> LagWindow:
        """The window after ``report``: a new sample where a commit shows, the end offset in the broker
        ring and the lookup table; windows of recreated topics start over."""
        cfg = config or EvaluationConfig()
        now = report.observed_at
        ids = dict(self.topic_ids)
        recreated = sorted(t for t, i in report.topic_ids.items() if t in ids and ids[t] != i)
        ids.update(report.topic_ids)
        windows = {tp: w for tp, w in self.partitions.items() if tp[0] not in recreated}
        for p in report.partitions:
            windows[p.key] = _observe_partition(windows.get(p.key, PartitionWindow()), p, now, cfg)
        return LagWindow(report.group or self.group, ids, windows, tuple(recreated))

    # -- JSON --------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """Plain JSON: ``{"version", "group", "topic_ids", "partitions": {topic: {partition: ...}}}``."""
        parts: dict[str, dict[str, Any]] = {}
        for (topic, partition), w in sorted(self.partitions.items()):
            parts.setdefault(topic, {})[str(partition)] = {
                "samples": [[s.offset, s.lag, s.ts] for s in w.samples],
                "broker_offsets": [[o, t] for o, t in w.broker_offsets],
                "points": [[o, t] for o, t in w.points],
                **({"waiting_since": w.waiting_since} if w.waiting_since is not None else {}),
            }
        return {
            "version": WINDOW_VERSION,
            "group": self.group,
            "topic_ids": dict(self.topic_ids),
            "partitions": parts,
            "recreated": list(self.recreated),
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str | None) -> LagWindow:
        """Read :meth:`to_json`'s output (a dict or its text); ``None`` or ``""`` is an empty window."""
        if not data:
            return cls()
        doc: Mapping[str, Any] = json.loads(data) if isinstance(data, str) else data
        if doc.get("version") != WINDOW_VERSION:
            raise ValueError(f"lag window version {doc.get('version')!r} is not {WINDOW_VERSION}")
        parts: dict[TopicPartitionKey, PartitionWindow] = {}
        for topic, by_partition in doc.get("partitions", {}).items():
            for partition, w in by_partition.items():
                parts[(str(topic), int(partition))] = PartitionWindow(
                    samples=tuple(
                        Sample(int(o), None if lag is None else int(lag), float(ts))
                        for o, lag, ts in w["samples"]
                    ),
                    broker_offsets=tuple((int(o), float(t)) for o, t in w["broker_offsets"]),
                    points=tuple((int(o), float(t)) for o, t in w["points"]),
                    waiting_since=None if w.get("waiting_since") is None else float(w["waiting_since"]),
                )
        return cls(
            group=doc.get("group"),
            topic_ids={str(k): str(v) for k, v in doc.get("topic_ids", {}).items()},
            partitions=parts,
            recreated=tuple(doc.get("recreated", ())),
        )


def _observe_partition(
    w: PartitionWindow, p: PartitionLag, now: float, cfg: EvaluationConfig
) -> PartitionWindow:
    broker = (*w.broker_offsets, (p.end, now))[-cfg.intervals :]
    points = _add_point(w.points, p.end, now, cfg.lookup_size)
    samples = tuple(s for s in w.samples if now - s.ts <= cfg.expire_s)
    if p.committed is not None:
        new = Sample(p.committed, p.lag, now)
        last = samples[-1] if samples else None
        if last is None:
            samples = (new,)
        elif now <= last.ts or (new.offset == last.offset and p.owner is None):
            pass  # out of order, or no evidence of a commit: the offset did not move and nobody owns it
        elif now - last.ts < cfg.min_distance_s:
            samples = (*samples[:-1], replace(new, ts=last.ts))  # Burrow's min-distance
        else:
            samples = (*samples, new)[-cfg.intervals :]
    waiting = None  # since when records wait (reset whenever the partition is seen caught up)
    if p.lag > cfg.allowed_lag:
        waiting = now if w.waiting_since is None else w.waiting_since
    return PartitionWindow(samples, broker, points, waiting)


# -- results -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PartitionStatus:
    """A partition's status with the observation it was judged on."""

    lag: PartitionLag
    status: Status
    reason: str
    complete: float
    start: Sample | None
    last: Sample | None

    @property
    def name(self) -> str:
        return f"{self.lag.topic}[{self.lag.partition}]"

    def to_dict(self) -> dict[str, Any]:
        def sample(s: Sample | None) -> dict[str, Any] | None:
            return None if s is None else {"offset": s.offset, "lag": s.lag, "ts": s.ts}

        return {
            **self.lag.to_dict(),
            "status": self.status,
            "reason": self.reason,
            "complete": self.complete,
            "start": sample(self.start),
            "last": sample(self.last),
        }


@dataclass(frozen=True)
class LagStatus:
    """A group's status: Burrow's group status (OK, WARN, ERR, or NOTFOUND with no commit at all), the
    worst partition status, per-partition detail and a one-line :attr:`summary`."""

    group: str | None
    status: Status
    worst: Status
    complete: float
    evaluated_at: float
    isolation: Isolation
    partitions: tuple[PartitionStatus, ...]
    recreated_topics: tuple[str, ...] = ()
    missing_topics: tuple[str, ...] = ()

    @property
    def total_lag(self) -> int:
        return sum(p.lag.lag for p in self.partitions)

    @property
    def max_lag(self) -> PartitionStatus | None:
        return max(self.partitions, key=lambda p: p.lag.lag) if self.partitions else None

    @property
    def max_time_lag_s(self) -> float | None:
        known = [p.lag.time_lag_s for p in self.partitions if p.lag.time_lag_s is not None]
        return max(known) if known else None

    def at_least(self, level: Status) -> bool:
        """Whether the group status is ``level`` or worse (for ``--fail-on``)."""
        return STATUS_ORDER[self.status] >= STATUS_ORDER[level]

    @property
    def summary(self) -> str:
        who = f"group {self.group!r}" if self.group else "offsets"
        if self.status == "NOTFOUND":
            return f"{who}: NOTFOUND (no committed offsets)"
        bad = [p for p in self.partitions if p.status not in ("OK", "NOTFOUND")]
        bad.sort(key=lambda p: -STATUS_ORDER[p.status])
        head = f"{who}: {self.status}"
        if bad:
            head += f" ({bad[0].status} on {bad[0].name}: {bad[0].reason}"
            head += f"; {len(bad) - 1} more)" if len(bad) > 1 else ")"
        uncommitted = sum(1 for p in self.partitions if p.lag.committed is None)
        parts = f"{len(self.partitions)} partitions" + (
            f", {uncommitted} without a commit" if uncommitted else ""
        )
        text = f"{head}; lag {self.total_lag} over {parts}"
        top = self.max_lag
        if top is not None and top.lag.lag:
            text += f", max {top.lag.lag} on {top.name}"
        if self.max_time_lag_s is not None:
            text += f"; time lag max {self.max_time_lag_s:.1f}s"
        lost = [p.name for p in self.partitions if p.lag.data_loss]
        if lost:
            text += f"; DATA LOSS on {', '.join(lost)}"
        if self.recreated_topics:
            text += f"; recreated: {', '.join(self.recreated_topics)}"
        return text + f"; window {self.complete:.0%} complete"

    def to_dict(self) -> dict[str, Any]:
        top = self.max_lag
        return {
            "group": self.group,
            "status": self.status,
            "worst": self.worst,
            "complete": self.complete,
            "evaluated_at": self.evaluated_at,
            "isolation": self.isolation,
            "total_lag": self.total_lag,
            "max_lag": None if top is None else top.to_dict(),
            "max_time_lag_s": self.max_time_lag_s,
            "recreated_topics": list(self.recreated_topics),
            "missing_topics": list(self.missing_topics),
            "summary": self.summary,
            "partitions": [p.to_dict() for p in self.partitions],
        }


def evaluate(window: LagWindow, report: LagReport, config: EvaluationConfig | None = None) -> LagStatus:
    """Burrow's group evaluation of ``report`` against ``window`` (already :meth:`~LagWindow.observe`-d
    with it): each partition judged, group status = the worst partition with STOP, STALL and REWIND
    counted as ERR, complete = share of partitions with a full window. Pure: no broker, no clock."""
    cfg = config or EvaluationConfig()
    now = report.observed_at
    out: list[PartitionStatus] = []
    group_status: Status = "NOTFOUND"
    worst: Status = "NOTFOUND"
    full = judged = 0
    for p in report.partitions:
        w = window.partitions.get(p.key, PartitionWindow())
        start, last = (w.samples[0], w.samples[-1]) if w.samples else (None, None)
        if p.committed is None and (p.lag == 0 or w.waiting_since is None):
            out.append(PartitionStatus(p, "NOTFOUND", "no committed offset", 0.0, start, last))
            continue
        if p.committed is None and w.waiting_since is not None:
            seen = sum(1 for _, t in w.broker_offsets if t >= w.waiting_since)
            v = evaluate_waiting(
                w.waiting_since, seen, p.lag, now, intervals=cfg.intervals, schedule=cfg.schedule
            )
        else:
            v = evaluate_partition(
                w.samples,
                w.recent_broker_offsets(),
                p.lag,
                now,
                allowed_lag=cfg.allowed_lag,
                intervals=cfg.intervals,
                minimum_complete=cfg.minimum_complete,
                schedule=cfg.schedule,
                waiting_since=w.waiting_since,
            )
        if p.data_loss and STATUS_ORDER[v.status] < STATUS_ORDER["WARN"]:
            v = Verdict(
                "WARN",
                f"data loss: committed offset {p.committed} is below the earliest {p.earliest}",
                v.complete,
            )
        out.append(PartitionStatus(p, v.status, v.reason, v.complete, start, last))
        judged += 1
        full += v.complete >= 1.0
        if STATUS_ORDER[v.status] > STATUS_ORDER[worst]:
            worst = v.status
        collapsed: Status = "ERR" if STATUS_ORDER[v.status] > STATUS_ORDER["ERR"] else v.status
        if STATUS_ORDER[collapsed] > STATUS_ORDER[group_status]:
            group_status = collapsed
    return LagStatus(
        group=report.group,
        status=group_status,
        worst=worst,
        complete=full / judged if judged else 0.0,
        evaluated_at=now,
        isolation=report.isolation,
        partitions=tuple(out),
        recreated_topics=window.recreated,
        missing_topics=report.missing_topics,
    )


def check(
    window: LagWindow | Mapping[str, Any] | str | None,
    report: LagReport,
    config: EvaluationConfig | None = None,
) -> tuple[LagStatus, LagWindow]:
    """Observe ``report`` in ``window`` (a :class:`LagWindow` or its JSON) and evaluate: the status and
    the window to keep for the next call."""
    current = window if isinstance(window, LagWindow) else LagWindow.from_json(window)
    updated = current.observe(report, config)
    return evaluate(updated, report, config), updated
