"""Two schedulers start the same job at once (issue 23, item 5): a Dagster run of a materialize job
(its own process, paused after its read while it holds the target) and an Airflow task of the same
job. The Airflow task fails clearly when its lock timeout is short, or waits and then runs after the
Dagster run's commit; the two never write at once, and the table ends as the later run leaves it,
equal to the fold of the topic."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from airflow.sdk.exceptions import AirflowException
from tests.integration.jobs_support import (
    oracle_table,
    pipeline,
    produce,
    random_changes,
    rows_as_table,
    source,
)

from upsert_kafka_ops.airflow.operators import UpsertKafkaMaterializeOperator
from upsert_kafka_ops.jobs.targets.delta import read_delta_log
from upsert_kafka_ops.local import LocalKafka

DAGSTER_RUN = """
import sys
import dagster as dg
from upsert_kafka_ops.dagster import upsert_kafka_assets
result = dg.materialize(upsert_kafka_assets(pipeline_file=sys.argv[1], row_count_check=False), raise_on_error=False)
sys.exit(0 if result.success else 1)
"""


def test_an_airflow_task_and_a_dagster_run_of_one_job_never_write_at_once(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: Any, jars_dir: Path, tmp_path: Path
) -> None:
    servers = kafka.bootstrap_servers
    topic, path = new_topic(partitions=2), tmp_path / "users"
    written = produce(servers, topic, random_changes(random.Random(91), 60, 15))
    file = tmp_path / "pipeline.yaml"
    job = {"name": "users", "kind": "materialize", "source": source(topic, servers),
           "target": {"kind": "delta", "path": str(path)}}  # fmt: skip
    file.write_text(yaml.safe_dump(pipeline(servers, [job]).to_json_dict()))
    flag = tmp_path / "go"
    (tmp_path / "dg").mkdir()
    dagster = subprocess.Popen(
        [sys.executable, "-c", DAGSTER_RUN, str(file)],
        env={**os.environ, "UPSERT_KAFKA_OPS_JARS_DIR": str(jars_dir), "DAGSTER_HOME": str(tmp_path / "dg"),
             "UKO_FAULT_POINT": f"pause:after-read:{flag}"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while not Path(f"{flag}.reached").exists():  # the Dagster run holds the table, after its read
        assert dagster.poll() is None, dagster.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the Dagster run never reached its pause point"
        time.sleep(0.2)

    def task(task_id: str, lock_timeout: float) -> UpsertKafkaMaterializeOperator:
        return UpsertKafkaMaterializeOperator(task_id=task_id, pipeline_file=str(file), job_name="users",
                                              lock_timeout=lock_timeout)  # fmt: skip

    # a short lock timeout: the Airflow task fails clearly, and writes nothing
    with pytest.raises(AirflowException) as err:
        task("impatient", 3).execute(context={})  # type: ignore[arg-type]
    assert "is being written by another run" in str(err.value), err.value
    assert not (path / "_delta_log").exists()

    # a long one: the task waits for the Dagster run's commit, then runs after it
    outcome: dict[str, Any] = {}
    waiting = threading.Thread(target=lambda: outcome.update(result=task("patient", 300).execute(context={})))  # type: ignore[arg-type]
    waiting.start()
    time.sleep(5)
    assert waiting.is_alive() and not (path / "_delta_log").exists()  # still waiting, nothing written
    flag.touch()
    _, err_text = dagster.communicate(timeout=600)
    assert dagster.returncode == 0, err_text[-3000:]
    waiting.join(timeout=600)
    result = outcome["result"]
    assert (result["run"], result["records_read"]) == (2, 0), result  # the Dagster run read everything
    log = read_delta_log(path)
    assert log.state is not None and log.state.run == 2
    rows = spark.read.format("delta").load(str(path)).select("id", "name", "region", "score").collect()
    assert rows_as_table(rows) == oracle_table(servers, topic) and written == 60
