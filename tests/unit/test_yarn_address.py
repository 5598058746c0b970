"""The ResourceManager's address as the Hadoop configuration gives it (no YARN here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from upsert_kafka_ops.errors import JobFailedError
from upsert_kafka_ops.runtime.yarn import Application, resource_manager_url


def _site(folder: Path, **props: str) -> Path:
    body = "".join(
        f"<property><name>{k.replace('_', '.')}</name><value>{v}</value></property>" for k, v in props.items()
    )
    (folder / "yarn-site.xml").write_text(f"<configuration>{body}</configuration>")
    return folder


def test_the_webapp_address_the_host_default_and_https(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "c").mkdir()
    web = _site(tmp_path / "a", **{"yarn_resourcemanager_webapp_address": "rm-1:18088"})
    assert resource_manager_url(web) == "http://rm-1:18088"
    host = _site(tmp_path / "b", **{"yarn_resourcemanager_hostname": "rm-2"})
    assert resource_manager_url(host) == "http://rm-2:8088"
    secure = _site(
        tmp_path / "c", **{"yarn_http_policy": "HTTPS_ONLY", "yarn_resourcemanager_hostname": "rm-3"}
    )
    assert resource_manager_url(secure) == "https://rm-3:8090"
    monkeypatch.setenv("HADOOP_CONF_DIR", str(web))
    assert resource_manager_url() == "http://rm-1:18088"  # the environment's, as spark-submit reads it
    monkeypatch.delenv("HADOOP_CONF_DIR")
    monkeypatch.delenv("YARN_CONF_DIR", raising=False)
    with pytest.raises(JobFailedError, match="hadoop_conf_dir"):
        resource_manager_url()


def test_an_application_is_done_and_succeeded_only_at_the_end() -> None:
    running = Application("application_1_0001", "RUNNING", "UNDEFINED")
    assert not running.done and not running.succeeded
    assert Application("application_1_0001", "FINISHED", "SUCCEEDED").succeeded
    failed = Application("application_1_0001", "FINISHED", "FAILED")
    assert failed.done and not failed.succeeded
    assert Application(**failed.to_dict()) == failed  # the trigger's event payload round-trips
