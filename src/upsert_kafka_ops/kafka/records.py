"""A small offset range read whole in this process, for a read too small to pay for Spark's scan.

Spark's Kafka source starts a consumer in each task and plans a job around it: for a few records that
setup is nearly all of the read. :func:`read_range` reads the same records with librdkafka in this
process, record for record as Spark's source gives them (the same isolation, aborted transactions and
control records skipped, the same timestamp type numbers), or says it could not (``None``) so that the
caller reads with Spark instead.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, NamedTuple

from upsert_kafka_ops.kafka.admin import KafkaAdmin, TopicPartitionKey

#: Kafka's TimestampType ids, which Spark's source puts in ``timestampType``: librdkafka's
#: TIMESTAMP_NOT_AVAILABLE (0), TIMESTAMP_CREATE_TIME (1), TIMESTAMP_LOG_APPEND_TIME (2)
_TIMESTAMP_TYPE = {0: -1, 1: 0, 2: 1}


class RawRecord(NamedTuple):
    """One record in the column order of Spark's Kafka source (``timestamp`` in milliseconds)."""

    key: bytes | None
    value: bytes | None
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    timestamp_type: int
    headers: list[tuple[str, bytes | None]] | None


def read_range(
    config: Mapping[str, Any],
    ranges: Mapping[TopicPartitionKey, tuple[int, int]],
    *,
    isolation: str = "read_committed",
    headers: bool = False,
    timeout: float = 10.0,
) -> list[RawRecord] | None:
    """The records of ``ranges`` (per partition ``[start, end)``) in partition and offset order, or
    None when the read cannot be completed here within ``timeout`` seconds (a partition ended before
    its end offset, a start offset no longer in the log, a broker error): the caller reads with Spark,
    which reports the cause as it would have anyway."""
    from confluent_kafka import KafkaError, TopicPartition

    todo = {tp: r for tp, r in ranges.items() if r[1] > r[0]}
    if not todo:
        return []
    deadline = time.monotonic() + timeout
    out: dict[TopicPartitionKey, list[RawRecord]] = {tp: [] for tp in todo}
    with KafkaAdmin(dict(config), timeout=timeout) as admin:
        consumer = admin.record_reader(isolation)  # type: ignore[arg-type]
        consumer.assign([TopicPartition(t, p, start) for (t, p), (start, _) in todo.items()])
        open_parts = set(todo)
        while open_parts:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            first = consumer.poll(min(remaining, 0.5))
            batch = [first, *consumer.consume(10_000, 0)] if first is not None else []
            for msg in batch:
                tp = (msg.topic(), msg.partition())
                if tp not in open_parts:
                    continue
                end = todo[tp][1]
                err = msg.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF or msg.offset() < end:
                        return None  # an error, or the partition ends before the range does
                    open_parts.discard(tp)
                    continue
                if msg.offset() >= end:
                    open_parts.discard(tp)
                    continue
                kind, ts = msg.timestamp()
                found = msg.headers() if headers else None
                out[tp].append(
                    RawRecord(
                        msg.key(),
                        msg.value(),
                        tp[0],
                        tp[1],
                        msg.offset(),
                        int(ts) if kind else -1,
                        _TIMESTAMP_TYPE.get(kind, -1),
                        [(str(k), v) for k, v in found] if found else None,
                    )
                )
                if msg.offset() >= end - 1:
                    open_parts.discard(tp)
    return [rec for tp in sorted(out) for rec in out[tp]]
