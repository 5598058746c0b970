"""What a job reads: an upsert-kafka or a plain kafka (CDC) table on a named connection, a Delta
table's change feed, or a Spark SQL query."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Discriminator, Field, Tag, model_validator

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.pipeline.folders import Folder
from upsert_kafka_ops.pipeline.tables import table_input
from upsert_kafka_ops.spec.base import SpecModel, nested
from upsert_kafka_ops.spec.table import KafkaTable, UpsertKafkaTable


class TableOnConnection(SpecModel):
    """A table on a named connection; ``table`` may be a Flink ``ddl``, ``options`` or the fields."""

    table_kind: ClassVar[type[UpsertKafkaTable] | type[KafkaTable]] = UpsertKafkaTable

    @model_validator(mode="before")
    @classmethod
    def _table(cls, data: Any) -> Any:
        if isinstance(data, dict) and "table" in data:
            try:
                data = {**data, "table": table_input(data["table"], cls.table_kind)}
            except SpecError as exc:
                error = nested(exc, "table")
                raise error from None
        return data


class UpsertSource(TableOnConnection):
    """An upsert-kafka table read from a named connection."""

    kind: Literal["upsert-kafka"] = Field(default="upsert-kafka", description="Source kind.")
    connection: str = Field(description="Name of a connection in the pipeline's 'connections'.")
    table: UpsertKafkaTable = Field(
        description="The table: 'ddl', Flink 'options' + columns, its fields, or a name in 'tables'."
    )


class KafkaSource(TableOnConnection):
    """A plain (append-only) Kafka table read from a named connection."""

    table_kind: ClassVar[type[UpsertKafkaTable] | type[KafkaTable]] = KafkaTable

    kind: Literal["kafka"] = Field(description="Source kind.")
    connection: str = Field(description="Name of a connection in the pipeline's 'connections'.")
    table: KafkaTable = Field(
        description="The table: 'ddl', Flink 'options' + columns, its fields, or a name in 'tables'."
    )
    key: list[str] = Field(
        default_factory=list,
        description="CDC tables (debezium-json, canal-json, maxwell-json): fold the changes into the last "
        "row per these columns (the database table's primary key), which also works on a compacted "
        "topic; without it the changes are applied as a multiset of rows, as Flink does.",
    )

    @model_validator(mode="after")
    def _check_key(self) -> KafkaSource:
        from upsert_kafka_ops.formats.cdc_json import is_cdc

        if self.key and not is_cdc(self.table.value_format):
            raise SpecError(
                "key",
                f"applies to changelog formats only; {self.table.name!r} is {self.table.value_format!r}.",
                "remove key, or read a debezium-json, canal-json or maxwell-json topic.",
            )
        names = {c.name for c in self.table.physical_columns}
        unknown = [k for k in self.key if k not in names]
        if unknown:
            raise SpecError(
                "key",
                f"{unknown[0]!r} is not a column of {self.table.name!r}.",
                f"use some of: {', '.join(sorted(names))}.",
            )
        return self

    def upsert_view(self) -> UpsertKafkaTable:
        """The table a CDC source folds into, as an upsert table keyed by ``key``: what warehouse
        targets are created from and offsets are tracked for (its formats are never used)."""
        if not self.table.topic:
            raise SpecError(
                "table.topic",
                "a CDC source of a warehouse job reads named topics.",
                "give 'topic' instead of 'topic-pattern'.",
            )
        return UpsertKafkaTable.model_validate(
            {
                "name": self.table.name,
                "topic": self.table.topic,
                "properties": dict(self.table.properties),
                "columns": [c.model_dump() for c in self.table.physical_columns],
                "primary_key": list(self.key),
                "key_format": "json",
                "value_format": "json",
            }
        )


def kind_of(value: Any, default: str) -> str:
    """The ``kind`` of a source or sink given as a dict (``default`` when it has none) or a model."""
    kind = value.get("kind", default) if isinstance(value, dict) else getattr(value, "kind", "")
    return str(kind)


#: A topic-to-topic source; ``kind`` defaults to ``upsert-kafka``.
Source = Annotated[
    Annotated[UpsertSource, Tag("upsert-kafka")] | Annotated[KafkaSource, Tag("kafka")],
    Discriminator(lambda value: kind_of(value, "upsert-kafka")),
]


class DeltaFeedSource(Folder):
    """A Delta table's Change Data Feed (``delta.enableChangeDataFeed`` must be on)."""

    kind: Literal["delta-cdf"] = Field(description="Source kind.")
    path: str = Field(description="Delta table folder: a local path or s3a://bucket/folder.")


class QuerySource(SpecModel):
    """A Spark SQL query over tables Spark can read (``delta.`/path```, ``parquet.`/path```, catalog)."""

    kind: Literal["query"] = Field(description="Source kind.")
    query: str = Field(description="Spark SQL SELECT giving the sink table's columns, one row per key.")
