"""A pipeline file: its connections, stores, catalogs and tables, and the jobs that use them, with
every reference between them checked when the file is read."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.pipeline.folders import Folder
from upsert_kafka_ops.pipeline.jobs import (
    AnyJob,
    Job,
    PublishJob,
    maintained_targets,
)
from upsert_kafka_ops.pipeline.loading import expand, with_lines
from upsert_kafka_ops.pipeline.sources import DeltaFeedSource
from upsert_kafka_ops.pipeline.tables import PipelineTable, resolve_table_names
from upsert_kafka_ops.pipeline.targets import IcebergTarget, TargetSpec
from upsert_kafka_ops.spec.base import SpecModel
from upsert_kafka_ops.spec.connection import KafkaConnection, for_table
from upsert_kafka_ops.spec.iceberg import IcebergCatalog
from upsert_kafka_ops.spec.storage import S3Storage, is_s3


def _stores_named(job: AnyJob) -> Iterator[tuple[str, str]]:
    """``(field, store name)`` for each store a job's parts name (target, source, checkpoint, state)."""
    for field in ("target.storage", "source.storage", "checkpoint.storage", "state.storage"):
        owner, _, attr = field.rpartition(".")
        name = getattr(getattr(job, owner, None) if owner else job, attr, None)
        if name is not None:
            yield field, name


def _kafka_parts(job: AnyJob) -> Iterator[tuple[str, Any]]:
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


def _folder_of(part: object, catalogs: Mapping[str, IcebergCatalog]) -> tuple[str, str | None] | None:
    """A target's or a Delta source's folder and the name of its store (``None``: it has none)."""
    return part.folder(catalogs) if isinstance(part, TargetSpec | Folder) else None


def _catalog_of(job: AnyJob) -> str | None:
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
        return maintained_targets(resolve_table_names(data))

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

    def job(self, name: str) -> AnyJob:
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

    def _folders(self, job: AnyJob) -> Iterator[tuple[str, str | None]]:
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

    def location_of(self, target: object) -> str | None:
        """Where a warehouse target's files live: a Delta or Parquet target's path, an Iceberg
        table's default location in its catalog's warehouse; ``None`` for other targets."""
        found = _folder_of(target, self.catalogs)
        return found[0] if found is not None else None

    def storage_of(self, target: object) -> S3Storage | None:
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

    def checkpoint_storage_of(self, job: AnyJob) -> S3Storage | None:
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
            return cls.model_validate(expand(data, os.environ if env is None else env))
        except SpecError as exc:
            error = with_lines(exc, yaml.compose(text))
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
            pipeline = cls.model_validate(expand(data, os.environ if env is None else env))
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
