"""A Parquet folder holding the topic's full latest state, overwritten by every run.

The offsets go to ``_upsert_kafka_ops.json`` in the folder after the data: renamed into place on
disk, one PUT on object storage (read back through pyarrow's S3 filesystem: the ``s3`` extra).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from upsert_kafka_ops.jobs.faults import fault_point
from upsert_kafka_ops.jobs.folders import read_text, write_text
from upsert_kafka_ops.jobs.state import StoredState, from_payload
from upsert_kafka_ops.jobs.targets.base import Stored, Write, comparable_rows, folder_lock
from upsert_kafka_ops.pipeline import ParquetTarget, Pipeline
from upsert_kafka_ops.spec.storage import S3Storage, split_s3

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from upsert_kafka_ops.spec.table import UpsertKafkaTable

PARQUET_STATE_FILE = "_upsert_kafka_ops.json"


@dataclass(frozen=True)
class ParquetFolder:
    """A ``kind: parquet`` target of ``pipeline``."""

    spec: ParquetTarget
    pipeline: Pipeline
    full_only: ClassVar[bool] = True
    previewed: ClassVar[bool] = False

    @property
    def uri(self) -> str:
        return self.spec.uri

    @property
    def lineage_uri(self) -> str:
        return self.spec.uri

    @property
    def storage(self) -> S3Storage | None:
        return self.pipeline.storage_of(self.spec)

    def hold(self, spark: SparkSession, timeout: float) -> AbstractContextManager[None]:
        return folder_lock(spark, self.spec.path, self.storage, timeout, self.uri)

    def stored(self, job: str) -> Stored:
        return Stored(self.read_state())

    def read_state(self) -> StoredState | None:
        return read_parquet_state(self.spec.path, self.storage)

    def gaps(self, spark: SparkSession, table: UpsertKafkaTable) -> str:
        return ""  # every run rebuilds the folder

    def write(self, spark: SparkSession, w: Write) -> None:
        from upsert_kafka_ops.engine.warehouse import target_columns

        names = [n for n, _ in target_columns(w.written)]
        w.df.select(*names).write.mode("overwrite").parquet(self.spec.path)
        fault_point("after-data")
        write_parquet_state(self.spec.path, w.payload, self.storage)

    def rows(self, spark: SparkSession, columns: Sequence[str] | None = None) -> DataFrame:
        from upsert_kafka_ops.engine.hashing import quoted
        from upsert_kafka_ops.engine.session import use_storage

        if self.storage is not None:
            use_storage(spark, self.storage, split_s3(self.spec.path)[0])
        df = spark.read.format("parquet").load(self.spec.path)
        return df if columns is None else df.select(*[quoted(c) for c in columns])

    def comparable(
        self, spark: SparkSession, table: UpsertKafkaTable, current: str | None
    ) -> tuple[DataFrame, set[str]]:
        return comparable_rows(self.rows(spark), table, current), set()


def read_parquet_state(path: str | Path, storage: S3Storage | None = None) -> StoredState | None:
    """The offsets file of a Parquet folder (``None`` before the first run)."""
    text = read_text(str(path), PARQUET_STATE_FILE, storage)
    return None if text is None else from_payload(json.loads(text))


def write_parquet_state(path: str | Path, payload: dict[str, Any], storage: S3Storage | None = None) -> None:
    """The offsets file beside the data, written after it (whole: a rename, or one PUT on S3)."""
    write_text(str(path), PARQUET_STATE_FILE, json.dumps(payload, sort_keys=True), storage)
