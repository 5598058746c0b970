"""A pipeline's maintain jobs as Dagster jobs: one op each, on the job's ``schedule:``.

A maintain job rewrites a table's files, not its data, so it makes no asset (the table stays the
asset of the job that writes it). Its op runs in the writer's concurrency pool, and the run holds
the target's lock, so it never runs beside a write to the same table.
"""

from collections.abc import Mapping, Sequence
from pathlib import Path

import dagster as dg
from upsert_kafka_ops.dagster._plan import (
    check_kafka_resources,
    definition_name,
    load_pipeline,
    resolve_connections,
)
from upsert_kafka_ops.dagster.assets import UpsertKafkaRunConfig, op_name, pool_name, run, runtime_resource
from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.pipeline import MaintainJob, Pipeline
from upsert_kafka_ops.spec.cadence import cron_expression


def _maintain_jobs(pipe: Pipeline, jobs: Sequence[str] | None) -> list[MaintainJob]:
    found = [j for j in pipe.jobs if isinstance(j, MaintainJob)]
    if jobs is None:
        return found
    names = {j.name for j in found}
    other = [j for j in jobs if j not in names]
    if other:
        raise SpecError(
            "jobs",
            f"{', '.join(map(repr, other))} is not a maintain job of the pipeline.",
            f"use some of: {', '.join(sorted(names)) or 'none'}.",
        )
    return [j for j in found if j.name in jobs]


def upsert_kafka_maintenance_jobs(
    *,
    pipeline_file: str | Path | None = None,
    pipeline: Pipeline | None = None,
    jobs: Sequence[str] | None = None,
    kafka_resources: Mapping[str, str] | None = None,
    spark_runtime: str | None = None,
) -> list[dg.JobDefinition]:
    """A Dagster job of one op for each maintain job of the pipeline (or of ``jobs``), named
    ``upsert_kafka_<job>``, whose op runs in the concurrency pool of the job that writes the table
    (``upsert_kafka/<writer>``). Schedules come from :func:`upsert_kafka_maintenance_schedules`."""
    pipe = load_pipeline(pipeline_file, pipeline)
    kres = dict(kafka_resources or {})
    check_kafka_resources(pipe, kres)
    return [_job(pipe, spec, kres, spark_runtime) for spec in _maintain_jobs(pipe, jobs)]


def upsert_kafka_maintenance_schedules(
    *,
    pipeline_file: str | Path | None = None,
    pipeline: Pipeline | None = None,
    jobs: Sequence[str] | None = None,
    default_status: dg.DefaultScheduleStatus = dg.DefaultScheduleStatus.STOPPED,
) -> list[dg.ScheduleDefinition]:
    """One schedule (UTC) per maintain job with a ``schedule:``, named ``upsert_kafka_schedule_<job>``,
    running the job of :func:`upsert_kafka_maintenance_jobs` (give both to the same Definitions)."""
    pipe = load_pipeline(pipeline_file, pipeline)
    return [
        dg.ScheduleDefinition(
            name=definition_name("upsert_kafka_schedule", spec.name),
            cron_schedule=cron_expression(spec.schedule),
            job_name=op_name(spec.name),
            execution_timezone="UTC",
            default_status=default_status,
            tags={"upsert_kafka/job": spec.name},
            description=f"upsert-kafka maintain job {spec.name!r} on its schedule {spec.schedule!r} (UTC).",
        )
        for spec in _maintain_jobs(pipe, jobs)
        if spec.schedule is not None
    ]


def _job(
    pipe: Pipeline, spec: MaintainJob, kres: Mapping[str, str], spark_runtime: str | None
) -> dg.JobDefinition:
    name = spec.name
    required = set(kres.values()) | ({spark_runtime} if spark_runtime else set())

    @dg.op(
        name=op_name(name),
        pool=pool_name(spec.job or name),
        required_resource_keys=required,
        tags={"upsert_kafka/job": name},
        description=spec.description or f"Maintain {spec.target.uri}.",
    )
    def _op(context: dg.OpExecutionContext) -> dg.Output[None]:
        live = resolve_connections(pipe, kres, context.resources)
        res = runtime_resource(context, spark_runtime)
        result, _ = run(context, live, name, UpsertKafkaRunConfig(), res.runtime_spec() if res else None)
        metadata = {f"upsert_kafka/{k}": v for k, v in result["write"].items()}
        return dg.Output(None, metadata={**metadata, "upsert_kafka/duration_s": result["duration_s"]})

    @dg.job(name=op_name(name), tags={"upsert_kafka/job": name}, description=_op.description)
    def _maintenance() -> None:
        _op()

    return _maintenance
