"""A Delta table kept equal to the topic's latest state.

A run writes a MERGE (incremental), an overwrite (full) or a snapshot replace, each one Delta commit
whose ``txnAppId``/``txnVersion`` (job name, run number) make a repeated run a no-op and whose
``userMetadata`` carries the offsets (one JSON object under the key ``upsert_kafka_ops``). The
offsets are read back without Spark from ``_delta_log/*.json`` newest first, or through delta-rs on
S3 (checkpoints included; the ``s3`` extra).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from upsert_kafka_ops.jobs.continuity import missing_columns
from upsert_kafka_ops.jobs.core import ConcurrentRunError
from upsert_kafka_ops.jobs.folders import local_path, store_error
from upsert_kafka_ops.jobs.state import MARKER, StoredState, from_payload
from upsert_kafka_ops.jobs.targets.base import FolderTable, Stored, Write
from upsert_kafka_ops.pipeline import DeltaTarget, MaintainJob
from upsert_kafka_ops.spec.storage import S3Storage, is_s3, s3_extra_missing

log = logging.getLogger("upsert_kafka_ops.jobs")

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from upsert_kafka_ops.spec.table import UpsertKafkaTable


@dataclass(frozen=True)
class DeltaTable(FolderTable):
    """A ``kind: delta`` target of ``pipeline``."""

    spec: DeltaTarget
    #: the table's schema as :meth:`gaps` read it under the run's lock, for :meth:`write` (one Spark
    #: read of the log fewer per run)
    _read: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    format: ClassVar[str] = "delta"
    full_only: ClassVar[bool] = False
    previewed: ClassVar[bool] = True

    def stored(self, job: str) -> Stored:
        found = read_delta_log(self.spec.path, self.storage, app_ids=[job])
        return Stored(found.state, found.txn_versions.get(job, 0))

    def read_state(self) -> StoredState | None:
        return read_delta_log(self.spec.path, self.storage).state

    def gaps(self, spark: SparkSession, table: UpsertKafkaTable) -> str:
        from upsert_kafka_ops.engine.delta import delta_schema
        from upsert_kafka_ops.engine.delta_rs import table_schema

        schema = table_schema(self.spec.path)  # from the log here when it can; else Spark reads it
        if schema is None:
            schema = delta_schema(spark, self.spec.path)
        self._read["schema"] = schema
        if schema is None:
            return "the Delta table is missing: it is rebuilt from the earliest offset"
        return missing_columns(table, set(schema.names))

    def write(self, spark: SparkSession, w: Write) -> None:
        from upsert_kafka_ops.engine import delta as wh
        from upsert_kafka_ops.engine.delta_rs import merge_here, merge_small

        job, df, mode, run, result = w.job, w.df, w.mode, w.run, w.result
        table, path, as_of = w.written, self.spec.path, self.spec.as_of_column
        result.columns_added = wh.ensure_delta_table(
            spark, path, table, as_of_column=as_of, schema=self._read.pop("schema", None)
        )
        meta = {MARKER: w.payload}
        if as_of:  # a snapshot table: only this end's rows are replaced
            counts = wh.delta_replace_snapshot(
                spark,
                df,
                path,
                table,
                as_of_column=as_of,
                as_of_ms=result.write["as_of_ms"],
                app_id=job.name,
                version=run,
                metadata=meta,
            )
        elif mode == "incremental":
            why = merge_here(df, path, table, w.rows)
            if why is None and w.rows is not None:
                local = str(local_path(path))
                counts = merge_small(
                    df,
                    local,
                    table,
                    app_id=job.name,
                    version=run,
                    metadata=meta,
                    rows=w.rows,
                    close_only=w.close_only,
                )
                result.write["writer"] = "delta-rs"
            else:
                log.debug("%s: Spark's MERGE writes this run (%s)", self.uri, why)
                counts = wh.delta_merge(
                    spark,
                    df,
                    path,
                    table,
                    app_id=job.name,
                    version=run,
                    metadata=meta,
                    rows=w.rows,
                    close_only=w.close_only,
                )
        else:
            counts = wh.delta_overwrite(spark, df, path, table, app_id=job.name, version=run, metadata=meta)
        after = read_delta_log(path, self.storage, app_ids=[job.name]).state
        if after is None or after.run != run:
            raise ConcurrentRunError(
                f"{self.uri}: Delta skipped this run's commit (txnAppId {job.name!r} already at version "
                f">= {run}); another run committed first. Nothing was written by this run; rerun it."
            )
        result.rows_upserted, result.rows_deleted = counts["upserted"], counts["deleted"]

    def maintain(self, spark: SparkSession, job: MaintainJob) -> dict[str, int]:
        from upsert_kafka_ops.engine.delta import delta_maintain, delta_schema

        if delta_schema(spark, self.spec.path) is None:  # on S3 the hold gave the session its store
            return {}
        return delta_maintain(
            spark,
            self.spec.path,
            compact=job.compact,
            expire=job.expire,
            retain_hours=job.retain_hours,
            cluster_file_bytes=int(job.cluster_file_mb * 1024 * 1024) if job.cluster else None,
        )


# -- the Delta log, read without Spark ------------------------------------------------------------
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
        from deltalake import DeltaTable as RsDeltaTable
        from deltalake.exceptions import TableNotFoundError
    except ImportError:
        raise s3_extra_missing(f"reading the Delta table {uri}") from None
    try:
        table = RsDeltaTable(uri, storage_options={**storage.object_store_options(), **_OBJECT_STORE_LIMITS})
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
        return from_payload(meta[MARKER], None if version is None else int(version))
    return None
