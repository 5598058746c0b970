"""A target's processed offsets, stored atomically with its data: what a run stores
(:func:`state_payload`) and what it reads back (:class:`StoredState`).

Each target stores the payload its own way, in the commit that writes the data, and reads it back
without Spark (``jobs.targets``: Delta's commit info, Iceberg's snapshot summary, PostgreSQL's
offsets table, Parquet's state file). Sensors and the lag exporter read these; the job runner reads
them to continue.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from upsert_kafka_ops.jobs.folders import StateError

MARKER = "upsert_kafka_ops"
STATE_VERSION = 1
Offsets = dict[tuple[str, int], int]


@dataclass(frozen=True)
class StoredState:
    """What the last successful run of a target recorded."""

    job: str
    run: int
    offsets: Offsets
    mode: str = "incremental"
    committed_at: str = ""
    target_version: int | None = None  # Delta table version of the commit
    extra: dict[str, Any] = field(default_factory=dict)

    def offsets_json(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for (t, p), off in sorted(self.offsets.items()):
            out.setdefault(t, {})[str(p)] = off
        return out


def state_payload(job: str, run: int, offsets: Offsets, mode: str, **extra: Any) -> dict[str, Any]:
    """The JSON object stored with the data."""
    by_topic: dict[str, dict[str, int]] = {}
    for (t, p), off in sorted(offsets.items()):
        by_topic.setdefault(t, {})[str(p)] = int(off)
    return {
        "v": STATE_VERSION,
        "job": job,
        "run": run,
        "mode": mode,
        "offsets": by_topic,
        "committed_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        **extra,
    }


def from_payload(data: dict[str, Any], version: int | None = None) -> StoredState:
    """The state a target stored (``version``: the target's version that holds it)."""
    if data.get("v") != STATE_VERSION:
        raise StateError(
            f"stored state version {data.get('v')!r} is not {STATE_VERSION}; upgrade upsert-kafka-ops."
        )
    offsets = {(t, int(p)): int(o) for t, parts in data["offsets"].items() for p, o in parts.items()}
    extra = {k: v for k, v in data.items() if k not in {"v", "job", "run", "mode", "offsets", "committed_at"}}
    return StoredState(
        job=str(data["job"]),
        run=int(data["run"]),
        offsets=offsets,
        mode=str(data.get("mode", "incremental")),
        committed_at=str(data.get("committed_at", "")),
        target_version=version,
        extra=extra,
    )
