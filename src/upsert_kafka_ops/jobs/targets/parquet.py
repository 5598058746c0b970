"""A Parquet folder holding the topic's full latest state, overwritten by every run.

The offsets go to ``_upsert_kafka_ops.json`` in the folder after the data: renamed into place on
disk, one PUT on object storage (read back through pyarrow's S3 filesystem: the ``s3`` extra).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.jobs.faults import fault_point
from upsert_kafka_ops.jobs.folders import read_text, write_text
from upsert_kafka_ops.jobs.state import StoredState, from_payload
from upsert_kafka_ops.jobs.targets.base import FolderTable, Stored, Write
from upsert_kafka_ops.pipeline import MaintainJob, ParquetTarget
from upsert_kafka_ops.spec.storage import S3Storage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from upsert_kafka_ops.spec.table import UpsertKafkaTable

PARQUET_STATE_FILE = "_upsert_kafka_ops.json"


@dataclass(frozen=True)
class ParquetFolder(FolderTable):
    """A ``kind: parquet`` target of ``pipeline``."""

    spec: ParquetTarget
    format: ClassVar[str] = "parquet"
    full_only: ClassVar[bool] = True
    previewed: ClassVar[bool] = False

    def stored(self, job: str) -> Stored:
        return Stored(self.read_state())

    def read_state(self) -> StoredState | None:
        return read_parquet_state(self.spec.path, self.storage)

    def gaps(self, spark: SparkSession, table: UpsertKafkaTable) -> str:
        return ""  # every run rebuilds the folder

    def maintain(self, spark: SparkSession, job: MaintainJob) -> dict[str, int]:
        raise SpecError(
            "target",
            "a Parquet target is rewritten whole by every run: it has nothing to maintain.",
            "maintain a Delta, Iceberg or PostgreSQL target.",
        )

    def write(self, spark: SparkSession, w: Write) -> None:
        from upsert_kafka_ops.engine.warehouse import target_columns

        names = [n for n, _ in target_columns(w.written)]
        w.df.select(*names).write.mode("overwrite").parquet(self.spec.path)
        fault_point("after-data")
        write_parquet_state(self.spec.path, w.payload, self.storage)


def read_parquet_state(path: str | Path, storage: S3Storage | None = None) -> StoredState | None:
    """The offsets file of a Parquet folder (``None`` before the first run)."""
    text = read_text(str(path), PARQUET_STATE_FILE, storage)
    return None if text is None else from_payload(json.loads(text))


def write_parquet_state(path: str | Path, payload: dict[str, Any], storage: S3Storage | None = None) -> None:
    """The offsets file beside the data, written after it (whole: a rename, or one PUT on S3)."""
    write_text(str(path), PARQUET_STATE_FILE, json.dumps(payload, sort_keys=True), storage)
