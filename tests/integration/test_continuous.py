"""A continuous materialize job (``trigger: {continuous: true}``) run by the CLI until it is stopped:
its table follows the topic batch after batch, SIGTERM ends it cleanly, and a SIGKILL in a later
batch leaves only whole batches, which the next run continues exactly.

The job is a real ``upsert-kafka-ops run`` process; the table is checked against the plain-Python
fold of the topic.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from pyspark.sql import SparkSession
from tests.integration.jobs_support import (
    oracle_table,
    pipeline,
    produce,
    random_changes,
    rows_as_table,
    source,
)

from upsert_kafka_ops.jobs import Pipeline, run_job
from upsert_kafka_ops.jobs.targets.delta import read_delta_log
from upsert_kafka_ops.kafka import offsets as ko
from upsert_kafka_ops.local import LocalKafka


def _start(file: Path, jars_dir: Path, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "upsert_kafka_ops.cli", "run", str(file), "--json"],
        env={**os.environ, "UPSERT_KAFKA_OPS_JARS_DIR": str(jars_dir), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _ends(servers: str, topic: str) -> dict[tuple[str, int], int]:
    config = {"bootstrap.servers": servers}
    return dict(ko.end_offsets(config, ko.topic_partitions(config, topics=[topic])))


def _caught_up(
    proc: subprocess.Popen[str], table: Path, servers: str, topic: str, timeout: float = 300
) -> int:
    """Wait until the table's stored offsets are the topic's end (while ``proc`` runs); its run."""
    want = _ends(servers, topic)
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        state = read_delta_log(table).state if (table / "_delta_log").exists() else None
        if state is not None and state.offsets == want:
            return state.run
        assert time.monotonic() < deadline, f"the table never reached {want}: {state}"
        time.sleep(0.2)


@pytest.mark.lines
def test_a_continuous_job_follows_its_topic_stops_on_sigterm_and_continues_after_a_kill(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, jars_dir: Path, tmp_path: Path
) -> None:
    servers = kafka.bootstrap_servers
    topic = new_topic(partitions=2)
    rnd = random.Random(43)
    path = tmp_path / "users"
    job = {
        "name": "users-live",
        "kind": "materialize",
        "source": source(topic, servers),
        "target": {"kind": "delta", "path": str(path)},
        "trigger": {"continuous": True, "interval": "500ms"},
    }
    p = pipeline(servers, [job])
    file = tmp_path / "pipeline.yaml"
    file.write_text(yaml.safe_dump(p.to_json_dict()))
    produced = produce(servers, topic, random_changes(rnd, 150, 40))

    # 1. the table follows the topic while records arrive; SIGTERM ends the run with exit 0
    live = _start(file, jars_dir)
    runs = [_caught_up(live, path, servers, topic)]
    for n in (30, 1, 45):
        produced += produce(servers, topic, random_changes(rnd, n, 40))
        runs.append(_caught_up(live, path, servers, topic))
    time.sleep(1.5)  # three intervals with nothing new: no batch, no commit
    assert read_delta_log(path).state.run == runs[-1]
    live.send_signal(signal.SIGTERM)
    out, err = live.communicate(timeout=120)
    assert live.returncode == 0, err[-3000:]
    result = json.loads(out)["results"][0]
    assert (result["status"], result["execution"]) == ("succeeded", "continuous"), result
    assert runs == sorted(set(runs)) and result["run"] == runs[-1]
    assert result["batches"] == runs[-1] and len(runs) <= result["batches"] <= 2 * len(runs), (runs, result)
    assert result["records_read"] == produced  # every record read once, by exactly one batch
    assert "SIGTERM: stopping after the current batch" in err
    table = spark.read.format("delta").load(str(path)).select("id", "name", "region", "score").collect()
    assert rows_as_table(table) == oracle_table(servers, topic)
    group = ko.committed_offsets(
        {"bootstrap.servers": servers}, "upsert-kafka-ops.users-live", sorted(_ends(servers, topic))
    )
    assert group == _ends(
        servers, topic
    )  # the consumer group is at the end: lag 0, as lag and the sensors see it

    # 2. killed after the read of its second batch: the first batch stays committed, the second is not seen
    produce(servers, topic, random_changes(rnd, 40, 60))
    killed = _start(file, jars_dir, UKO_FAULT_POINT="after-read@2")
    committed = _caught_up(killed, path, servers, topic)
    assert committed == runs[-1] + 1
    before = read_delta_log(path).state
    second = produce(servers, topic, random_changes(rnd, 25, 60))
    _, err = killed.communicate(timeout=300)
    assert killed.returncode == -9, err[-3000:]
    assert (
        read_delta_log(path).state.offsets == before.offsets and read_delta_log(path).state.run == committed
    )

    # ... and the next run (here one batch, as --once or a scheduler runs it) reads exactly the rest
    rerun = run_job(Pipeline.load(file), spark=spark)
    assert (rerun.mode, rerun.run, rerun.records_read) == ("incremental", committed + 1, second)
    table = spark.read.format("delta").load(str(path)).select("id", "name", "region", "score").collect()
    assert rows_as_table(table) == oracle_table(servers, topic)
