"""``dagster-daemon`` as a deployment runs it, on ``dagster_defs/definitions.py``: with the new-data
sensor started, records arriving in the source topic make the daemon launch a run of the job's
assets (in a process of its own, local Spark), and the table equals the fold of the topic. Sensors
evaluated by the daemon's code server get their resources the daemon's way, not a test helper's."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from tests.dagster.support import one_job
from tests.integration.jobs_support import oracle_table, produce, random_changes, rows_as_table

import dagster as dg
from upsert_kafka_ops.local import LocalKafka
from upsert_kafka_ops.local.process import stop_group

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_the_daemon_launches_a_run_when_records_arrive(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    spark: SparkSession,
    jars_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic = new_topic(partitions=2)
    target = tmp_path / "users"
    pipe = one_job(kafka.bootstrap_servers, topic, target)
    job = pipe.jobs[0].name
    pipelines = tmp_path / "pipelines"
    pipelines.mkdir()
    (pipelines / "users.yaml").write_text(pipe.to_yaml())
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    workspace = tmp_path / "workspace.yaml"
    workspace.write_text(
        "load_from:\n  - python_file:\n"
        f"      relative_path: {ROOT / 'dagster_defs' / 'definitions.py'}\n"
        f"      working_directory: {ROOT}\n"
    )
    env = {**os.environ, "DAGSTER_HOME": str(home), "UKO_PIPELINES_DIR": str(pipelines),
           "UKO_BOOTSTRAP_SERVERS": kafka.bootstrap_servers, "UPSERT_KAFKA_OPS_JARS_DIR": str(jars_dir)}  # fmt: skip
    sensor = "upsert_kafka_new_data_" + "".join(c if c.isalnum() else "_" for c in job)
    started = subprocess.run([str(BIN / "dagster"), "sensor", "start", sensor, "-w", str(workspace)], env=env,
                             capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert started.returncode == 0, started.stdout + started.stderr

    n = produce(kafka.bootstrap_servers, topic, random_changes(random.Random(8), 40, 12))
    log = tmp_path / "daemon.log"
    with open(log, "wb") as out:
        daemon = subprocess.Popen([str(BIN / "dagster-daemon"), "run", "-w", str(workspace)], env=env, stdout=out,
                                  stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    try:
        instance = dg.DagsterInstance.get()
        # the sensor requests the run within 240 s; the run (a new process starting Spark) then takes
        # what the machine's load makes it: beside make test's other suites, one run that began late
        # under a single shared deadline was cut off while it committed
        deadline = time.monotonic() + 240
        run = None
        while time.monotonic() < deadline:
            runs = instance.get_runs(filters=dg.RunsFilter(tags={"upsert_kafka/job": job}))
            if run is None and runs:
                deadline = time.monotonic() + 420
            run = runs[0] if runs else None
            if run is not None and run.is_finished:
                break
            assert daemon.poll() is None, log.read_text(errors="replace")[-3000:]
            time.sleep(2)
        assert run is not None, "no run requested:\n" + log.read_text(errors="replace")[-3000:]
        assert run.status == dg.DagsterRunStatus.SUCCESS, log.read_text(errors="replace")[-3000:]
        assert run.tags["upsert_kafka/new_records"] == str(n)
        instance.dispose()
    finally:
        stop_group(daemon, timeout=30)  # SIGTERM to its process group, SIGKILL what remains
    assert rows_as_table(spark.read.format("delta").load(str(target)).collect()) == oracle_table(
        kafka.bootstrap_servers, topic
    )
