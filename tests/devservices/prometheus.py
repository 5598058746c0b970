"""A Prometheus server and a Pushgateway on 127.0.0.1 for the tests: Debian's builds
(``make prometheus`` extracts the ``prometheus`` and ``prometheus-pushgateway`` packages into the tool
cache; no root, no service), found on ``UKO_PROMETHEUS_BIN`` (a folder) or the ``PATH``.

:class:`LocalPrometheus` scrapes the targets it is given every ``scrape_interval_s`` and evaluates
the rule files it is given every ``evaluation_interval_s``; :meth:`LocalPrometheus.query` and
:meth:`LocalPrometheus.alerts` read its HTTP API.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from upsert_kafka_ops.errors import LocalServiceError
from upsert_kafka_ops.local.process import free_port, get_json, stop_group, wait_ready


def binary(name: str) -> str:
    """The path of ``prometheus``, ``promtool`` or ``pushgateway``: ``UKO_PROMETHEUS_BIN`` first, then
    the ``PATH``."""
    folder = os.environ.get("UKO_PROMETHEUS_BIN")
    found = shutil.which(name, path=folder) if folder else shutil.which(name)
    if found is None:
        raise LocalServiceError(
            f"{name} is not installed. Run `make prometheus` (Debian's prometheus and "
            "prometheus-pushgateway packages, extracted into the tool cache) and set "
            "UKO_PROMETHEUS_BIN to its folder, or put the binaries on the PATH."
        )
    return found


class _Server:
    """A local HTTP service started from one binary, stopped with its process group."""

    what = "the service"

    def __init__(self, dir: Path | str | None, port: int | None) -> None:
        self.dir = Path(dir if dir is not None else tempfile.mkdtemp(prefix="uko-prom-")).resolve()
        self.port = port
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        if self.port is None or self._proc is None:
            raise LocalServiceError(f"{self.what} is not started.")
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.dir / "server.log"

    def _launch(self, cmd: list[str], ready_path: str, timeout: float) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as out:
            self._proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          cwd=self.dir, start_new_session=True)  # fmt: skip

        def answers(left: float) -> bool:
            try:
                get_json(f"{self.url}{ready_path}", timeout=min(2.0, max(left, 0.1)))
                return True
            except (OSError, ValueError):
                time.sleep(0.3)
                return False

        def tail() -> str:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-30:])

        try:
            wait_ready(self._proc, answers, timeout, self.what, tail)
        except BaseException:
            self.stop()
            raise

    def stop(self, timeout: float = 15.0) -> None:
        if self._proc is not None:
            stop_group(self._proc, timeout)
            self._proc = None


class LocalPushgateway(_Server):
    """Prometheus's Pushgateway as a context manager (in-memory: nothing persists)."""

    what = "The Pushgateway"

    def __init__(self, dir: Path | str | None = None, *, port: int | None = None) -> None:
        super().__init__(dir, port)

    def start(self, timeout: float = 60.0) -> LocalPushgateway:
        self.port = self.port or free_port()
        cmd = [binary("pushgateway"), f"--web.listen-address=127.0.0.1:{self.port}"]
        self._launch(cmd, "/api/v1/status", timeout)
        return self

    def __enter__(self) -> LocalPushgateway:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class LocalPrometheus(_Server):
    """A Prometheus server as a context manager.

    :param targets: ``host:port`` addresses scraped under the scrape job ``upsert-kafka-ops``.
    :param rule_files: Prometheus rule files (alerting and recording rules) it evaluates.
    :param honor_labels: keep the targets' own labels on a clash (as for a Pushgateway).
    """

    what = "Prometheus"

    def __init__(
        self,
        targets: Sequence[str],
        *,
        rule_files: Sequence[Path] = (),
        scrape_interval_s: float = 5.0,
        evaluation_interval_s: float = 5.0,
        honor_labels: bool = False,
        dir: Path | str | None = None,
        port: int | None = None,
    ) -> None:
        super().__init__(dir, port)
        self.targets, self.rule_files = list(targets), [Path(f).resolve() for f in rule_files]
        self.scrape_interval_s, self.evaluation_interval_s = scrape_interval_s, evaluation_interval_s
        self.honor_labels = honor_labels

    def config(self) -> dict[str, Any]:
        """The prometheus.yml written at start."""
        return {
            "global": {
                "scrape_interval": f"{self.scrape_interval_s:g}s",
                "scrape_timeout": f"{min(self.scrape_interval_s, 10.0):g}s",
                "evaluation_interval": f"{self.evaluation_interval_s:g}s",
            },
            "rule_files": [str(f) for f in self.rule_files],
            "scrape_configs": [
                {
                    "job_name": "upsert-kafka-ops",
                    "honor_labels": self.honor_labels,
                    "static_configs": [{"targets": self.targets}],
                }
            ],
        }

    def start(self, timeout: float = 60.0) -> LocalPrometheus:
        self.port = self.port or free_port()
        self.dir.mkdir(parents=True, exist_ok=True)
        conf = self.dir / "prometheus.yml"
        conf.write_text(json.dumps(self.config(), indent=2))  # JSON is YAML
        cmd = [binary("prometheus"), f"--config.file={conf}", f"--storage.tsdb.path={self.dir / 'data'}",
               f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1d"]  # fmt: skip
        self._launch(cmd, "/api/v1/status/buildinfo", timeout)
        return self

    def api(self, path: str, **params: Any) -> Any:
        """GET ``/api/v1/<path>`` and return its ``data`` (an error answer raises, with Prometheus's text)."""
        query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        doc = get_json(f"{self.url}/api/v1/{path}" + (f"?{query}" if query else ""), 60.0)
        if doc.get("status") != "success":
            raise LocalServiceError(f"Prometheus answered {doc.get('errorType')}: {doc.get('error')}")
        return doc["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """An instant query's vector (``[{"metric": {...}, "value": [ts, "v"]}]``)."""
        data = self.api("query", query=expr, time=at)
        result: list[dict[str, Any]] = data["result"]
        return result

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.api("query_range", query=expr, start=start, end=end, step=step)[
            "result"
        ]
        return result

    def alerts(self) -> list[dict[str, Any]]:
        """The alerts pending or firing now (``labels``, ``state``, ``annotations``)."""
        found: list[dict[str, Any]] = self.api("alerts")["alerts"]
        return found

    def rules(self) -> list[dict[str, Any]]:
        """The loaded rule groups with each rule's health and last error."""
        groups: list[dict[str, Any]] = self.api("rules")["groups"]
        return groups

    def targets_up(self) -> dict[str, str]:
        """Each scrape target's health (``up``, ``down``, ``unknown``)."""
        active = self.api("targets")["activeTargets"]
        return {t["labels"]["instance"]: t["health"] for t in active}

    def __enter__(self) -> LocalPrometheus:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
