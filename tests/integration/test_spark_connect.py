"""Runs on a Spark Connect server (``LocalSparkConnect``: pyspark's own server, started with the
project's jars and Delta) from new client processes, as an orchestrator's tasks would: the targets
equal the plain-Python fold of their topics, incremental runs read only what is new.

A process holds Spark Connect sessions or a local driver, not both (pyspark switches its functions
to the client's for the whole process), so every client here is a process of its own."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

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

from upsert_kafka_ops.local import LocalKafka, LocalSparkConnect

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def connect_server(jars_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSparkConnect]:
    with LocalSparkConnect(tmp_path_factory.mktemp("connect"), master="local[2]") as server:
        yield server


def _cli(*args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "upsert_kafka_ops.cli", *args, "--json"], capture_output=True,
                          text=True, timeout=600, check=False, env=dict(os.environ))  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)["results"][0]
    return result


def test_materialize_and_a_topic_backfill_through_spark_connect(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    connect_server: LocalSparkConnect,
    spark: SparkSession,
    tmp_path: Path,
) -> None:
    servers = kafka.bootstrap_servers
    topic, sink = new_topic(partitions=2), new_topic(partitions=3, config={"cleanup.policy": "compact"})
    rnd = random.Random(21)
    n = produce(servers, topic, random_changes(rnd, 300, 40))
    src = source(topic, servers)
    sink_table = json.loads(json.dumps(src["table"]).replace(topic, sink))
    target = tmp_path / "users"
    p = pipeline(servers, [
        {"name": "users", "kind": "materialize", "source": src, "target": {"kind": "delta", "path": str(target)}},
        {"name": "copy", "kind": "backfill", "source": src,
         "target": {"kind": "topic", "connection": "main", "table": sink_table}},
    ])  # fmt: skip
    file = tmp_path / "pipeline.yaml"
    file.write_text(p.to_yaml())
    remote = ("--remote", connect_server.url)

    first = _cli("run", str(file), "--job", "users", *remote)
    assert (first["status"], first["mode"], first["records_read"]) == ("succeeded", "full", n)
    table = lambda: rows_as_table(spark.read.format("delta").load(str(target)).collect())  # noqa: E731
    assert table() == oracle_table(servers, topic)

    more = produce(servers, topic, random_changes(rnd, 12, 40))
    second = _cli("run", str(file), "--job", "users", *remote)
    assert (second["mode"], second["run"], second["records_read"]) == ("incremental", 2, more)
    assert table() == oracle_table(servers, topic)
    idle = _cli("run", str(file), "--job", "users", *remote)
    assert (idle["mode"], idle["records_read"], idle["rows_upserted"]) == ("incremental", 0, 0)

    copied = _cli("backfill", str(file), "--job", "copy", *remote)
    assert (copied["status"], copied["execution"]) == ("succeeded", "snapshot")
    assert oracle_table(servers, sink) == oracle_table(servers, topic)
