"""Run one job of a pipeline on a chosen runtime: in this process, with spark-submit, or against a
Spark Connect server.

This is what the orchestrator adapters call (the Airflow operators, the Dagster assets), so both
behave alike::

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
import os
import re
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator

from upsert_kafka_ops.engine.connect import CA_CERT_ENV, TOKEN_ENV
from upsert_kafka_ops.errors import JobFailedError, SpecError
from upsert_kafka_ops.jobs.spec import Pipeline
from upsert_kafka_ops.runtime.submit import SparkSubmitRuntime, SubmitHandle, submit_driver
from upsert_kafka_ops.spec.base import SpecModel
from upsert_kafka_ops.spec.connection import KafkaConnection, SecretRef

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from upsert_kafka_ops.jobs.core import JobResult
    from upsert_kafka_ops.runtime.yarn import Application

Mode = Literal["incremental", "full"]


class LocalRuntime(SpecModel):
    """Run in this process with local (or given-master) Spark."""

    kind: Literal["local"] = Field(default="local", description="Runtime kind.")
    master: str = Field(
        default="local[*]", description="Master of a SparkSession built for the run (when none is active)."
    )
    conf: dict[str, str] = Field(
        default_factory=dict, description="Extra Spark configuration for a session built for the run."
    )


class ConnectRuntime(SpecModel):
    """Run in this process against a Spark Connect server: its driver is already warm, so a small
    run costs its queries and not a JVM's start. The server needs the project's jars and Delta
    (``upsert_kafka_ops.local.LocalSparkConnect`` starts one; the Helm chart deploys one); this
    process needs the ``connect`` extra (the Spark Connect client).

    The token and the CA bundle are secret references, resolved when the session opens; without
    them, ``SPARK_CONNECT_AUTHENTICATE_TOKEN`` (pyspark's variable) and ``UKO_SPARK_CONNECT_CA_CERT``
    (a PEM file's path) are read, which is what the chart's orchestrator overlays set. The token
    goes over TLS, or to a loopback address only (:mod:`upsert_kafka_ops.engine.connect`)."""

    kind: Literal["connect"] = Field(default="connect", description="Runtime kind.")
    remote: str = Field(
        description="The server: sc://host:port, optionally with Spark Connect parameters "
        "(sc://host:port/;use_ssl=true;user_id=etl); the token goes in 'token', never here.",
        pattern=r"^sc://[^/;]+",
    )
    token: SecretRef | None = Field(
        default=None,
        description="The server's bearer token, as a reference ({env: VAR} or {file: PATH}); "
        f"default: the {TOKEN_ENV} variable when set.",
    )
    ca_cert: SecretRef | None = Field(
        default=None,
        description="The CA bundle (PEM) that verifies the server's TLS certificate, as a reference "
        f"({{file: PATH}} or {{env: VAR}}); turns TLS on. Default, with use_ssl=true: the file {CA_CERT_ENV} "
        "names when set, else the system's CAs.",
    )
    conf: dict[str, str] = Field(
        default_factory=dict, description="Spark SQL settings for the run's session (runtime settings only)."
    )

    @field_validator("remote")
    @classmethod
    def _no_token_in_url(cls, value: str) -> str:
        if re.search(r";\s*token\s*=", value, re.IGNORECASE):
            raise SpecError("remote", "holds a token; a secret never goes into a URL.",
                            "give it as token: {env: VAR} (or {file: PATH}).")  # fmt: skip
        return value

    def resolved_token(self) -> str | None:
        """The token's value: ``token``, else ``SPARK_CONNECT_AUTHENTICATE_TOKEN``, else None."""
        if self.token is not None:
            return self.token.resolve()
        return os.environ.get(TOKEN_ENV) or None

    def resolved_ca_cert(self) -> bytes | None:
        """The CA bundle's PEM: ``ca_cert``, else (with ``use_ssl=true`` in ``remote``: the variable
        verifies, it does not turn TLS on) the file ``UKO_SPARK_CONNECT_CA_CERT`` names."""
        if self.ca_cert is not None:
            return self.ca_cert.resolve().encode()
        path = os.environ.get(CA_CERT_ENV)
        if not path or not re.search(r";\s*use_ssl\s*=\s*true", self.remote, re.IGNORECASE):
            return None
        try:
            return Path(path).read_bytes()
        except OSError as exc:
            raise SpecError(CA_CERT_ENV, f"names {path}, which cannot be read ({exc.strerror}).",
                            "mount the CA bundle there, or unset the variable.") from None  # fmt: skip


Runtime = LocalRuntime | SparkSubmitRuntime | ConnectRuntime


def connect_session(runtime: ConnectRuntime) -> SparkSession:
    """The run's session on the runtime's Spark Connect server. A process holds Spark Connect
    sessions or a local driver, not both: pyspark switches its functions to the client's for the
    whole process."""
    from upsert_kafka_ops.engine.session import remote_session

    return remote_session(
        runtime.remote, runtime.conf, token=runtime.resolved_token(), ca_cert=runtime.resolved_ca_cert()
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
    return portable, runtime.model_copy(update={"env": {**runtime.env, **env}}) if env else runtime


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


def submit_job(
    pipeline: Pipeline,
    job: str,
    *,
    runtime: SparkSubmitRuntime,
    mode: Mode | None = None,
    workdir: str | Path | None = None,
    handle: RunHandle | None = None,
) -> SubmittedRun:
    """Submit ``job`` to YARN in cluster mode and return as soon as YARN accepted it: nothing of the
    run stays in this process. Follow it with :func:`upsert_kafka_ops.runtime.yarn.application`
    (what a deferred Airflow task's trigger does) and read its result with :func:`finish_job`."""
    from upsert_kafka_ops.runtime.submit import submit_application
    from upsert_kafka_ops.runtime.yarn import resource_manager_url

    rt, payload, folder = _submission(pipeline.only(job), job, mode, runtime, workdir)
    handle = handle or RunHandle()
    app_id = submit_application(rt, payload, workdir=folder, handle=handle.submit)
    return SubmittedRun(job, app_id, resource_manager_url(runtime.hadoop_conf_dir))


def finish_job(pipeline: Pipeline, job: str, runtime: SparkSubmitRuntime, app: Application) -> JobResult:
    """The result of a run :func:`submit_job` started, once its application ended (``app``).

    :raises JobFailedError: when it did not succeed, with YARN's diagnostics and the driver's error."""
    from upsert_kafka_ops.runtime.submit import application_result

    _, rt = _with_secrets(pipeline.only(job), runtime)  # the secrets to redact from its messages
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
    if isinstance(runtime, SparkSubmitRuntime):
        rt, payload, folder = _submission(one, job, mode, runtime, workdir)
        return _job_result(submit_driver(rt, payload, workdir=folder, handle=handle.submit))

    if isinstance(runtime, ConnectRuntime):
        session = spark if spark is not None else connect_session(runtime)
        handle._attach(session)
        session.addTag(handle.job_group)
        try:
            return run_job(one, job, mode=mode, spark=session, lock_timeout_s=lock_timeout_s)
        finally:
            session.removeTag(handle.job_group)

    local = runtime or LocalRuntime()
    from upsert_kafka_ops.engine.session import session_for

    with (
        contextlib.nullcontext(spark)
        if spark is not None
        else session_for(job, local.master, local.conf, one.jar_groups(job)) as session
    ):
        handle._attach(session)
        context = session.sparkContext
        context.setJobGroup(handle.job_group, f"upsert-kafka-ops job {job}", interruptOnCancel=True)
        try:
            return run_job(one, job, mode=mode, spark=session, lock_timeout_s=lock_timeout_s)
        finally:
            context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
