"""Schedules and freshness checks from the jobs' ``schedule:`` in the pipeline file, so a job runs and
is judged on the clock its file states (the Airflow DAG factory reads the same field).

A job scheduled ``0 * * * *`` gets a schedule materializing its outputs every hour; its outputs carry
a freshness policy (``upsert_kafka_assets``, through the translator), and
:func:`upsert_kafka_freshness_checks` gives the same rule as asset checks: at every tick of the
schedule (the deadline) the output must have been updated within the schedule's longest gap before
it, i.e. by the run of the previous tick. A run that failed or never started leaves the asset stale
until the next run succeeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import dagster as dg
from upsert_kafka_ops.dagster._plan import definition_name, load_pipeline, plan
from upsert_kafka_ops.dagster.translator import DagsterUpsertKafkaTranslator
from upsert_kafka_ops.pipeline import Pipeline
from upsert_kafka_ops.spec.cadence import cron_expression, longest_gap


def _scheduled(
    pipeline_file: str | Path | None,
    pipeline: Pipeline | None,
    jobs: Sequence[str] | None,
    translator: DagsterUpsertKafkaTranslator | None,
) -> list[tuple[str, str, list[dg.AssetKey]]]:
    """(job, cron, output keys) of each selected job that has a schedule."""
    pipe = load_pipeline(pipeline_file, pipeline)
    out = []
    for p in plan(pipe, jobs, translator or DagsterUpsertKafkaTranslator()):
        schedule = pipe.job(p.job).schedule
        if schedule is not None:
            out.append((p.job, cron_expression(schedule), p.output_keys))
    return out


def upsert_kafka_schedules(
    *,
    pipeline_file: str | Path | None = None,
    pipeline: Pipeline | None = None,
    jobs: Sequence[str] | None = None,
    translator: DagsterUpsertKafkaTranslator | None = None,
    default_status: dg.DefaultScheduleStatus = dg.DefaultScheduleStatus.STOPPED,
) -> list[dg.ScheduleDefinition]:
    """One schedule per job with a ``schedule:`` (UTC), materializing the job's outputs; named
    ``upsert_kafka_schedule_<job>``. Jobs without one get none (run them from a sensor or by hand)."""
    return [
        dg.ScheduleDefinition(
            name=definition_name("upsert_kafka_schedule", job),
            cron_schedule=cron,
            target=keys,
            execution_timezone="UTC",
            default_status=default_status,
            tags={"upsert_kafka/job": job},
            description=f"upsert-kafka job {job!r} on its pipeline schedule {cron!r} (UTC).",
        )
        for job, cron, keys in _scheduled(pipeline_file, pipeline, jobs, translator)
    ]


def upsert_kafka_freshness_checks(
    *,
    pipeline_file: str | Path | None = None,
    pipeline: Pipeline | None = None,
    jobs: Sequence[str] | None = None,
    translator: DagsterUpsertKafkaTranslator | None = None,
    blocking: bool = False,
) -> list[dg.AssetChecksDefinition]:
    """A last-update freshness check on each output of a job with a ``schedule:``: the deadline is each
    tick of the schedule, the lower bound the schedule's longest gap before it (a weekday job's
    weekend, a monthly job's 31 days). Severity WARN unless ``blocking``. Evaluate them with
    ``dg.build_sensor_for_freshness_checks``."""
    severity = dg.AssetCheckSeverity.ERROR if blocking else dg.AssetCheckSeverity.WARN
    out: list[dg.AssetChecksDefinition] = []
    for _, cron, keys in _scheduled(pipeline_file, pipeline, jobs, translator):
        out += dg.build_last_update_freshness_checks(
            assets=keys,
            deadline_cron=cron,
            lower_bound_delta=longest_gap(cron),
            timezone="UTC",
            severity=severity,
        )
    return out
