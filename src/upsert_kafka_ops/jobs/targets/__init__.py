"""The warehouse targets, one module each, registered in :data:`TARGETS` by their ``kind``.

Adding a target: a spec model in the pipeline model (``pipeline/targets.py``, with its ``kind`` literal in
the target union) and a module here whose class satisfies :class:`WarehouseTable`, registered in
:data:`TARGETS`. The jobs, ``verify``, lineage, the sensors and Dagster's assets reach a target only
through :func:`target_for`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeGuard

from typing_extensions import TypeIs  # typing.TypeIs from Python 3.13

from upsert_kafka_ops.jobs.state import StoredState
from upsert_kafka_ops.jobs.targets.base import Stored, WarehouseTable, Write
from upsert_kafka_ops.jobs.targets.delta import DeltaTable
from upsert_kafka_ops.jobs.targets.iceberg import IcebergTable
from upsert_kafka_ops.jobs.targets.parquet import ParquetFolder
from upsert_kafka_ops.jobs.targets.postgres import PostgresTable
from upsert_kafka_ops.pipeline import Job, Pipeline, WarehouseTarget

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: every warehouse target's class, by the ``kind`` its spec carries
TARGETS: dict[str, Any] = {
    "delta": DeltaTable,
    "iceberg": IcebergTable,
    "parquet": ParquetFolder,
    "postgres": PostgresTable,
}


def is_warehouse(spec: object) -> TypeIs[WarehouseTarget]:
    """Whether ``spec`` (a job's target or sink) is a warehouse table (not a topic)."""
    return getattr(spec, "kind", None) in TARGETS


def previewed(spec: object) -> TypeGuard[WarehouseTarget]:
    """Whether the rows of the target ``spec`` names are counted and previewed after a run (Dagster's
    row count and preview)."""
    return is_warehouse(spec) and bool(TARGETS[spec.kind].previewed)


def target_for(spec: WarehouseTarget, pipeline: Pipeline) -> WarehouseTable:
    """The target ``spec`` names, bound to the pipeline that holds its store and catalog."""
    kind = getattr(spec, "kind", None)
    if kind not in TARGETS:
        raise TypeError(f"{kind!r} is not a warehouse target kind (one of {', '.join(sorted(TARGETS))})")
    table: WarehouseTable = TARGETS[kind](spec, pipeline)
    return table


def read_target(spark: SparkSession, pipeline: Pipeline, spec: WarehouseTarget) -> DataFrame:
    """A warehouse target's rows (on S3 through its store, an Iceberg table through its catalog:
    ``spark`` is given their settings)."""
    return target_for(spec, pipeline).rows(spark)


def readable_here(job: Job) -> bool:
    """Whether :func:`read_stored_offsets` can read ``job``'s target state without Spark: every
    warehouse target (PostgreSQL, Iceberg, and Delta or Parquet tables on the local file system or
    S3); topic targets keep none."""
    return is_warehouse(getattr(job, "target", None))


def read_stored_offsets(job: Job, pipeline: Pipeline | None = None) -> StoredState | None:
    """The stored state of a materialize or backfill job's warehouse target, read without Spark
    (``None`` before the first successful run). Topic targets and topic-to-topic jobs keep no
    offsets of their own: their consumer group ``upsert-kafka-ops.<job>`` has them.

    :param pipeline: the job's pipeline, for the store a target on S3 names (without it: AWS S3 and
        the AWS credential chain) and an Iceberg target's catalog (needed).
    """
    from upsert_kafka_ops.errors import SpecError

    target = getattr(job, "target", None)
    if not is_warehouse(target):
        return None
    if pipeline is None:
        if target.kind == "iceberg":
            raise SpecError(
                "pipeline",
                f"job {job.name!r} writes an Iceberg table: its catalog is in the pipeline.",
                "call read_stored_offsets(job, pipeline).",
            )
        # no pipeline: a table on S3 is read from AWS S3 with the AWS credential chain
        if getattr(target, "storage", None) is not None:
            target = target.model_copy(update={"storage": None})
        pipeline = Pipeline.model_construct(connections={}, storage={}, catalogs={}, jobs=[])
    return target_for(target, pipeline).read_state()


__all__ = [
    "TARGETS",
    "Stored",
    "WarehouseTable",
    "Write",
    "is_warehouse",
    "previewed",
    "read_stored_offsets",
    "read_target",
    "readable_here",
    "target_for",
]
