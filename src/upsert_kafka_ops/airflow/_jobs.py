"""Which job a task runs, and its connections from Airflow: shared by operators, sensors, triggers.

A task names its job either as a job spec (a model or a dict) or as ``pipeline_file`` +
``job_name``. Kafka connections come from Airflow connections of type ``kafka``:
``kafka_config_ids`` maps a pipeline connection name to a connection id; ``kafka_config_id`` is
used for every other connection the job uses. A pipeline file's own connections are used for the
names neither covers; a job given as a spec has no file, so its connections default to
``kafka_default``.

:class:`JobRef` is plain JSON (no secret: only references and connection ids), so a trigger can
carry it to the triggerer and resolve it there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import BaseModel

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.pipeline import (
    AnyJob,
    Pipeline,
)
from upsert_kafka_ops.spec.connection import KafkaConnection

#: a task's job: a job model, or its dict form (as a pipeline file writes it)
JobArg = AnyJob | Mapping[str, Any] | None

DEFAULT_KAFKA_CONN = "kafka_default"


@dataclass(frozen=True)
class JobRef:
    job: Mapping[str, Any] | None = None
    pipeline_file: str | None = None
    job_name: str | None = None
    kafka_config_id: str | None = None
    kafka_config_ids: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        job: JobArg = None,
        pipeline_file: str | None = None,
        job_name: str | None = None,
        kafka_config_id: str | None = None,
        kafka_config_ids: dict[str, str] | None = None,
    ) -> JobRef:
        if (job is None) == (pipeline_file is None):
            raise SpecError(
                "job",
                "give exactly one of job (a spec) or pipeline_file.",
                "e.g. pipeline_file=..., job_name=...",
            )
        if isinstance(job, BaseModel):
            job = job.model_dump(mode="json")
        return cls(job, pipeline_file, job_name, kafka_config_id, dict(kafka_config_ids or {}))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def resolve(self, airflow_connections: bool = True) -> tuple[Pipeline, str]:
        """The pipeline (connections from Airflow where asked) and the job's name."""
        from upsert_kafka_ops.airflow.hooks import UpsertKafkaHook

        if self.job is not None:
            spec = _validate_job(self.job)
            name = spec.name
            if self.job_name is not None and self.job_name != name:
                raise SpecError("job_name", f"{self.job_name!r} is not the given job's name {name!r}.")
            used = spec.connections_used()
            ids = {n: self.kafka_config_ids.get(n, self.kafka_config_id or DEFAULT_KAFKA_CONN) for n in used}
            conns = {n: UpsertKafkaHook(ids[n]).get_kafka_connection() for n in used}
            return Pipeline(connections=conns, jobs=[spec]), name
        assert self.pipeline_file is not None
        pipeline = Pipeline.load(self.pipeline_file)
        if self.job_name is None:
            if len(pipeline.jobs) != 1:
                raise SpecError("job_name", f"{self.pipeline_file} has several jobs.", "name the one to run.")
            name = pipeline.jobs[0].name
        else:
            name = pipeline.job(self.job_name).name
        if not airflow_connections:
            return pipeline, name
        used = pipeline.job(name).connections_used()
        replace: dict[str, KafkaConnection] = {}
        for n in used:
            conn_id = self.kafka_config_ids.get(n, self.kafka_config_id)
            if conn_id is not None:
                replace[n] = UpsertKafkaHook(conn_id).get_kafka_connection()
        unknown = sorted(set(self.kafka_config_ids) - set(pipeline.connections))
        if unknown:
            raise SpecError(
                "kafka_config_ids",
                f"{', '.join(map(repr, unknown))} is not a connection of {self.pipeline_file}.",
                f"use one of: {', '.join(sorted(pipeline.connections))}.",
            )
        return pipeline.with_connections(replace), name


class JobFields:
    """The job a task names: the arguments the operators and the sensors share (a mixin)."""

    job: Mapping[str, Any] | None
    pipeline_file: str | None
    job_name: str | None
    kafka_config_id: str | None
    kafka_config_ids: dict[str, str]

    def _set_job(
        self,
        job: JobArg,
        pipeline_file: Any,
        job_name: str | None,
        kafka_config_id: str | None,
        kafka_config_ids: dict[str, str] | None,
    ) -> None:
        # parse time stays cheap: nothing is read or validated against a broker here
        self.job = job.model_dump(mode="json") if isinstance(job, BaseModel) else job
        self.pipeline_file = str(pipeline_file) if pipeline_file is not None else None
        self.job_name = job_name
        self.kafka_config_id = kafka_config_id
        self.kafka_config_ids = dict(kafka_config_ids or {})

    def job_ref(self) -> JobRef:
        return JobRef.of(
            self.job, self.pipeline_file, self.job_name, self.kafka_config_id, self.kafka_config_ids
        )


def _connection_names(data: Any) -> set[str]:
    if isinstance(data, dict):
        found = {data["connection"]} if isinstance(data.get("connection"), str) else set()
        return found.union(*(_connection_names(v) for v in data.values()))
    if isinstance(data, list):
        return set().union(*(_connection_names(v) for v in data))
    return set()


def _validate_job(data: Mapping[str, Any]) -> AnyJob:
    """A job given as a dict, validated as the only job of a pipeline: errors name ``job.<path>``."""
    placeholders = {n: {"bootstrap_servers": "unresolved:9092"} for n in _connection_names(data)}
    try:
        return Pipeline.model_validate({"connections": placeholders, "jobs": [data]}).jobs[0]
    except SpecError as exc:
        at = "jobs.0"
        error = SpecError.of(
            [
                SpecError("job" + p.field[len(at) :] if p.field.startswith(at) else p.field, p.message, p.fix)
                for p in exc.problems
            ]
        )
    raise error
