"""A Spark standalone cluster on 127.0.0.1: one master and one worker from the pyspark installation.

The pip distribution of pyspark ships ``bin/spark-class`` but not ``sbin/start-master.sh``, so the
master and the worker are started in the foreground with ``spark-class``, each in its own process
group (the worker's executors live in the worker's group), and stopped by killing those groups::

    with LocalSparkCluster(tmp_path) as cluster:
        submit_driver(SparkSubmitRuntime(master=cluster.master_url, conf=cluster.driver_conf), ...)

Everything binds to loopback on free ports and needs no network. The worker runs Python with this
interpreter (``PYSPARK_PYTHON``), so the driver and the executors share one environment.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from upsert_kafka_ops.errors import LocalServiceError
from upsert_kafka_ops.local.process import free_ports, get_json, java_executable, stop_group
from upsert_kafka_ops.spark_lines import spark_home


class LocalSparkCluster:
    """A standalone master and one worker on free loopback ports, as a context manager.

    :param dir: folder for logs (``master.log``, ``worker.log``) and the worker's work folder
        (executor logs under ``work/<app-id>/``); a temporary folder when not given.
    :param cores: cores the worker offers.
    :param memory: memory the worker offers to executors (Spark size, e.g. ``1g``, ``512m``).
    :param daemon_memory: heap of the master and worker JVMs themselves.
    """

    def __init__(
        self,
        dir: Path | str | None = None,
        *,
        cores: int = 1,
        memory: str = "1g",
        daemon_memory: str = "512m",
    ) -> None:
        self.dir = Path(dir if dir is not None else tempfile.mkdtemp(prefix="uko-spark-")).resolve()
        self.cores = cores
        self.memory = memory
        self.daemon_memory = daemon_memory
        self.ports: dict[str, int] = {}
        self._procs: dict[str, subprocess.Popen[bytes]] = {}

    # -- addresses -------------------------------------------------------------------------
    @property
    def master_url(self) -> str:
        """``spark://127.0.0.1:PORT``."""
        if "master" not in self.ports:
            raise LocalServiceError("The Spark cluster is not started.")
        return f"spark://127.0.0.1:{self.ports['master']}"

    @property
    def master_ui_url(self) -> str:
        if "master_ui" not in self.ports:
            raise LocalServiceError("The Spark cluster is not started.")
        return f"http://127.0.0.1:{self.ports['master_ui']}"

    @property
    def driver_conf(self) -> dict[str, str]:
        """Spark settings for a driver on this machine: loopback only, this Python on the executors
        (Python workers run what the driver names), executors sized to fit the worker."""
        return {
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.pyspark.python": sys.executable,
            "spark.executor.memory": self.memory,
            "spark.executor.cores": str(self.cores),
        }

    def log_file(self, role: str) -> Path:
        """``master`` or ``worker``: the process's console output (Spark logs to stderr)."""
        return self.dir / f"{role}.log"

    # -- lifecycle -------------------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        home = spark_home()
        conf_dir = self.dir / "conf"  # empty: no spark-env.sh or spark-defaults.conf of the user
        conf_dir.mkdir(exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_WORKER_", "SPARK_MASTER_"))}
        env.update(
            SPARK_HOME=str(home),
            SPARK_CONF_DIR=str(conf_dir),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOCAL_HOSTNAME="127.0.0.1",
            SPARK_DAEMON_MEMORY=self.daemon_memory,
            SPARK_LOG_DIR=str(self.dir),
            PYSPARK_PYTHON=sys.executable,
            PYSPARK_DRIVER_PYTHON=sys.executable,
        )
        return env

    def _spawn(self, role: str, args: list[str], env: dict[str, str]) -> None:
        cmd = [str(spark_home() / "bin" / "spark-class"), *args]
        with open(self.log_file(role), "ab") as out:
            self._procs[role] = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                cwd=self.dir, start_new_session=True,
            )  # fmt: skip

    def start(self, timeout: float = 180.0) -> LocalSparkCluster:
        """Start the master and the worker; returns once the worker is registered and alive.

        :raises LocalServiceError: when a process exits or the worker does not register within
            ``timeout`` seconds; the message carries the tail of both logs.
        """
        if self._procs:
            raise LocalServiceError("This Spark cluster is already started.")
        java_executable()  # a clear error when Java is missing
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "work").mkdir(exist_ok=True)
        env = self._env()
        names = ("master", "master_ui", "worker", "worker_ui")
        self.ports = dict(zip(names, free_ports(len(names)), strict=True))
        try:
            self._spawn(
                "master",
                [
                    "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.ports["master"]), "--webui-port", str(self.ports["master_ui"]),
                ],
                env,
            )  # fmt: skip
            self._spawn(
                "worker",
                [
                    "org.apache.spark.deploy.worker.Worker", self.master_url, "--host", "127.0.0.1",
                    "--port", str(self.ports["worker"]), "--webui-port", str(self.ports["worker_ui"]),
                    "--cores", str(self.cores), "--memory", self.memory,
                    "--work-dir", str(self.dir / "work"),
                ],
                env,
            )  # fmt: skip
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def status(self, timeout: float = 5.0) -> dict[str, Any]:
        """The master's state as its web UI reports it (``/json/``: workers, apps, status)."""
        data: dict[str, Any] = get_json(f"{self.master_ui_url}/json/", timeout)
        return data

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            for role, proc in self._procs.items():
                if proc.poll() is not None:
                    raise LocalServiceError(
                        f"The Spark {role} exited with code {proc.returncode} during start.\n{self.log_tail()}"
                    )
            with contextlib.suppress(OSError, ValueError):
                workers = self.status(timeout=2.0).get("workers", [])
                if any(w.get("state") == "ALIVE" and w.get("port") == self.ports["worker"] for w in workers):
                    return
            if time.monotonic() >= deadline:
                raise LocalServiceError(
                    f"The Spark worker did not register with the master within {timeout:g}s.\n{self.log_tail()}"
                )
            time.sleep(0.5)

    def log_tail(self, lines: int = 30) -> str:
        """The first ERROR lines and the last lines of the master's and the worker's logs."""
        parts = []
        for role in ("master", "worker"):
            f = self.log_file(role)
            if not f.is_file():
                continue
            text = f.read_text(errors="replace").splitlines()
            errors = [ln for ln in text if " ERROR " in ln or ln.startswith(("Exception", "Caused by"))][:10]
            if errors:
                parts.append(f"--- {f} (errors)\n" + "\n".join(errors))
            parts.append(f"--- {f} (last {min(lines, len(text))} lines)\n" + "\n".join(text[-lines:]))
        return "\n".join(parts) or "(no Spark log was written)"

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the worker (and its executors), then the master; a no-op when not running."""
        for role in ("worker", "master"):
            proc = self._procs.pop(role, None)
            if proc is not None:
                stop_group(proc, timeout)
        self._procs.clear()

    def __enter__(self) -> LocalSparkCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
