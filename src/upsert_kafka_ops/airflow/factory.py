"""Build a DAG from a pipeline file: one task per job, ordered by what each job reads and writes;
each maintain job (compaction and cleanup of a table, on a schedule of its own) gets a DAG of its own.
A continuous job (``trigger: {continuous: true}``) runs outside Airflow, as a long-running process:
its task waits until the job is caught up (a lag sensor on it), so the tasks after it read a fresh
table, and a job that falls behind fails the DAG run. A continuous publish reads a Delta table, not a
topic, so it has no lag to wait on and no task.

Example (a file in the DAGs folder)::

    from upsert_kafka_ops.airflow.factory import pipeline_dags

    globals().update(pipeline_dags("/opt/airflow/pipelines", kafka_config_id="kafka_default"))

Parsing reads the YAML files only (no broker, no Spark), so it stays fast.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG

from upsert_kafka_ops.airflow.operators import UpsertKafkaJobOperator
from upsert_kafka_ops.airflow.sensors import ConsumerLagSensor
from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.jobs.graph import upstream_jobs
from upsert_kafka_ops.pipeline import MaintainJob, Pipeline
from upsert_kafka_ops.spec.cadence import cron_expression


def dag_id_for(path: str | Path) -> str:
    return "upsert_kafka_" + re.sub(r"[^A-Za-z0-9_]", "_", Path(path).stem)


def pipeline_dag(
    pipeline_file: str | Path,
    *,
    dag_id: str | None = None,
    schedule: Any = None,
    start_date: datetime = datetime(2026, 1, 1),
    kafka_config_id: str | None = None,
    kafka_config_ids: dict[str, str] | None = None,
    operator_kwargs: dict[str, Any] | None = None,
    continuous_time_lag_s: float = 60.0,
    continuous_timeout_s: float = 600.0,
    **dag_kwargs: Any,
) -> DAG:
    """A DAG running every job of ``pipeline_file`` once per run, upstream jobs first; maintain jobs
    are left out (:func:`maintenance_dag`). A continuous job's task is a :class:`ConsumerLagSensor`
    instead: it passes once the job's time lag is at most ``continuous_time_lag_s`` and fails after
    ``continuous_timeout_s`` (the job runs as a Deployment or another long-running process); a
    continuous publish has no task.

    ``schedule`` defaults to the jobs' ``schedule:`` in the file (they run in one DAG, so the jobs that
    have one must agree); with none, the DAG runs when triggered. Runs are serialized
    (``max_active_runs=1``, as the jobs' own locks would anyway); jobs with no order between them may
    run in parallel.
    """
    path = Path(pipeline_file)
    pipeline = Pipeline.load(path)
    if schedule is None:
        schedule = _file_schedule(pipeline, path)
    order = upstream_jobs(pipeline)
    defaults = {"retries": 1, "retry_delay": timedelta(minutes=1)}
    dag = DAG(
        dag_id=dag_id or dag_id_for(path),
        schedule=schedule,
        start_date=start_date,
        catchup=False,
        max_active_runs=1,
        default_args={**defaults, **dag_kwargs.pop("default_args", {})},
        tags=["upsert-kafka-ops", *dag_kwargs.pop("tags", [])],
        doc_md=dag_kwargs.pop("doc_md", f"Jobs of `{path.name}`, upstream jobs first."),
        **dag_kwargs,
    )
    tasks: dict[str, ConsumerLagSensor | UpsertKafkaJobOperator] = {}
    with dag:
        for job in pipeline.jobs:
            if isinstance(job, MaintainJob) or (job.continuous and not job.reads_topics):
                continue  # a continuous publish has no consumer group to wait on: it runs outside Airflow
            task: dict[str, Any] = {
                "task_id": re.sub(r"[^A-Za-z0-9_.-]", "_", job.name),
                "pipeline_file": str(path),
                "job_name": job.name,
                "kafka_config_id": kafka_config_id,
                "kafka_config_ids": kafka_config_ids,
            }
            if job.continuous:  # it runs outside Airflow: its task waits until it is caught up
                tasks[job.name] = ConsumerLagSensor(
                    **task,
                    max_time_lag_s=continuous_time_lag_s,
                    timeout=continuous_timeout_s,
                    poke_interval=min(30.0, continuous_time_lag_s),
                    doc_md=job.description
                    or f"The continuous job {job.name} is caught up (it runs outside Airflow).",
                )
            else:
                tasks[job.name] = UpsertKafkaJobOperator(
                    **task, doc_md=job.description or None, **(operator_kwargs or {})
                )
    for name, ups in order.items():
        for up in ups:
            if name in tasks and up in tasks:
                tasks[up] >> tasks[name]
    return dag


def maintenance_dag(
    pipeline_file: str | Path,
    job: str,
    *,
    start_date: datetime = datetime(2026, 1, 1),
    kafka_config_id: str | None = None,
    kafka_config_ids: dict[str, str] | None = None,
    operator_kwargs: dict[str, Any] | None = None,
    **dag_kwargs: Any,
) -> DAG:
    """A DAG of one task running the maintain job ``job`` of ``pipeline_file`` on its own
    ``schedule:`` (none: when triggered), ``upsert_kafka_<file>__<job>``. The run holds the target's
    lock, so it waits for (and holds off) a run of the pipeline DAG writing the same table."""
    path = Path(pipeline_file)
    spec = Pipeline.load(path).job(job)
    if not isinstance(spec, MaintainJob):
        raise SpecError(
            "job", f"{job!r} is a {spec.kind} job, not a maintain job.", "use pipeline_dag for it."
        )
    task_id = re.sub(r"[^A-Za-z0-9_.-]", "_", job)
    dag = DAG(
        dag_id=dag_kwargs.pop("dag_id", None) or f"{dag_id_for(path)}__{re.sub(r'[^A-Za-z0-9_]', '_', job)}",
        schedule=dag_kwargs.pop("schedule", None)
        or (cron_expression(spec.schedule) if spec.schedule else None),
        start_date=start_date,
        catchup=False,
        max_active_runs=1,
        default_args={
            "retries": 1,
            "retry_delay": timedelta(minutes=5),
            **dag_kwargs.pop("default_args", {}),
        },
        tags=["upsert-kafka-ops", "maintenance", *dag_kwargs.pop("tags", [])],
        doc_md=dag_kwargs.pop("doc_md", spec.description or f"Maintain `{spec.target.uri}` ({path.name})."),
        **dag_kwargs,
    )
    with dag:
        UpsertKafkaJobOperator(
            task_id=task_id,
            pipeline_file=str(path),
            job_name=job,
            kafka_config_id=kafka_config_id,
            kafka_config_ids=kafka_config_ids,
            **(operator_kwargs or {}),
        )
    return dag


def _file_schedule(pipeline: Pipeline, path: Path) -> str | None:
    crons = {
        job.name: cron_expression(job.schedule)
        for job in pipeline.jobs
        if job.schedule is not None and not isinstance(job, MaintainJob)
    }
    if len(set(crons.values())) > 1:
        listed = ", ".join(f"{name}: {cron!r}" for name, cron in crons.items())
        raise SpecError(
            f"{path.name}: jobs.schedule",
            f"the jobs run in one DAG but have different schedules ({listed}).",
            "give them one schedule, pass schedule= to pipeline_dag, or split the file.",
        )
    return next(iter(crons.values()), None)


def pipeline_dags(folder: str | Path, pattern: str = "*.yaml", **kwargs: Any) -> dict[str, DAG]:
    """One DAG per pipeline file in ``folder`` (see :func:`pipeline_dag`), and one per maintain job
    (:func:`maintenance_dag`), by DAG id."""
    dags = []
    for path in sorted(Path(folder).glob(pattern)):
        dags.append(pipeline_dag(path, **kwargs))
        shared = {
            k: v
            for k, v in kwargs.items()
            if k in ("start_date", "kafka_config_id", "kafka_config_ids", "operator_kwargs")
        }
        for job in Pipeline.load(path).jobs:
            if isinstance(job, MaintainJob):
                dags.append(maintenance_dag(path, job.name, **shared))
    return {d.dag_id: d for d in dags}
