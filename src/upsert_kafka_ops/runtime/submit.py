"""Submitting a job to Spark with spark-submit and reading its run result back.

:class:`SparkSubmitRuntime` says where and how the job runs (master, deploy mode, configuration,
jars, environment); :func:`submit_driver` writes the job JSON, runs spark-submit with the driver
entrypoint (:mod:`upsert_kafka_ops.runtime.driver`) and returns the driver's run result.

- **client mode**: the driver runs in the spark-submit process on this machine; its result comes
  back on stdout, as the line ``UKO_RESULT_JSON {...}`` (:data:`~upsert_kafka_ops.runtime.driver.RESULT_MARKER`).
- **cluster mode** (YARN, Kubernetes): the driver runs on the cluster and writes its result to
  ``result_uri``, which must be a file path or ``file://`` URI visible to both sides (a shared
  mount). Spark standalone and local masters run Python applications in client mode only
  (spark-submit refuses cluster mode for them), so the runtime rejects that combination.

Secrets: the job JSON carries secret references; the values reach the driver through ``env``
(the environment of spark-submit in client mode; a private properties file of
``spark.yarn.appMasterEnv.*`` / ``spark.kubernetes.driverEnv.*`` in cluster mode). They are
never put on the command line, and every ``env`` value is redacted from logs and errors.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator
from typing_extensions import Self  # typing.Self from Python 3.11

from upsert_kafka_ops.engine.session import jvm_line
from upsert_kafka_ops.errors import JobFailedError, SpecError, ToolchainError
from upsert_kafka_ops.runtime.models import RuntimeModel

log = logging.getLogger(__name__)

#: ``env`` values shorter than this are not redacted (they would blank out ordinary text).
MIN_REDACTED_LENGTH = 6
_REDACTED = "***"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# "pkg.module.SomeError: text", "Exception in thread ...", spark-submit's "Error: ..." lines
_ERROR_LINE = re.compile(
    r"^(?:(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)(?::.*)?"
    r"|Exception in thread .*|Error: .*)$"
)


#: spark-submit path -> the Spark release its --version printed (read once per process)
_CLUSTER_VERSIONS: dict[str, str] = {}


def default_spark_submit() -> str:
    """``bin/spark-submit`` of the installed pyspark."""
    from upsert_kafka_ops.spark_lines import spark_home

    return str(spark_home() / "bin" / "spark-submit")


def _is_cluster_manager(master: str) -> bool:
    return master == "yarn" or master.startswith("k8s://")


def _is_loopback(master: str) -> bool:
    if master.startswith("local"):
        return True
    hosts = [a.rpartition(":")[0] for a in master.removeprefix("spark://").split(",")]
    return master.startswith("spark://") and all(h in ("127.0.0.1", "localhost", "[::1]") for h in hosts)


class SparkSubmitRuntime(RuntimeModel):
    """How to run a job with spark-submit: master, deploy mode, configuration, jars, environment.

    Example::

        runtime = SparkSubmitRuntime(
            master="spark://spark-master:7077",
            conf={"spark.executor.memory": "2g"},
            env={"KAFKA_PASSWORD": password},  # the job references it: {"env": "KAFKA_PASSWORD"}
        )
    """

    kind: Literal["spark-submit"] = Field(default="spark-submit", description="Runtime kind.")
    master: str = Field(description="Spark master URL: spark://host:port, yarn, k8s://https://..., local[N].")
    deploy_mode: Literal["client", "cluster"] = Field(
        default="client",
        description="client: the driver runs here and returns its result on stdout; cluster: the driver "
        "runs on the cluster (YARN, Kubernetes) and writes its result to result_uri.",
    )
    conf: dict[str, str] = Field(
        default_factory=dict,
        description="Spark configuration (--conf), applied after the project's defaults.",
    )
    project_conf: bool = Field(
        default=True,
        description="Start from the project's Spark configuration (runtime.spark_conf: Delta, UTC session "
        "time zone, quiet logging, shuffle partitions); needs the fetched jar cache.",
    )
    jars: list[str] | None = Field(
        default=None,
        description="Jars for the driver and executors (--jars); default: the project's spark jar cache "
        "(upsert-kafka-ops jars fetch). An empty list passes none.",
    )
    py_files: list[str] = Field(
        default_factory=list,
        description="Python files, zips or eggs for the driver and executors (--py-files).",
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Environment variables for the driver, e.g. the secrets the job references. Never on "
        "the command line, redacted from logs and errors.",
    )
    python: str | None = Field(
        default=None,
        description="Python of the driver and executors (spark.pyspark.python); default: this interpreter "
        "for a client-mode driver, the cluster's python3 for executors.",
    )
    spark_submit: str | None = Field(
        default=None, description="Path of spark-submit; default: bin/spark-submit of the installed pyspark."
    )
    spark_version: str | None = Field(
        default=None,
        description="The cluster's Spark release (vendor strings such as 3.5.6-amzn-1 are read by x.y.z): its "
        "jars are resolved for it, and a driver of another line is refused at start; default: "
        "UKO_SPARK_VERSION (the Helm chart's image.sparkVersion) when set, else read from spark_submit's "
        "--version when spark_submit is set, else the installed pyspark's.",
    )
    result_uri: str | None = Field(
        default=None,
        description="File path or file:// URI the driver writes its run result to; required in cluster mode.",
    )
    timeout_s: float | None = Field(
        default=None,
        gt=0,
        description="Kill spark-submit and fail after this many seconds; no limit by default.",
    )
    hadoop_conf_dir: str | None = Field(
        default=None,
        description="YARN: the Hadoop configuration folder (HADOOP_CONF_DIR and YARN_CONF_DIR of spark-submit; "
        "it names the ResourceManager); default: the process's HADOOP_CONF_DIR.",
    )

    @model_validator(mode="after")
    def _check(self) -> SparkSubmitRuntime:
        if not self.master.strip():
            raise SpecError("master", "must not be empty.", "give e.g. 'spark://host:7077' or 'yarn'.")
        if self.deploy_mode == "cluster":
            if not _is_cluster_manager(self.master):
                raise SpecError(
                    "deploy_mode",
                    f"cluster mode is not available with master {self.master!r}: Spark standalone and local "
                    "masters run Python applications in client mode only.",
                    "use deploy_mode='client', or a YARN or Kubernetes master.",
                )
            if not self.result_uri:
                raise SpecError(
                    "result_uri",
                    "is required in cluster mode (the driver's stdout stays on the cluster).",
                    "give a file path or file:// URI on storage both sides see.",
                )
        if self.result_uri:
            from upsert_kafka_ops.runtime.driver import result_path

            try:
                result_path(self.result_uri)
            except ValueError as exc:
                raise SpecError("result_uri", str(exc), "give a file path or file:///path.") from None
        for key in self.conf:
            if key in ("spark.master", "spark.submit.deployMode"):
                raise SpecError(
                    f"conf.{key}", "is set by the runtime.", "use the fields master and deploy_mode."
                )
        for name in self.env:
            if not _ENV_NAME.match(name):
                raise SpecError(f"env.{name}", "is not a valid environment variable name.")
        return self

    # -- what a caller asks any runtime (RuntimeModel) ------------------------------------------------
    @property
    def launches_driver(self) -> bool:
        """Always: spark-submit starts the driver as a process of its own."""
        return True

    @property
    def can_defer(self) -> bool:
        """On YARN in cluster mode: the driver runs on the cluster, followed through the ResourceManager."""
        return self.master == "yarn" and self.deploy_mode == "cluster"

    def with_driver_env(self, env: Mapping[str, str]) -> Self:
        """This runtime with ``env`` added to the driver's environment (redacted like ``env``)."""
        return self.model_copy(update={"env": {**self.env, **env}}) if env else self

    # -- the command -------------------------------------------------------------------------------
    def spark_conf(self) -> dict[str, str]:
        """The ``--conf`` settings: the project's defaults (unless ``project_conf`` is off), then ``conf``."""
        out: dict[str, str] = {}
        if self.project_conf:
            from upsert_kafka_ops.engine.session import spark_conf

            out = spark_conf(self.master)
            for key in ("spark.master", "spark.jars"):  # given as --master and --jars
                out.pop(key, None)
        if self.python:
            out["spark.pyspark.python"] = self.python
        out.update(self.conf)
        return out

    def cluster_version(self) -> str | None:
        """The cluster's Spark release (None: the installed pyspark's own spark-submit); a
        :class:`ToolchainError` naming both when its line differs from the installed pyspark's."""
        from upsert_kafka_ops import spark_lines

        version = self.spark_version or spark_lines.declared_version()
        if version is None and self.spark_submit is not None:
            version = _CLUSTER_VERSIONS.get(self.spark_submit) or spark_lines.cluster_version(
                self.spark_submit
            )
            _CLUSTER_VERSIONS[self.spark_submit] = version
        if version is not None:
            spark_lines.same_line(spark_lines.installed_version(), version)
        return version

    def jar_list(self, groups: tuple[str, ...] = ("spark",)) -> list[str]:
        """``--jars``: ``jars`` when given, else the jar groups resolved for the cluster's Spark."""
        version = self.cluster_version()  # a driver of another line fails here, before spark-submit
        if self.jars is not None:
            return list(self.jars)
        from upsert_kafka_ops import jars

        return [str(p) for p in jars.class_path(list(groups), spark_version=version)]

    def redact(self, text: str) -> str:
        """``text`` with every ``env`` value (of at least :data:`MIN_REDACTED_LENGTH` characters) masked."""
        for value in sorted(self.env.values(), key=len, reverse=True):
            if len(value) >= MIN_REDACTED_LENGTH:
                text = text.replace(value, _REDACTED)
        return text


def _properties_escape(text: str, key: bool) -> str:
    out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    out = out.replace("\f", "\\f")
    if key:
        for ch in "=: #!":
            out = out.replace(ch, "\\" + ch)
    elif out.startswith(" "):
        out = "\\" + out
    return out


def submit_command(
    runtime: SparkSubmitRuntime,
    job_file: Path,
    *,
    function: str | None = None,
    properties_file: Path | None = None,
) -> list[str]:
    """The spark-submit command line for a job file (no secret values in it).

    :param function: ``module:function`` for the driver's ``--callable``; the job runner by default.
    :param properties_file: a properties file with the driver environment (cluster mode).
    """
    from upsert_kafka_ops.runtime import driver

    cmd = [runtime.spark_submit or default_spark_submit(), "--master", runtime.master]
    cmd += ["--deploy-mode", runtime.deploy_mode]
    if properties_file is not None:
        cmd += ["--properties-file", str(properties_file), "--load-spark-defaults"]
    jar_list = runtime.jar_list()
    if jar_list:
        cmd += ["--jars", ",".join(jar_list)]
    if runtime.py_files:
        cmd += ["--py-files", ",".join(runtime.py_files)]
    job_arg = str(job_file)
    if runtime.deploy_mode == "cluster":  # ship the job file into the driver's working directory
        cmd += ["--files", str(job_file)]
        job_arg = job_file.name
    for key, value in runtime.spark_conf().items():
        cmd += ["--conf", f"{key}={value}"]
    cmd += [str(Path(driver.__file__).resolve()), job_arg]
    if runtime.result_uri:
        cmd += ["--result-uri", runtime.result_uri]
    if function:
        cmd += ["--callable", function]
    return cmd


def _cluster_env_properties(runtime: SparkSubmitRuntime, path: Path) -> None:
    prefix = "spark.yarn.appMasterEnv." if runtime.master == "yarn" else "spark.kubernetes.driverEnv."
    lines = [
        f"{_properties_escape(prefix + k, key=True)}={_properties_escape(v, key=False)}\n"
        for k, v in runtime.env.items()
    ]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.writelines(lines)


def _process_env(runtime: SparkSubmitRuntime) -> dict[str, str]:
    env = dict(os.environ)
    if runtime.spark_submit is None:  # pyspark's spark-submit with pyspark's Spark, whatever SPARK_HOME says
        from upsert_kafka_ops.spark_lines import spark_home

        env["SPARK_HOME"] = str(spark_home())
    if runtime.hadoop_conf_dir:
        env["HADOOP_CONF_DIR"] = env["YARN_CONF_DIR"] = runtime.hadoop_conf_dir
    if runtime.deploy_mode == "client":
        env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)  # the driver imports this package
        if _is_loopback(runtime.master):  # as build_spark_session: stay off the network interfaces
            env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        env.update(runtime.env)
    return env


class _Output:
    """spark-submit's stdout and stderr: redacted, logged, saved to files, with a shared tail."""

    def __init__(self, runtime: SparkSubmitRuntime, workdir: Path, tail: int) -> None:
        self.runtime = runtime
        self.workdir = workdir
        self.tail: deque[str] = deque(maxlen=tail)
        # spark-submit's PythonRunner merges the Python driver's stderr into its stdout: search both
        self.lines: deque[str] = deque(maxlen=2000)
        self.marker_lines: list[str] = []
        self._lock = threading.Lock()

    def pump(self, stream: Any, name: str) -> None:
        from upsert_kafka_ops.runtime.driver import RESULT_MARKER

        level = logging.INFO
        with open(self.workdir / f"spark-submit.{name}", "w", encoding="utf-8") as saved:
            for raw in iter(stream.readline, b""):
                line = self.runtime.redact(raw.decode("utf-8", errors="replace").rstrip("\r\n"))
                if name == "out" and line.startswith(RESULT_MARKER + " "):
                    with self._lock:
                        self.marker_lines.append(line[len(RESULT_MARKER) + 1 :])
                    continue
                saved.write(line + "\n")
                saved.flush()
                level, text = jvm_line(line, level)  # WARN stays WARN in the orchestrator's log
                log.log(level, "spark-submit: %s", text)
                with self._lock:
                    self.tail.append(line)
                    self.lines.append(line)
        stream.close()


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=15)
            return
        except subprocess.TimeoutExpired:
            continue


def check_master_reachable(master: str, timeout: float = 10.0) -> None:
    """For a ``spark://`` master, fail at once when no listed master accepts a TCP connection.

    Spark's own client retries an unreachable master for about a minute before it gives up.

    :raises JobFailedError: naming the master URL and the connection error.
    """
    if not master.startswith("spark://"):
        return
    errors = []
    for address in master.removeprefix("spark://").split(","):
        host, sep, port = address.strip().rpartition(":")
        if not sep or not port.isdigit():
            raise JobFailedError(f"Spark master {master!r}: {address!r} is not host:port.")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return
        except OSError as exc:
            errors.append(f"{address}: {exc.strerror or exc}")
    raise JobFailedError(f"No Spark master answers at {master} ({'; '.join(errors)}).")


def _driver_error(lines: list[str]) -> str | None:
    for line in reversed(lines):
        text = line.strip()
        if _ERROR_LINE.match(text):
            return text
    return None


def _read_result_file(runtime: SparkSubmitRuntime) -> dict[str, Any] | None:
    from upsert_kafka_ops.runtime.driver import result_path

    assert runtime.result_uri is not None
    path = result_path(runtime.result_uri)
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    return data if isinstance(data, dict) else None


class SubmitHandle:
    """Lets another thread stop a running :func:`submit_driver` (an orchestrator's ``on_kill``)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self.killed = False

    def _attach(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._proc = proc
            kill = self.killed
        if kill:
            _kill_group(proc)

    def kill(self) -> None:
        """Stop spark-submit and its driver (the whole process group); safe to call at any time."""
        with self._lock:
            self.killed = True
            proc = self._proc
        if proc is not None and proc.poll() is None:
            _kill_group(proc)


def submit_driver(
    runtime: SparkSubmitRuntime,
    job_json: dict[str, Any],
    *,
    workdir: Path,
    function: str | None = None,
    tail_lines: int = 40,
    handle: SubmitHandle | None = None,
) -> dict[str, Any]:
    """Run a job with spark-submit and return the driver's run result.

    Writes ``workdir/job.json``, runs spark-submit with the driver entrypoint and keeps its output
    in ``workdir/spark-submit.out`` and ``.err`` (also logged at INFO, redacted).

    :param job_json: the job; secrets in it must be references (``{"env": "VAR"}``), whose values
        go in ``runtime.env``.
    :param function: ``module:function(spec, spark) -> dict`` to run instead of the job runner.
    :param handle: a :class:`SubmitHandle` whose ``kill()`` stops this run from another thread.
    :returns: the run result, ``{"version": 1, "status": "succeeded", "result": {...}, "spark":
        {...}, "duration_s": ...}`` (see :mod:`upsert_kafka_ops.runtime.driver`).
    :raises JobFailedError: on a non-zero exit, a timeout, a failed or missing result; the message
        has the driver's error line and the last ``tail_lines`` lines of output. Also, before any
        JVM starts, when no ``spark://`` master accepts a connection.
    """
    check_master_reachable(runtime.master)
    workdir = Path(workdir).resolve()
    cmd = _prepare(runtime, job_json, workdir, function)
    log.info("running %s", shlex.join(cmd))
    output = _Output(runtime, workdir, tail_lines)
    started = time.monotonic()
    code, timed_out = _run_process(runtime, cmd, workdir, output, handle)
    elapsed = time.monotonic() - started
    result, problem = _run_result(runtime, output)
    if not timed_out and code == 0 and result is not None and result.get("status") == "succeeded":
        log.info("spark-submit finished in %.1fs", elapsed)
        return result
    if handle is not None and handle.killed:
        what = "spark-submit was stopped on request (killed)"
    elif timed_out:
        what = f"spark-submit did not finish within {runtime.timeout_s:g}s and was killed"
    elif code != 0:
        what = f"spark-submit failed (exit {code})"
    elif result is None:
        what = problem or "the driver returned no run result"
    else:
        what = f"the job failed (status {result.get('status')!r})"
    driver_error = None
    if result is not None and result.get("error"):
        driver_error = runtime.redact(str(result["error"]))
    if driver_error is None:
        driver_error = _driver_error(list(output.lines))
    lines = list(output.tail)
    message = (
        f"{what}; master {runtime.master}, {runtime.deploy_mode} mode, output in {workdir}.\n"
        f"Driver error: {driver_error or '(none found in the output)'}\n"
        f"--- last {len(lines)} lines of spark-submit's output\n" + "\n".join(lines)
    )
    raise JobFailedError(
        message, driver_error=driver_error, returncode=None if timed_out else code, result=result
    )


_YARN_APP = re.compile(r"\b(application_\d+_\d+)\b")


def submit_application(
    runtime: SparkSubmitRuntime,
    job_json: dict[str, Any],
    *,
    workdir: Path,
    function: str | None = None,
    handle: SubmitHandle | None = None,
) -> str:
    """Submit a cluster-mode job to YARN and return its application id once YARN accepted it, without
    waiting for the run (``spark.yarn.submit.waitAppCompletion=false``): follow it with
    :func:`upsert_kafka_ops.runtime.yarn.application`, then read its result with
    :func:`application_result`.

    :raises SpecError: for a runtime other than YARN in cluster mode.
    :raises JobFailedError: when spark-submit fails or names no application.
    """
    if runtime.master != "yarn" or runtime.deploy_mode != "cluster":
        raise SpecError(
            "deploy_mode",
            "a run is followed without a process only in YARN cluster mode.",
            "use master='yarn' and deploy_mode='cluster' (with result_uri).",
        )
    detached = runtime.model_copy(
        update={"conf": {**runtime.conf, "spark.yarn.submit.waitAppCompletion": "false"}}
    )
    workdir = Path(workdir).resolve()
    cmd = _prepare(detached, job_json, workdir, function)
    log.info("submitting %s", shlex.join(cmd))
    output = _Output(detached, workdir, 40)
    code, timed_out = _run_process(detached, cmd, workdir, output, handle)
    ids = [m.group(1) for line in output.lines for m in [_YARN_APP.search(line)] if m]
    if code == 0 and not timed_out and ids:
        log.info("submitted YARN application %s", ids[-1])
        return ids[-1]
    lines = list(output.tail)
    if handle is not None and handle.killed:
        what = "was stopped"
    elif code:
        what = f"failed (exit {code})"
    else:
        what = "named no YARN application"
    raise JobFailedError(
        f"spark-submit {what}; output in {workdir}.\n--- last {len(lines)} lines\n" + "\n".join(lines),
        driver_error=_driver_error(list(output.lines)),
        returncode=code,
    )


def application_result(runtime: SparkSubmitRuntime, app: Any) -> dict[str, Any]:
    """The run result a cluster-mode driver wrote to ``result_uri``, once its YARN application ended
    (``app``: :class:`upsert_kafka_ops.runtime.yarn.Application`).

    :raises JobFailedError: when the application did not succeed or its result says the job failed;
        the message has YARN's diagnostics and the driver's error.
    """
    try:
        result = _read_result_file(runtime)
    except (OSError, ValueError) as exc:
        result, problem = None, f"the run result could not be read: {exc}"
    else:
        problem = "" if result is not None else f"the driver wrote no run result to {runtime.result_uri}"
    if app.succeeded and result is not None and result.get("status") == "succeeded":
        return result
    driver_error = (
        runtime.redact(str(result["error"])) if result is not None and result.get("error") else None
    )
    state = f"YARN application {app.id} ended {app.state}/{app.final_status}"
    diagnostics = runtime.redact(app.diagnostics.strip())[-2000:]
    raise JobFailedError(
        f"{state}; {problem or 'the job failed'}.\nDriver error: {driver_error or '(none reported)'}\n"
        f"YARN diagnostics: {diagnostics or '(none)'}",
        driver_error=driver_error,
        result=result,
    )


def _prepare(
    runtime: SparkSubmitRuntime, job_json: dict[str, Any], workdir: Path, function: str | None
) -> list[str]:
    """Write the job file (and a cluster driver's environment) into ``workdir``; the command to run."""
    workdir.mkdir(parents=True, exist_ok=True)
    job_file = workdir / "job.json"
    job_file.write_text(json.dumps(job_json, indent=2, sort_keys=True) + "\n")
    if runtime.result_uri:
        from upsert_kafka_ops.runtime.driver import result_path

        result_path(runtime.result_uri).unlink(missing_ok=True)  # never read a previous run's result
    properties = None
    if runtime.deploy_mode == "cluster" and runtime.env:
        properties = workdir / "driver-env.properties"
        _cluster_env_properties(runtime, properties)
    return submit_command(runtime, job_file, function=function, properties_file=properties)


def _run_process(
    runtime: SparkSubmitRuntime, cmd: list[str], workdir: Path, output: _Output, handle: SubmitHandle | None
) -> tuple[int | None, bool]:
    """Run spark-submit with its output pumped into ``output``: (exit code, whether it timed out). An
    interruption (Ctrl-C, a task killed by the orchestrator) takes Spark down too."""
    try:
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env=_process_env(runtime),
            cwd=workdir,
            start_new_session=True,
        )
    except OSError as exc:
        raise ToolchainError(f"cannot run spark-submit ({cmd[0]}): {exc.strerror}.") from None
    if handle is not None:
        handle._attach(proc)
    pumps = [
        threading.Thread(target=output.pump, args=(proc.stdout, "out"), daemon=True),
        threading.Thread(target=output.pump, args=(proc.stderr, "err"), daemon=True),
    ]
    for t in pumps:
        t.start()
    timed_out = False
    try:
        proc.wait(timeout=runtime.timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
    except BaseException:
        _kill_group(proc)
        raise
    for t in pumps:
        t.join(timeout=30)
    return proc.returncode, timed_out


def _run_result(runtime: SparkSubmitRuntime, output: _Output) -> tuple[dict[str, Any] | None, str]:
    """The driver's run result (its result file in cluster mode, else its marker line), or why not."""
    try:
        if runtime.deploy_mode == "cluster":
            return _read_result_file(runtime), ""
        if output.marker_lines:
            parsed = json.loads(output.marker_lines[-1])
            return (parsed if isinstance(parsed, dict) else None), ""
    except (OSError, ValueError) as exc:
        return None, f"the run result could not be read: {exc}"
    return None, ""
