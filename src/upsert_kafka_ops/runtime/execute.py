"""Run one job of a pipeline on a chosen runtime: in this process, with spark-submit, or against a
Spark Connect server.

:func:`execute_job` is the entry point for running one job of a pipeline on a runtime: every surface
calls it (the CLI, the Airflow operators, the Dagster assets) with a runtime from
:func:`~upsert_kafka_ops.runtime.factory.runtime_for`, so all behave alike::

    result = execute_job(pipeline, "users-to-delta")                      # local Spark
    result = execute_job(pipeline, "users-to-delta",
                         runtime=SparkSubmitRuntime(master="spark://h:7077"), workdir=tmp)

- The local runtime uses the active SparkSession, or builds one (``LocalRuntime.master``/``conf``)
  and stops it after the run; a session it did not create is never stopped.
- spark-submit gets the one-job pipeline as JSON. Connections built from an orchestrator carry their
  secrets as in-process values, which never go into a file: they are moved into the driver's
  environment (``runtime.env``, redacted from its output) and the JSON references them by name.
- A :class:`RunHandle` lets another thread stop the run: it cancels the local Spark jobs (their
  job group) or kills spark-submit's process group.
- On YARN in cluster mode a run can also be started without waiting (:func:`submit_job`), followed
  through the ResourceManager and finished later (:func:`finish_job`): a deferred Airflow task.
"""

from __future__ import annotations

import contextlib
import re
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from upsert_kafka_ops.errors import JobFailedError, SpecError
from upsert_kafka_ops.pipeline import Pipeline
from upsert_kafka_ops.runtime.factory import Runtime as Runtime
from upsert_kafka_ops.runtime.models import ConnectRuntime as ConnectRuntime
from upsert_kafka_ops.runtime.models import LocalRuntime as LocalRuntime
from upsert_kafka_ops.runtime.submit import SparkSubmitRuntime, SubmitHandle, submit_driver
from upsert_kafka_ops.spec.connection import KafkaConnection, SecretRef

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from upsert_kafka_ops.jobs.core import JobResult
    from upsert_kafka_ops.runtime.yarn import Application

Mode = Literal["incremental", "full"]


def as_mode(value: str | None, field: str = "mode") -> Mode | None:
    """``value`` as a run's mode: ``incremental``, ``full``, or ``None`` (empty: the job's own)."""
    if not value:
        return None
    if value == "incremental":
        return "incremental"
    if value == "full":
        return "full"
    raise SpecError(field, f"{value!r} is not a mode.", "use 'incremental' or 'full'.")


def connect_session(runtime: ConnectRuntime) -> SparkSession:
    """The run's session on the runtime's Spark Connect server. A process holds Spark Connect
    sessions or a local driver, not both: pyspark switches its functions to the client's for the
    whole process."""
    from upsert_kafka_ops.engine.session import remote_session

    return remote_session(
        runtime.remote, runtime.conf, token=runtime.resolved_token(), ca_cert=runtime.resolved_ca_cert()
    )


def open_session(
    runtime: Runtime, *, app_name: str, jar_groups: tuple[str, ...] = ("spark",)
) -> SparkSession:
    """A session on ``runtime`` for several runs of :func:`execute_job` (``spark=``); the caller stops
    it. Local Spark is built with the runtime's master and ``conf`` (or is the active session); a
    connect runtime's is on its server; spark-submit has none here (each run's driver is a process of
    its own)."""
    if runtime.kind == "connect":
        return connect_session(runtime)
    if runtime.kind == "spark-submit":
        raise SpecError(
            "runtime",
            "spark-submit runs each job in a driver of its own: there is no session to share.",
            "run each job with execute_job(runtime=...).",
        )
    from upsert_kafka_ops.engine.session import build_spark_session

    return build_spark_session(
        runtime.master, app_name=app_name, extra=dict(runtime.conf), jar_groups=jar_groups
    )


class RunHandle:
    """Stop a running :func:`execute_job` from another thread (``kill()`` is safe at any time)."""

    def __init__(self) -> None:
        self.submit = SubmitHandle()
        self.job_group = f"upsert-kafka-ops-{uuid.uuid4().hex[:12]}"
        self._spark: SparkSession | None = None
        self._lock = threading.Lock()
        self.killed = False

    def _attach(self, spark: SparkSession) -> None:
        with self._lock:
            self._spark = spark

    def kill(self) -> None:
        from upsert_kafka_ops.engine.session import is_connect

        with self._lock:
            self.killed = True
            spark = self._spark
        self.submit.kill()
        if spark is not None:
            with contextlib.suppress(Exception):  # the session may be gone: nothing left to cancel
                if is_connect(spark):
                    spark.interruptTag(self.job_group)
                else:
                    spark.sparkContext.cancelJobGroup(self.job_group)


_SECRET_FIELDS = (
    "password",
    "sasl_jaas_config",
    "ssl_truststore_password",
    "ssl_key_password",
    "ssl_keystore_password",
)


def externalize_secrets(pipeline: Pipeline) -> tuple[Pipeline, dict[str, str]]:
    """``pipeline`` with every in-process secret value replaced by an environment reference, and the
    environment holding those values (``UKO_SECRET_<CONNECTION>_<FIELD>``)."""
    env: dict[str, str] = {}
    connections: dict[str, KafkaConnection] = {}
    for name, conn in pipeline.connections.items():
        changes: dict[str, Any] = {}
        for fld in _SECRET_FIELDS:
            ref: SecretRef | None = getattr(conn, fld)
            if ref is not None and ref.value is not None:
                var = "UKO_SECRET_" + re.sub(r"[^A-Z0-9]", "_", f"{name}_{fld}".upper())
                env[var] = ref.value.get_secret_value()
                changes[fld] = SecretRef(env=var)
        connections[name] = conn.model_copy(update=changes) if changes else conn
    return pipeline.model_copy(update={"connections": connections}), env


def _submission(
    one: Pipeline, job: str, mode: Mode | None, runtime: SparkSubmitRuntime, workdir: str | Path | None
) -> tuple[SparkSubmitRuntime, dict[str, Any], Path]:
    """The runtime with the job's secrets in its environment, the driver's job JSON, its folder."""
    import tempfile

    portable, rt = _with_secrets(one, runtime)
    extra = [g for g in one.jar_groups(job) if g != "spark"]  # S3A, Iceberg's runtime
    if rt.jars is None and extra:
        rt = rt.model_copy(update={"jars": rt.jar_list(("spark", *extra))})
    payload: dict[str, Any] = {"pipeline": portable.to_json_dict(), "job": job}
    if mode is not None:
        payload["mode"] = mode
    folder = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix=f"uko-{job}-"))
    return rt, payload, folder


def _with_secrets(one: Pipeline, runtime: SparkSubmitRuntime) -> tuple[Pipeline, SparkSubmitRuntime]:
    """``one`` with its secrets as environment references, and ``runtime`` with their values in its
    environment (the driver's; redacted from spark-submit's output)."""
    portable, env = externalize_secrets(one)
    return portable, runtime.with_driver_env(env)


def _job_result(envelope: dict[str, Any]) -> JobResult:
    from upsert_kafka_ops.jobs.core import JobResult

    result = envelope.get("result")
    if not isinstance(result, dict):
        raise JobFailedError("the driver's run result has no job result.", result=envelope)
    return JobResult.from_dict(result)


@dataclass(frozen=True)
class SubmittedRun:
    """A job submitted to YARN in cluster mode and not waited for (plain JSON: no secret)."""

    job: str
    app_id: str
    rm_url: str


def _spark_submit(runtime: Runtime, what: str) -> SparkSubmitRuntime:
    """``runtime`` as the spark-submit runtime ``what`` needs."""
    if runtime.kind != "spark-submit":
        raise SpecError(
            "runtime",
            f"{what} submits the driver with spark-submit; this runtime is {runtime.kind}.",
            "give a SparkSubmitRuntime (master 'yarn', deploy_mode 'cluster').",
        )
    return runtime


def submit_job(
    pipeline: Pipeline,
    job: str,
    *,
    runtime: Runtime,
    mode: Mode | None = None,
    workdir: str | Path | None = None,
    handle: RunHandle | None = None,
) -> SubmittedRun:
    """Submit ``job`` to YARN in cluster mode and return as soon as YARN accepted it: nothing of the
    run stays in this process. Follow it with :func:`upsert_kafka_ops.runtime.yarn.application`
    (what a deferred Airflow task's trigger does) and read its result with :func:`finish_job`.

    :param runtime: a spark-submit runtime (:attr:`~upsert_kafka_ops.runtime.models.RuntimeModel.can_defer`
        says whether it runs the driver on YARN)."""
    from upsert_kafka_ops.runtime.submit import submit_application
    from upsert_kafka_ops.runtime.yarn import resource_manager_url

    submit = _spark_submit(runtime, "submit_job")
    rt, payload, folder = _submission(pipeline.only(job), job, mode, submit, workdir)
    handle = handle or RunHandle()
    app_id = submit_application(rt, payload, workdir=folder, handle=handle.submit)
    return SubmittedRun(job, app_id, resource_manager_url(submit.hadoop_conf_dir))


def finish_job(pipeline: Pipeline, job: str, runtime: Runtime, app: Application) -> JobResult:
    """The result of a run :func:`submit_job` started (on the spark-submit ``runtime``), once its
    application ended (``app``).

    :raises JobFailedError: when it did not succeed, with YARN's diagnostics and the driver's error."""
    from upsert_kafka_ops.runtime.submit import application_result

    submit = _spark_submit(runtime, "finish_job")
    _, rt = _with_secrets(pipeline.only(job), submit)  # the secrets to redact from its messages
    return _job_result(application_result(rt, app))


def execute_job(
    pipeline: Pipeline,
    job: str,
    *,
    mode: Mode | None = None,
    runtime: Runtime | None = None,
    spark: SparkSession | None = None,
    workdir: str | Path | None = None,
    handle: RunHandle | None = None,
    lock_timeout_s: float = 60.0,
) -> JobResult:
    """Run ``job`` of ``pipeline`` on ``runtime`` (default: :class:`LocalRuntime`) and return its result.

    :param spark: the session for the local runtime (default: the active one, else one built and
        stopped after).
    :param workdir: spark-submit's folder for the job file and output (default: a new temporary one).
    :raises JobFailedError: from spark-submit, with the driver's error line.
    """
    from upsert_kafka_ops.jobs.run import run_job

    one = pipeline.only(job)
    handle = handle or RunHandle()
    runtime = runtime or LocalRuntime()
    if runtime.kind == "spark-submit":
        rt, payload, folder = _submission(one, job, mode, runtime, workdir)
        return _job_result(submit_driver(rt, payload, workdir=folder, handle=handle.submit))

    if runtime.kind == "connect":
        session = spark if spark is not None else connect_session(runtime)
        handle._attach(session)
        session.addTag(handle.job_group)
        try:
            return run_job(one, job, mode=mode, spark=session, lock_timeout_s=lock_timeout_s)
        finally:
            session.removeTag(handle.job_group)

    from upsert_kafka_ops.engine.session import session_for

    with (
        contextlib.nullcontext(spark)
        if spark is not None
        else session_for(job, runtime.master, runtime.conf, one.jar_groups(job)) as session
    ):
        handle._attach(session)
        context = session.sparkContext
        context.setJobGroup(handle.job_group, f"upsert-kafka-ops job {job}", interruptOnCancel=True)
        try:
            return run_job(one, job, mode=mode, spark=session, lock_timeout_s=lock_timeout_s)
        finally:
            context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
