"""Run a job of a pipeline: pick its kind's function, time it, report a versioned result.

``run_job(pipeline, "name")`` runs in this process (it uses the active SparkSession, or builds one
and stops it afterwards): the step below the runtimes, which
:func:`upsert_kafka_ops.runtime.execute.execute_job` (the entry point on a runtime: local, Spark
Connect or spark-submit) calls for the runs in this process. ``run_spec(spec, spark)`` is what the
spark-submit driver calls with the JSON form of a one-job pipeline.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.jobs.backfill import run_backfill
from upsert_kafka_ops.jobs.core import JobResult, RunContext
from upsert_kafka_ops.jobs.grants import check_grants
from upsert_kafka_ops.jobs.maintain import run_maintain
from upsert_kafka_ops.jobs.publish import run_publish
from upsert_kafka_ops.jobs.to_warehouse import run_materialize
from upsert_kafka_ops.jobs.topic_to_topic import run_topic_to_topic
from upsert_kafka_ops.kafka.admin import shared_clients
from upsert_kafka_ops.metrics.run_export import export_run
from upsert_kafka_ops.pipeline import Pipeline

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("upsert_kafka_ops.jobs")

#: each job kind's run: ``(ctx, job) -> JobResult``
KINDS: dict[str, Callable[[RunContext, Any], JobResult]] = {
    "materialize": run_materialize,
    "backfill": run_backfill,
    "topic-to-topic": run_topic_to_topic,
    "publish": run_publish,
    "maintain": run_maintain,
}


def run_job(
    pipeline: Pipeline,
    job: str | None = None,
    *,
    mode: Literal["incremental", "full"] | None = None,
    spark: SparkSession | None = None,
    lock_timeout_s: float = 60.0,
) -> JobResult:
    """Run one job of ``pipeline`` in this process.

    :param job: the job's name (optional when the pipeline has one job).
    :param mode: override a materialize job's mode (``full`` rebuilds from the earliest offset).
    :param spark: the session to use; default: the active one, else a new one that is stopped after.
    :param lock_timeout_s: how long to wait for another run of the same target to finish.
    """
    if job is None:
        if len(pipeline.jobs) != 1:
            raise SpecError("job", "the pipeline has several jobs.", "name the one to run.")
        job = pipeline.jobs[0].name
    spec = pipeline.job(job)
    if spark is not None:
        return run_context(RunContext(pipeline, spec, spark, mode, lock_timeout_s))
    from upsert_kafka_ops.engine.session import session_for

    with session_for(job, jar_groups=pipeline.jar_groups(job)) as session:
        return run_context(RunContext(pipeline, spec, session, mode, lock_timeout_s))


def run_spec(spec: Mapping[str, Any], spark: SparkSession) -> dict[str, Any]:
    """The driver's entry: ``{"pipeline": {...}, "job": name, "mode": ...}`` -> the result as a dict."""
    pipeline = Pipeline.model_validate(spec["pipeline"])
    result = run_job(pipeline, spec.get("job"), mode=spec.get("mode"), spark=spark)
    return result.to_dict()


def run_context(ctx: RunContext) -> JobResult:
    """Run ``ctx.job`` with its kind's function, showing read progress, and log what it did."""
    from upsert_kafka_ops.engine.progress import ReadProgress
    from upsert_kafka_ops.engine.session import application_id

    job = ctx.job
    log.info("job %s (%s): starting", job.name, job.kind)
    every = float(os.environ.get("UKO_PROGRESS_INTERVAL_S") or 10.0)
    try:
        with shared_clients():  # one admin client per cluster for the run's metadata and offsets
            check_grants(ctx)  # a missing ACL fails here, before anything is read or written
            with ReadProgress(ctx.spark, f"job {job.name}", every=every):
                result = KINDS[job.kind](ctx, job)
    except BaseException:
        export_run(ctx.pipeline.name, job.name, None)  # run_success 0 where Prometheus reads it
        raise
    result.duration_s = round(time.monotonic() - ctx.began, 3)
    result.spark_app_id = application_id(ctx.spark)
    export_run(ctx.pipeline.name, job.name, result)
    log.info(
        "job %s: %s, run %s, %s records read, %s upserted, %s deleted, %s written in %.1f s",
        job.name,
        result.mode,
        result.run,
        result.records_read,
        result.rows_upserted,
        result.rows_deleted,
        result.records_written,
        result.duration_s,
    )
    return result
