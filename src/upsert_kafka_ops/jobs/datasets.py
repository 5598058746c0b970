"""What each job of a pipeline reads and writes, as OpenLineage dataset names.

Names follow OpenLineage's conventions: a topic is namespace ``kafka://host:port`` (the first
bootstrap server), name = the topic; a table is named by its location URI (``file``, ``s3://bucket``,
...) or ``postgres://host:port``. The job graph (``jobs.graph``), lineage events
(``jobs.lineage``), Airflow's assets and Dagster's asset keys all use these names.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.jobs.targets import is_warehouse, target_for
from upsert_kafka_ops.pipeline import (
    AnyTarget,
    BackfillJob,
    DeltaFeedSource,
    MaintainJob,
    MaterializeJob,
    Pipeline,
    PublishJob,
    Sink,
)
from upsert_kafka_ops.spec.connection import KafkaConnection
from upsert_kafka_ops.spec.table import KafkaTable, UpsertKafkaTable


@dataclass(frozen=True)
class Dataset:
    """An OpenLineage dataset identifier."""

    namespace: str
    name: str

    def to_dict(self) -> dict[str, str]:
        return {"namespace": self.namespace, "name": self.name}

    @property
    def uri(self) -> str:
        """The dataset as one URI: ``kafka://host:port/topic``, ``file:///path``, ``s3://bucket/key``,
        ``postgres://host:port/database.schema.table`` (Airflow's asset URIs, Dagster's ``dagster/uri``)."""
        base = "file://" if self.namespace == "file" else self.namespace
        return base + self.name if self.name.startswith("/") else f"{base}/{self.name}"


def kafka_dataset(bootstrap_servers: str | KafkaConnection, topic: str) -> Dataset:
    """``kafka://host:port`` (the first bootstrap server) and the topic."""
    servers = (
        bootstrap_servers.bootstrap_servers
        if isinstance(bootstrap_servers, KafkaConnection)
        else bootstrap_servers
    )
    first = servers.split(",")[0].strip()
    for prefix in ("PLAINTEXT://", "SSL://", "SASL_PLAINTEXT://", "SASL_SSL://"):
        if first.upper().startswith(prefix):
            first = first[len(prefix) :]
    host, sep, port = first.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise SpecError("bootstrap_servers", f"{first!r} is not host:port.", "write e.g. 'broker:9092'.")
    if not topic:
        raise SpecError("topic", "must not be empty.")
    return Dataset(f"kafka://{host.lower()}:{port}", topic)


def postgres_dataset(host: str, port: int, database: str, schema: str, table: str) -> Dataset:
    """``postgres://host:port`` and ``database.schema.table``."""
    return Dataset(f"postgres://{host.lower()}:{port}", f"{database}.{schema}.{table}")


def table_dataset(uri: str) -> Dataset:
    """A table by its location URI: a local path or ``file:`` URI (namespace ``file``), ``s3``/``s3a``
    (``s3://bucket``), ``gs``, ``hdfs``, ``abfss`` (scheme and authority), name = the path; and
    ``postgres(ql)://host:port/database.schema.table``."""
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme in ("", "file"):
        path = parts.path if scheme else uri
        if not path.startswith("/"):
            raise SpecError("uri", f"{uri!r} is not an absolute path.", "give an absolute path or a URI.")
        return Dataset("file", str(PurePosixPath(path)))
    if scheme in ("postgres", "postgresql"):
        name = parts.path.lstrip("/")
        if name.count(".") != 2:
            raise SpecError("uri", f"{uri!r} does not name database.schema.table.")
        return Dataset(f"postgres://{(parts.hostname or '').lower()}:{parts.port or 5432}", name)
    if scheme in ("s3", "s3a", "s3n", "gs", "hdfs", "abfss", "wasbs"):
        if not parts.netloc:
            raise SpecError("uri", f"{uri!r} has no bucket or host.")
        normalized = "s3" if scheme.startswith("s3") else scheme
        path = parts.path.rstrip("/")
        return Dataset(f"{normalized}://{parts.netloc}", path if scheme == "hdfs" else path.lstrip("/"))
    raise SpecError(
        "uri", f"unsupported table URI scheme {scheme!r}.", "use file, s3, gs, hdfs, abfss or postgres."
    )


def _table_topics(table: UpsertKafkaTable | KafkaTable) -> list[str]:
    return list(table.topic or [])


def job_datasets(pipeline: Pipeline, job: str) -> tuple[list[Dataset], list[Dataset]]:
    """A pipeline job's input and output datasets: Kafka topics as ``kafka://host:port`` + topic (every
    source of a topic-to-topic job), warehouse tables by their URI (PostgreSQL as
    ``postgres://host:port`` + ``database.schema.table``, Iceberg by its location), a published Delta
    table by its path. A source given by a topic pattern has no fixed name and is left out; so is a
    publish job's query."""
    spec = pipeline.job(job)
    conns = pipeline.connections

    def topics(connection: str, table: UpsertKafkaTable | KafkaTable) -> list[Dataset]:
        return [kafka_dataset(conns[connection], t) for t in _table_topics(table)]

    def target(t: AnyTarget | Sink) -> list[Dataset]:
        if is_warehouse(t):
            return [table_dataset(target_for(t, pipeline).lineage_uri)]
        return topics(t.connection, t.table)  # a topic

    if isinstance(spec, MaterializeJob | BackfillJob):
        return topics(spec.source.connection, spec.source.table), target(spec.target)
    if isinstance(spec, MaintainJob):  # it rewrites the table's files, not its data
        return target(spec.target), []
    if isinstance(spec, PublishJob):
        src = spec.source
        inputs = [table_dataset(_uri(src.path))] if isinstance(src, DeltaFeedSource) else []
        return inputs, target(spec.sink)
    inputs = [d for s in spec.sources.values() for d in topics(s.connection, s.table)]
    return list(dict.fromkeys(inputs)), target(spec.sink)


def _uri(path: str) -> str:
    return path if "://" in path else Path(path).absolute().as_uri()
