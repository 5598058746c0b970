"""Tables in a pipeline file: how a source or sink writes its table, and the pipeline's ``tables``
section, where a table is defined once, as in a Flink catalog, and jobs name it.

A table is written the way a Flink user already has it: a ``ddl`` string (a ``CREATE TABLE``
statement), Flink ``options`` with ``columns`` and ``primary_key``, or the table spec's own fields.
In ``tables`` it is ``ddl`` or ``options`` (their ``connector`` says whether it is an upsert-kafka or
a plain kafka table) with the connection its topic is on; a source or sink then says ``table: users``
and takes the table and, unless it names one, the connection. A topic-to-topic job may instead be a
Flink ``INSERT INTO sink SELECT ...`` statement (``sql``) over those tables. The names are resolved when the file
is read: every job holds its whole table afterwards, so whatever runs a job (a driver on a cluster,
an Airflow task, a Dagster asset) sees what an inline definition gives.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import Field, PrivateAttr, model_validator

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.pipeline.flink_dialect import SqlError, read_insert
from upsert_kafka_ops.spec.base import SpecModel, nested
from upsert_kafka_ops.spec.ddl import parse_create_table
from upsert_kafka_ops.spec.table import Column, KafkaTable, UpsertKafkaTable

#: The ``kind`` a part takes for each connector, where the part has none: (source, sink).
_KINDS = {"upsert-kafka": ("upsert-kafka", "upsert-kafka"), "kafka": ("kafka", "kafka")}


def table_input(data: Any, kind: type[UpsertKafkaTable] | type[KafkaTable]) -> Any:
    """``{ddl: ...}`` or ``{options: ..., columns: ..., primary_key: ...}`` into the table spec."""
    if not isinstance(data, dict):
        return data
    if "ddl" in data:
        extra = sorted(set(data) - {"ddl"})
        if extra:
            raise SpecError(extra[0], "cannot be combined with 'ddl'.", "put it into the DDL or drop 'ddl'.")
        return kind.from_flink_ddl(str(data["ddl"]))
    if "options" in data:
        rest = {k: v for k, v in data.items() if k != "options"}
        allowed = {"columns", "name"} | ({"primary_key"} if kind is UpsertKafkaTable else set())
        extra = sorted(set(rest) - allowed)
        if extra:
            raise SpecError(extra[0], "is not allowed next to 'options'.", f"use {sorted(allowed)}.")
        options = {str(k): str(v) for k, v in dict(data["options"]).items()}
        name = {"name": str(rest["name"])} if "name" in rest else {}
        if kind is UpsertKafkaTable:
            return UpsertKafkaTable.from_options(
                options, rest.get("columns", []), list(rest.get("primary_key", [])), **name
            )
        return KafkaTable.from_options(options, rest.get("columns", []), **name)
    return data


class PipelineTable(SpecModel):
    """A table defined once in the pipeline's ``tables``: Flink ``ddl`` or ``options``, and its connection."""

    connection: str | None = Field(
        default=None,
        description="The connection its topic is on (a name in 'connections'); a source or sink that names "
        "the table may name another.",
    )
    ddl: str | None = Field(
        default=None, description="A Flink CREATE TABLE statement ('upsert-kafka' or 'kafka' connector)."
    )
    options: dict[str, str] | None = Field(
        default=None, description="Flink's WITH options, instead of 'ddl' (with 'columns', 'primary_key')."
    )
    columns: list[Column] = Field(default_factory=list, description="The columns, with 'options'.")
    primary_key: list[str] = Field(
        default_factory=list, description="The primary key, with 'options' of an upsert-kafka table."
    )
    _table: UpsertKafkaTable | KafkaTable = PrivateAttr()

    @model_validator(mode="after")
    def _check(self) -> PipelineTable:
        if (self.ddl is None) == (self.options is None):
            raise SpecError(
                "ddl", "give the table as 'ddl' or as 'options' (with 'columns'), one of the two.", None
            )
        if self.ddl is not None and (self.columns or self.primary_key):
            field = "columns" if self.columns else "primary_key"
            raise SpecError(field, "cannot be combined with 'ddl'.", "put it into the DDL or drop 'ddl'.")
        # read once: a definition that cannot be read fails here, under tables.<name>
        self._table = self._read()
        return self

    @property
    def connector(self) -> str:
        """``upsert-kafka`` or ``kafka``."""
        return "upsert-kafka" if isinstance(self._table, UpsertKafkaTable) else "kafka"

    def table(self) -> UpsertKafkaTable | KafkaTable:
        """The table spec its definition gives."""
        return self._table

    def _read(self) -> UpsertKafkaTable | KafkaTable:
        if self.ddl is not None:
            found = parse_create_table(self.ddl).options.get("connector")
        else:
            found = (self.options or {}).get("connector")
        if found not in _KINDS:
            raise SpecError(
                "connector",
                "is missing." if found is None else f"is {found!r}, which is not a Kafka connector.",
                "write 'connector' = 'upsert-kafka' (a changelog by primary key) or 'kafka' (append-only).",
            )
        kind = UpsertKafkaTable if found == "upsert-kafka" else KafkaTable
        if self.ddl is not None:
            return table_input({"ddl": self.ddl}, kind)  # type: ignore[no-any-return]
        data: dict[str, Any] = {"options": self.options, "columns": [c.model_dump() for c in self.columns]}
        if kind is UpsertKafkaTable:
            data["primary_key"] = self.primary_key
        elif self.primary_key:
            raise SpecError("primary_key", "a plain 'kafka' table has no primary key.", "drop it.")
        return table_input(data, kind)  # type: ignore[no-any-return]


def _parts(job: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any], int]]:
    """``(path, part, role)`` for each source or sink of a job as written (role 0: a source it reads,
    1: a topic it writes); a warehouse target's ``table`` (PostgreSQL, Iceberg) is a table name of
    its own and is left alone."""
    if isinstance(job.get("source"), Mapping):
        yield "source", job["source"], 0
    if isinstance(job.get("sources"), Mapping):
        for alias, part in job["sources"].items():
            if isinstance(part, Mapping):
                yield f"sources.{alias}", part, 0
    if isinstance(job.get("sink"), Mapping):
        yield "sink", job["sink"], 1
    target = job.get("target")
    if isinstance(target, Mapping) and target.get("kind") in ("upsert-kafka", "topic"):
        yield "target", target, 1


def resolve_table_names(data: Any) -> Any:
    """A pipeline as read (a dict) with each ``table: <name>`` of a source or sink replaced by that
    table from ``tables``, its connection taken from there unless the part names one, and its ``kind``
    from the table's connector unless the part gives one. Unknown names and a kind that contradicts
    the table are :class:`SpecError` at the part's ``table``."""
    if not isinstance(data, Mapping) or not isinstance(data.get("jobs"), list):
        return data
    raw = data.get("tables") or {}
    if not isinstance(raw, Mapping):
        return data  # the field's own validation names the problem
    tables: dict[str, PipelineTable] = {}
    for name, entry in raw.items():
        try:
            tables[str(name)] = (
                entry if isinstance(entry, PipelineTable) else PipelineTable.model_validate(entry)
            )
        except SpecError as exc:
            raise nested(exc, f"tables.{name}") from None
    jobs = []
    for i, job in enumerate(data["jobs"]):
        if not isinstance(job, Mapping):
            jobs.append(job)
            continue
        job = dict(job)
        if job.get("kind") == "topic-to-topic" and isinstance(job.get("sql"), str):
            job = _from_sql(job, tables, f"jobs.{i}.sql")
        for path, part, role in list(_parts(job)):
            if isinstance(part.get("table"), str) and part.get("kind") in (None, *_KINDS, "topic"):
                _set(job, path, _resolved(part, tables, f"jobs.{i}.{path}", role))
        jobs.append(job)
    return {**data, "tables": tables, "jobs": jobs}  # the models, not read again


def _from_sql(job: dict[str, Any], tables: Mapping[str, PipelineTable], where: str) -> dict[str, Any]:
    """A topic-to-topic job given as a Flink ``INSERT INTO sink SELECT ...`` (``sql``): its ``sink``
    and ``sources`` the tables the statement names, its ``query`` the SELECT in Spark SQL. A job that
    also has them (a pipeline written back, e.g. to a driver) must have that query."""
    try:
        insert = read_insert(job["sql"])
    except SqlError as exc:
        raise SpecError(where, exc.message, exc.fix) from None
    given = sorted({"query", "sink", "sources"} & set(job))
    if given:  # a job written back (e.g. to a driver, whose pipeline has no 'tables') keeps its parts
        if given != ["query", "sink", "sources"] or job["query"] != insert.query:
            raise SpecError(
                where,
                f"is given with {', '.join(repr(g) for g in given)}, which the statement already says.",
                "give the INSERT statement alone, or 'query', 'sources' and 'sink' without 'sql'.",
            )
        return job
    unknown = [t for t in (insert.sink, *insert.reads) if t not in tables]
    if unknown:
        raise SpecError(
            where,
            f"names table {unknown[0]!r}, which the pipeline does not define.",
            f"add it under 'tables' (defined: {', '.join(sorted(tables)) or 'none'}).",
        )
    sources = {table: {"table": table} for table in insert.reads}
    return {**job, "query": insert.query, "sink": {"table": insert.sink}, "sources": sources}


def _resolved(
    part: Mapping[str, Any], tables: Mapping[str, PipelineTable], where: str, role: int
) -> dict[str, Any]:
    name = part["table"]
    if name not in tables:
        raise SpecError(
            f"{where}.table",
            f"names table {name!r}, which the pipeline does not define.",
            f"add it under 'tables' (defined: {', '.join(sorted(tables)) or 'none'}), or write the table "
            "here as 'ddl' or 'options'.",
        )
    entry = tables[name]
    kind = _KINDS[entry.connector][role]
    given = part.get("kind")
    if given == "topic" and kind == "upsert-kafka":  # a topic sink's old kind: the model says so
        kind = given
    if given is not None and given != kind:
        raise SpecError(
            f"{where}.kind",
            f"is {given!r}, but table {name!r} is a {entry.connector!r} table, which this part takes as "
            f"kind {kind!r}.",
            f"write kind: {kind}, or name another table.",
        )
    out = {**part, "kind": kind, "table": entry.table()}
    if "connection" not in part and entry.connection is not None:
        out["connection"] = entry.connection
    return out


def _set(job: dict[str, Any], path: str, value: dict[str, Any]) -> None:
    if path.startswith("sources."):
        job["sources"] = {**job["sources"], path.split(".", 1)[1]: value}
    else:
        job[path] = value
