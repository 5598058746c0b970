"""Partitions and offsets of topics from a librdkafka configuration (no Spark, bounded time): one
call each, through a :class:`~upsert_kafka_ops.kafka.admin.KafkaAdmin` that lives for the call.

Offsets are ``{(topic, partition): offset}``; an end offset is exclusive (the next offset to read).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.kafka.admin import KafkaAdmin, probe

TopicPartitionOffsets = dict[tuple[str, int], int]


def topic_partitions(
    config: dict[str, Any],
    topics: Iterable[str] | None = None,
    pattern: str | None = None,
    timeout: float = 30.0,
) -> list[tuple[str, int]]:
    """The (topic, partition) pairs of the given topics, or of every topic matching ``pattern``.

    :raises SpecError: when a named topic does not exist.
    """
    # the metadata through probe: an authentication or TLS failure ends the wait at once and is named
    md = probe(config, timeout=timeout)
    if pattern is not None:
        rx = re.compile(pattern)
        names = sorted(t for t in md.topics if rx.fullmatch(t) and not t.startswith("__"))
    else:
        names = list(topics or [])
        missing = [t for t in names if t not in md.topics or md.topics[t].error is not None]
        if missing:
            raise SpecError(
                "topic", f"topic(s) not found: {', '.join(missing)}.", "create them or fix the name."
            )
    return [(t, p) for t in names for p in sorted(md.topics[t].partitions)]


def earliest_offsets(
    config: dict[str, Any], partitions: list[tuple[str, int]], timeout: float = 30.0
) -> TopicPartitionOffsets:
    """The log start offset of each partition."""
    with KafkaAdmin(config, timeout=timeout) as admin:
        return admin.earliest_offsets(partitions)


def end_offsets(
    config: dict[str, Any],
    partitions: list[tuple[str, int]],
    read_committed: bool = True,
    timeout: float = 30.0,
) -> TopicPartitionOffsets:
    """End offsets: the last stable offset for ``read_committed``, else the high watermark."""
    with KafkaAdmin(config, timeout=timeout) as admin:
        return admin.end_offsets(
            partitions, isolation="read_committed" if read_committed else "read_uncommitted"
        )


def offsets_for_timestamp(
    config: dict[str, Any], partitions: list[tuple[str, int]], timestamp_ms: int, timeout: float = 30.0
) -> TopicPartitionOffsets:
    """Per partition, the first offset whose record timestamp is >= ``timestamp_ms``; the end offset
    where no record is that late."""
    with KafkaAdmin(config, timeout=timeout) as admin:
        found = admin.offsets_for_times(partitions, timestamp_ms, isolation="read_committed")
        late = [tp for tp, off in found.items() if off is None]
        ends = admin.end_offsets(late, isolation="read_committed") if late else {}
    return {tp: (off if off is not None else ends[tp]) for tp, off in found.items()}


def committed_offsets(
    config: dict[str, Any], group: str, partitions: list[tuple[str, int]], timeout: float = 30.0
) -> dict[tuple[str, int], int | None]:
    """A consumer group's committed offsets; ``None`` for partitions it never committed."""
    with KafkaAdmin(config, timeout=timeout) as admin:
        return admin.committed_offsets(group, partitions)
