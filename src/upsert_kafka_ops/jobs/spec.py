"""Job specs: the unit that the CLI, spark-submit, Airflow, Dagster and the Helm chart all run.

A :class:`Pipeline` (one YAML file) names its Kafka connections once and holds several jobs; each
source and sink names the connection it uses, so a job may read one cluster and write another.
Secrets stay references (``{env: VAR}`` or ``{file: /path}``) in the file, in the JSON that goes to
spark-submit and in Helm values; whoever runs the job resolves them.

Tables are written the way a Flink user already has them (``jobs/tables.py``): inline in a source
or sink, or once in the pipeline's ``tables`` and named there (``table: users``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.jobs.tables import PipelineTable, resolve_table_names, table_input
from upsert_kafka_ops.spec.base import SpecModel, moved_into, nested, within
from upsert_kafka_ops.spec.cadence import cron_expression
from upsert_kafka_ops.spec.connection import KafkaConnection, SecretRef, for_table
from upsert_kafka_ops.spec.history import HistorySpec
from upsert_kafka_ops.spec.iceberg import IcebergCatalog, split_table_name
from upsert_kafka_ops.spec.storage import S3Storage, check_table_path, is_s3
from upsert_kafka_ops.spec.table import KafkaTable, UpsertKafkaTable

PIPELINE_VERSION = 1
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,99}$")
_VIEW = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_env(text: str, env: Mapping[str, str]) -> str:
    """Replace ``${VAR}`` / ``${VAR:-default}``; an unset variable without a default is an error."""

    def sub(m: re.Match[str]) -> str:
        name, default = m.group(1), m.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        raise SpecError(
            "pipeline",
            f"uses ${{{name}}}, which is not set.",
            f"export {name}=... or write ${{{name}:-default}}.",
        )

    return _ENV.sub(sub, text)


def _expand(data: Any, env: Mapping[str, str]) -> Any:
    if isinstance(data, str):
        return expand_env(data, env)
    if isinstance(data, dict):
        return {k: _expand(v, env) for k, v in data.items()}
    if isinstance(data, list):
        return [_expand(v, env) for v in data]
    return data


def _with_lines(error: SpecError, root: Any) -> SpecError:
    """``error`` with each problem's line in the YAML file (``root``: the composed node tree), found by
    following the problem's path as far as the file has it: the key of a misspelled field, the
    mapping a missing field belongs to."""
    import yaml

    def line(field: str) -> int | None:
        node, found = root, None
        for part in field.split("."):
            if isinstance(node, yaml.MappingNode):
                pair = next(((k, v) for k, v in node.value if k.value == part), None)
                if pair is None:
                    break
                found, node = pair[0].start_mark.line + 1, pair[1]
            elif isinstance(node, yaml.SequenceNode) and part.isdigit() and int(part) < len(node.value):
                node = node.value[int(part)]
                found = node.start_mark.line + 1
            else:
                break
        return found

    return SpecError.of(
        [SpecError(p.field, p.message, p.fix, file_line=line(p.field)) for p in error.problems]
    )


# -- sources ---------------------------------------------------------------------------------------
class _TableOnConnection(SpecModel):
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


class UpsertSource(_TableOnConnection):
    """An upsert-kafka table read from a named connection."""

    kind: Literal["upsert-kafka"] = Field(default="upsert-kafka", description="Source kind.")
    connection: str = Field(description="Name of a connection in the pipeline's 'connections'.")
    table: UpsertKafkaTable = Field(
        description="The table: 'ddl', Flink 'options' + columns, its fields, or a name in 'tables'."
    )


class AppendSource(_TableOnConnection):
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
    def _check_key(self) -> AppendSource:
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
            raise SpecError("key", f"{unknown[0]!r} is not a column of {self.table.name!r}.",
                            f"use some of: {', '.join(sorted(names))}.")  # fmt: skip
        return self

    def upsert_view(self) -> UpsertKafkaTable:
        """The table a CDC source folds into, as an upsert table keyed by ``key``: what warehouse
        targets are created from and offsets are tracked for (its formats are never used)."""
        if not self.table.topic:
            raise SpecError("table.topic", "a CDC source of a warehouse job reads named topics.",
                            "give 'topic' instead of 'topic-pattern'.")  # fmt: skip
        return UpsertKafkaTable.model_validate({
            "name": self.table.name, "topic": self.table.topic, "properties": dict(self.table.properties),
            "columns": [c.model_dump() for c in self.table.physical_columns], "primary_key": list(self.key),
            "key_format": "json", "value_format": "json",
        })  # fmt: skip


def _kind(value: Any, default: str) -> str:
    """The ``kind`` of a source or sink given as a dict (``default`` when it has none) or a model."""
    kind = value.get("kind", default) if isinstance(value, dict) else getattr(value, "kind", "")
    return str(kind)


#: A topic-to-topic source; ``kind`` defaults to ``upsert-kafka``.
Source = Annotated[
    Annotated[UpsertSource, Tag("upsert-kafka")] | Annotated[AppendSource, Tag("kafka")],
    Discriminator(lambda value: _kind(value, "upsert-kafka")),
]


class _Target(SpecModel):
    """What the pipeline model asks of whatever a job writes, a table or a topic, so that no part of
    it asks which kind it holds (what a run does with a warehouse table is ``jobs.targets``')."""

    #: a topic (written through a connection, keeping no offsets of its own)
    is_topic: ClassVar[bool] = False
    #: rewritten whole by every run (no incremental writes, no history table)
    full_only: ClassVar[bool] = False

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


class _Sink(_TableOnConnection, _Target):
    """A topic a job writes through a named connection."""

    is_topic: ClassVar[bool] = True

    on_partitions_changed: Literal["fail", "write"] = Field(
        default="fail",
        description="When the topic's partition count differs from the one the job recorded at its last write "
        "(partitions were added, so keys would get records in a second partition and readers could apply a "
        "key's records out of order): fail before writing, naming the fix, or write anyway. A topic created "
        "again, empty, with the new count passes on its own.",
    )

    @model_validator(mode="after")
    def _one_topic(self) -> _Sink:
        _check_one_topic(self.table)  # type: ignore[attr-defined]
        return self

    def connections_used(self) -> list[str]:
        return [self.connection]  # type: ignore[attr-defined]


class TopicSink(_Sink):
    """An upsert-kafka table written through a named connection."""

    kind: Literal["topic"] = Field(default="topic", description="Target kind.")
    connection: str = Field(description="Name of a connection in the pipeline's 'connections'.")
    table: UpsertKafkaTable = Field(
        description="The sink table (its topic, key and formats), or a name in 'tables'."
    )


class AppendSink(_Sink):
    """A plain ``kafka`` table written through a named connection: each row of the query's output is
    appended as a record (Flink's kafka sink); the query must be append-only."""

    table_kind: ClassVar[type[UpsertKafkaTable] | type[KafkaTable]] = KafkaTable

    kind: Literal["kafka"] = Field(description="Target kind.")
    connection: str = Field(description="Name of a connection in the pipeline's 'connections'.")
    table: KafkaTable = Field(
        description="The sink table (its topic, key.fields and formats), or a name in 'tables'."
    )


def _check_one_topic(table: UpsertKafkaTable | KafkaTable) -> None:
    if table.topic_pattern is not None or len(table.topic or []) != 1:
        raise SpecError(
            "sink.table.topic",
            f"a sink writes to exactly one topic; {table.name!r} names "
            f"{table.topic_pattern or ';'.join(table.topic or [])!r}.",
            "set 'topic' to a single topic name.",
        )


#: A topic-to-topic sink; ``kind`` defaults to ``topic`` (an upsert-kafka table).
Sink = Annotated[
    Annotated[TopicSink, Tag("topic")] | Annotated[AppendSink, Tag("kafka")],
    Discriminator(lambda value: _kind(value, "topic")),
]


# -- warehouse targets -----------------------------------------------------------------------------
class Folder(SpecModel):
    """A folder: a local path, or s3a://bucket/folder on a store the pipeline names.

    A table's, a checkpoint's, a publish job's state: every field that names a folder is one."""

    path: str = Field(description="A local path or s3a://bucket/folder.")
    storage: str | None = Field(
        default=None,
        description="For an s3a:// path: the name of a store in the pipeline's 'storage' section (endpoint, "
        "region, credentials); none: AWS S3 with the AWS credential chain.",
    )

    @model_validator(mode="after")
    def _check_path(self) -> Folder:
        try:
            check_table_path(self.path, self.storage)
        except SpecError as exc:
            raise within(exc) from None
        return self

    @property
    def uri(self) -> str:
        return self.path if "://" in self.path else Path(self.path).absolute().as_uri()

    def folder(self, catalogs: Mapping[str, IcebergCatalog]) -> tuple[str, str | None] | None:
        """The folder and the name of its store."""
        return self.path, self.storage


class DeltaTarget(Folder, _Target):
    """A Delta table kept equal to the topic's latest state by MERGE (update, insert, delete).

    Processed offsets are stored in the same commit (``userMetadata``), with Delta's idempotent-write
    identifiers (txnAppId = job name, txnVersion = run sequence).
    """

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


class PostgresTarget(_Target):
    """A PostgreSQL table kept equal to the topic's latest state: rows are staged over JDBC, then
    ``INSERT ... ON CONFLICT DO UPDATE`` and ``DELETE`` run in one transaction with the offsets."""

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


class ParquetTarget(Folder, _Target):
    """A Parquet folder holding the full latest state, overwritten by every run (always ``full``)."""

    full_only: ClassVar[bool] = True

    kind: Literal["parquet"] = Field(description="Target kind.")
    path: str = Field(description="Output folder: a local path or s3a://bucket/folder.")


class IcebergTarget(_Target):
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
    DeltaTarget | PostgresTarget | ParquetTarget | IcebergTarget | TopicSink, Field(discriminator="kind")
]


# -- jobs ------------------------------------------------------------------------------------------
class _Job(SpecModel):
    name: str = Field(description="Job name: letters, digits, '_', '.', '-'; unique in the pipeline.")
    description: str = Field(default="", description="Free text shown by the orchestrators.")
    schedule: str | None = Field(
        default=None,
        description="When the orchestrators run the job, in UTC: a cron expression ('*/15 * * * *') or @hourly, "
        "@daily, @weekly, @monthly, @yearly. Dagster gets a schedule and freshness checks from it, Airflow's "
        "pipeline DAG its schedule.",
    )

    @model_validator(mode="after")
    def _check_name(self) -> _Job:
        if not _NAME.match(self.name):
            raise SpecError("name", f"{self.name!r} is not a valid job name.", "use [A-Za-z][A-Za-z0-9_.-]*.")
        return self

    @field_validator("schedule")
    @classmethod
    def _check_schedule(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                cron_expression(value)
            except SpecError as e:  # the path in the file is the field's: jobs.N.schedule
                raise SpecError("", e.message, e.fix) from None
        return value

    @property
    def consumer_group(self) -> str:
        """The consumer group the job's processed offsets are committed to (monitoring only)."""
        return f"upsert-kafka-ops.{self.name}"

    def connections_used(self) -> list[str]:
        raise NotImplementedError


class MaterializeJob(_Job):
    """Topic -> warehouse: fold the upsert topic into the latest row per key in the target."""

    kind: Literal["materialize"] = Field(description="Job kind.")
    source: Source = Field(
        description="The upsert-kafka source, or a CDC source (kind: kafka, a debezium-json, canal-json or "
        "maxwell-json table, with its key)."
    )
    target: WarehouseTarget = Field(description="Delta, PostgreSQL, Parquet or Iceberg target.")
    mode: Literal["incremental", "full"] = Field(
        default="incremental",
        description="incremental: continue from the stored offsets; full: rebuild from the earliest offset.",
    )
    on_reset: Literal["fail", "rebuild"] = Field(
        default="fail",
        description="When the stored offsets cannot be continued (the topic was deleted and created again, "
        "lost partitions, or was truncated past them): fail before any write, naming the fix (a person "
        "decides), or rebuild the target from the earliest offset and say why.",
    )
    strict: bool = Field(default=False, description="Fail when a key is found in more than one partition.")
    validation: Literal["winners", "full"] = Field(
        default="winners",
        description="Decode only winning values, or every value (fail on the first bad one).",
    )
    history: HistorySpec | None = Field(
        default=None,
        description="scd2: keep every version of a key (valid_from, valid_to, is_current) instead of the "
        "latest row; see docs/history.md.",
    )

    @model_validator(mode="after")
    def _source(self) -> MaterializeJob:
        _check_folded_source(self.source)
        return self

    @model_validator(mode="after")
    def _history(self) -> MaterializeJob:
        if self.history is None:
            return self
        if not isinstance(self.source, UpsertSource):
            raise SpecError("history", "a history table is built from an upsert-kafka source.",
                            "read the topic as an upsert-kafka table, or drop history.")  # fmt: skip
        if self.target.full_only:
            raise SpecError("history", "a Parquet target is rewritten whole on every run; a history table is "
                            "updated in place.", "write the history to Delta, PostgreSQL or Iceberg.")  # fmt: skip
        self.history.check(self.source.table)
        return self

    @model_validator(mode="after")
    def _latest_state_target(self) -> MaterializeJob:
        if self.target.snapshot_column:
            raise SpecError(
                "target.as_of_column",
                "a materialize job keeps the latest state; a snapshot table is written by backfills.",
                "use kind: backfill for a snapshot table, or drop as_of_column.",
            )
        return self

    def connections_used(self) -> list[str]:
        return [self.source.connection]


class BackfillJob(_Job):
    """Bounded earliest -> end read that rebuilds a target idempotently."""

    kind: Literal["backfill"] = Field(description="Job kind.")
    source: Source = Field(
        description="The upsert-kafka source, or a CDC source with its key (warehouse targets)."
    )
    target: AnyTarget = Field(description="Delta, PostgreSQL, Parquet, Iceberg or an upsert topic.")
    until: Any = Field(
        default="latest",
        description="End of the read: 'latest' (fixed at start), {'timestamp_ms': N}, "
        "{'offsets': {topic: {partition: offset}}}.",
    )
    rewind: bool = Field(
        default=False,
        description="Allow an end older than the target's stored offsets (the target goes back in time).",
    )

    @model_validator(mode="after")
    def _check_until(self) -> BackfillJob:
        u = self.until
        ok = u == "latest" or (
            isinstance(u, dict) and len(u) == 1 and ("timestamp_ms" in u or "offsets" in u)
        )
        if not ok:
            raise SpecError(
                "until",
                f"cannot use {u!r}.",
                "use 'latest', {timestamp_ms: N} or {offsets: {topic: {p: n}}}.",
            )
        _check_folded_source(self.source)
        if isinstance(self.source, AppendSource) and self.target.is_topic:
            raise SpecError("target", "a CDC source is backfilled into warehouse targets only (for now).",
                            "use a topic-to-topic job to turn a CDC topic into an upsert topic.")  # fmt: skip
        as_of = self.target.snapshot_column
        if as_of and as_of in {c.name for c in self.source.table.columns}:
            raise SpecError(
                "target.as_of_column",
                f"{as_of!r} is also a column of the table {self.source.table.name!r}.",
                "choose a name the table does not use, e.g. as_of.",
            )
        return self

    @property
    def snapshot(self) -> bool:
        """Whether the target is a snapshot table (one snapshot per end, see DeltaTarget.as_of_column)."""
        return bool(self.target.snapshot_column)

    def until_bound(self) -> Any:
        if isinstance(self.until, dict) and "offsets" in self.until:
            return dict(self.until["offsets"])
        return self.until

    def connections_used(self) -> list[str]:
        return [self.source.connection, *self.target.connections_used()]


def history_start_error(name: str, source: Any, why: str) -> SpecError | None:
    """The error for a source whose ``scan.startup.mode`` would cut the history a job reads whole."""
    if not isinstance(source, AppendSource) or source.table.startup_mode == "earliest-offset":
        return None
    return SpecError(
        f"{name}.table.scan.startup.mode",
        f"'{source.table.startup_mode}': {why}, so a start other than the earliest offset would leave out "
        "part of the table and then write that partial result over the whole one.",
        "remove it (or set 'earliest-offset'); a start applies to streaming topic-to-topic jobs and engine reads.",
    )


def _check_folded_source(source: Any) -> None:
    """A warehouse job folds its source per key: an upsert table, or a CDC table with ``key``."""
    if not isinstance(source, AppendSource):
        return
    error = history_start_error("source", source, "a warehouse job folds its source from the earliest offset")
    if error is not None:
        raise error
    from upsert_kafka_ops.formats.cdc_json import is_cdc

    if not is_cdc(source.table.value_format):
        raise SpecError("source", f"{source.table.name!r} is an append-only {source.table.value_format} table: "
                        "it has no key to keep the latest row of.",
                        "read an upsert-kafka table, or a CDC table (debezium-json, canal-json, maxwell-json).")  # fmt: skip
    if not source.key:
        raise SpecError("source.key", f"the CDC table {source.table.name!r} needs the key of its rows here.",
                        "add key: [<primary key columns>] to the source.")  # fmt: skip
    source.upsert_view()


def source_table(source: Any) -> UpsertKafkaTable:
    """The upsert table a warehouse job's source stands for (a CDC source: its upsert view)."""
    return source.upsert_view() if isinstance(source, AppendSource) else source.table


def target_table(job: MaterializeJob | BackfillJob) -> UpsertKafkaTable:
    """The table a warehouse job's target holds: its source's, or with ``history`` the history table
    (every version, with its validity and bookkeeping columns)."""
    table = source_table(job.source)
    history = getattr(job, "history", None)
    return history.table(table) if history is not None else table


def parse_until(value: Any, field: str = "until") -> Any:
    """A backfill's end from what a user types: ``latest``, epoch milliseconds, an ISO-8601 time
    (``2026-11-22T10:00:00Z``; without a zone it is timezone.utc), offsets JSON, or the spec form itself."""
    if value is None or value == "latest":
        return "latest"
    if isinstance(value, dict):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return {"timestamp_ms": value}
    text = str(value).strip()
    if text.isdigit():
        return {"timestamp_ms": int(text)}
    if text.startswith("{"):
        try:
            offsets = json.loads(text)
        except ValueError:
            raise SpecError(
                field, f"cannot read {text!r} as offsets JSON.", 'write {"topic": {"0": 123}}.'
            ) from None
        return offsets if set(offsets) <= {"offsets", "timestamp_ms"} and offsets else {"offsets": offsets}
    from datetime import datetime, timezone

    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise SpecError(
            field,
            f"cannot read {text!r}.",
            "use latest, epoch milliseconds, an ISO-8601 time (2026-11-22T10:00:00Z) or offsets JSON.",
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return {"timestamp_ms": int(when.timestamp() * 1000)}


def as_backfill(
    job: MaterializeJob | BackfillJob | TopicToTopicJob | PublishJob,
    until: Any = None,
    rewind: bool | None = None,
) -> BackfillJob:
    """The bounded backfill of a materialize job (or a backfill job with a new end): reads from the
    earliest offset to ``until`` (see :func:`parse_until`; default: the job's own end, else latest)
    and rebuilds the target. ``rewind`` allows an end older than the target's stored offsets."""
    if isinstance(job, MaterializeJob):
        return BackfillJob(
            name=job.name, description=job.description, kind="backfill", source=job.source, target=job.target,
            until=parse_until(until), rewind=bool(rewind),
        )  # fmt: skip
    if isinstance(job, BackfillJob):
        return BackfillJob.model_validate(
            {
                **job.model_dump(),
                "until": parse_until(until) if until is not None else job.until,
                "rewind": job.rewind if rewind is None else rewind,
            }
        )
    raise SpecError("job", f"{job.name!r} is a {job.kind} job.", "backfill a materialize or backfill job.")


class TopicToTopicJob(_Job):
    """Kafka sources registered as temporary views, a Spark SQL query, an upsert-kafka sink."""

    kind: Literal["topic-to-topic"] = Field(description="Job kind.")
    sources: dict[str, Source] = Field(
        description="View name -> source; the query refers to the views by these names."
    )
    sql: str | None = Field(
        default=None,
        description="Flink's INSERT INTO sink SELECT ... over tables of the pipeline's 'tables', instead of "
        "'query', 'sources' and 'sink' (the SELECT is translated to Spark SQL; columns go by position).",
    )
    query: str = Field(description="Spark SQL SELECT whose columns are the sink table's columns, in order.")
    sink: Sink = Field(
        description="The sink: an upsert-kafka table (kind: topic, the default), or a plain kafka table "
        "(kind: kafka) for an append-only query, written by the streaming path."
    )
    execution: Literal["auto", "streaming", "snapshot"] = Field(
        default="auto",
        description="auto: Structured Streaming (AvailableNow) when the query can run incrementally "
        "and exactly, else a bounded recompute written with write_snapshot.",
    )
    checkpoint: Folder | None = Field(
        default=None,
        description="Streaming checkpoint folder (required for the streaming path): {path, storage}. "
        "Formerly checkpoint_location and checkpoint_storage, which still read.",
    )

    @model_validator(mode="before")
    @classmethod
    def _old_checkpoint_fields(cls, data: Any) -> Any:
        return _old_folder(data, "checkpoint", "checkpoint_location", "checkpoint_storage")

    @model_validator(mode="after")
    def _check_views(self) -> TopicToTopicJob:
        if not self.sources:
            raise SpecError("sources", "needs at least one source.")
        for view in self.sources:
            if not _VIEW.match(view):
                raise SpecError(
                    f"sources.{view}", "is not a valid SQL view name.", "use [A-Za-z_][A-Za-z0-9_]*."
                )
        return self

    def connections_used(self) -> list[str]:
        return [s.connection for s in self.sources.values()] + [self.sink.connection]


class DeltaFeedSource(Folder):
    """A Delta table's Change Data Feed (``delta.enableChangeDataFeed`` must be on)."""

    kind: Literal["delta-cdf"] = Field(description="Source kind.")
    path: str = Field(description="Delta table folder: a local path or s3a://bucket/folder.")


class QuerySource(SpecModel):
    """A Spark SQL query over tables Spark can read (``delta.`/path```, ``parquet.`/path```, catalog)."""

    kind: Literal["query"] = Field(description="Source kind.")
    query: str = Field(description="Spark SQL SELECT giving the sink table's columns, one row per key.")


class PublishJob(_Job):
    """Table -> topic: a Delta table's changes (Change Data Feed) or a query's full snapshot."""

    kind: Literal["publish"] = Field(description="Job kind.")
    source: Annotated[DeltaFeedSource | QuerySource, Field(discriminator="kind")] = Field(
        description="delta-cdf: publish the changes since the stored version; query: publish a snapshot."
    )
    sink: TopicSink = Field(description="The upsert-kafka sink.")
    state: Folder | None = Field(
        default=None,
        description="Folder for the last published Delta version (delta-cdf; default: next to the table, on "
        "its store): {path, storage}. Formerly state_path and state_storage, which still read.",
    )

    @model_validator(mode="before")
    @classmethod
    def _old_state_fields(cls, data: Any) -> Any:
        return _old_folder(data, "state", "state_path", "state_storage")

    def connections_used(self) -> list[str]:
        return [self.sink.connection]


Job = Annotated[MaterializeJob | BackfillJob | TopicToTopicJob | PublishJob, Field(discriminator="kind")]


def _stores_named(job: Any) -> Iterator[tuple[str, str]]:
    """``(field, store name)`` for each store a job's parts name (target, source, checkpoint, state)."""
    for field in ("target.storage", "source.storage", "checkpoint.storage", "state.storage"):
        owner, _, attr = field.rpartition(".")
        name = getattr(getattr(job, owner, None) if owner else job, attr, None)
        if name is not None:
            yield field, name


def _kafka_parts(job: Any) -> Iterator[tuple[str, Any]]:
    """``(where, part)`` for each of a job's parts that reads or writes a Kafka table through a named
    connection (a source, a topic target or sink, each source of a topic-to-topic job)."""
    for name in ("source", "target", "sink"):
        part = getattr(job, name, None)
        if hasattr(part, "connection") and hasattr(part, "table"):
            yield name, part
    for view, part in (getattr(job, "sources", None) or {}).items():
        yield f"sources.{view}", part


#: the pipeline section each kind of reference names
_SECTIONS = {"connection": "connections", "storage": "storage", "catalog": "catalogs"}


def _old_folder(data: Any, new: str, path: str, storage: str) -> Any:
    """A job's input with a folder given by its old pair of fields (``path``, ``storage``) moved
    into ``new``; a folder that cannot work is refused naming the fields the file uses."""
    if not isinstance(data, Mapping) or (path not in data and storage not in data):
        return data
    check_table_path(data.get(path), data.get(storage), path, storage)
    return moved_into(data, new, {path: "path", storage: "storage"}, f"job {data.get('name')!r}")


def _folder_of(part: Any, catalogs: Mapping[str, IcebergCatalog]) -> tuple[str, str | None] | None:
    """A target's or a Delta source's folder and the name of its store (``None``: it has none)."""
    return part.folder(catalogs) if isinstance(part, _Target | Folder) else None


def _catalog_of(job: Any) -> str | None:
    """The catalog a job's target is in (``None``: not an Iceberg table, or no target)."""
    target = getattr(job, "target", None)
    return target.catalog_used() if target is not None else None


def _defined(section: Mapping[str, Any], kind: str, name: str, field: str, who: str) -> None:
    """Refuse a reference of ``who`` at ``field`` to a connection, store or catalog (``kind``) that
    the pipeline does not define."""
    if name not in section:
        raise SpecError(
            field,
            f"{who} names {kind} {name!r}, which the pipeline does not define.",
            f"add it under {_SECTIONS[kind]!r} (defined: {', '.join(sorted(section)) or 'none'}).",
        )


class Pipeline(SpecModel):
    """A pipeline file: named connections and the jobs that use them."""

    version: Literal[1] = Field(default=1, description="Pipeline file format version.")
    name: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
        description="The pipeline's name: the `pipeline` label of its lag and run metrics. Default: "
        "the file's name without its suffix.",
    )
    connections: dict[str, KafkaConnection] = Field(description="Connection name -> Kafka connection.")
    storage: dict[str, S3Storage] = Field(
        default_factory=dict,
        description="Store name -> object storage (S3 or S3-compatible) that s3a:// targets name.",
    )
    catalogs: dict[str, IcebergCatalog] = Field(
        default_factory=dict, description="Catalog name -> Apache Iceberg catalog that iceberg targets name."
    )
    tables: dict[str, PipelineTable] = Field(
        default_factory=dict,
        description="Table name -> Kafka table (Flink DDL or options, and its connection) that sources and "
        "sinks name with 'table: <name>', defined once for every job that reads or writes it.",
    )
    jobs: list[Job] = Field(min_length=1, description="The jobs, each with a unique name.")

    @model_validator(mode="before")
    @classmethod
    def _table_names(cls, data: Any) -> Any:
        return resolve_table_names(data)

    @model_validator(mode="after")
    def _check_refs(self) -> Pipeline:
        names = [j.name for j in self.jobs]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise SpecError(
                "jobs", f"duplicate job name(s): {', '.join(dupes)}.", "give each job its own name."
            )
        for name, table in self.tables.items():
            if table.connection is not None:
                _defined(
                    self.connections,
                    "connection",
                    table.connection,
                    f"tables.{name}.connection",
                    f"table {name!r}",
                )
        for i, job in enumerate(self.jobs):
            for conn in job.connections_used():
                _defined(self.connections, "connection", conn, f"jobs.{i}.connection", f"job {job.name!r}")
            for field, store in _stores_named(job):
                _defined(self.storage, "storage", store, f"jobs.{i}.{field}", f"job {job.name!r}")
            named = _catalog_of(job)
            if named is not None:
                _defined(self.catalogs, "catalog", named, f"jobs.{i}.target.catalog", f"job {job.name!r}")
            # a table's security over its connection's, as a run merges them: a conflict, or a login
            # only half given (Kerberos principal without keytab), is a validation error, not a run's
            for where, part in _kafka_parts(job):
                try:
                    for_table(self.connections[part.connection], part.table.properties)
                except SpecError as exc:
                    raise SpecError(f"jobs.{i}.{where}.{exc.field}", exc.message, exc.fix) from None
        for name, catalog in self.catalogs.items():
            if catalog.storage is not None:
                _defined(
                    self.storage, "storage", catalog.storage, f"catalogs.{name}.storage", f"catalog {name!r}"
                )
        return self

    def job(self, name: str) -> MaterializeJob | BackfillJob | TopicToTopicJob | PublishJob:
        for job in self.jobs:
            if job.name == name:
                return job
        raise SpecError(
            "job", f"no job named {name!r}.", f"use one of: {', '.join(j.name for j in self.jobs)}."
        )

    def only(self, name: str) -> Pipeline:
        """This pipeline reduced to one job and the connections and storage it uses (what a driver
        receives)."""
        job = self.job(name)
        used = set(job.connections_used())
        catalog = _catalog_of(job)
        stores = {name for _, name in self._folders(job)}
        return Pipeline(
            name=self.name,
            connections={k: v for k, v in self.connections.items() if k in used},
            storage={k: v for k, v in self.storage.items() if k in stores},
            catalogs={k: v for k, v in self.catalogs.items() if k == catalog},
            jobs=[job],
        )

    def jar_groups(self, *names: str) -> tuple[str, ...]:
        """The jar groups runs of the jobs ``names`` (default: all) need on Spark's class path:
        ``spark``, ``s3`` when one has a target or a checkpoint on S3, ``iceberg`` when one has an
        Iceberg target."""
        jobs = [self.job(n) for n in names] if names else self.jobs
        groups = ["spark"]
        if any(is_s3(folder) for j in jobs for folder, _ in self._folders(j)):
            groups.append("s3")
        if any(_catalog_of(j) for j in jobs):
            groups.append("iceberg")
        return tuple(groups)

    def _folders(self, job: Any) -> Iterator[tuple[str, str | None]]:
        """``(folder, store name)`` of each folder a job reads or writes: its target's (an Iceberg
        table's location, on its catalog's store), a Delta source's, its checkpoint, its publish state."""
        found = _folder_of(getattr(job, "target", None), self.catalogs)
        if found is not None:
            yield found
        source = getattr(job, "source", None)
        if isinstance(source, DeltaFeedSource):
            yield source.path, source.storage
        for folder in (getattr(job, "checkpoint", None), getattr(job, "state", None)):
            if folder is not None:
                yield folder.path, folder.storage

    def _store(self, folder: str | None, name: str | None) -> S3Storage | None:
        """The store of a folder on S3 (one that names none: AWS S3 and its credential chain)."""
        if not is_s3(folder):
            return None
        return self.storage[name] if name is not None else S3Storage()

    def location_of(self, target: Any) -> str | None:
        """Where a warehouse target's files live: a Delta or Parquet target's path, an Iceberg
        table's default location in its catalog's warehouse; ``None`` for other targets."""
        found = _folder_of(target, self.catalogs)
        return found[0] if found is not None else None

    def storage_of(self, target: Any) -> S3Storage | None:
        """The store of a target (or a Delta source) on object storage (one that names none: AWS S3
        with the AWS credential chain); ``None`` for other targets."""
        found = _folder_of(target, self.catalogs)
        return self._store(*found) if found is not None else None

    def publish_state_of(self, job: PublishJob) -> tuple[str | None, S3Storage | None]:
        """A publish job's state folder (``state``, else beside its Delta source; ``None`` for a
        query's publish without one) and the store it is on."""
        if job.state is not None:
            folder, name = job.state.path, job.state.storage
        elif isinstance(job.source, DeltaFeedSource):
            folder, name = job.source.path, job.source.storage
        else:
            return None, None
        return folder, self._store(folder, name)

    def checkpoint_storage_of(self, job: Any) -> S3Storage | None:
        """The store of a topic-to-topic job's checkpoint on S3; ``None`` for other jobs."""
        folder = getattr(job, "checkpoint", None)
        return self._store(folder.path, folder.storage) if folder is not None else None

    def catalog_of(self, target: IcebergTarget) -> tuple[str, IcebergCatalog]:
        """An Iceberg target's catalog: its name as engines use it, and its settings."""
        catalog = self.catalogs[target.catalog]
        return catalog.name_in(target.catalog), catalog

    def with_connections(self, connections: Mapping[str, KafkaConnection]) -> Pipeline:
        """This pipeline with the named connections replaced (e.g. by ones built from an Airflow
        connection or a Dagster resource). Every name must be one the pipeline defines."""
        unknown = sorted(set(connections) - set(self.connections))
        if unknown:
            raise SpecError(
                "connections",
                f"no connection named {', '.join(map(repr, unknown))} in the pipeline.",
                f"use one of: {', '.join(sorted(self.connections))}.",
            )
        return self.model_copy(update={"connections": {**self.connections, **connections}})

    # -- files -------------------------------------------------------------------------------------
    @classmethod
    def from_yaml(cls, text: str, env: Mapping[str, str] | None = None) -> Pipeline:
        """Parse a pipeline file; then ``${VAR}`` and ``${VAR:-default}`` inside its string values
        are replaced from ``env`` (default: the process environment). Substitution happens after
        parsing, so a value can neither change the file's structure nor appear in a syntax error.
        Secrets still have to be references: a substituted literal password is refused."""
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or "cannot parse"
            raise SpecError("pipeline", f"is not valid YAML{where}: {problem}.") from None
        if not isinstance(data, dict):
            raise SpecError("pipeline", "must be a mapping with 'connections' and 'jobs'.")
        try:
            return cls.model_validate(_expand(data, os.environ if env is None else env))
        except SpecError as exc:
            error = _with_lines(exc, yaml.compose(text))
        raise error

    @classmethod
    def load(cls, path: str | Path, env: Mapping[str, str] | None = None) -> Pipeline:
        p = Path(path)
        try:
            text = p.read_text()
        except OSError as exc:
            raise SpecError("pipeline", f"cannot read {str(p)!r}: {exc.strerror}.") from None
        if p.suffix == ".json":
            try:
                data = json.loads(text)
            except ValueError as exc:
                raise SpecError("pipeline", f"is not valid JSON: {exc}.") from None
            pipeline = cls.model_validate(_expand(data, os.environ if env is None else env))
        else:
            pipeline = cls.from_yaml(text, env)
        return pipeline if pipeline.name is not None else pipeline.model_copy(update={"name": p.stem})

    def to_json_dict(self) -> dict[str, Any]:
        """The JSON form (secrets stay references; an in-process secret is refused)."""
        data: dict[str, Any] = json.loads(self.model_dump_json())
        return data

    def to_yaml(self) -> str:
        import yaml

        return str(yaml.safe_dump(self.to_json_dict(), sort_keys=False))
