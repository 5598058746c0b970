"""Whether an incremental run can continue from a target's stored offsets.

A run that cannot continue either fails (the stored offsets name a topic that was recreated or
truncated: a person decides) or rebuilds from the earliest offset and says why (the target lacks a
column, or tombstones may have been compacted away since the last run).
"""

from __future__ import annotations

import datetime as dt

from upsert_kafka_ops.jobs import state as st
from upsert_kafka_ops.jobs.core import OffsetsError
from upsert_kafka_ops.spec.connection import KafkaConnection
from upsert_kafka_ops.spec.table import UpsertKafkaTable


def missing_columns(table: UpsertKafkaTable, have: set[str]) -> str:
    """Why a target holding the columns ``have`` must be rebuilt to hold ``table``'s, or ''."""
    added = [c.name for c in table.columns if c.name not in have]
    if added:
        return (
            f"column(s) {', '.join(added)} added to the spec: rows outside one run's range need them too, "
            "so the target is rebuilt from the earliest offset"
        )
    return ""


def topic_ids(conn: KafkaConnection, topics: list[str]) -> dict[str, str]:
    """Each topic's id: a topic deleted and created again has a new one."""
    from upsert_kafka_ops.kafka.admin import KafkaAdmin

    if not topics:
        return {}
    with KafkaAdmin(conn) as admin:
        return admin.topic_ids(topics)


def check_stored(
    table: UpsertKafkaTable, conn: KafkaConnection, stored: st.StoredState, on_reset: str = "fail"
) -> str:
    """Why the run must rebuild instead of continuing the stored offsets (a tombstone may have been
    compacted away since the last run; with ``on_reset="rebuild"``, offsets the topic no longer
    holds), or ''. Offsets the topic no longer holds fail by default: a person decides."""
    from upsert_kafka_ops.kafka import offsets as ko
    from upsert_kafka_ops.kafka.admin import KafkaAdmin

    topics = sorted({t for t, _ in stored.offsets})
    with KafkaAdmin(conn) as admin:
        ids = admin.topic_ids(topics) if topics else {}
        configs = admin.topic_configs(topics) if topics else {}
    config = conn.to_librdkafka()
    parts = ko.topic_partitions(config, topics=table.topic, pattern=table.topic_pattern)
    earliest = ko.earliest_offsets(config, parts)
    latest = ko.end_offsets(config, parts, read_committed=False)
    problem = reset_problem(stored, ids, earliest, latest)
    if problem and on_reset == "rebuild":
        return f"{problem}: the target is rebuilt from the earliest offset (on_reset: rebuild)"
    if problem:
        raise OffsetsError(
            f"{problem}. Rebuild the target: run with mode full (or set on_reset: rebuild to do it on its own)."
        )
    if stored.committed_at:
        age_ms = (
            dt.datetime.now(dt.timezone.utc) - dt.datetime.fromisoformat(stored.committed_at)
        ).total_seconds() * 1000
        for t, cfg in sorted(configs.items()):
            if cfg.compacted and cfg.delete_retention_ms is not None and age_ms > cfg.delete_retention_ms:
                return (
                    f"the last run was {age_ms / 3_600_000:.1f} h ago, longer than {t}'s delete.retention.ms "
                    f"({cfg.delete_retention_ms / 3_600_000:.1f} h): tombstones may have been compacted away, so "
                    "the target is rebuilt from the earliest offset"
                )
    return ""


def reset_problem(
    stored: st.StoredState,
    ids: dict[str, str],
    earliest: dict[tuple[str, int], int],
    latest: dict[tuple[str, int], int],
) -> str:
    """Why the stored offsets no longer fit the topic (deleted and created again, partitions gone,
    truncated past them), or ''."""
    for t, old in sorted(dict(stored.extra.get("topic_ids", {})).items()):
        if t in ids and ids[t] != old:
            return (
                f"topic {t} was deleted and created again (topic id {old} is now {ids[t]}): the stored "
                "offsets belong to the old topic"
            )
    for (t, p), off in sorted(stored.offsets.items()):
        if (t, p) not in latest:
            return f"stored offsets name {t}[{p}], which the topic no longer has (deleted or recreated)"
        if off > latest[(t, p)]:
            return (
                f"stored offset {off} of {t}[{p}] is beyond its end offset {latest[(t, p)]}: the topic was "
                "recreated or truncated"
            )
        if off < earliest[(t, p)]:
            return (
                f"stored offset {off} of {t}[{p}] is below its log start offset {earliest[(t, p)]}: records "
                "were deleted (retention or DeleteRecords) before this job read them"
            )
    return ""
