"""A Spark History Server on 127.0.0.1 for the tests: Spark's own
(``org.apache.spark.deploy.history.HistoryServer`` from pyspark's jars, started with ``spark-class``
like the local cluster), reading the event logs that runs write into its folder.

A run shows up once it writes its event log there: give it :attr:`LocalSparkHistory.event_log_conf`
(``spark.eventLog.enabled``, ``spark.eventLog.dir``). The Airflow operators link to a run's page
(``spark_history_url``).
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
from upsert_kafka_ops.local.process import free_port, get_json, java_executable, stop_group, wait_ready
from upsert_kafka_ops.spark_lines import spark_home


class LocalSparkHistory:
    """A Spark History Server as a context manager.

    :param dir: folder for the event logs (``events/``), the configuration and the server's log.
    :param port: the web UI's port (default: a free one).
    """

    def __init__(self, dir: Path | str | None = None, *, port: int | None = None) -> None:
        self.dir = Path(dir if dir is not None else tempfile.mkdtemp(prefix="uko-history-")).resolve()
        self.port = port
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        if self.port is None or self._proc is None:
            raise LocalServiceError("The Spark History Server is not started.")
        return f"http://127.0.0.1:{self.port}"

    @property
    def events(self) -> Path:
        return self.dir / "events"

    @property
    def event_log_conf(self) -> dict[str, str]:
        """Spark settings that make a run write its event log where this server reads."""
        return {"spark.eventLog.enabled": "true", "spark.eventLog.dir": self.events.as_uri()}

    @property
    def log_file(self) -> Path:
        return self.dir / "history.log"

    def start(self, timeout: float = 120.0) -> LocalSparkHistory:
        if self._proc is not None:
            raise LocalServiceError("This Spark History Server is already started.")
        java_executable()  # a clear error when Java is missing
        self.events.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        conf_dir = self.dir / "conf"  # no spark-defaults.conf of the user
        conf_dir.mkdir(exist_ok=True)
        props = self.dir / "history.properties"
        props.write_text(
            f"spark.history.fs.logDirectory={self.events.as_uri()}\n"
            f"spark.history.ui.port={self.port}\n"
            "spark.history.fs.update.interval=1s\n"
        )
        env = {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_CONF_DIR": str(conf_dir),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_HOSTNAME": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": "512m",
            "PYSPARK_PYTHON": sys.executable,
        }
        cmd = [str(spark_home() / "bin" / "spark-class"), "org.apache.spark.deploy.history.HistoryServer",
               "--properties-file", str(props)]  # fmt: skip
        with open(self.log_file, "ab") as out:
            self._proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          env=env, cwd=self.dir, start_new_session=True)  # fmt: skip
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def get(self, path: str, timeout: float = 5.0) -> Any:
        """GET ``path`` of the server's REST API (``/api/v1/...``) as JSON."""
        return get_json(f"{self.url}{path}", timeout)

    def application(self, app_id: str, timeout: float = 60.0) -> dict[str, Any]:
        """The application as the server lists it, waiting until its event log has been read."""
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(OSError, ValueError):
                found: dict[str, Any] = self.get(f"/api/v1/applications/{app_id}")
                return found
            if time.monotonic() >= deadline:
                raise LocalServiceError(
                    f"The Spark History Server did not list {app_id} within {timeout:g}s."
                )
            time.sleep(0.5)

    def _wait_ready(self, timeout: float) -> None:
        def answers(left: float) -> bool:
            try:
                self.get("/api/v1/applications", timeout=min(2.0, max(left, 0.1)))
                return True
            except (OSError, ValueError):
                time.sleep(0.5)
                return False

        def tail() -> str:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-30:])

        wait_ready(self._proc, answers, timeout, "The Spark History Server", tail)

    def stop(self, timeout: float = 30.0) -> None:
        if self._proc is not None:
            stop_group(self._proc, timeout)
            self._proc = None

    def __enter__(self) -> LocalSparkHistory:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
