"""Consumer lag per partition and per group: offsets and time, from committed offsets of any source.

:func:`compute_lag` takes committed offsets from anywhere (a consumer group, a job's stored offsets)
as ``{(topic, partition): offset or None}``; :func:`group_lag` reads a group's offsets and calls it.

Offset lag is ``end - committed`` clamped at 0. A partition with no commit is read from where its
consumer would start (``uncommitted``): ``earliest`` (upsert-kafka always reads from the earliest
offset, so a job that never ran has every record still to process: ``end - earliest``) or
``latest`` (nothing to read until new records arrive). The committed offsets are read *before* the end
offsets, so the race between the two reads can only overstate lag by records that arrived in
between, never report a negative number. ``end`` is the last stable offset for ``read_committed``
consumers and the high watermark for ``read_uncommitted`` ones (``isolation`` is always explicit).

Time lag is how long ago the record at the committed offset was written: one bounded fetch per
lagging partition (all partitions assigned to one consumer, one record each, one deadline) reads
the record at the committed offset, and ``now - timestamp`` is exact to the millisecond against this
host's clock (the producer's clock for CreateTime topics: skew adds directly). When that record is
gone (compaction, deleted records) the first record read is newer; then the time when the log end
passed the committed offset is interpolated over recorded ``(end offset, time)`` points, as
kafka-lag-exporter does. Interpolation between two points is within the time between them
(``time_lag_tolerance_s``), and never below the lower bound the newer record gives. The same fetch
tells phantom lag apart: when no record lies between the committed offset and the end (only
transaction markers or aborted records), the consumer has nothing left to read and the lag is 0.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from upsert_kafka_ops.kafka.admin import (
    GroupInfo,
    Isolation,
    KafkaAdmin,
    TopicConfig,
    TopicInfo,
    TopicNotFoundError,
    TopicPartitionKey,
)
from upsert_kafka_ops.spec.connection import KafkaConnection

#: How a partition's time lag was found.
#: ``caught-up``: no lag; ``record``: the record at the committed offset; ``interpolated`` /
#: ``extrapolated``: over recorded (end offset, time) points (the record was gone); ``next-record``:
#: the record was gone and there were no points, so the next record's age is a lower bound;
#: ``unknown``: no answer in time and no points; ``no-commit``: nothing committed and nothing to
#: read (for a partition without a commit that has records to read, the time lag is that of the first
#: record its consumer would read).
TimeLagMethod = Literal[
    "caught-up", "record", "interpolated", "extrapolated", "next-record", "unknown", "no-commit"
]

#: Resolution of a record timestamp (ms): the tolerance of a time lag read from the record itself.
RECORD_TOLERANCE_S = 0.001

#: Where a consumer without a committed offset starts (Kafka's ``auto.offset.reset``).
Uncommitted = Literal["earliest", "latest"]

Connection = Mapping[str, Any] | KafkaConnection | KafkaAdmin
Points = Sequence[tuple[int, float]]


@dataclass(frozen=True)
class PartitionLag:
    """Lag of one partition at one observation."""

    topic: str
    partition: int
    committed: int | None
    earliest: int
    end: int
    lag: int  # records to read: end - committed, or from where a consumer without a commit starts
    data_loss: bool = False
    records_lost: int = 0
    marker_only: bool = False
    time_lag_s: float | None = None
    time_lag_method: TimeLagMethod = "unknown"
    time_lag_tolerance_s: float | None = None
    record_timestamp_ms: int | None = None
    owner: str | None = None

    @property
    def key(self) -> TopicPartitionKey:
        return (self.topic, self.partition)

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "committed": self.committed,
            "earliest": self.earliest,
            "end": self.end,
            "lag": self.lag,
            "data_loss": self.data_loss,
            "records_lost": self.records_lost,
            "marker_only": self.marker_only,
            "time_lag_s": self.time_lag_s,
            "time_lag_method": self.time_lag_method,
            "time_lag_tolerance_s": self.time_lag_tolerance_s,
            "record_timestamp_ms": self.record_timestamp_ms,
            "owner": self.owner,
        }


@dataclass(frozen=True)
class LagReport:
    """One observation of a set of partitions: offsets, lag, time lag, and topic facts."""

    group: str | None
    isolation: Isolation
    observed_at: float
    partitions: tuple[PartitionLag, ...]
    topics: Mapping[str, TopicInfo] = field(default_factory=dict)
    configs: Mapping[str, TopicConfig] = field(default_factory=dict)
    group_state: str | None = None
    group_members: int | None = None
    missing_topics: tuple[str, ...] = ()

    @property
    def topic_ids(self) -> dict[str, str]:
        return {t: info.topic_id for t, info in self.topics.items()}

    @property
    def compacted_topics(self) -> list[str]:
        return sorted(t for t, c in self.configs.items() if c.compacted)

    @property
    def total_lag(self) -> int:
        return sum(p.lag for p in self.partitions)

    @property
    def max_lag(self) -> PartitionLag | None:
        return max(self.partitions, key=lambda p: p.lag) if self.partitions else None

    @property
    def max_time_lag_s(self) -> float | None:
        known = [p.time_lag_s for p in self.partitions if p.time_lag_s is not None]
        return max(known) if known else None

    def partition(self, topic: str, partition: int) -> PartitionLag:
        for p in self.partitions:
            if p.topic == topic and p.partition == partition:
                return p
        raise KeyError((topic, partition))

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "isolation": self.isolation,
            "observed_at": self.observed_at,
            "total_lag": self.total_lag,
            "max_time_lag_s": self.max_time_lag_s,
            "group_state": self.group_state,
            "group_members": self.group_members,
            "topic_ids": self.topic_ids,
            "compacted_topics": self.compacted_topics,
            "missing_topics": list(self.missing_topics),
            "partitions": [p.to_dict() for p in self.partitions],
        }


# -- time lag from recorded points (kafka-lag-exporter's lookup table) -----------------------------------
@dataclass(frozen=True)
class Estimate:
    """When the log end passed an offset, estimated from points; ``tolerance_s`` None = unbounded."""

    time: float
    method: Literal["interpolated", "extrapolated", "caught-up"]
    tolerance_s: float | None


def estimate_time(points: Points, offset: int) -> Estimate | None:
    """The time the log end passed ``offset``, from ``(end offset, time)`` points (oldest first).

    Between two bracketing points the time is interpolated linearly and the true time lies between
    the two points' times (the tolerance). Before the oldest point it is extrapolated over the
    oldest and newest points (kafka-lag-exporter's behaviour) but never later than the oldest point;
    no bound is known. ``None`` with fewer than two points or a flat table.
    """
    if not points:
        return None
    newest_offset, newest_time = points[-1]
    if offset >= newest_offset:
        return Estimate(newest_time, "caught-up", 0.0)
    if len(points) < 2:
        return None
    for (l_off, l_time), (r_off, r_time) in zip(reversed(points[:-1]), reversed(points[1:]), strict=True):
        if l_off <= offset <= r_off and r_off > l_off:
            t = r_time - (r_off - offset) * (r_time - l_time) / (r_off - l_off)
            return Estimate(t, "interpolated", r_time - l_time)
    (o_off, o_time), (n_off, n_time) = points[0], points[-1]
    if n_off <= o_off:
        return None
    t = n_time - (n_off - offset) * (n_time - o_time) / (n_off - o_off)
    return Estimate(min(t, o_time), "extrapolated", None)


# -- reading one record per partition ------------------------------------------------------------------
#: how long a reused KafkaAdmin trusts a first record it read (see _read_first_records)
FIRST_RECORD_REUSE_S = 300.0


@dataclass(frozen=True)
class _Probe:
    offset: int
    timestamp_ms: int | None  # None with eof
    eof: bool = False


def _read_first_records(
    admin: KafkaAdmin, starts: Mapping[TopicPartitionKey, int], isolation: Isolation, deadline: float
) -> dict[TopicPartitionKey, _Probe]:
    """The first record at or after each start offset (or the end of the partition), until ``deadline``.

    A reused ``admin`` remembers what it found for FIRST_RECORD_REUSE_S: a partition whose start has
    not moved since (a stuck consumer's, the one an alert is about) is not read again. A record never
    changes at its offset; compaction may remove it, and then the remembered time is older than the
    true one for at most that long. The end of a partition is never remembered (records arrive)."""
    from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, KafkaError, TopicPartition

    if not starts:
        return {}
    now = time.monotonic()
    found: dict[TopicPartitionKey, _Probe] = {}
    for (t, p), off in starts.items():
        seen = admin.first_records.get((t, p, isolation))
        if seen is not None and seen[0] == off and now - seen[2] < FIRST_RECORD_REUSE_S:
            found[(t, p)] = seen[1]
    todo = {tp: off for tp, off in starts.items() if tp not in found}
    if not todo:
        return found
    consumer = admin.record_reader(isolation)
    consumer.assign([TopicPartition(t, p, off) for (t, p), off in todo.items()])
    try:
        while len(found) < len(starts):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            first = consumer.poll(min(remaining, 0.5))
            batch = [first, *consumer.consume(1000, 0)] if first is not None else []
            for msg in batch:
                tp = (msg.topic(), msg.partition())
                if tp in found or tp not in starts:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF and msg.offset() >= starts[tp]:
                        found[tp] = _Probe(msg.offset(), None, eof=True)
                    continue
                kind, ts = msg.timestamp()
                found[tp] = _Probe(msg.offset(), None if kind == TIMESTAMP_NOT_AVAILABLE else int(ts))
                key = (*tp, isolation)
                admin.first_records[key] = (starts[tp], found[tp], now)
    finally:
        consumer.unassign()
    return found


# -- lag ---------------------------------------------------------------------------------------------
def _as_admin(connection: Connection, timeout: float) -> tuple[KafkaAdmin, bool]:
    if isinstance(connection, KafkaAdmin):
        return connection, False
    return KafkaAdmin(connection, timeout=timeout), True


def compute_lag(
    connection: Connection,
    committed: Mapping[TopicPartitionKey, int | None],
    *,
    isolation: Isolation,
    group: str | None = None,
    fetch_records: bool = True,
    history: Mapping[TopicPartitionKey, Points] | None = None,
    now: float | None = None,
    timeout: float = 10.0,
    group_info: GroupInfo | None = None,
    uncommitted: Uncommitted = "earliest",
) -> LagReport:
    """Lag of the given committed offsets (read them first: they must be older than the end offsets).

    :param connection: librdkafka settings, a ``KafkaConnection``, or a :class:`KafkaAdmin` to reuse.
    :param committed: ``{(topic, partition): offset}``; ``None`` for a partition with no commit.
    :param uncommitted: where a partition with no commit is read from: ``earliest`` (its lag is
        ``end - earliest``: everything waits) or ``latest`` (lag 0).
    :param isolation: the consumer's isolation level: ``read_committed`` measures against the last
        stable offset, ``read_uncommitted`` against the high watermark.
    :param fetch_records: read the record at each lagging committed offset (time lag, phantom
        marker lag); without it, time lag comes from ``history`` only.
    :param history: recorded ``(end offset, time)`` points per partition, oldest first (a
        :class:`~upsert_kafka_ops.kafka.evaluation.LagWindow` keeps them), for time lag when the
        record at the committed offset is gone.
    :param now: the observation time (epoch seconds); the wall clock by default.
    :param timeout: the bound of each broker call, in seconds; the record fetch has one more.
    :raises TopicNotFoundError: when a topic of ``committed`` does not exist.
    """
    admin, owned = _as_admin(connection, timeout)
    try:
        topics = admin.describe_topics({t for t, _ in committed})
        return _compute(
            admin,
            committed,
            topics,
            (),
            isolation,
            group,
            fetch_records,
            history,
            now,
            group_info,
            uncommitted,
        )
    finally:
        if owned:
            admin.close()


def group_lag(
    connection: Connection,
    group: str,
    *,
    isolation: Isolation,
    topics: Iterable[str] | None = None,
    fetch_records: bool = True,
    history: Mapping[TopicPartitionKey, Points] | None = None,
    now: float | None = None,
    timeout: float = 10.0,
    uncommitted: Uncommitted = "earliest",
) -> LagReport:
    """Lag of a consumer group: every partition of ``topics`` (those without a commit too), or of every
    topic the group has committed offsets for. Topics the group committed to that no longer exist are
    listed in ``missing_topics``. A group with no commits gives a report with no partitions."""
    admin, owned = _as_admin(connection, timeout)
    try:
        info = admin.describe_group(group)
        missing: tuple[str, ...] = ()
        if topics is not None:
            described = admin.describe_topics(topics)
            parts = [(t, p) for t, i in sorted(described.items()) for p in range(i.partitions)]
            committed = admin.committed_offsets(group, parts)
        else:
            seen = admin.committed_offsets(group)
            named = {t for t, _ in seen}
            described = admin.describe_topics(named, missing_ok=True)
            missing = tuple(sorted(named - set(described)))
            committed = {
                (t, p): seen.get((t, p)) for t, i in sorted(described.items()) for p in range(i.partitions)
            }
        return _compute(
            admin,
            committed,
            described,
            missing,
            isolation,
            group,
            fetch_records,
            history,
            now,
            info,
            uncommitted,
        )
    finally:
        if owned:
            admin.close()


def _compute(
    admin: KafkaAdmin,
    committed: Mapping[TopicPartitionKey, int | None],
    topics: Mapping[str, TopicInfo],
    missing: tuple[str, ...],
    isolation: Isolation,
    group: str | None,
    fetch_records: bool,
    history: Mapping[TopicPartitionKey, Points] | None,
    now: float | None,
    group_info: GroupInfo | None,
    uncommitted: Uncommitted,
) -> LagReport:
    unknown = sorted({t for (t, p) in committed if t in topics and p >= topics[t].partitions})
    if unknown:
        raise TopicNotFoundError([f"{t} (partition beyond its {topics[t].partitions})" for t in unknown])
    parts = sorted(tp for tp in committed if tp[0] in topics)
    marks = admin.watermarks(parts, isolation=isolation)  # after the committed offsets, on purpose
    configs = admin.topic_configs(topics)
    observed = time.time() if now is None else now
    lags: dict[TopicPartitionKey, tuple[int, bool, int]] = {}
    starts: dict[TopicPartitionKey, int] = {}
    for tp in parts:
        c = committed[tp]
        low, end = marks[tp]
        if c is None:  # read from where the consumer would start
            lags[tp] = (max(0, end - low) if uncommitted == "earliest" else 0, False, 0)
            c = low
        else:
            lost = max(0, low - c)
            lags[tp] = (max(0, end - c), lost > 0, lost)
        if lags[tp][0] > 0 and fetch_records:
            starts[tp] = max(c, low)
    probes = _read_first_records(admin, starts, isolation, time.monotonic() + admin.timeout)
    owners = group_info.owners if group_info is not None else {}
    out = []
    for tp in parts:
        c = committed[tp]
        low, end = marks[tp]
        lag, data_loss, lost = lags[tp]
        points = [*(history or {}).get(tp, ()), (end, observed)]
        common = {
            "topic": tp[0],
            "partition": tp[1],
            "committed": c,
            "earliest": low,
            "end": end,
            "data_loss": data_loss,
            "records_lost": lost,
            "owner": owners.get(tp),
        }
        if c is None and lag == 0:
            out.append(PartitionLag(lag=0, time_lag_method="no-commit", **common))  # type: ignore[arg-type]
            continue
        probe = probes.get(tp)
        if lag == 0 or (probe is not None and probe.eof):
            out.append(
                PartitionLag(
                    lag=0,
                    marker_only=lag > 0,
                    time_lag_s=0.0,
                    time_lag_method="caught-up",
                    time_lag_tolerance_s=0.0,
                    **common,  # type: ignore[arg-type]
                )
            )
            continue
        out.append(_with_time_lag(lag, low if c is None else c, probe, points, observed, common))
    return LagReport(
        group=group,
        isolation=isolation,
        observed_at=observed,
        partitions=tuple(out),
        topics=dict(topics),
        configs=configs,
        group_state=group_info.state if group_info is not None else None,
        group_members=group_info.members if group_info is not None else None,
        missing_topics=missing,
    )


def _with_time_lag(
    lag: int, c: int, probe: _Probe | None, points: Points, now: float, common: dict[str, Any]
) -> PartitionLag:
    if probe is not None and probe.offset == c and probe.timestamp_ms is not None:
        return PartitionLag(
            lag=lag,
            time_lag_s=max(0.0, now - probe.timestamp_ms / 1000),
            time_lag_method="record",
            time_lag_tolerance_s=RECORD_TOLERANCE_S,
            record_timestamp_ms=probe.timestamp_ms,
            **common,
        )
    floor = None  # the newer record read instead was written after the one at c
    if probe is not None and probe.timestamp_ms is not None:
        floor = max(0.0, now - probe.timestamp_ms / 1000)
    est = estimate_time(points, c)
    if est is not None and est.method != "caught-up":
        value = now - est.time
        if floor is not None:
            value = max(value, floor)
        return PartitionLag(
            lag=lag,
            time_lag_s=max(0.0, value),
            time_lag_method=est.method,
            time_lag_tolerance_s=est.tolerance_s,
            **common,
        )
    if floor is not None:
        return PartitionLag(
            lag=lag, time_lag_s=floor, time_lag_method="next-record", time_lag_tolerance_s=None, **common
        )
    return PartitionLag(lag=lag, time_lag_s=None, time_lag_method="unknown", **common)
