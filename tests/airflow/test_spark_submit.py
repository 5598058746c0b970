"""The operator on the spark-submit runtime (chosen by an ``upsert_kafka_spark`` connection): the
Airflow connection's SASL password reaches the driver through its environment only, ``on_kill``
stops a running job, and the rerun completes with the table equal to the oracle."""

from __future__ import annotations

import json
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowException
from tests.devservices import LocalSparkHistory
from tests.integration.jobs_support import oracle_table, produce, random_changes, rows_as_table, source

from upsert_kafka_ops.airflow.operators import SparkHistoryLink, UpsertKafkaMaterializeOperator
from upsert_kafka_ops.local import LocalKafka

from .conftest import PASSWORD


def test_on_kill_stops_spark_submit_and_the_rerun_completes(
    kafka: LocalKafka, kafka_default: dict[str, str], new_topic: Callable[..., str], spark: Any,
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    import random

    topic = new_topic(partitions=2, config={"cleanup.policy": "compact"})
    produce(kafka.bootstrap_servers, topic, random_changes(random.Random(7), 300, 40))
    monkeypatch.setenv("AIRFLOW_CONN_SUBMIT_LOCAL", json.dumps(
        {"conn_type": "upsert_kafka_spark", "host": "local[1]",
         "extra": {"runtime": "spark-submit", "timeout_s": 600}}))  # fmt: skip
    job = {"name": "killable", "kind": "materialize", "source": source(topic, ""),
           "target": {"kind": "delta", "path": str(tmp_path / "users")}}  # fmt: skip
    flag = tmp_path / "go"
    monkeypatch.setenv("UKO_FAULT_POINT", f"pause:after-read:{flag}")

    def operator(task_id: str, **kw: Any) -> UpsertKafkaMaterializeOperator:
        return UpsertKafkaMaterializeOperator(task_id=task_id, job=job, kafka_config_ids={"main": "kafka_default"},
                                              spark_config_id="submit_local", **kw)  # fmt: skip

    op = operator("kill_me")
    outcome: dict[str, BaseException | dict[str, Any]] = {}

    def run() -> None:
        try:
            outcome["result"] = op.execute(context={})  # type: ignore[arg-type]
        except BaseException as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=run)
    worker.start()
    deadline = time.monotonic() + 300
    while not Path(f"{flag}.reached").exists():
        assert worker.is_alive(), f"the job ended before the pause point: {outcome}"
        assert time.monotonic() < deadline, "the driver never reached the pause point"
        time.sleep(0.5)
    # the job file the driver read references the password; its value went through the environment
    job_files = sorted(
        Path(tempfile.gettempdir()).glob("uko-kill_me-*/job.json"), key=lambda p: p.stat().st_mtime
    )
    text = job_files[-1].read_text()
    assert PASSWORD not in text and "UKO_SECRET_MAIN_PASSWORD" in text
    op.on_kill()
    worker.join(timeout=60)
    assert not worker.is_alive(), "on_kill did not stop the run"
    error = outcome.get("error")
    assert isinstance(error, AirflowException) and "stopped on request" in str(error), outcome
    assert PASSWORD not in str(error)
    assert not (tmp_path / "users" / "_delta_log").exists()  # killed before the commit: nothing written

    monkeypatch.delenv("UKO_FAULT_POINT")
    # the rerun writes its event log where a real Spark History Server reads: the task's link opens it
    with LocalSparkHistory(tmp_path / "history") as history:
        rerun = operator("rerun", spark_conf=history.event_log_conf, spark_history_url=history.url)
        result = rerun.execute(context={})  # type: ignore[arg-type]
        app = result["spark_app_id"]
        assert app and history.application(app)["name"]  # the driver's application, read from its log
        link = SparkHistoryLink().get_link(rerun, ti_key=None)
        assert link == f"{history.url}/history/{app}/"
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(link, timeout=30) as page:
            assert page.status == 200 and app in page.read().decode(errors="replace")
    assert "| records read | 300 |" in rerun.run_summary  # the task view's rendered summary
    assert result["status"] == "succeeded" and result["records_read"] == 300
    assert PASSWORD not in json.dumps(result)
    table = spark.read.format("delta").load(str(tmp_path / "users")).select("id", "name", "region", "score")
    assert rows_as_table(table.collect()) == oracle_table(kafka.bootstrap_servers, topic)


async def _first_event(trigger: Any) -> Any:
    async for event in trigger.run():
        return event
    raise AssertionError("the trigger ended without an event")


def test_a_deferrable_run_on_yarn_frees_the_worker_and_resumes_with_the_result(
    kafka: LocalKafka, kafka_default: dict[str, str], new_topic: Callable[..., str], spark: Any,
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """Submit to a real YARN in cluster mode, defer to the trigger (built again from its kwargs, as the
    triggerer does), resume in a new operator (as another worker does) with the run's result; a user's
    kill of the deferred task kills the application."""
    import asyncio
    import random

    from airflow.sdk.exceptions import TaskDeferred
    from tests.devservices import LocalYarn

    from upsert_kafka_ops import jars
    from upsert_kafka_ops.airflow.triggers import SparkApplicationTrigger

    topic = new_topic(partitions=2)
    n = produce(kafka.bootstrap_servers, topic, random_changes(random.Random(5), 120, 30))
    job = {"name": "on-yarn", "kind": "materialize", "source": source(topic, ""),
           "target": {"kind": "delta", "path": str(tmp_path / "users")}}  # fmt: skip
    jars.fetch(["yarn"], log=False)
    with LocalYarn(tmp_path / "yarn") as yarn:
        monkeypatch.setenv("AIRFLOW_CONN_YARN_CLUSTER", json.dumps({
            "conn_type": "upsert_kafka_spark", "host": "yarn",
            "extra": {"runtime": "spark-submit", "deploy_mode": "cluster", "hadoop_conf_dir": str(yarn.conf_dir),
                      "result_uri": str(tmp_path / "result.json"), "conf": yarn.driver_conf, "timeout_s": 600}}))  # fmt: skip

        def operator(task_id: str) -> UpsertKafkaMaterializeOperator:
            return UpsertKafkaMaterializeOperator(task_id=task_id, job=job, kafka_config_ids={"main": "kafka_default"},
                                                  spark_config_id="yarn_cluster", deferrable=True, poll_interval=1)  # fmt: skip

        with pytest.raises(TaskDeferred) as deferred:
            operator("deferred").execute(context={})  # type: ignore[arg-type]
        assert deferred.value.method_name == "execute_complete"
        path, kwargs = deferred.value.trigger.serialize()
        assert path == "upsert_kafka_ops.airflow.triggers.SparkApplicationTrigger"
        assert kwargs["rm_url"] == yarn.rm_url and PASSWORD not in json.dumps(kwargs)
        event = asyncio.run(_first_event(SparkApplicationTrigger(**kwargs)))
        assert event.payload["status"] == "done" and event.payload["app"]["final_status"] == "SUCCEEDED"
        resumed = operator("deferred")
        result = resumed.execute_complete(context={}, event=event.payload)  # type: ignore[arg-type]
        assert (result["status"], result["records_read"]) == ("succeeded", n)
        assert result["spark_app_id"] == kwargs["app_id"] and PASSWORD not in json.dumps(result)
        assert f"| records read | {n} |" in resumed.run_summary
        table = (
            spark.read.format("delta").load(str(tmp_path / "users")).select("id", "name", "region", "score")
        )
        assert rows_as_table(table.collect()) == oracle_table(kafka.bootstrap_servers, topic)

        with pytest.raises(TaskDeferred) as again:  # a user marks this one failed while it waits
            operator("killed").execute(context={})  # type: ignore[arg-type]
        trigger = SparkApplicationTrigger(**again.value.trigger.serialize()[1])
        asyncio.run(trigger.on_kill())
        killed = asyncio.run(_first_event(trigger))
        assert killed.payload["app"]["state"] == "KILLED"
        with pytest.raises(AirflowException, match="ended KILLED"):
            operator("killed").execute_complete(context={}, event=killed.payload)  # type: ignore[arg-type]


def test_deferrable_without_a_yarn_cluster_runtime_fails_naming_the_field(
    kafka_default: dict[str, str],
) -> None:
    op = UpsertKafkaMaterializeOperator(task_id="t", pipeline_file=str(Path(__file__).parents[2] / "pipelines" / "demo.yaml"),
                                        job_name="users-to-delta", kafka_config_ids={"local": "kafka_default"},
                                        deferrable=True)  # fmt: skip
    with pytest.raises(AirflowException, match=r"deferrable.*YARN in cluster deploy mode"):
        op.execute(context={})  # type: ignore[arg-type]
