"""The Kafka operations a job needs, checked with its clusters before it reads or writes.

READ on each source topic (it is read) and on the job's consumer group (its processed offsets are
committed there after the target's commit), WRITE on a sink topic, and DESCRIBE_CONFIGS where a
topic's settings are read (a materialize job's source: ``delete.retention.ms``; a sink:
``max.message.bytes``). Each connection is asked once, by
``kafka.access``; a missing grant fails the run before anything moves.
"""

from __future__ import annotations

from typing import Any

from upsert_kafka_ops.jobs.core import RunContext
from upsert_kafka_ops.kafka.access import Need, check
from upsert_kafka_ops.spec.connection import KafkaConnection


def check_grants(ctx: RunContext) -> None:
    """Fail with every missing grant named, per connection, before the job starts."""
    job = ctx.job
    asks: dict[str, tuple[KafkaConnection, list[Need]]] = {}

    def on(part: Any) -> list[Need]:
        return asks.setdefault(part.connection, (ctx.connection(part.connection, part.table), []))[1]

    sources = list(getattr(job, "sources", {}).values()) or [getattr(job, "source", None)]
    for src in sources:
        if src is None or not hasattr(src, "table"):  # a publish job reads a table, not a topic
            continue
        topics = src.table.topic or []
        on(src).extend(Need("topic", t, "READ", "read its source") for t in topics)
        if job.kind == "materialize":  # delete.retention.ms decides whether stored offsets can go on
            on(src).extend(
                Need("topic", t, "DESCRIBE_CONFIGS", "read its retention settings") for t in topics
            )
        on(src).append(Need("group", job.consumer_group, "READ", "commit its processed offsets"))
    for sink in (getattr(job, "sink", None), getattr(job, "target", None)):
        if sink is not None and sink.is_topic:
            topic = (sink.table.topic or [""])[0]
            on(sink).append(Need("topic", topic, "WRITE", "write its sink"))
            on(sink).append(Need("topic", topic, "DESCRIBE_CONFIGS", "read its max.message.bytes"))
    for conn, needs in asks.values():
        check(conn, list(dict.fromkeys(needs)), job.name)
