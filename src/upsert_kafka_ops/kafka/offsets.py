"""Partitions and offsets of topics, with confluent-kafka's AdminClient (no Spark, bounded time).

Offsets are ``{(topic, partition): offset}``; an end offset is exclusive (the next offset to read).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from upsert_kafka_ops.errors import KafkaConnectionError, SpecError

TopicPartitionOffsets = dict[tuple[str, int], int]


def _admin(config: dict[str, Any]) -> Any:
    import logging

    from confluent_kafka.admin import AdminClient

    conf: dict[str, Any] = {**config, "logger": logging.getLogger("upsert_kafka_ops.kafka.client")}
    return AdminClient(conf)


def _spec(name: str) -> Any:
    from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

    return getattr(OffsetSpec, name)()


def topic_partitions(
    config: dict[str, Any],
    topics: Iterable[str] | None = None,
    pattern: str | None = None,
    timeout: float = 30.0,
) -> list[tuple[str, int]]:
    """The (topic, partition) pairs of the given topics, or of every topic matching ``pattern``.

    :raises SpecError: when a named topic does not exist.
    """
    from upsert_kafka_ops.kafka.admin import probe

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


def _list_offsets(
    config: dict[str, Any], partitions: list[tuple[str, int]], spec: Any, read_committed: bool, timeout: float
) -> TopicPartitionOffsets:
    from confluent_kafka import IsolationLevel, KafkaException, TopicPartition

    if not partitions:
        return {}
    request = {
        TopicPartition(t, p): (spec if not isinstance(spec, dict) else spec[(t, p)]) for t, p in partitions
    }
    level = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
    admin = _admin(config)  # keep the client alive until its futures are resolved
    futures = admin.list_offsets(request, isolation_level=level, request_timeout=timeout)
    out: TopicPartitionOffsets = {}
    try:
        for tp, fut in futures.items():
            out[(tp.topic, tp.partition)] = int(fut.result(timeout=timeout).offset)
    except KafkaException as exc:
        raise KafkaConnectionError(
            f"Cannot list offsets at {config.get('bootstrap.servers')}: {exc}"
        ) from None
    return out


def earliest_offsets(
    config: dict[str, Any], partitions: list[tuple[str, int]], timeout: float = 30.0
) -> TopicPartitionOffsets:

    return _list_offsets(config, partitions, _spec("earliest"), True, timeout)


def end_offsets(
    config: dict[str, Any],
    partitions: list[tuple[str, int]],
    read_committed: bool = True,
    timeout: float = 30.0,
) -> TopicPartitionOffsets:
    """End offsets: the last stable offset for ``read_committed``, else the high watermark."""

    return _list_offsets(config, partitions, _spec("latest"), read_committed, timeout)


def offsets_for_timestamp(
    config: dict[str, Any], partitions: list[tuple[str, int]], timestamp_ms: int, timeout: float = 30.0
) -> TopicPartitionOffsets:
    """Per partition, the first offset whose record timestamp is >= ``timestamp_ms``; the end offset
    where no record is that late."""
    from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

    found = _list_offsets(config, partitions, OffsetSpec.for_timestamp(timestamp_ms), True, timeout)
    ends = end_offsets(config, partitions, timeout=timeout)
    return {tp: (off if off >= 0 else ends[tp]) for tp, off in found.items()}


def committed_offsets(
    config: dict[str, Any], group: str, partitions: list[tuple[str, int]], timeout: float = 30.0
) -> dict[tuple[str, int], int | None]:
    """A consumer group's committed offsets; ``None`` for partitions it never committed."""
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition

    request = [ConsumerGroupTopicPartitions(group, [TopicPartition(t, p) for t, p in partitions])]
    try:
        admin = _admin(config)
        result = admin.list_consumer_group_offsets(request, request_timeout=timeout)[group].result(timeout)
    except KafkaException as exc:
        raise KafkaConnectionError(f"Cannot read offsets of group {group!r}: {exc}") from None
    return {
        (tp.topic, tp.partition): (tp.offset if tp.offset >= 0 else None) for tp in result.topic_partitions
    }
