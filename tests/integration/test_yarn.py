"""Jobs in YARN cluster deploy mode on a real one-node YARN (``LocalYarn``: Hadoop's ResourceManager
and NodeManager from Maven Central): the Python driver runs in YARN's application master, writes its
result to ``result_uri``, and the target equals the plain-Python fold of the topic. A run submitted
without waiting is followed through the ResourceManager's REST API and finished later, as a deferred
Airflow task does; a killed one fails with YARN's state."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from tests.integration.jobs_support import (
    oracle_table,
    pipeline,
    produce,
    random_changes,
    rows_as_table,
    source,
)

from upsert_kafka_ops import jars
from upsert_kafka_ops.errors import JobFailedError
from upsert_kafka_ops.local import LocalKafka
from upsert_kafka_ops.local.yarn import LocalYarn
from upsert_kafka_ops.runtime import SparkSubmitRuntime, execute_job, finish_job, submit_job
from upsert_kafka_ops.runtime.yarn import Application, application, kill_application

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def yarn(jars_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalYarn]:
    jars.fetch(["yarn"], log=False)
    with LocalYarn(tmp_path_factory.mktemp("yarn")) as cluster:
        yield cluster


def _runtime(yarn: LocalYarn, folder: Path) -> SparkSubmitRuntime:
    return SparkSubmitRuntime(master="yarn", deploy_mode="cluster", conf=yarn.driver_conf,
                              hadoop_conf_dir=str(yarn.conf_dir), result_uri=str(folder / "result.json"),
                              timeout_s=600)  # fmt: skip


def _wait(rm_url: str, app_id: str, timeout: float = 600) -> Application:
    deadline = time.monotonic() + timeout
    while True:
        app = application(rm_url, app_id)
        if app.done:
            return app
        assert time.monotonic() < deadline, f"{app_id} still {app.state} after {timeout:g}s"
        time.sleep(1)


def test_cluster_mode_runs_the_driver_in_yarn_and_a_detached_run_is_finished_later(
    yarn: LocalYarn, kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path
) -> None:
    servers = kafka.bootstrap_servers
    topic = new_topic(partitions=2)
    rnd = random.Random(19)
    n = produce(servers, topic, random_changes(rnd, 200, 30))
    target = tmp_path / "users"
    p = pipeline(servers, [{"name": "users", "kind": "materialize", "source": source(topic, servers),
                            "target": {"kind": "delta", "path": str(target)}}])  # fmt: skip
    runtime = _runtime(yarn, tmp_path)

    first = execute_job(
        p, "users", runtime=runtime, workdir=tmp_path / "first"
    )  # waits, as spark-submit does
    assert (first.status, first.mode, first.records_read) == ("succeeded", "full", n)
    assert first.spark_app_id.startswith("application_")  # the driver ran in YARN, not here
    table = lambda: rows_as_table(spark.read.format("delta").load(str(target)).collect())  # noqa: E731
    assert table() == oracle_table(servers, topic)

    more = produce(servers, topic, random_changes(rnd, 20, 30))
    submitted = submit_job(p, "users", runtime=runtime, workdir=tmp_path / "second")
    assert submitted.rm_url == yarn.rm_url and submitted.app_id.startswith("application_")
    assert not application(yarn.rm_url, submitted.app_id).done  # submit_job returned before the run ended
    ended = _wait(submitted.rm_url, submitted.app_id)
    assert ended.succeeded, ended
    second = finish_job(p, "users", runtime, ended)
    assert (second.mode, second.run, second.records_read) == ("incremental", 2, more)
    assert second.spark_app_id == submitted.app_id
    assert table() == oracle_table(servers, topic)


def test_a_killed_application_fails_its_run_with_yarns_state(
    yarn: LocalYarn, kafka: LocalKafka, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    servers = kafka.bootstrap_servers
    topic = new_topic(partitions=1)
    produce(servers, topic, random_changes(random.Random(3), 20, 5))
    p = pipeline(servers, [{"name": "doomed", "kind": "materialize", "source": source(topic, servers),
                            "target": {"kind": "delta", "path": str(tmp_path / "doomed")}}])  # fmt: skip
    runtime = _runtime(yarn, tmp_path)
    submitted = submit_job(p, "doomed", runtime=runtime, workdir=tmp_path / "run")
    kill_application(submitted.rm_url, submitted.app_id)
    ended = _wait(submitted.rm_url, submitted.app_id)
    assert ended.state == "KILLED"
    with pytest.raises(JobFailedError, match=rf"YARN application {submitted.app_id} ended KILLED"):
        finish_job(p, "doomed", runtime, ended)
    assert not (tmp_path / "doomed" / "_delta_log").exists()  # killed before any commit
