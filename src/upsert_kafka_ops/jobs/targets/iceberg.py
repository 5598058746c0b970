"""An Apache Iceberg table kept equal to the topic's latest state, in a catalog of the pipeline.

A run writes a MERGE (incremental) or an overwrite (full), each one snapshot whose summary carries
the offsets (property ``upsert_kafka_ops``). They are read back without Spark by walking the
table's snapshots from the current one back (pyiceberg: the ``iceberg`` extra). The run's lock is
on the table's location in the catalog's warehouse.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from upsert_kafka_ops.jobs.continuity import missing_columns
from upsert_kafka_ops.jobs.core import ConcurrentRunError
from upsert_kafka_ops.jobs.folders import StateError, store_error
from upsert_kafka_ops.jobs.state import StoredState, from_payload
from upsert_kafka_ops.jobs.targets.base import Stored, Write, comparable_rows, folder_lock
from upsert_kafka_ops.pipeline import IcebergTarget, MaintainJob, Pipeline
from upsert_kafka_ops.spec.iceberg import IcebergCatalog
from upsert_kafka_ops.spec.storage import S3Storage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from upsert_kafka_ops.spec.table import UpsertKafkaTable


@dataclass(frozen=True)
class IcebergTable:
    """A ``kind: iceberg`` target of ``pipeline``."""

    spec: IcebergTarget
    pipeline: Pipeline
    full_only: ClassVar[bool] = False
    previewed: ClassVar[bool] = True

    @property
    def uri(self) -> str:
        return self.spec.uri

    @property
    def lineage_uri(self) -> str:  # OpenLineage names an Iceberg table by its location
        return self.location

    @property
    def location(self) -> str:
        """The table's default location in its catalog's warehouse."""
        found = self.pipeline.location_of(self.spec)
        assert found is not None  # an Iceberg target always has one
        return found

    @property
    def catalog(self) -> IcebergCatalog:
        return self.pipeline.catalog_of(self.spec)[1]

    @property
    def catalog_name(self) -> str:
        """The catalog's name as engines use it."""
        return self.pipeline.catalog_of(self.spec)[0]

    @property
    def ref(self) -> str:
        from upsert_kafka_ops.engine.iceberg import iceberg_ref

        return iceberg_ref(self.catalog_name, self.spec.table)

    @property
    def storage(self) -> S3Storage | None:
        return self.pipeline.storage_of(self.spec)

    def use(self, spark: SparkSession) -> None:
        """Register the table's catalog (and its store's settings) in ``spark``."""
        from upsert_kafka_ops.engine.iceberg import use_catalog

        use_catalog(spark, self.catalog_name, self.catalog, self.storage)

    def hold(self, spark: SparkSession, timeout: float) -> AbstractContextManager[None]:
        return self._hold(spark, timeout)

    @contextmanager
    def _hold(self, spark: SparkSession, timeout: float) -> Iterator[None]:
        self.use(spark)
        with folder_lock(spark, self.location, self.storage, timeout, self.uri):
            yield

    def stored(self, job: str) -> Stored:
        return Stored(self.read_state())

    def read_state(self) -> StoredState | None:
        """The state of the newest snapshot that carries one, from the current snapshot back through
        its ancestors (a compaction or another writer's commit carries none); ``None`` when the table
        does not exist or no run has written it. ``target_version``: that snapshot's sequence number."""
        found = self.state_snapshot()
        return found[0] if found is not None else None

    def state_snapshot(self) -> tuple[StoredState, int] | None:
        """:meth:`read_state`'s state and the time (ms) of the snapshot that carries it."""
        from upsert_kafka_ops.engine.iceberg import SNAPSHOT_PROPERTY

        target, catalog, storage = self.spec, self.catalog, self.storage
        where = f"the Iceberg table {target.table} of catalog {target.catalog!r}"
        try:
            table = catalog.load_table(self.catalog_name, target.table, storage)
            if table is None:
                return None
            snapshot = table.current_snapshot()
            while snapshot is not None:
                summary = snapshot.summary
                found = summary.additional_properties.get(SNAPSHOT_PROPERTY) if summary else None
                if found is not None:
                    return from_payload(json.loads(found), snapshot.sequence_number), snapshot.timestamp_ms
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
                    f"cannot read {where} from its catalog database: {first}. Check the catalog's uri, "
                    "user and password (the pipeline's 'catalogs' section)."
                ) from None
            raise
        return None

    def gaps(self, spark: SparkSession, table: UpsertKafkaTable) -> str:
        from upsert_kafka_ops.engine.iceberg import iceberg_schema

        found = iceberg_schema(spark, self.ref)
        if found is None:
            return "the Iceberg table is missing: it is rebuilt from the earliest offset"
        return missing_columns(table, set(found.names))

    def write(self, spark: SparkSession, w: Write) -> None:
        from upsert_kafka_ops.engine import iceberg as ice

        table, ref = w.written, self.ref
        w.result.columns_added = ice.ensure_iceberg_table(spark, ref, table)
        if w.mode == "incremental":
            counts = ice.iceberg_merge(
                spark, w.df, ref, table, metadata=w.payload, rows=w.rows, close_only=w.close_only
            )
        else:
            counts = ice.iceberg_overwrite(spark, w.df, ref, table, metadata=w.payload)
        after = self.read_state()
        if after is None or after.run != w.run:  # the run holds the table's lock: another writer ignored it
            raise ConcurrentRunError(
                f"{self.uri}: the table's newest state is not this run's (run {w.run}); another writer "
                "committed without the lock. Rerun this job."
            )
        w.result.rows_upserted, w.result.rows_deleted = counts["upserted"], counts["deleted"]

    def maintain(self, spark: SparkSession, job: MaintainJob) -> dict[str, int]:
        import time

        from upsert_kafka_ops.engine import iceberg as ice

        if ice.iceberg_schema(spark, self.ref) is None:  # the hold registered the catalog
            return {}
        before = None
        if job.expire:
            # never the snapshot that holds the stored offsets: the next run continues from it
            before = int((time.time() - job.retain_hours * 3600) * 1000)
            state = self.state_snapshot()
            if state is not None:
                before = min(before, state[1])
        return ice.iceberg_maintain(
            spark, self.catalog_name, self.spec.table, compact=job.compact, expire_before_ms=before
        )

    def rows(self, spark: SparkSession, columns: Sequence[str] | None = None) -> DataFrame:
        from upsert_kafka_ops.engine.hashing import quoted

        self.use(spark)
        df = spark.table(self.ref)
        return df if columns is None else df.select(*[quoted(c) for c in columns])

    def comparable(
        self, spark: SparkSession, table: UpsertKafkaTable, current: str | None
    ) -> tuple[DataFrame, set[str]]:
        return comparable_rows(self.rows(spark), table, current), set()
