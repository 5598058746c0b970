"""Where a read starts and ends, fixed when the read starts.

``start``: ``"earliest"`` (default), ``"latest"``, stored offsets ``{(topic, partition): offset}`` (an
incremental run), or a plain table's ``scan.startup.*`` start (:class:`~upsert_kafka_ops.spec.table.StartAt`). ``until``: ``"latest"`` (the end offsets when the read starts, the default), a timestamp (a
``datetime`` or ``{"timestamp_ms": ...}``: the first offset at or after it), explicit offsets, or
``{"group": "name"}`` (a consumer group's committed offsets). End offsets are exclusive.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.kafka import offsets as ko
from upsert_kafka_ops.spec.table import KafkaTable, ReadEnd, StartAt, StopAt, UpsertKafkaTable

Offsets = dict[tuple[str, int], int]


@dataclass(frozen=True)
class Bounds:
    """Resolved bounds: per partition, the first offset to read and the end (exclusive)."""

    start: Offsets
    end: Offsets

    def partitions(self) -> list[tuple[str, int]]:
        return sorted(self.end)

    def span(self) -> int:
        """Offsets between start and end over all partitions: the records a read sees at most."""
        return sum(max(0, end - self.start.get(tp, 0)) for tp, end in self.end.items())

    def to_json(self) -> dict[str, dict[str, dict[str, int]]]:
        return {"start": offsets_to_json(self.start), "end": offsets_to_json(self.end)}


def offsets_to_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    """``{(t, p): o}`` as ``{"t": {"p": o}}`` (Spark's and Kafka tools' shape)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def offsets_from_json(data: Mapping[str, Mapping[str, int]]) -> Offsets:
    return {(t, int(p)): int(o) for t, parts in data.items() for p, o in parts.items()}


def _explicit(value: Mapping[Any, Any], topics: list[str], what: str) -> Offsets:
    out: Offsets = {}
    for k, v in value.items():
        if isinstance(k, tuple):
            out[(str(k[0]), int(k[1]))] = int(v)
        elif isinstance(k, int) or (isinstance(k, str) and k.isdigit()):
            if len(topics) != 1:
                raise SpecError(
                    what, "offsets keyed by partition need a single topic.", "key them by (topic, partition)."
                )
            out[(topics[0], int(k))] = int(v)
        elif isinstance(v, Mapping):  # {"topic": {"0": 12}}
            out.update(offsets_from_json({str(k): v}))
        else:
            raise SpecError(what, f"cannot read offsets key {k!r}.", "use {(topic, partition): offset}.")
    return out


def resolve_bounds(
    table: UpsertKafkaTable | KafkaTable,
    config: dict[str, Any],
    start: str | Mapping[Any, Any] | StartAt | None = None,
    until: ReadEnd = None,
) -> Bounds:
    """Fix the bounds of a read now, against the cluster (``config``: librdkafka settings). ``start``
    and ``until`` None: the table's own (``scan.startup.*``, ``scan.bounded.*``)."""
    partitions = ko.topic_partitions(config, topics=table.topic, pattern=table.topic_pattern)
    topics = sorted({t for t, _ in partitions})
    earliest = ko.earliest_offsets(config, partitions)
    latest = ko.end_offsets(config, partitions, read_committed=True)

    if until is None:
        until = table.end_position()
    if isinstance(until, str) and until == "latest":
        end = dict(latest)
    elif isinstance(until, dt.datetime):
        end = ko.offsets_for_timestamp(config, partitions, int(until.timestamp() * 1000))
    elif isinstance(until, Mapping) and "timestamp_ms" in until:
        end = ko.offsets_for_timestamp(config, partitions, int(until["timestamp_ms"]))
    elif isinstance(until, StopAt):
        end = _stop_at(until, config, partitions, earliest)
    elif isinstance(until, Mapping) and "group" in until:
        committed = ko.committed_offsets(config, str(until["group"]), partitions)
        end = {tp: (off if off is not None else earliest[tp]) for tp, off in committed.items()}
    elif isinstance(until, Mapping):
        given = _explicit(until, topics, "until")
        # Flink: "If an offset for a partition is not provided it will not consume from that partition."
        end = {tp: given.get(tp, earliest[tp]) for tp in partitions}
    else:
        raise SpecError(
            "until",
            f"cannot use {until!r}.",
            "use 'latest', a datetime, {'timestamp_ms': ...}, offsets, or {'group': name}.",
        )

    if start is None:
        start = table.start_position()
    if isinstance(start, str) and start == "earliest":
        begin = dict(earliest)
    elif isinstance(start, str) and start == "latest":
        begin = dict(latest)
    elif isinstance(start, StartAt):
        begin = _start_at(start, config, partitions, earliest, latest)
    elif isinstance(start, Mapping):
        given = _explicit(start, topics, "start")
        unknown = sorted(set(given) - set(partitions))
        if unknown:
            raise SpecError("start", f"offsets for partitions the topics do not have: {unknown}.")
        # a partition with no stored offset (e.g. added since the last run) starts at its earliest
        begin = {tp: max(given.get(tp, earliest[tp]), earliest[tp]) for tp in partitions}
    else:
        raise SpecError("start", f"cannot use {start!r}.", "use 'earliest', 'latest' or stored offsets.")
    end = {tp: min(max(off, earliest[tp]), latest[tp]) for tp, off in end.items()}
    return Bounds(start=begin, end=end)


def _start_at(
    start: StartAt,
    config: dict[str, Any],
    partitions: list[tuple[str, int]],
    earliest: Offsets,
    latest: Offsets,
) -> Offsets:
    """The first offset per partition for a ``scan.startup.*`` start, inside what the topic holds."""
    if start.mode == "timestamp":
        assert start.timestamp_ms is not None
        return ko.offsets_for_timestamp(config, partitions, start.timestamp_ms)
    committed = ko.committed_offsets(config, start.group, partitions) if start.group else {}
    begin: Offsets = {}
    for tp in partitions:
        have = committed.get(tp)
        if start.mode == "specific-offsets" and tp[1] in start.offsets:
            off = start.offsets[tp[1]]
        elif have is not None:
            off = have
        elif start.mode == "specific-offsets" and start.group is None:
            raise SpecError(
                "scan.startup.specific-offsets",
                f"gives no offset for partition {tp[1]} of topic {tp[0]!r}, and without 'properties.group.id' "
                "there is no committed offset to start it from (Flink fails the read here too).",
                "list every partition, or set 'properties.group.id' (a partition it never committed starts at "
                "the earliest offset).",
            )
        elif start.mode == "specific-offsets" or start.reset == "earliest":
            off = earliest[tp]
        elif start.reset == "latest":
            off = latest[tp]
        else:
            raise SpecError(
                "properties.auto.offset.reset",
                f"consumer group {start.group!r} has no committed offset for partition {tp[1]} of topic "
                f"{tp[0]!r}, and 'none' (Flink's default) fails the read there.",
                "set 'properties.auto.offset.reset' to 'earliest' or 'latest', or commit the group's offsets.",
            )
        begin[tp] = min(max(off, earliest[tp]), latest[tp])
    return begin


def _stop_at(
    stop: StopAt, config: dict[str, Any], partitions: list[tuple[str, int]], earliest: Offsets
) -> Offsets:
    """The end offset per partition for ``scan.bounded.specific-offsets``."""
    missing = [tp for tp in partitions if tp[1] not in stop.offsets]
    if missing and stop.group is None:
        t, p = missing[0]
        raise SpecError(
            "scan.bounded.specific-offsets",
            f"gives no offset for partition {p} of topic {t!r}, and without 'properties.group.id' there is no "
            "committed offset to end it at (Flink fails the read here too).",
            "list every partition, or set 'properties.group.id' (a partition it never committed is not read).",
        )
    committed = ko.committed_offsets(config, stop.group, missing) if missing and stop.group else {}
    end: Offsets = {}
    for tp in partitions:
        have = committed.get(tp)
        end[tp] = (
            stop.offsets[tp[1]] if tp[1] in stop.offsets else (have if have is not None else earliest[tp])
        )
    return end
