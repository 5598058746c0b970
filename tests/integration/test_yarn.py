"""Jobs in YARN cluster deploy mode on a real one-node YARN (``LocalYarn``: Hadoop's ResourceManager
and NodeManager from Maven Central): the Python driver runs in YARN's application master, writes its
result to ``result_uri``, and the target equals the plain-Python fold of the topic. A run submitted
without waiting returns at once and, killed, fails with YARN's state (the Airflow suite's deferrable
test follows one through the ResourceManager's REST API to its result)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from tests.devservices import LocalYarn
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
from upsert_kafka_ops.jobs import run_job
from upsert_kafka_ops.local import LocalKafka
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


def test_cluster_mode_continues_a_local_run_with_the_driver_in_yarn(
    yarn: LocalYarn, kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path
) -> None:
    """One YARN application (each is a driver and an executor JVM in containers): the full run happens
    in this process's session, the incremental one on YARN, waited for as spark-submit waits. A run
    submitted without waiting and finished later is the Airflow suite's deferrable YARN test (the
    operator calls submit_job and finish_job), and the killed run's below."""
    servers = kafka.bootstrap_servers
    topic = new_topic(partitions=2)
    rnd = random.Random(19)
    n = produce(servers, topic, random_changes(rnd, 200, 30))
    target = tmp_path / "users"
    p = pipeline(servers, [{"name": "users", "kind": "materialize", "source": source(topic, servers),
                            "target": {"kind": "delta", "path": str(target)}}])  # fmt: skip
    assert run_job(p, "users", spark=spark).records_read == n

    more = produce(servers, topic, random_changes(rnd, 20, 30))
    runtime = _runtime(yarn, tmp_path)
    second = execute_job(p, "users", runtime=runtime, workdir=tmp_path / "second")  # waits
    assert (second.status, second.mode, second.run, second.records_read) == (
        "succeeded",
        "incremental",
        2,
        more,
    )
    assert second.spark_app_id.startswith("application_")  # the driver ran in YARN, not here
    assert application(yarn.rm_url, second.spark_app_id).succeeded
    table = rows_as_table(spark.read.format("delta").load(str(target)).collect())
    assert table == oracle_table(servers, topic)


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
    assert submitted.rm_url == yarn.rm_url and submitted.app_id.startswith("application_")
    assert not application(yarn.rm_url, submitted.app_id).done  # submit_job returned before the run ended
    kill_application(submitted.rm_url, submitted.app_id)
    ended = _wait(submitted.rm_url, submitted.app_id)
    assert ended.state == "KILLED"
    with pytest.raises(JobFailedError, match=rf"YARN application {submitted.app_id} ended KILLED"):
        finish_job(p, "doomed", runtime, ended)
    assert not (tmp_path / "doomed" / "_delta_log").exists()  # killed before any commit
