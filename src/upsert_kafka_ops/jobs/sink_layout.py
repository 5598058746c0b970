"""A sink topic's partition count: recorded by each run that writes it, checked before the next write.

Kafka places a keyed record by the hash of its key modulo the topic's partition count, so partitions
added to a sink topic move keys: a key's next record lands in another partition than its earlier ones,
and a reader (Flink's upsert-kafka source, this project's fold) may apply the two in either order,
bringing back an old value or a deleted row. A job that writes a topic records the count it wrote
with (in the metadata of its consumer group's commit, or in a publish job's state file) and refuses
to write when the topic's count differs, unless the sink says ``on_partitions_changed: write`` or the
topic holds no record (created again, empty, with the new count).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

from upsert_kafka_ops.errors import UpsertKafkaOpsError
from upsert_kafka_ops.pipeline import KafkaSink, UpsertSink
from upsert_kafka_ops.spec.connection import KafkaConnection

log = logging.getLogger("upsert_kafka_ops.jobs")
#: The key under which a run records its sink topics' partition counts.
KEY = "sink_partitions"


class SinkPartitionsError(UpsertKafkaOpsError):
    """The sink topic's partition count changed since the job last wrote it."""


def record(counts: Mapping[str, int]) -> str:
    """The commit metadata that records ``counts`` (sink topic -> partitions); '' for none."""
    return json.dumps({KEY: dict(counts)}, separators=(",", ":")) if counts else ""


def recorded(metadata: str | Mapping[str, object] | None) -> dict[str, int]:
    """The counts a commit's metadata (or a state file's document) recorded; {} when it holds none."""
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata) if metadata else {}
        except ValueError:  # another tool's metadata on the group
            return {}
    found = (metadata or {}).get(KEY) if isinstance(metadata, Mapping) else None
    if not isinstance(found, Mapping):
        return {}
    return {str(t): int(n) for t, n in found.items() if isinstance(n, int)}


def recorded_in_group(conn: KafkaConnection, group: str) -> dict[str, int]:
    """The counts the group's last commit recorded (each committed partition carries them)."""
    from upsert_kafka_ops.kafka.admin import KafkaAdmin

    out: dict[str, int] = {}
    with KafkaAdmin(conn) as admin:
        for metadata in admin.committed_metadata(group).values():
            out.update(recorded(metadata))
    return out


def check(
    job: str, sink: UpsertSink | KafkaSink, conn: KafkaConnection, before: Mapping[str, int]
) -> dict[str, int]:
    """The sink topic's partition count now, as ``{topic: count}`` to record after the write.

    :raises SinkPartitionsError: when it differs from ``before`` (the count recorded at the job's last
        run) and the topic holds records, unless the sink allows it; nothing has been written then.
    """
    from upsert_kafka_ops.kafka.admin import KafkaAdmin

    topic = (sink.table.topic or [""])[0]
    with KafkaAdmin(conn) as admin:  # one client: the count, and the offsets only when it changed
        now, then = admin.partition_counts([topic])[topic], before.get(topic)
        if then is None or then == now:
            return {topic: now}
        if not sink.keyed:
            return {topic: now}  # records without a key go to any partition: nothing to keep in place
        parts = [(topic, p) for p in range(now)]
        starts = admin.earliest_offsets(parts)
        ends = admin.end_offsets(parts, isolation="read_uncommitted")
    if all(ends[tp] <= starts[tp] for tp in parts):  # created again with the new count, and empty
        return {topic: now}
    if sink.on_partitions_changed == "write":
        log.warning(
            "job %s: sink topic %s has %d partitions, %d when the job last wrote it; writing anyway "
            "(on_partitions_changed: write): keys written before may now have records in two partitions",
            job,
            topic,
            now,
            then,
        )
        return {topic: now}
    raise SinkPartitionsError(
        f"job {job!r}: sink topic {topic!r} has {now} partitions, {then} when the job last wrote it. Kafka "
        "places a key by its hash modulo the partition count, so the keys written before would get their "
        "next records in other partitions, and readers could apply a key's records out of order (an old "
        "value or a deleted row coming back). Nothing was written. Fix: create the topic again (empty) "
        "with the partitions it should have and rebuild it (a backfill, or a full run of the job), or set "
        "on_partitions_changed: write on the sink to write anyway."
    )
