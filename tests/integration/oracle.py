"""An independent oracle: records read back with confluent-kafka, folded in plain Python.

Nothing here uses the package's engine: keys and values are decoded with :mod:`json` and the fold is a
loop over the records in changelog order (offset order per partition; across partitions by the
record timestamp raised to the largest seen before it in its partition, then topic and partition).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, TopicPartition


@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


def read_all(bootstrap: str, topics: Iterable[str]) -> list[Record]:
    """Every record the topics hold (from each partition's log start), up to their current end offsets."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "oracle", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})  # fmt: skip
    try:
        md = consumer.list_topics(timeout=10)
        parts = [(t, p) for t in topics for p in md.topics[t].partitions]
        marks = {tp: consumer.get_watermark_offsets(TopicPartition(*tp), timeout=10) for tp in parts}
        want = sum(high - low for low, high in marks.values())
        consumer.assign([TopicPartition(t, p, marks[(t, p)][0]) for t, p in parts])
        out: list[Record] = []
        while len(out) < want:
            msg = consumer.poll(10)
            assert msg is not None, f"oracle read {len(out)} of {want} records"
            assert msg.error() is None, msg.error()
            out.append(
                Record(msg.topic(), msg.partition(), msg.offset(), msg.timestamp()[1], msg.key(), msg.value())
            )
        return out
    finally:
        consumer.close()


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (seed 0x9747b28c), as a signed 32-bit int."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rest = length % 4
    tail = data[length - rest :]
    if rest == 3:
        h ^= tail[2] << 16
    if rest >= 2:
        h ^= tail[1] << 8
    if rest >= 1:
        h ^= tail[0]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_partition(key: bytes, partitions: int) -> int:
    """Kafka's default partitioner for a non-null key: ``toPositive(murmur2(key)) % partitions``."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def changelog_order(records: list[Record], key_of: Callable[[Record], Any]) -> dict[Any, list[Record]]:
    """Each key's records in changelog order."""
    per_key: dict[Any, list[Record]] = defaultdict(list)
    running: dict[tuple[Any, str, int], int] = {}
    ordered = []
    for rec in sorted(records, key=lambda r: (r.topic, r.partition, r.offset)):
        k = key_of(rec)
        slot = (k, rec.topic, rec.partition)
        running[slot] = max(running.get(slot, rec.timestamp), rec.timestamp)
        ordered.append(((running[slot], rec.topic, rec.partition, rec.offset), k, rec))
    for _, k, rec in sorted(ordered, key=lambda t: t[0]):
        per_key[k].append(rec)
    return per_key


def last_values(bootstrap: str, topic: str) -> dict[bytes, bytes]:
    """The last value of each key in a topic, by partition and offset, without the keys whose last
    record is a tombstone: the raw bytes two writers of one table must agree on."""
    out: dict[bytes, bytes | None] = {}
    for r in sorted(read_all(bootstrap, [topic]), key=lambda r: (r.partition, r.offset)):
        assert r.key is not None
        out[r.key] = r.value
    return {k: v for k, v in out.items() if v is not None}


def fold(
    records: list[Record], decode_key: Callable[[bytes], Any], decode_value: Callable[[bytes], Any]
) -> dict[Any, Any]:
    """The latest live row per key."""
    keyed = [r for r in records if r.key is not None]
    state: dict[Any, Any] = {}
    for k, recs in changelog_order(keyed, lambda r: decode_key(r.key)).items():  # type: ignore[arg-type]
        last = recs[-1]
        if last.value is not None:
            state[k] = decode_value(last.value)
    return state


def changelog(
    records: list[Record], decode_key: Callable[[bytes], Any], decode_value: Callable[[bytes], Any], mode: str
) -> list[tuple[str, Any, tuple[str, int, int]]]:
    """(op, row, (topic, partition, offset)) events as Flink's ChangelogNormalize emits them."""
    keyed = [r for r in records if r.key is not None]
    events = []
    for _, recs in changelog_order(keyed, lambda r: decode_key(r.key)).items():  # type: ignore[arg-type]
        current = None
        for rec in recs:
            pos = (rec.topic, rec.partition, rec.offset)
            if rec.value is None:
                if current is not None:
                    events.append(("-D", current, pos))
                current = None
                continue
            row = decode_value(rec.value)
            if current is None:
                events.append(("+I", row, pos))
            elif row != current:
                if mode == "retract":
                    events.append(("-U", current, pos))
                events.append(("+U", row, pos))
            current = row
    return events


def json_int(value: Any) -> int | None:
    """Flink's JSON INT/BIGINT decoding: a number, or a number sent as a string."""
    return None if value is None else int(str(value).strip())


def decode_json(data: bytes) -> dict[str, Any]:
    return dict(json.loads(data))


@dataclass
class Version:
    """One version of a key in a history table (SCD type 2)."""

    key: Any
    row: Any
    valid_from: Any
    opened: tuple[int, int]  # (partition, offset) of the record that opened it
    valid_to: Any = None
    closed: tuple[int, int] | None = None

    @property
    def is_current(self) -> bool:
        return self.closed is None


def history(
    records: list[Record],
    decode_key: Callable[[bytes], Any],
    decode_value: Callable[[bytes], Any],
    tracked: Callable[[Any], Any],
    sequence: Callable[[Any], Any] | None = None,
) -> list[Version]:
    """Every version of every key, walking each key's records one by one: in changelog order with
    the record timestamps as times, or by ``sequence`` of the decoded row (a tombstone, or a row
    whose sequence is None, takes the largest sequence of the key's records before it in the topic;
    ties keep the topic's order). A row equal on ``tracked`` to the current version updates it in
    place; another opens a version and ends the current one; a tombstone ends the current one."""
    keyed = [r for r in records if r.key is not None]
    out: list[Version] = []
    for k, recs in changelog_order(keyed, lambda r: decode_key(r.key)).items():  # type: ignore[arg-type]
        steps: list[tuple[Any, int, Record, Any]] = []
        largest = None
        for i, rec in enumerate(recs):
            row = None if rec.value is None else decode_value(rec.value)
            own = None if sequence is None or row is None else sequence(row)
            if sequence is None:
                t = rec.timestamp
            else:
                t = own if own is not None else largest
                if own is not None:
                    largest = own if largest is None else max(largest, own)
            steps.append((t, i, rec, row))
        if sequence is not None:  # None first, as SQL's ascending order puts NULL
            steps.sort(key=lambda s: (s[0] is not None, s[0] if s[0] is not None else 0, s[1]))
        current: Version | None = None
        for t, _, rec, row in steps:
            at = (rec.partition, rec.offset)
            if row is not None and current is not None and tracked(row) == tracked(current.row):
                current.row = row
                continue
            if current is not None:
                current.valid_to, current.closed = t, at
                current = None
            if row is not None:
                current = Version(k, row, t, at)
                out.append(current)
    return out
