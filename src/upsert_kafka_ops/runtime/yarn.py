"""A cluster-mode run on YARN, followed without holding a process: its application's state from the
ResourceManager's REST API (``/ws/v1/cluster/apps/<id>``), and a kill through the same API. What a
deferred Airflow task's trigger polls; plain blocking HTTP, run in a thread by async callers."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from upsert_kafka_ops.errors import JobFailedError

#: YARN's terminal application states
DONE = ("FINISHED", "FAILED", "KILLED")


@dataclass(frozen=True)
class Application:
    """A YARN application as the ResourceManager reports it."""

    id: str
    state: str  # NEW ... ACCEPTED, RUNNING, FINISHED, FAILED, KILLED
    final_status: str  # UNDEFINED while it runs; SUCCEEDED, FAILED, KILLED at the end
    diagnostics: str = ""
    tracking_url: str = ""

    @property
    def done(self) -> bool:
        return self.state in DONE

    @property
    def succeeded(self) -> bool:
        return self.state == "FINISHED" and self.final_status == "SUCCEEDED"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "state": self.state,
            "final_status": self.final_status,
            "diagnostics": self.diagnostics,
            "tracking_url": self.tracking_url,
        }


def _site(conf_dir: Path) -> dict[str, str]:
    path = conf_dir / "yarn-site.xml"
    if not path.is_file():
        return {}
    props = {}
    for prop in ET.parse(path).getroot().iter("property"):
        name, value = prop.findtext("name"), prop.findtext("value")
        if name and value is not None:
            props[name.strip()] = value.strip()
    return props


def resource_manager_url(conf_dir: str | Path | None = None) -> str:
    """The ResourceManager's web address from ``yarn-site.xml`` in ``conf_dir`` (default:
    ``HADOOP_CONF_DIR``, then ``YARN_CONF_DIR``): ``yarn.resourcemanager.webapp.address`` (https with
    ``yarn.http.policy=HTTPS_ONLY``), else the RM host on port 8088."""
    folder = conf_dir or os.environ.get("HADOOP_CONF_DIR") or os.environ.get("YARN_CONF_DIR")
    if not folder:
        raise JobFailedError(
            "No Hadoop configuration to find the YARN ResourceManager in: set hadoop_conf_dir "
            "on the runtime (or HADOOP_CONF_DIR)."
        )
    site = _site(Path(folder))
    https = site.get("yarn.http.policy", "HTTP_ONLY") == "HTTPS_ONLY"
    key = "yarn.resourcemanager.webapp.https.address" if https else "yarn.resourcemanager.webapp.address"
    address = (
        site.get(key) or f"{site.get('yarn.resourcemanager.hostname', '0.0.0.0')}:{8090 if https else 8088}"
    )
    return f"{'https' if https else 'http'}://{address}"


def _call(url: str, method: str = "GET", body: dict[str, Any] | None = None, timeout: float = 10.0) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        url,
        data=data,
        method=method,
        headers={"Accept": "application/json", "Content-Type": "application/json"},
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout) as resp:
            return json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        raise JobFailedError(f"YARN ResourceManager {url}: HTTP {exc.code} {exc.reason}.") from None
    except (OSError, ValueError) as exc:
        raise JobFailedError(f"YARN ResourceManager {url} did not answer: {exc}.") from None


def application(rm_url: str, app_id: str, timeout: float = 10.0) -> Application:
    """The application's state (one REST call)."""
    app = _call(f"{rm_url.rstrip('/')}/ws/v1/cluster/apps/{app_id}", timeout=timeout).get("app") or {}
    return Application(
        id=app_id,
        state=str(app.get("state", "")),
        final_status=str(app.get("finalStatus", "")),
        diagnostics=str(app.get("diagnostics", "") or ""),
        tracking_url=str(app.get("trackingUrl", "") or ""),
    )


def kill_application(rm_url: str, app_id: str, timeout: float = 10.0) -> None:
    """Ask the ResourceManager to kill the application (its driver and executors)."""
    _call(f"{rm_url.rstrip('/')}/ws/v1/cluster/apps/{app_id}/state", "PUT", {"state": "KILLED"}, timeout)
