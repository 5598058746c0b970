"""A target's processed offsets, stored atomically with its data, read back without Spark.

- Delta: the ``userMetadata`` of the commit that wrote the data (one JSON object under the key
  ``upsert_kafka_ops``), found by reading ``_delta_log/*.json`` newest first.
- PostgreSQL: rows of the offsets table (``target, job, run, topic, partition, offset``) updated in
  the transaction that changed the target.
- Parquet: ``_upsert_kafka_ops.json`` in the output folder, renamed into place after the data.

Sensors and the lag exporter read these with plain Python; the job runner reads them to continue.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from upsert_kafka_ops.errors import SpecError, UpsertKafkaOpsError

MARKER = "upsert_kafka_ops"
STATE_VERSION = 1
PARQUET_STATE_FILE = "_upsert_kafka_ops.json"
Offsets = dict[tuple[str, int], int]


class StateError(UpsertKafkaOpsError):
    """The stored state of a target cannot be read or does not fit the run."""


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
        "committed_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        **extra,
    }


def _from_payload(data: dict[str, Any], version: int | None = None) -> StoredState:
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


def local_path(uri: str, field_name: str = "path") -> Path:
    """A local folder for a path or ``file:`` URI; other schemes need Spark."""
    if "://" not in uri:
        return Path(uri)
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        raise SpecError(
            field_name,
            f"{uri!r} is not on the local file system; its state can only be read through Spark.",
            "use upsert_kafka_ops.jobs.read_stored_offsets with spark=... for remote tables.",
        )
    return Path(parsed.path)


# -- Delta ----------------------------------------------------------------------------------------
_LOG_FILE = re.compile(r"^(\d{20})\.json$")


@dataclass(frozen=True)
class DeltaLogState:
    """The newest state commit and facts the runner checks (latest version, txn versions)."""

    state: StoredState | None
    latest_version: int | None
    txn_versions: dict[str, int]


def read_delta_log(path: str | Path) -> DeltaLogState:
    """Scan ``_delta_log`` newest first for the last commit carrying our state."""
    log = local_path(str(path)) / "_delta_log"
    if not log.is_dir():
        return DeltaLogState(None, None, {})
    versions = sorted(
        (int(m.group(1)) for f in log.iterdir() if (m := _LOG_FILE.match(f.name))), reverse=True
    )
    txns: dict[str, int] = {}
    state: StoredState | None = None
    for version in versions:
        for line in (log / f"{version:020d}.json").read_text().splitlines():
            if not line.strip():
                continue
            action = json.loads(line)
            txn = action.get("txn")
            if txn is not None:
                txns.setdefault(str(txn["appId"]), int(txn["version"]))
            info = action.get("commitInfo")
            if state is None and info is not None and info.get("userMetadata"):
                try:
                    meta = json.loads(info["userMetadata"])
                except ValueError:
                    continue  # someone else's free-text metadata
                if isinstance(meta, dict) and MARKER in meta:
                    state = _from_payload(meta[MARKER], version)
        if state is not None and txns:
            break
    return DeltaLogState(state, versions[0] if versions else None, txns)


# -- Parquet --------------------------------------------------------------------------------------
def read_parquet_state(path: str | Path) -> StoredState | None:
    file = local_path(str(path)) / PARQUET_STATE_FILE
    if not file.exists():
        return None
    return _from_payload(json.loads(file.read_text()))


def write_parquet_state(path: str | Path, payload: dict[str, Any]) -> None:
    folder = local_path(str(path))
    tmp = folder / f".{PARQUET_STATE_FILE}.tmp"
    tmp.write_text(json.dumps(payload, sort_keys=True))
    tmp.replace(folder / PARQUET_STATE_FILE)


# -- PostgreSQL -----------------------------------------------------------------------------------
def read_postgres_state(conn: Any, offsets_table: str, target: str) -> StoredState | None:
    """Rows of ``offsets_table`` for ``target`` (a psycopg connection; the table may not exist)."""
    from psycopg import sql

    schema, _, name = offsets_table.rpartition(".")
    quoted = ".".join('"' + part.replace('"', '""') + '"' for part in offsets_table.split("."))
    exists = conn.execute("SELECT to_regclass(%s)", (quoted,)).fetchone()[0]
    if exists is None:
        return None
    ident = sql.Identifier(schema, name) if schema else sql.Identifier(name)
    rows = conn.execute(
        sql.SQL(
            'SELECT job, run, mode, topic, "partition", "offset", committed_at, topic_id FROM {} WHERE target = %s'
        ).format(ident),
        (target,),
    ).fetchall()
    if not rows:
        return None
    job, run, mode, _, _, _, at, _ = rows[0]
    return StoredState(
        job=job,
        run=int(run),
        mode=mode,
        offsets={(r[3], int(r[4])): int(r[5]) for r in rows},
        committed_at=at.isoformat(timespec="seconds") if at is not None else "",
        extra={"topic_ids": {r[3]: r[7] for r in rows if r[7] is not None}},
    )


def readable_here(job: Any) -> bool:
    """Whether :func:`read_stored_offsets` can read ``job``'s target state without Spark: PostgreSQL,
    and Delta or Parquet tables on the local file system (an object-store path needs Spark here)."""
    from upsert_kafka_ops.jobs.spec import DeltaTarget, ParquetTarget, PostgresTarget

    target = getattr(job, "target", None)
    if isinstance(target, PostgresTarget):
        return True
    if isinstance(target, DeltaTarget | ParquetTarget):
        return "://" not in target.path or urlparse(target.path).scheme == "file"
    return False


def read_stored_offsets(job: Any) -> StoredState | None:
    """The stored state of a materialize or backfill job's warehouse target, read without Spark
    (``None`` before the first successful run). Topic targets and topic-to-topic jobs keep no
    offsets of their own: their consumer group ``upsert-kafka-ops.<job>`` has them."""
    from upsert_kafka_ops.jobs.spec import DeltaTarget, ParquetTarget, PostgresTarget

    target = getattr(job, "target", None)
    if isinstance(target, DeltaTarget):
        return read_delta_log(target.path).state
    if isinstance(target, ParquetTarget):
        return read_parquet_state(target.path)
    if isinstance(target, PostgresTarget):
        import psycopg

        with psycopg.connect(**target.conninfo(), autocommit=True) as conn:
            return read_postgres_state(conn, target.offsets_table, target.table)
    return None
