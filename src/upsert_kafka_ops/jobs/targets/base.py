"""What every warehouse target does for a run, and the pieces the targets share.

A target is one class per kind (``delta.py``, ``iceberg.py``, ``postgres.py``, ``parquet.py``) that
satisfies :class:`WarehouseTable`, bound to the pipeline that names it; ``jobs.targets`` registers
them and finds a spec's class by its ``kind``. The jobs call the protocol and never ask which kind
they hold.
"""

from __future__ import annotations

import fcntl
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol

from upsert_kafka_ops.jobs.core import ConcurrentRunError, JobResult
from upsert_kafka_ops.jobs.folders import local_path
from upsert_kafka_ops.jobs.object_lock import object_lock
from upsert_kafka_ops.jobs.state import StoredState
from upsert_kafka_ops.pipeline import BackfillJob, Folder, MaintainJob, MaterializeJob, Pipeline, source_table
from upsert_kafka_ops.spec.storage import S3Storage, split_s3

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from upsert_kafka_ops.spec.table import UpsertKafkaTable

log = logging.getLogger("upsert_kafka_ops.jobs")


class Stored(NamedTuple):
    """What a target holds of a job's runs: the state stored with its newest data (``None`` before
    the first run) and the last run number the target's own bookkeeping saw for the job (Delta's
    ``txnVersion``; 0 where the target keeps none apart from the state)."""

    state: StoredState | None
    last_run: int = 0


@dataclass(frozen=True)
class Write:
    """One run's write: ``df`` (the latest row per key, or an incremental run's changes) and
    ``payload`` (the offsets and run number stored with it); the counts go into ``result``.
    ``rows``: how many rows ``df`` holds, when the fold counted them; ``table``: the table written,
    when it is not the source's (a history table); ``close_only``: the columns a history table's
    ``close`` rows set (see :func:`upsert_kafka_ops.engine.warehouse.merge_sql`)."""

    job: MaterializeJob | BackfillJob
    df: DataFrame
    mode: str
    run: int
    payload: dict[str, Any]
    result: JobResult
    rows: int | None = None
    table: UpsertKafkaTable | None = None
    close_only: tuple[str, ...] = ()

    @property
    def written(self) -> UpsertKafkaTable:
        """The table the target holds."""
        return self.table or source_table(self.job.source)


class WarehouseTable(Protocol):
    """A warehouse target of a pipeline, as a run, ``verify``, lineage and the sensors use it."""

    #: every run rebuilds the whole table (no incremental writes, no history)
    full_only: ClassVar[bool]
    #: Dagster's assets count and preview its rows after a run
    previewed: ClassVar[bool]

    @property
    def uri(self) -> str:
        """The target as one URI, in messages and results."""
        ...

    @property
    def lineage_uri(self) -> str:
        """Where the table lives, as OpenLineage names it (``jobs.datasets.table_dataset``)."""
        ...

    def hold(self, spark: SparkSession, timeout: float) -> AbstractContextManager[None]:
        """The run's exclusive hold on the table, waited for at most ``timeout`` seconds."""
        ...

    def stored(self, job: str) -> Stored:
        """What the table holds of ``job``'s runs (read under :meth:`hold`)."""
        ...

    def read_state(self) -> StoredState | None:
        """The state stored with the table's newest data, read without Spark."""
        ...

    def gaps(self, spark: SparkSession, table: UpsertKafkaTable) -> str:
        """Why an incremental run cannot continue the table (it must be rebuilt), or ''."""
        ...

    def write(self, spark: SparkSession, w: Write) -> None:
        """Write ``w``'s rows and offsets in one commit."""
        ...

    def maintain(self, spark: SparkSession, job: MaintainJob) -> dict[str, int]:
        """Compact the table and expire what old versions left, as ``job`` says (under :meth:`hold`,
        so never beside a run's write); what was done, by count (empty: there is no table yet)."""
        ...

    def rows(self, spark: SparkSession, columns: Sequence[str] | None = None) -> DataFrame:
        """The table's rows (``columns`` of them, by name, when given)."""
        ...

    def comparable(
        self, spark: SparkSession, table: UpsertKafkaTable, current: str | None
    ) -> tuple[DataFrame, set[str]]:
        """The rows ``verify`` compares with the fold, in the fold's column names (of a history
        table, ``current`` names its is-current column: only current versions, the source's
        columns), and the columns held as JSON text."""
        ...


@dataclass(frozen=True)
class FolderTable:
    """What a table in a folder (Delta, Parquet) does the same way whatever its format: it is named
    by its path, held by a lock beside it, and read by Spark in its ``format``."""

    spec: Folder
    pipeline: Pipeline
    #: the Spark data source that reads the folder
    format: ClassVar[str]

    @property
    def uri(self) -> str:
        return self.spec.uri

    @property
    def lineage_uri(self) -> str:
        return self.spec.uri

    @property
    def storage(self) -> S3Storage | None:
        """The store of a folder on S3 (``None`` on the local file system)."""
        return self.pipeline.storage_of(self.spec)

    def hold(self, spark: SparkSession, timeout: float) -> AbstractContextManager[None]:
        return folder_lock(spark, self.spec.path, self.storage, timeout, self.uri)

    def rows(self, spark: SparkSession, columns: Sequence[str] | None = None) -> DataFrame:
        from upsert_kafka_ops.engine.hashing import quoted
        from upsert_kafka_ops.engine.session import use_storage

        if self.storage is not None:
            use_storage(spark, self.storage, split_s3(self.spec.path)[0])
        df = spark.read.format(self.format).load(self.spec.path)
        return df if columns is None else df.select(*[quoted(c) for c in columns])

    def comparable(
        self, spark: SparkSession, table: UpsertKafkaTable, current: str | None
    ) -> tuple[DataFrame, set[str]]:
        return comparable_rows(self.rows(spark), table, current), set()


def comparable_rows(rows: DataFrame, table: UpsertKafkaTable, current: str | None) -> DataFrame:
    """A table read through Spark, as ``verify`` compares it (see ``WarehouseTable.comparable``)."""
    from pyspark.sql import functions as F

    from upsert_kafka_ops.engine.hashing import quoted

    if current is None:
        return rows
    return rows.where(F.col(quoted(current))).select(*[quoted(c.name) for c in table.columns])


# -- locks ----------------------------------------------------------------------------------------
def wait_for(take: Callable[[], bool], timeout: float, what: str, lock: str, hint: str) -> None:
    """Call ``take`` until it returns True, at most ``timeout`` seconds; the wait is logged when it
    starts, every 10 s while it lasts, and when it ends (a task waiting on another run says so)."""
    if take():
        return
    start = time.monotonic()
    log.info("%s is being written by another run: waiting for %s (at most %.0f s)", what, lock, timeout)
    said = start
    while not take():
        now = time.monotonic()
        if now - start >= timeout:
            raise ConcurrentRunError(
                f"{what} is being written by another run ({lock} held for {timeout:.0f} s). "
                f"Runs of one target are serialized: {hint}"
            )
        if now - said >= 10:
            log.info("%s: still waiting for %s after %.0f s", what, lock, now - start)
            said = now
        time.sleep(0.2)
    log.info("%s: took %s after waiting %.1f s", what, lock, time.monotonic() - start)


@contextmanager
def file_lock(path: Path, timeout: float, what: str) -> Iterator[None]:
    """``flock`` on ``path`` (created when missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:

        def take() -> bool:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            return True

        wait_for(take, timeout, what, f"lock {path}", "wait for the other run, or raise lock_timeout_s.")
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextmanager
def folder_lock(
    spark: SparkSession, folder: str, storage: S3Storage | None, timeout: float, what: str
) -> Iterator[None]:
    """A run's hold on a table in a folder: a lease object on S3 (its session given the store's
    settings first), else ``flock`` on a file beside the folder."""
    if storage is None:
        local = local_path(folder)
        with file_lock(local.parent / f".{local.name}.upsert-kafka-ops.lock", timeout, what):
            yield
        return
    from upsert_kafka_ops.engine.session import use_storage

    use_storage(spark, storage, split_s3(folder)[0])

    def wait(take: Callable[[], bool], limit: float, lock: str) -> None:
        wait_for(take, limit, what, f"lock {lock}", "wait for the other run, or raise lock_timeout_s.")

    with object_lock(folder, storage, timeout, wait):
        yield
