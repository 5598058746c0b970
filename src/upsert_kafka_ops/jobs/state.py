"""A target's processed offsets, stored atomically with its data, read back without Spark.

- Delta: the ``userMetadata`` of the commit that wrote the data (one JSON object under the key
  ``upsert_kafka_ops``), found by reading ``_delta_log/*.json`` newest first.
- PostgreSQL: rows of the offsets table (``target, job, run, topic, partition, offset``) updated in
  the transaction that changed the target.
- Parquet: ``_upsert_kafka_ops.json`` in the output folder, renamed into place after the data (on
  object storage, one PUT after the data).
- Iceberg: the snapshot summary property ``upsert_kafka_ops`` of the commit that wrote the data,
  found by walking the table's snapshots from the current one back (pyiceberg: the ``iceberg``
  extra).

Sensors and the lag exporter read these without Spark; the job runner reads them to continue. A
table on S3 is read through delta-rs (the Delta log, checkpoints included) and pyarrow's S3
filesystem (the Parquet state file): the ``s3`` extra.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.jobs.folders import StateError, local_path, read_text, store_error, write_text
from upsert_kafka_ops.spec.storage import S3Storage, is_s3, s3_extra_missing

if TYPE_CHECKING:
    from upsert_kafka_ops.jobs.spec import IcebergTarget, Pipeline

MARKER = "upsert_kafka_ops"
STATE_VERSION = 1
PARQUET_STATE_FILE = "_upsert_kafka_ops.json"
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


# -- Delta ----------------------------------------------------------------------------------------
_LOG_FILE = re.compile(r"^(\d{20})\.json$")


@dataclass(frozen=True)
class DeltaLogState:
    """The newest state commit and facts the runner checks (latest version, txn versions)."""

    state: StoredState | None
    latest_version: int | None
    txn_versions: dict[str, int]


def read_delta_log(
    path: str | Path, storage: S3Storage | None = None, app_ids: Iterable[str] = ()
) -> DeltaLogState:
    """The last commit carrying our state, newest first, and the Delta txn versions (on S3: those of
    ``app_ids``; on disk: all of them)."""
    if is_s3(str(path)):
        return _read_delta_log_s3(str(path), storage or S3Storage(), app_ids)
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
            if state is None and info is not None:
                state = _state_in(info.get("userMetadata"), version)
        if state is not None and txns:
            break
    return DeltaLogState(state, versions[0] if versions else None, txns)


#: delta-rs asks the store at most this long (a few tries) before it reports the store unreachable
_OBJECT_STORE_LIMITS = {"timeout": "10s", "connect_timeout": "5s", "max_retries": "2", "retry_timeout": "20s"}


def _read_delta_log_s3(uri: str, storage: S3Storage, app_ids: Iterable[str]) -> DeltaLogState:
    try:
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError
    except ImportError:
        raise s3_extra_missing(f"reading the Delta table {uri}") from None
    try:
        table = DeltaTable(uri, storage_options={**storage.object_store_options(), **_OBJECT_STORE_LIMITS})
    except TableNotFoundError:
        return DeltaLogState(None, None, {})
    except OSError as exc:
        raise store_error(uri, storage, exc) from None
    txns = {a: v for a in app_ids if (v := table.transaction_version(a)) is not None}
    state: StoredState | None = None
    for limit in (20, None):  # our runs commit their state every time: it is almost always the newest
        for info in table.history(limit):
            found = _state_in(info.get("userMetadata"), info.get("version"))
            if found is not None:
                state = found
                break
        if state is not None:
            break
    return DeltaLogState(state, table.version(), txns)


def _state_in(user_metadata: Any, version: Any) -> StoredState | None:
    if not user_metadata:
        return None
    try:
        meta = json.loads(user_metadata)
    except ValueError:
        return None  # someone else's free-text metadata
    if isinstance(meta, dict) and MARKER in meta:
        return _from_payload(meta[MARKER], None if version is None else int(version))
    return None


# -- Parquet --------------------------------------------------------------------------------------
def read_parquet_state(path: str | Path, storage: S3Storage | None = None) -> StoredState | None:
    text = read_text(str(path), PARQUET_STATE_FILE, storage)
    return None if text is None else _from_payload(json.loads(text))


def write_parquet_state(path: str | Path, payload: dict[str, Any], storage: S3Storage | None = None) -> None:
    """The offsets file beside the data, written after it (whole: a rename, or one PUT on S3)."""
    write_text(str(path), PARQUET_STATE_FILE, json.dumps(payload, sort_keys=True), storage)


# -- Iceberg --------------------------------------------------------------------------------------
def read_iceberg_state(pipeline: Pipeline, target: IcebergTarget) -> StoredState | None:
    """The state of the newest snapshot that carries one, from the current snapshot back through
    its ancestors (a compaction or another writer's commit carries none); ``None`` when the table
    does not exist or no run has written it. ``target_version``: that snapshot's sequence number."""
    from upsert_kafka_ops.engine.iceberg import SNAPSHOT_PROPERTY

    name, catalog = pipeline.catalog_of(target)
    storage = pipeline.storage_of(target)
    where = f"the Iceberg table {target.table} of catalog {target.catalog!r}"
    try:
        table = catalog.load_table(name, target.table, storage)
        if table is None:
            return None
        snapshot = table.current_snapshot()
        while snapshot is not None:
            found = (
                snapshot.summary.additional_properties.get(SNAPSHOT_PROPERTY) if snapshot.summary else None
            )
            if found is not None:
                return _from_payload(json.loads(found), snapshot.sequence_number)
            parent = snapshot.parent_snapshot_id
            snapshot = table.snapshot_by_id(parent) if parent is not None else None
    except (OSError, ValueError) as exc:
        if storage is not None:
            raise store_error(catalog.location(target.table), storage, exc) from None
        raise StateError(f"cannot read {where}: {str(exc).splitlines()[0][:300]}") from None
    except Exception as exc:  # the catalog database: SQLAlchemy's errors name the server, not secrets
        if type(exc).__module__.startswith("sqlalchemy"):
            first = str(getattr(exc, "orig", exc) or exc).splitlines()[0][:300]
            raise StateError(
                f"cannot read {where} from its catalog database: {first}. Check the catalog's uri, user "
                "and password (the pipeline's 'catalogs' section)."
            ) from None
        raise
    return None


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
    Iceberg, and Delta or Parquet tables on the local file system or S3."""
    from upsert_kafka_ops.jobs.spec import DeltaTarget, IcebergTarget, ParquetTarget, PostgresTarget

    return isinstance(
        getattr(job, "target", None), DeltaTarget | ParquetTarget | PostgresTarget | IcebergTarget
    )


def read_stored_offsets(job: Any, pipeline: Pipeline | None = None) -> StoredState | None:
    """The stored state of a materialize or backfill job's warehouse target, read without Spark
    (``None`` before the first successful run). Topic targets and topic-to-topic jobs keep no
    offsets of their own: their consumer group ``upsert-kafka-ops.<job>`` has them.

    :param pipeline: the job's pipeline, for the store a target on S3 names (without it: AWS S3 and
        the AWS credential chain) and an Iceberg target's catalog (needed).
    """
    from upsert_kafka_ops.jobs.spec import DeltaTarget, IcebergTarget, ParquetTarget, PostgresTarget

    target = getattr(job, "target", None)
    if isinstance(target, IcebergTarget):
        if pipeline is None:
            raise SpecError(
                "pipeline",
                f"job {job.name!r} writes an Iceberg table: its catalog is in the pipeline.",
                "call read_stored_offsets(job, pipeline).",
            )
        return read_iceberg_state(pipeline, target)
    storage = pipeline.storage_of(target) if pipeline is not None else None
    if isinstance(target, DeltaTarget):
        return read_delta_log(target.path, storage).state
    if isinstance(target, ParquetTarget):
        return read_parquet_state(target.path, storage)
    if isinstance(target, PostgresTarget):
        import psycopg

        with psycopg.connect(**target.conninfo(), autocommit=True) as conn:
            return read_postgres_state(conn, target.offsets_table, target.table)
    return None
