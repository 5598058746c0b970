"""What a job writes: a topic (an upsert-kafka or a plain kafka table on a named connection) or a
warehouse table (Delta, PostgreSQL, Parquet, Iceberg). What a run does with a warehouse table is
``jobs.targets``'; these are the pipeline file's fields."""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Discriminator, Field, Tag, model_validator

from upsert_kafka_ops.errors import OldFieldWarning, SpecError
from upsert_kafka_ops.pipeline.folders import Folder
from upsert_kafka_ops.pipeline.sources import TableOnConnection, kind_of
from upsert_kafka_ops.spec.base import SpecModel
from upsert_kafka_ops.spec.connection import SecretRef
from upsert_kafka_ops.spec.iceberg import IcebergCatalog, split_table_name
from upsert_kafka_ops.spec.table import KafkaTable, UpsertKafkaTable


class TargetSpec(SpecModel):
    """What the pipeline model asks of whatever a job writes, a table or a topic, so that no part of
    it asks which kind it holds (what a run does with a warehouse table is ``jobs.targets``')."""

    #: a topic (written through a connection, keeping no offsets of its own)
    is_topic: ClassVar[bool] = False
    #: rewritten whole by every run (no incremental writes, no history table)
    full_only: ClassVar[bool] = False
    #: keeps replaced files or snapshots until they are expired (what a maintain job's expire removes)
    keeps_versions: ClassVar[bool] = True
    #: a maintain job can sort it by its key into small files (a maintain job's cluster)
    clusters_by_key: ClassVar[bool] = False

    @property
    def snapshot_column(self) -> str | None:
        """The column that tells a snapshot table's snapshots apart (``None``: not a snapshot table)."""
        return None

    def folder(self, catalogs: Mapping[str, IcebergCatalog]) -> tuple[str, str | None] | None:
        """Where the target's files live and the name of the store they are on (``None``: no files)."""
        return None

    def catalog_used(self) -> str | None:
        """The name of the catalog in the pipeline's ``catalogs`` that holds the target, if any."""
        return None

    def connections_used(self) -> list[str]:
        """The names of the connections the target is written through."""
        return []


class SinkSpec(TableOnConnection, TargetSpec):
    """A topic a job writes through a named connection."""

    is_topic: ClassVar[bool] = True
    #: each row of the query's output is appended as a record (the query must be append-only)
    appends: ClassVar[bool] = False

    on_partitions_changed: Literal["fail", "write"] = Field(
        default="fail",
        description="When the topic's partition count differs from the one the job recorded at its last write "
        "(partitions were added, so keys would get records in a second partition and readers could apply a "
        "key's records out of order): fail before writing, naming the fix, or write anyway. A topic created "
        "again, empty, with the new count passes on its own.",
    )

    @model_validator(mode="after")
    def _one_topic(self) -> SinkSpec:
        _check_one_topic(self.table)  # type: ignore[attr-defined]
        return self

    def connections_used(self) -> list[str]:
        return [self.connection]  # type: ignore[attr-defined]

    @property
    def keyed(self) -> bool:
        """Whether every record has a key, so a key's records stay in one partition."""
        return True


class UpsertSink(SinkSpec):
    """An upsert-kafka table written through a named connection."""

    kind: Literal["upsert-kafka"] = Field(
        default="upsert-kafka",
        description="Target kind: upsert-kafka, as a source of the same table says (formerly topic, which "
        "still reads).",
    )

    @model_validator(mode="before")
    @classmethod
    def _old_kind(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and data.get("kind") == OLD_TOPIC_KIND:
            warnings.warn(
                f"kind: {OLD_TOPIC_KIND} is the old name of a topic sink's kind; write kind: upsert-kafka "
                "(a source of the same table says so). The old name still reads and will be removed in a "
                "later release.",
                OldFieldWarning,
                stacklevel=2,
            )
            return {**data, "kind": "upsert-kafka"}
        return data

    connection: str = Field(description="Name of a connection in the pipeline's 'connections'.")
    table: UpsertKafkaTable = Field(
        description="The sink table (its topic, key and formats), or a name in 'tables'."
    )


class KafkaSink(SinkSpec):
    """A plain ``kafka`` table written through a named connection: each row of the query's output is
    appended as a record (Flink's kafka sink); the query must be append-only."""

    table_kind: ClassVar[type[UpsertKafkaTable] | type[KafkaTable]] = KafkaTable
    appends: ClassVar[bool] = True

    kind: Literal["kafka"] = Field(description="Target kind.")
    connection: str = Field(description="Name of a connection in the pipeline's 'connections'.")
    table: KafkaTable = Field(
        description="The sink table (its topic, key.fields and formats), or a name in 'tables'."
    )

    @property
    def keyed(self) -> bool:
        return bool(self.table.key_fields)


def _check_one_topic(table: UpsertKafkaTable | KafkaTable) -> None:
    if table.topic_pattern is not None or len(table.topic or []) != 1:
        raise SpecError(
            "sink.table.topic",
            f"a sink writes to exactly one topic; {table.name!r} names "
            f"{table.topic_pattern or ';'.join(table.topic or [])!r}.",
            "set 'topic' to a single topic name.",
        )


#: the kind a topic sink had before it was named like its source's
OLD_TOPIC_KIND = "topic"


def _write_kind(value: Any, default: str) -> str:
    """The kind of what a job writes, its old name read as the new one."""
    kind = kind_of(value, default)
    return "upsert-kafka" if kind == OLD_TOPIC_KIND else kind


#: A topic-to-topic sink; ``kind`` defaults to ``upsert-kafka``.
Sink = Annotated[
    Annotated[UpsertSink, Tag("upsert-kafka")] | Annotated[KafkaSink, Tag("kafka")],
    Discriminator(lambda value: _write_kind(value, "upsert-kafka")),
]


class DeltaTarget(Folder, TargetSpec):
    """A Delta table kept equal to the topic's latest state by MERGE (update, insert, delete).

    Processed offsets are stored in the same commit (``userMetadata``), with Delta's idempotent-write
    identifiers (txnAppId = job name, txnVersion = run sequence).
    """

    clusters_by_key: ClassVar[bool] = True

    kind: Literal["delta"] = Field(description="Target kind.")
    path: str = Field(description="Table folder: a local path or s3a://bucket/folder.")
    as_of_column: str | None = Field(
        default=None,
        description="Snapshot table: each backfill writes the state as of its end (until) into the rows "
        "where this TIMESTAMP column equals that time, replacing only those rows; the table is "
        "partitioned by it. Written by backfill jobs only, so runs for different ends (e.g. Dagster "
        "daily partitions, in any order or in parallel) never take the latest state back.",
    )

    @property
    def snapshot_column(self) -> str | None:
        return self.as_of_column


class PostgresTarget(TargetSpec):
    """A PostgreSQL table kept equal to the topic's latest state: rows are staged over JDBC, then
    ``INSERT ... ON CONFLICT DO UPDATE`` and ``DELETE`` run in one transaction with the offsets."""

    keeps_versions: ClassVar[bool] = False

    kind: Literal["postgres"] = Field(description="Target kind.")
    host: str = Field(description="Server host name.")
    port: int = Field(default=5432, description="Server port.")
    database: str = Field(description="Database name.")
    user: str = Field(description="Login role.")
    password: SecretRef | None = Field(default=None, description="Password reference (env or file).")
    table: str = Field(description="Target table, optionally schema-qualified (schema.table).")
    offsets_table: str = Field(
        default="upsert_kafka_ops_offsets",
        description="Table holding each job's processed offsets (same schema as the target).",
    )
    sslmode: str | None = Field(default=None, description="libpq sslmode (e.g. require, verify-full).")

    @model_validator(mode="after")
    def _names(self) -> PostgresTarget:
        for field in ("table", "offsets_table"):
            parts = getattr(self, field).split(".")
            if len(parts) > 2 or not all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", p) for p in parts):
                raise SpecError(
                    field,
                    f"{getattr(self, field)!r} is not a plain [schema.]name.",
                    "use letters, digits, _.",
                )
        return self

    @property
    def schema_name(self) -> str:
        return self.table.split(".")[0] if "." in self.table else "public"

    @property
    def table_name(self) -> str:
        return self.table.split(".")[-1]

    @property
    def uri(self) -> str:
        return f"postgres://{self.host}:{self.port}/{self.database}/{self.schema_name}.{self.table_name}"

    def jdbc_url(self) -> str:
        url = f"jdbc:postgresql://{self.host}:{self.port}/{self.database}"
        return url + (f"?sslmode={self.sslmode}" if self.sslmode else "")

    def conninfo(self) -> dict[str, Any]:
        """psycopg keyword arguments (the password resolved here, in the process that connects)."""
        out: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "dbname": self.database,
            "user": self.user,
        }
        if self.password is not None:
            out["password"] = self.password.resolve()
        if self.sslmode:
            out["sslmode"] = self.sslmode
        return out


class ParquetTarget(Folder, TargetSpec):
    """A Parquet folder holding the full latest state, overwritten by every run (always ``full``)."""

    full_only: ClassVar[bool] = True

    kind: Literal["parquet"] = Field(description="Target kind.")
    path: str = Field(description="Output folder: a local path or s3a://bucket/folder.")


class IcebergTarget(TargetSpec):
    """An Apache Iceberg table kept equal to the topic's latest state by MERGE (update, insert,
    delete), in a catalog of the pipeline's ``catalogs`` section.

    Processed offsets are stored in the snapshot summary of the commit that wrote the data (property
    ``upsert_kafka_ops``), so rows and offsets land together or not at all."""

    kind: Literal["iceberg"] = Field(description="Target kind.")
    catalog: str = Field(description="The name of a catalog in the pipeline's 'catalogs' section.")
    table: str = Field(description="The table as namespace.table (created when missing).")

    @model_validator(mode="after")
    def _check_table(self) -> IcebergTarget:
        split_table_name(self.table)
        return self

    @property
    def uri(self) -> str:
        return f"iceberg://{self.catalog}/{self.table}"

    def folder(self, catalogs: Mapping[str, IcebergCatalog]) -> tuple[str, str | None] | None:
        """The table's default location in its catalog's warehouse, on the catalog's store."""
        catalog = catalogs[self.catalog]
        return catalog.location(self.table), catalog.storage

    def catalog_used(self) -> str | None:
        return self.catalog


WarehouseTarget = Annotated[
    DeltaTarget | PostgresTarget | ParquetTarget | IcebergTarget, Field(discriminator="kind")
]
AnyTarget = Annotated[
    Annotated[DeltaTarget, Tag("delta")]
    | Annotated[PostgresTarget, Tag("postgres")]
    | Annotated[ParquetTarget, Tag("parquet")]
    | Annotated[IcebergTarget, Tag("iceberg")]
    | Annotated[UpsertSink, Tag("upsert-kafka")],
    Discriminator(lambda value: _write_kind(value, "")),
]
