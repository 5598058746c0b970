"""Operators that run one job of a pipeline (materialize, topic-to-topic, publish, backfill), and one
that verifies a job's warehouse table against its topic.

Example::

    UpsertKafkaMaterializeOperator(
        task_id="users_to_delta",
        pipeline_file="/opt/airflow/pipelines/demo.yaml",
        job_name="users-to-delta",
        kafka_config_ids={"local": "kafka_default"},   # pipeline connection -> Airflow connection id
    )

The job runs in the task's process on local Spark (an active SparkSession is used and never stopped),
or with spark-submit: ``spark_master="spark://h:7077"`` (with ``spark_conf``, ``deploy_mode``), or
an ``upsert_kafka_spark`` connection (``spark_config_id``). The return value (XCom) is the core's
run result as JSON: counts, offsets, mode and why; it holds no secret. A failing job fails the task
with the core's message (a bad spec is not retried); ``on_kill`` cancels the Spark jobs or kills
spark-submit.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import quote

from airflow.sdk import BaseOperator, BaseOperatorLink, Context
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from upsert_kafka_ops.airflow._jobs import JobArg, JobFields, JobRef
from upsert_kafka_ops.airflow.assets import assets_of, declared_assets
from upsert_kafka_ops.errors import SpecError, UpsertKafkaOpsError
from upsert_kafka_ops.pipeline import Pipeline, as_backfill
from upsert_kafka_ops.runtime.execute import RunHandle, as_mode, execute_job
from upsert_kafka_ops.runtime.factory import Runtime, runtime_for

JOB_FIELDS: tuple[str, ...] = ("job", "pipeline_file", "job_name", "kafka_config_id", "kafka_config_ids")
#: where the Spark History Server is, when the operator is not told (``spark_history_url``)
HISTORY_ENV = "UKO_SPARK_HISTORY_URL"


class SparkHistoryLink(BaseOperatorLink):
    """The run's Spark application in the Spark History Server: its jobs, stages and SQL plans.
    Shown when the operator knows the server (``spark_history_url`` or ``UKO_SPARK_HISTORY_URL``) and
    the run reported its application; the runs must write event logs where the server reads them
    (``spark.eventLog.enabled``, ``spark.eventLog.dir``)."""

    name = "Spark History"

    def get_link(self, operator: BaseOperator, *, ti_key: Any) -> str:
        # called on the worker when the task ends, with the operator that ran
        base = getattr(operator, "spark_history_url", None) or os.environ.get(HISTORY_ENV, "")
        app = getattr(operator, "spark_app_id", "")
        return f"{base.rstrip('/')}/history/{quote(app)}/" if base and app else ""


def task_error(exc: UpsertKafkaOpsError) -> AirflowException:
    """The Airflow error for a failed job: the core's message, without the traceback chain. A spec
    error cannot succeed on retry, so it fails the task at once."""
    message = f"{type(exc).__name__}: {exc}"
    return AirflowFailException(message) if isinstance(exc, SpecError) else AirflowException(message)


class UpsertKafkaJobOperator(JobFields, BaseOperator):
    """Run one job of a pipeline.

    :param job: the job spec (a job model or its dict form); or
    :param pipeline_file: a pipeline file, with ``job_name`` (optional when it has one job).
    :param kafka_config_id: Airflow ``kafka`` connection for every Kafka connection the job uses.
    :param kafka_config_ids: per pipeline connection name: the Airflow connection id.
    :param mode: ``full`` rebuilds a materialized target from the earliest offset.
    :param spark_master: ``local[*]`` (default) runs here; ``sc://host:port`` runs on that Spark
        Connect server; another master runs spark-submit.
    :param spark_conf: Spark configuration for the run.
    :param spark_config_id: an ``upsert_kafka_spark`` connection giving master and settings.
    :param deploy_mode: spark-submit's deploy mode (``cluster`` needs YARN/Kubernetes and a result URI).
    :param spark_submit_timeout: kill spark-submit after this many seconds.
    :param lock_timeout: how long to wait for another run of the same target.
    :param spark_history_url: the Spark History Server (``http://host:18080``) for the task's
        "Spark History" link; default ``UKO_SPARK_HISTORY_URL``.
    :param deferrable: with a YARN cluster-mode runtime (``master="yarn"``, ``deploy_mode="cluster"``):
        submit, then wait in the triggerer (:class:`SparkApplicationTrigger`) instead of a worker slot,
        and finish on a worker when the application ends.
    :param poll_interval: seconds between the trigger's looks at the application.

    After the run, ``run_summary`` holds its Markdown summary (:meth:`JobResult.to_markdown`), shown
    in the task view's Rendered Templates; the return value (XCom) is the full result.
    """

    template_fields: Sequence[str] = (
        *JOB_FIELDS,
        "mode",
        "spark_master",
        "spark_conf",
        "spark_config_id",
        "spark_history_url",
        "run_summary",
    )
    template_fields_renderers: ClassVar[dict[str, str]] = {
        "job": "json",
        "spark_conf": "json",
        "run_summary": "md",
    }
    #: the task view's Rendered Templates show the run's summary (``run_summary``) once it ran
    overwrite_rtif_after_execution = True
    operator_extra_links = (SparkHistoryLink(),)
    ui_color = "#e8f2ff"
    #: The job kinds this operator runs (None: any).
    kinds: ClassVar[tuple[str, ...] | None] = None

    def __init__(
        self,
        *,
        job: JobArg = None,
        pipeline_file: str | Path | None = None,
        job_name: str | None = None,
        kafka_config_id: str | None = None,
        kafka_config_ids: dict[str, str] | None = None,
        mode: str | None = None,
        spark_master: str | None = None,
        spark_conf: dict[str, str] | None = None,
        spark_config_id: str | None = None,
        deploy_mode: str = "client",
        spark_submit_timeout: float | None = None,
        lock_timeout: float = 60.0,
        spark_history_url: str | None = None,
        deferrable: bool = False,
        poll_interval: float = 10.0,
        **kwargs: Any,
    ) -> None:
        if job is None and pipeline_file is not None:  # inlets/outlets: the Assets page, asset schedules
            ref = JobRef.of(None, str(pipeline_file), job_name, kafka_config_id, kafka_config_ids)
            assets_of(declared_assets(ref), kwargs)
        super().__init__(**kwargs)
        self._set_job(job, pipeline_file, job_name, kafka_config_id, kafka_config_ids)
        self.mode = mode
        self.spark_master = spark_master
        self.spark_conf = dict(spark_conf or {})
        self.spark_config_id = spark_config_id
        self.deploy_mode = deploy_mode
        self.spark_submit_timeout = spark_submit_timeout
        self.lock_timeout = lock_timeout
        self.spark_history_url = spark_history_url
        self.deferrable = deferrable
        self.poll_interval = poll_interval
        self.run_summary = ""  # the run's Markdown summary, set when it ran
        self.spark_app_id = ""
        self._handle: RunHandle | None = None
        self._lineage: tuple[list[Any], list[Any]] | None = None

    # -- what runs -----------------------------------------------------------------------------------
    def prepare(self, pipeline: Pipeline, name: str) -> Pipeline:
        """The pipeline to run (a subclass may change the job, e.g. a backfill's end)."""
        return pipeline

    def runtime(self) -> Runtime:
        if self.spark_config_id:
            from upsert_kafka_ops.airflow.hooks import SparkRuntimeHook

            found = SparkRuntimeHook(self.spark_config_id).get_runtime()
            return found.model_copy(update={"conf": {**found.conf, **self.spark_conf}})
        return runtime_for(
            self.spark_master or "local[*]",
            conf=self.spark_conf,
            applicable={"deploy_mode": self.deploy_mode, "timeout_s": self.spark_submit_timeout},
        )

    def execute(self, context: Context) -> dict[str, Any]:
        handle = self._handle = RunHandle()
        try:
            pipeline, name = self.job_ref().resolve()
            kind = pipeline.job(name).kind
            if self.kinds is not None and kind not in self.kinds:
                raise SpecError(
                    "job_name",
                    f"{name!r} is a {kind} job; {type(self).__name__} runs {' or '.join(self.kinds)} jobs.",
                    "use UpsertKafkaJobOperator, or the operator for that kind.",
                )
            pipeline = self.prepare(pipeline, name)
            self._lineage = _datasets(pipeline, name)
            mode = as_mode(self.mode)
            workdir = None
            runtime = self.runtime()
            if runtime.launches_driver:  # the job file and the driver's output
                import tempfile

                workdir = tempfile.mkdtemp(prefix=f"uko-{self.task_id}-")
            if self.deferrable:
                submitted = self._submit(pipeline, name, mode, runtime, workdir, handle)
            else:
                self.log.info("running job %r (%s) on %s", name, kind, type(runtime).__name__)
                result = execute_job(
                    pipeline,
                    name,
                    mode=mode,
                    runtime=runtime,
                    workdir=workdir,
                    handle=handle,
                    lock_timeout_s=self.lock_timeout,
                )
        except UpsertKafkaOpsError as exc:
            if handle.killed:
                raise AirflowException(f"job stopped on request: {exc}") from None
            self.log.error("%s: %s", type(exc).__name__, exc)
            raise task_error(exc) from None
        if self.deferrable:
            from upsert_kafka_ops.airflow.triggers import SparkApplicationTrigger

            self.log.info(
                "job %r runs as YARN application %s: waiting in the triggerer", name, submitted.app_id
            )
            self.defer(
                trigger=SparkApplicationTrigger(submitted.rm_url, submitted.app_id, self.poll_interval),
                method_name="execute_complete",
            )
        return self._finished(name, result)

    def _submit(
        self, pipeline: Pipeline, name: str, mode: Any, runtime: Runtime, workdir: Any, handle: RunHandle
    ) -> Any:
        from upsert_kafka_ops.runtime import submit_job

        if not runtime.can_defer:
            raise SpecError(
                "deferrable",
                "a deferred run needs a cluster that runs the driver: YARN in cluster deploy mode.",
                "use master 'yarn' with deploy_mode 'cluster' and a result_uri (an upsert_kafka_spark connection), "
                "or deferrable=False.",
            )
        self.log.info("submitting job %r to YARN (cluster mode)", name)
        return submit_job(pipeline, name, runtime=runtime, mode=mode, workdir=workdir, handle=handle)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """Resumed on a worker when the job's YARN application ended: its result, as ``execute``'s."""
        from upsert_kafka_ops.runtime import finish_job
        from upsert_kafka_ops.runtime.yarn import Application

        if event.get("status") != "done":
            raise AirflowException(
                f"the job's YARN application could not be followed: {event.get('message')}"
            )
        try:
            pipeline, name = self.job_ref().resolve()
            pipeline = self.prepare(pipeline, name)
            result = finish_job(pipeline, name, self.runtime(), Application(**event["app"]))
        except UpsertKafkaOpsError as exc:
            self.log.error("%s: %s", type(exc).__name__, exc)
            raise task_error(exc) from None
        return self._finished(name, result)

    def _finished(self, name: str, result: Any) -> dict[str, Any]:
        out: dict[str, Any] = result.to_dict()
        self.run_summary = result.to_markdown()
        self.spark_app_id = result.spark_app_id
        self.log.info(
            "job %r %s (%s, %s): %d records read, %d upserted, %d deleted, %d written, %d tombstones in %.1fs",
            name,
            result.status,
            result.mode,
            result.execution,
            result.records_read,
            result.rows_upserted,
            result.rows_deleted,
            result.records_written,
            result.tombstones_written,
            result.duration_s,
        )
        return out

    def on_kill(self) -> None:
        if self._handle is not None:
            self._handle.kill()

    # -- OpenLineage (used when apache-airflow-providers-openlineage is installed) --------------------
    def lineage_datasets(self) -> tuple[list[Any], list[Any]]:
        """(inputs, outputs) as the core's OpenLineage datasets: topics ``kafka://host:port`` / topic,
        tables in their store's naming."""
        if self._lineage is None:
            pipeline, name = self.job_ref().resolve()
            self._lineage = _datasets(self.prepare(pipeline, name), name)
        return self._lineage

    def get_openlineage_facets_on_start(self) -> Any:
        from airflow.providers.common.compat.openlineage.facet import Dataset
        from airflow.providers.openlineage.extractors import OperatorLineage

        inputs, outputs = self.lineage_datasets()
        return OperatorLineage(
            inputs=[Dataset(namespace=d.namespace, name=d.name) for d in inputs],
            outputs=[Dataset(namespace=d.namespace, name=d.name) for d in outputs],
        )

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        return self.get_openlineage_facets_on_start()


def _datasets(pipeline: Pipeline, name: str) -> tuple[list[Any], list[Any]]:
    from upsert_kafka_ops.jobs.datasets import job_datasets

    return job_datasets(pipeline, name)


class UpsertKafkaMaterializeOperator(UpsertKafkaJobOperator):
    """Fold an upsert topic into its warehouse table (incremental, or ``mode="full"``)."""

    kinds = ("materialize",)


class UpsertKafkaTopicToTopicOperator(UpsertKafkaJobOperator):
    """Transform topics with Spark SQL into an upsert topic (streaming where Spark can, else snapshot)."""

    kinds = ("topic-to-topic",)


class UpsertKafkaPublishOperator(UpsertKafkaJobOperator):
    """Publish a table (Delta change feed or a query) to an upsert topic."""

    kinds = ("publish",)


class UpsertKafkaBackfillOperator(UpsertKafkaJobOperator):
    """Rebuild a target from the earliest offset up to a fixed end, idempotently.

    Runs a backfill job, or the backfill of a materialize job.

    :param until: the end: ``latest`` (fixed when the task starts), epoch milliseconds, an ISO-8601
        time (templated: e.g. ``"{{ params.end }}"``) or offsets JSON; default: the job's own end.
    :param rewind: allow an end older than the target's stored offsets (the target goes back).
    """

    template_fields: Sequence[str] = (*UpsertKafkaJobOperator.template_fields, "until", "rewind")
    kinds = ("materialize", "backfill")

    def __init__(self, *, until: object = None, rewind: bool | str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.until = until
        self.rewind = rewind

    def prepare(self, pipeline: Pipeline, name: str) -> Pipeline:
        rewind = self.rewind
        if isinstance(rewind, str) and rewind.strip().lower() in ("none", ""):
            rewind = None
        if isinstance(rewind, str):
            if rewind.strip().lower() not in ("true", "false", "1", "0"):
                raise SpecError("rewind", f"{rewind!r} is not a boolean.", "use true or false.")
            rewind = rewind.strip().lower() in ("true", "1")
        until = self.until if self.until not in ("", None) else None
        job = as_backfill(pipeline.job(name), until, rewind)
        return Pipeline(connections=pipeline.connections, jobs=[job])


class UpsertKafkaVerifyOperator(JobFields, BaseOperator):
    """Compare a materialize or backfill job's warehouse table with the fold of its topic up to the
    offsets stored with the table (:func:`upsert_kafka_ops.jobs.verify.verify_job`), on local Spark
    in the task's process. A difference fails the task without retries (a rerun finds the same),
    naming the first ``show`` keys of each kind; the return value (XCom) is the outcome's counts and
    keys. ``verify_summary`` (Rendered Templates) holds the verdict.

    :param show: keys listed per kind of difference.
    :param spark_conf: Spark configuration of the comparison's session.
    """

    template_fields: Sequence[str] = (*JOB_FIELDS, "spark_conf", "verify_summary")
    template_fields_renderers: ClassVar[dict[str, str]] = {"job": "json", "spark_conf": "json"}
    overwrite_rtif_after_execution = True
    ui_color = "#eaf7e8"

    def __init__(
        self,
        *,
        job: JobArg = None,
        pipeline_file: str | Path | None = None,
        job_name: str | None = None,
        kafka_config_id: str | None = None,
        kafka_config_ids: dict[str, str] | None = None,
        show: int = 10,
        spark_conf: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._set_job(job, pipeline_file, job_name, kafka_config_id, kafka_config_ids)
        self.show = show
        self.spark_conf = dict(spark_conf or {})
        self.verify_summary = ""

    def execute(self, context: Context) -> dict[str, Any]:
        from upsert_kafka_ops.engine.session import session_for
        from upsert_kafka_ops.jobs.verify import verify_job

        try:
            pipeline, name = self.job_ref().resolve()
            with session_for(
                f"verify:{name}", "local[*]", self.spark_conf, pipeline.jar_groups(name)
            ) as spark:
                outcome = verify_job(spark, pipeline, name, show=self.show)
        except UpsertKafkaOpsError as exc:
            self.log.error("%s: %s", type(exc).__name__, exc)
            raise task_error(exc) from None
        self.verify_summary = outcome.summary()
        self.log.info("%s", self.verify_summary)
        if not outcome.ok:
            raise AirflowFailException(self.verify_summary)
        return outcome.to_dict()
