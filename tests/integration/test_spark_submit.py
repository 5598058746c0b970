"""spark-submit against a real Spark standalone cluster on 127.0.0.1 (master and worker from pyspark).

A job reads a topic over SCRAM; its password is a reference in the job JSON whose value only the
runtime's ``env`` carries, so it reaches the driver without touching the job file, the command
line or the result.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from tests.devservices import LocalSparkCluster
from tests.integration.jobs_support import oracle_table, produce, random_changes, rows_as_table, source

from upsert_kafka_ops import spark_lines
from upsert_kafka_ops.errors import JobFailedError, SpecError
from upsert_kafka_ops.jobs import Pipeline
from upsert_kafka_ops.jobs.core import JobResult
from upsert_kafka_ops.local import LocalKafka, free_port
from upsert_kafka_ops.runtime.driver import RESULT_MARKER
from upsert_kafka_ops.runtime.submit import SparkSubmitRuntime, submit_command, submit_driver

APP = Path(__file__).with_name("submit_app.py")
PASSWORD_VAR = "UKO_TEST_SCRAM_PASSWORD"
PASSWORD = "bob-secret"  # tests/shared_broker.py SCRAM_USERS


@pytest.fixture(scope="module")
def spark_cluster(jars_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSparkCluster]:
    """The module's cluster; when the module ends, it stops cleanly: its master and worker are gone,
    and a second stop does nothing (checked here rather than on a cluster of its own: two JVMs fewer)."""
    with LocalSparkCluster(tmp_path_factory.mktemp("spark-cluster"), cores=1, memory="1g") as cluster:
        pids = [p.pid for p in cluster._procs.values()]
        assert cluster.status()["aliveworkers"] == 1
        yield cluster
    cluster.stop()  # idempotent
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{pid}").exists() for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in pids if Path(f"/proc/{pid}").exists()]
    assert "Successfully registered with master" in cluster.log_file("worker").read_text()


def _runtime(cluster: LocalSparkCluster, **fields: Any) -> SparkSubmitRuntime:
    conf = {**cluster.driver_conf, "spark.driver.memory": "1g", "spark.sql.shuffle.partitions": "2"}
    return SparkSubmitRuntime(
        master=cluster.master_url, conf=conf, py_files=[str(APP)], timeout_s=900, **fields
    )


def _apps(cluster: LocalSparkCluster) -> set[str]:
    status = cluster.status()
    return {a["id"] for a in status.get("activeapps", []) + status.get("completedapps", [])}


@pytest.mark.lines  # each Spark line's lane submits one job to a standalone cluster of its own Spark
def test_scram_materialize_job_runs_on_the_cluster_with_the_secret_as_a_reference(
    kafka: LocalKafka,
    spark_cluster: LocalSparkCluster,
    new_topic: Callable[..., str],
    spark: SparkSession,
    tmp_path: Path,
) -> None:
    topic = new_topic(partitions=2)
    servers = kafka.bootstrap_servers
    written = produce(servers, topic, random_changes(random.Random(5), 40, 12))
    connection = {"bootstrap_servers": kafka.sasl_bootstrap_servers, "security_protocol": "SASL_PLAINTEXT",
                  "sasl_mechanism": "SCRAM-SHA-512", "username": "bob", "password": {"env": PASSWORD_VAR}}  # fmt: skip
    table_path = tmp_path / "users"
    job = {"name": "users", "kind": "materialize", "source": source(topic, servers),
           "target": {"kind": "delta", "path": str(table_path)}}  # fmt: skip
    p = Pipeline.model_validate({"connections": {"main": connection}, "jobs": [job]})
    assert PASSWORD_VAR not in os.environ  # only the runtime carries the value
    result_file = tmp_path / "out" / "result.json"
    runtime = _runtime(spark_cluster, env={PASSWORD_VAR: PASSWORD}, result_uri=result_file.as_uri())
    workdir = tmp_path / "run"

    result = submit_driver(runtime, {"pipeline": p.to_json_dict(), "job": "users"}, workdir=workdir)

    assert (result["version"], result["status"], result["error"]) == (1, "succeeded", None)
    run = JobResult.from_dict(result["result"])
    assert (run.job, run.mode, run.records_read) == ("users", "full", written)
    # the driver ran against the cluster
    assert result["spark"]["master"] == spark_cluster.master_url
    assert result["spark"]["deploy_mode"] == "client"
    assert result["spark"]["app_id"] in _apps(spark_cluster)
    # the table it wrote equals the oracle
    rows = spark.read.format("delta").load(str(table_path)).select("id", "name", "region", "score").collect()
    assert rows_as_table(rows) == oracle_table(servers, topic)
    # the same result went to the result URI
    assert json.loads(result_file.read_text()) == result
    # the secret travelled as a reference: not in the job file, the command, the result or the logs
    job_text = (workdir / "job.json").read_text()
    assert json.loads(job_text)["pipeline"]["connections"]["main"]["password"] == {"env": PASSWORD_VAR}
    assert PASSWORD not in job_text
    assert PASSWORD not in json.dumps(result)
    assert PASSWORD not in " ".join(submit_command(runtime, workdir / "job.json"))
    for name in ("spark-submit.out", "spark-submit.err"):
        assert PASSWORD not in (workdir / name).read_text()
    assert RESULT_MARKER not in (workdir / "spark-submit.out").read_text()


def test_a_failing_job_raises_its_own_error_with_secrets_redacted(
    spark_cluster: LocalSparkCluster, tmp_path: Path
) -> None:
    token = "tok-0123456789"
    runtime = _runtime(spark_cluster, env={"UKO_TEST_TOKEN": token})

    with pytest.raises(JobFailedError) as info:
        submit_driver(runtime, {"table": "orders"}, workdir=tmp_path, function="submit_app:fail")

    error = info.value
    assert error.driver_error == "ValueError: no table named 'orders' (token ***)"
    assert error.returncode == 1
    assert error.result is not None and error.result["status"] == "failed"
    text = str(error)
    assert "spark-submit failed (exit 1)" in text
    assert "ValueError: no table named 'orders' (token ***)" in text
    assert "--- last " in text and "Traceback (most recent call last)" in text  # the log tail
    assert token not in text
    for name in ("spark-submit.out", "spark-submit.err"):
        assert token not in (tmp_path / name).read_text()


def test_an_unreachable_master_fails_before_any_jvm_starts(tmp_path: Path) -> None:
    master = f"spark://127.0.0.1:{free_port()}"
    runtime = SparkSubmitRuntime(master=master, jars=[], timeout_s=60)

    with pytest.raises(JobFailedError, match=f"No Spark master answers at {master} .*refused"):
        submit_driver(runtime, {}, workdir=tmp_path, function="submit_app:fail")
    assert not (tmp_path / "job.json").exists()


def test_a_malformed_master_url_fails_with_spark_submits_message(tmp_path: Path) -> None:
    runtime = SparkSubmitRuntime(master="spork://127.0.0.1:7077", jars=[], timeout_s=120)

    with pytest.raises(JobFailedError) as info:
        submit_driver(runtime, {}, workdir=tmp_path, function="submit_app:fail")
    assert info.value.driver_error is not None
    assert "Master must either be yarn or start with spark, k8s, or local" in info.value.driver_error
    assert info.value.returncode not in (0, None)


def test_a_master_that_never_answers_is_killed_at_the_timeout(kafka: LocalKafka, tmp_path: Path) -> None:
    # the broker's port accepts TCP connections but speaks no Spark RPC: registration never succeeds
    master = f"spark://{kafka.bootstrap_servers}"
    runtime = SparkSubmitRuntime(
        master=master,
        conf={"spark.driver.host": "127.0.0.1"},
        jars=[],
        py_files=[str(APP)],
        project_conf=False,
        timeout_s=8,
    )

    with pytest.raises(JobFailedError) as info:
        submit_driver(runtime, {}, workdir=tmp_path, function="submit_app:fail")
    assert info.value.returncode is None
    assert f"spark-submit did not finish within 8s and was killed; master {master}" in str(info.value)


def test_standalone_cluster_mode_is_refused_for_python_jobs(spark_cluster: LocalSparkCluster) -> None:
    with pytest.raises(SpecError, match="client mode only") as info:
        SparkSubmitRuntime(master=spark_cluster.master_url, deploy_mode="cluster", result_uri="/tmp/r.json")
    assert info.value.field == "deploy_mode"
    with pytest.raises(SpecError, match="required in cluster mode"):
        SparkSubmitRuntime(master="yarn", deploy_mode="cluster")


def test_cluster_mode_ships_the_job_file_and_keeps_env_off_the_command(tmp_path: Path) -> None:
    runtime = SparkSubmitRuntime(
        master="k8s://https://127.0.0.1:6443",
        deploy_mode="cluster",
        result_uri="file:///shared/results/run.json",
        jars=[],
        project_conf=False,
        env={"KAFKA_PASSWORD": "very-secret-value"},
        spark_submit="/opt/spark/bin/spark-submit",
        # the cluster's Spark, given: else the runtime reads it from that spark-submit's --version
        spark_version=spark_lines.installed_version(),
    )
    job = tmp_path / "job.json"
    props = tmp_path / "driver-env.properties"
    cmd = submit_command(runtime, job, properties_file=props)

    assert cmd[:5] == ["/opt/spark/bin/spark-submit", "--master", runtime.master, "--deploy-mode", "cluster"]
    assert cmd[cmd.index("--files") + 1] == str(job)
    assert cmd[cmd.index("--properties-file") + 1] == str(props)
    assert cmd[-3:] == ["job.json", "--result-uri", "file:///shared/results/run.json"]
    assert "very-secret-value" not in " ".join(cmd)
