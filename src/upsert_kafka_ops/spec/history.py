"""A history table (slowly changing dimension, type 2): every version of a key, not only its latest.

``history: scd2`` on a materialize job turns its target into a history table. Each version of a key
is one row: the table's columns, ``valid_from`` (when the version began), ``valid_to`` (when the
next version or a tombstone ended it; NULL while it lasts) and ``is_current``. Versions are ordered
by the record's position in the topic (its Kafka timestamp gives the times), or by a ``sequence_by``
column, where a late record slots in at its place. :mod:`upsert_kafka_ops.engine.history` builds
the versions; this module holds what a user writes and the table it implies.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.spec.base import SpecModel
from upsert_kafka_ops.spec.table import Column, UpsertKafkaTable
from upsert_kafka_ops.spec.types import parse_type

#: The bookkeeping columns of a history table: the record that opened a version (part of the
#: table's primary key), the record that closed it, a hash of the tracked columns, and with
#: ``sequence_by`` the largest sequence value of the key when the row was written.
OPENED = ("_uko_partition", "_uko_offset")
CLOSED = ("_uko_end_partition", "_uko_end_offset")
HASH = "_uko_hash"
SEEN = "_uko_seen"

#: Types a ``sequence_by`` column may have: they order, and they name a point of the key's history.
_ORDERED = {"TINYINT", "SMALLINT", "INT", "BIGINT", "DECIMAL", "DATE", "TIMESTAMP", "TIMESTAMP_LTZ"}


class HistorySpec(SpecModel):
    """``history: scd2`` (or this mapping): keep every version of a key with its validity."""

    kind: Literal["scd2"] = Field(default="scd2", description="History kind: scd2 (a row per version).")
    valid_from: str = Field(default="valid_from", description="Column: when the version began.")
    valid_to: str = Field(
        default="valid_to",
        description="Column: when the next version or a delete ended it (NULL while current).",
    )
    is_current: str = Field(default="is_current", description="Column: true on the key's live version.")
    sequence_by: str | None = Field(
        default=None,
        description="A value column ordering a key's versions (a late record slots into its place) and "
        "giving their times; by default the records' order in the topic and their Kafka timestamps.",
    )
    track_columns: list[str] | None = Field(
        default=None,
        description="The columns whose change opens a new version (default: every value column); a change "
        "of another column updates the current version in place.",
    )

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"kind": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _distinct_names(self) -> HistorySpec:
        names = [self.valid_from, self.valid_to, self.is_current]
        if len(set(names)) != 3:
            raise SpecError(
                "history",
                f"valid_from, valid_to and is_current must differ: {names}.",
                "give each its own column name.",
            )
        return self

    def time_type(self, table: UpsertKafkaTable) -> str:
        """The type of ``valid_from`` and ``valid_to``: the sequence column's, else the Kafka
        timestamp's (TIMESTAMP_LTZ(3))."""
        if self.sequence_by is None:
            return "TIMESTAMP_LTZ(3)"
        column = next(c for c in table.columns if c.name == self.sequence_by)
        return parse_type(column.type).with_nullable(True).to_flink()

    def tracked(self, table: UpsertKafkaTable) -> list[str]:
        """The columns whose change opens a version: ``track_columns``, else the value columns."""
        if self.track_columns is not None:
            return list(self.track_columns)
        return [c.name for c in table.physical_columns if c.name not in table.primary_key]

    def check(self, table: UpsertKafkaTable, field: str = "history") -> None:
        """The spec fits the source ``table``: its names are free, its columns exist and order."""
        if table.topic_pattern is not None or len(table.topic or []) != 1:
            raise SpecError(
                f"{field}",
                f"a history table reads one topic; {table.name!r} names "
                f"{table.topic_pattern or ';'.join(table.topic or [])!r} (a version is named by "
                "its record's partition and offset).",
                "read one topic per history job.",
            )
        columns = {c.name: c for c in table.columns}
        for name in (self.valid_from, self.valid_to, self.is_current):
            if name in columns or name.startswith("_uko_"):
                raise SpecError(
                    f"{field}",
                    f"column {name!r} is already a column of {table.name!r} (or a bookkeeping name).",
                    "name the history columns apart from the table's.",
                )
        physical = {c.name for c in table.physical_columns}
        if self.sequence_by is not None:
            column = columns.get(self.sequence_by)
            if column is None or column.name not in physical or column.name in table.primary_key:
                raise SpecError(
                    f"{field}.sequence_by",
                    f"{self.sequence_by!r} is not a value column of {table.name!r}.",
                    f"use one of {sorted(physical - set(table.primary_key))}.",
                )
            if parse_type(column.type).name not in _ORDERED:
                raise SpecError(
                    f"{field}.sequence_by",
                    f"{self.sequence_by!r} is {column.type}, which does not order versions.",
                    "use a TIMESTAMP, DATE, DECIMAL or integer column.",
                )
        for name in self.track_columns or []:
            if name not in physical or name in table.primary_key:
                raise SpecError(
                    f"{field}.track_columns",
                    f"{name!r} is not a value column of {table.name!r}.",
                    f"use columns of {sorted(physical - set(table.primary_key))}.",
                )
        if self.track_columns is not None and not self.track_columns:
            raise SpecError(
                f"{field}.track_columns",
                "is empty: no change would open a version.",
                "list at least one column, or leave track_columns out.",
            )

    def table(self, table: UpsertKafkaTable) -> UpsertKafkaTable:
        """The history table's spec: the source's columns, the history columns and the bookkeeping
        columns; its primary key is the source's plus the opening record's position."""
        time_type = self.time_type(table)
        extra = [
            Column(name=self.valid_from, type=time_type),
            Column(name=self.valid_to, type=time_type),
            Column(name=self.is_current, type="BOOLEAN"),
            Column(name=OPENED[0], type="INT NOT NULL"),
            Column(name=OPENED[1], type="BIGINT NOT NULL"),
            Column(name=CLOSED[0], type="INT"),
            Column(name=CLOSED[1], type="BIGINT"),
            Column(name=HASH, type="STRING"),
        ]
        if self.sequence_by is not None:
            extra.append(Column(name=SEEN, type=time_type))
        return table.model_copy(
            update={"columns": [*table.columns, *extra], "primary_key": [*table.primary_key, *OPENED]}
        )
