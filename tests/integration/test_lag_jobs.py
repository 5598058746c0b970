"""Per-job lag and OpenLineage run events against the real broker and Spark.

A materialize job's lag comes from the offsets its Delta target stores (read without Spark) and is
exactly the records produced after its run; its consumer group agrees. A topic-to-topic job's lag
covers every source, from its consumer group. The ``lag --pipeline`` CLI, its exit codes and its
Prometheus endpoint (``pipeline`` and ``pipeline_job`` labels on every series); and run events from the CLI only.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import threading
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from pyspark.sql import SparkSession
from tests.integration.jobs_support import pipeline, produce, random_changes, source
from tests.integration.test_lag import parse_exposition

from upsert_kafka_ops.jobs import Pipeline, read_stored_offsets, run_job
from upsert_kafka_ops.jobs.gates import new_data
from upsert_kafka_ops.jobs.lag import job_lag, pipeline_lag
from upsert_kafka_ops.kafka import group_lag
from upsert_kafka_ops.local import LocalKafka
from upsert_kafka_ops.local.process import free_port

pytestmark = pytest.mark.integration


def _produce_counted(servers: str, topic: str, n: int, seed: int) -> Counter[int]:
    """``n`` upserts with random keys; how many landed in each partition (from delivery reports)."""
    landed: Counter[int] = Counter()
    producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True, "linger.ms": 5})

    def delivered(err: Any, msg: Any) -> None:
        assert err is None, err
        landed[msg.partition()] += 1

    for key, row in random_changes(random.Random(seed), n, 40):
        value = None if row is None else json.dumps({"id": key, **row}).encode()
        producer.produce(topic, key=json.dumps({"id": key}).encode(), value=value, on_delivery=delivered)
    assert producer.flush(30) == 0
    assert sum(landed.values()) == n
    return landed


def _materialize(servers: str, topic: str, path: Path, name: str = "users") -> dict[str, Any]:
    return {"name": name, "kind": "materialize", "source": source(topic, servers),
            "target": {"kind": "delta", "path": str(path)}}  # fmt: skip


def test_job_lag_is_exactly_the_records_after_the_stored_offsets(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path
) -> None:
    servers = kafka.bootstrap_servers
    topic = new_topic(partitions=3)
    p = pipeline(servers, [_materialize(servers, topic, tmp_path / "users")])
    produce(servers, topic, random_changes(random.Random(1), 90, 30))
    result = run_job(p, "users", spark=spark)
    assert result.status == "succeeded"

    caught_up = job_lag(p, "users")
    assert [(x.partition, x.lag) for x in caught_up.partitions] == [(0, 0), (1, 0), (2, 0)]
    assert caught_up.group is None  # the target's own offsets, not a group's
    # the job's consumer group, committed after the target, shows no lag either
    group = group_lag(
        {"bootstrap.servers": servers}, "upsert-kafka-ops.users", isolation="read_committed", topics=[topic]
    )
    assert [(x.partition, x.committed, x.lag) for x in group.partitions] == [
        (x.partition, x.committed, 0) for x in caught_up.partitions
    ]

    new = _produce_counted(servers, topic, 57, seed=2)
    report = job_lag(p, "users")
    stored = read_stored_offsets(p.job("users"))
    assert stored is not None
    assert {x.partition: x.lag for x in report.partitions} == {i: new[i] for i in range(3)}
    assert {x.partition: x.committed for x in report.partitions} == {
        i: stored.offsets[(topic, i)] for i in range(3)
    }
    assert report.total_lag == 57
    lagging = [x for x in report.partitions if x.lag]
    assert lagging and all(x.time_lag_method == "record" and x.time_lag_s is not None for x in lagging)
    # the group agrees until the next run
    again = group_lag(
        {"bootstrap.servers": servers}, "upsert-kafka-ops.users", isolation="read_committed", topics=[topic]
    )
    assert {x.partition: x.lag for x in again.partitions} == {i: new[i] for i in range(3)}

    # a second run catches up: lag 0 from the target, and from the group
    run_job(p, "users", spark=spark)
    assert job_lag(p, "users").total_lag == 0
    assert (
        group_lag(
            {"bootstrap.servers": servers},
            "upsert-kafka-ops.users",
            isolation="read_committed",
            topics=[topic],
        ).total_lag
        == 0
    )


def test_topic_to_topic_lag_covers_every_source_from_the_jobs_group(
    kafka: LocalKafka, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    servers = kafka.bootstrap_servers
    a, b, sink = new_topic(partitions=2), new_topic(partitions=1), new_topic(partitions=1)
    in_a, in_b = _produce_counted(servers, a, 20, seed=3), _produce_counted(servers, b, 9, seed=4)
    table = source(a, servers)["table"]
    job = {"name": "joined", "kind": "topic-to-topic",
           "sources": {"a": source(a, servers), "b": source(b, servers)},
           "query": "SELECT a.id, a.name, b.region, a.score FROM a JOIN b ON a.id = b.id",
           "sink": {"connection": "main", "table": json.loads(json.dumps(table).replace(a, sink))},
           "execution": "snapshot"}  # fmt: skip
    p = pipeline(servers, [job, _materialize(servers, a, tmp_path / "never-run", name="fresh")])
    # what a run commits to upsert-kafka-ops.joined (here: a run that read a[0] fully, a[1] 2 records, b 4)
    done = {(a, 0): in_a[0], (a, 1): 2, (b, 0): 4}
    consumer = Consumer({"bootstrap.servers": servers, "group.id": "upsert-kafka-ops.joined"})
    try:
        consumer.commit(offsets=[TopicPartition(t, q, o) for (t, q), o in done.items()], asynchronous=False)
    finally:
        consumer.close()

    jobs = {j.job: j for j in pipeline_lag(p)}
    joined = jobs["joined"]
    assert (joined.offsets_from, joined.group, joined.error) == (
        "consumer-group",
        "upsert-kafka-ops.joined",
        None,
    )
    assert joined.report is not None and joined.report.group == "upsert-kafka-ops.joined"
    assert {(x.topic, x.partition): x.lag for x in joined.report.partitions} == {
        (a, 0): 0, (a, 1): in_a[1] - 2, (b, 0): in_b[0] - 4,
    }  # fmt: skip
    fresh = jobs["fresh"]  # never ran: no commit, every record from the earliest waits (as new_data says)
    assert fresh.offsets_from == "target" and fresh.stored_run is None and fresh.report is not None
    assert [(x.partition, x.committed, x.lag) for x in fresh.report.partitions] == [
        (0, None, in_a[0]),
        (1, None, in_a[1]),
    ]
    assert new_data(p, "fresh").new_records == fresh.report.total_lag == sum(in_a.values())


def _lag_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "upsert_kafka_ops.cli", "lag", *args], capture_output=True,
                          text=True, check=False, timeout=120)  # fmt: skip


def test_lag_pipeline_cli_json_table_fail_on_and_the_job_labelled_endpoint(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path
) -> None:
    from upsert_kafka_ops.jobs.lag_monitor import PipelineLagMonitor
    from upsert_kafka_ops.metrics.exporter import WatchOptions, serve

    servers = kafka.bootstrap_servers
    topic, other = new_topic(partitions=2), new_topic(partitions=1)
    p = pipeline(servers, [_materialize(servers, topic, tmp_path / "users"),
                           _materialize(servers, other, tmp_path / "other", name="other")])  # fmt: skip
    file = tmp_path / "pipeline.yaml"
    file.write_text(p.to_yaml())
    produce(servers, topic, random_changes(random.Random(5), 30, 10))
    run_job(p, "users", spark=spark)
    new = _produce_counted(servers, topic, 12, seed=6)

    window = tmp_path / "window.json"
    args = ("--pipeline", str(file), "--job", "users", "--json", "--window", str(window), "--fail-on", "WARN")
    first = _lag_cli(*args)
    assert first.returncode == 0, first.stderr
    doc = json.loads(first.stdout)
    assert (doc["kind"], doc["status"]) == ("jobs-lag", "OK")
    (users,) = doc["jobs"]
    assert (users["job"], users["offsets_from"], users["stored_run"]) == ("users", "target", 1)
    assert users["target"] == (tmp_path / "users").absolute().as_uri()
    assert {x["partition"]: x["lag"] for x in users["report"]["partitions"]} == {0: new[0], 1: new[1]}
    assert users["status"]["status"] == "OK"
    # no run since: the stored offsets did not move while the end did -> Burrow's STOP -> ERR, exit 1
    second = _lag_cli(*args)
    assert second.returncode == 1, second.stdout + second.stderr
    doc = json.loads(second.stdout)
    assert doc["status"] == "ERR" and doc["jobs"][0]["status"]["worst"] == "STOP"
    assert set(json.loads(window.read_text())["jobs"]) == {"users"}

    table = _lag_cli("--pipeline", str(file))
    assert table.returncode == 0, table.stderr
    assert (
        f"JOB users (materialize)  offsets from target {(tmp_path / 'users').absolute().as_uri()} (run 1)"
        in table.stdout
    )
    assert "JOB other (materialize)" in table.stdout and "job 'other': NOTFOUND" in table.stdout
    assert re.search(rf"^{topic}\s+0\s+\d+\s+\d+\s+{new[0]}\s", table.stdout, re.M), table.stdout
    both = _lag_cli("--pipeline", str(file), "--group", "g")
    assert both.returncode == 2 and "--group and --pipeline" in both.stderr
    missing = _lag_cli("--pipeline", str(file), "--job", "nope")
    assert missing.returncode == 2 and "no job named 'nope'" in missing.stderr

    port = free_port()
    monitor = PipelineLagMonitor(Pipeline.load(file), options=WatchOptions(min_interval_s=0), name=file.stem)
    server = serve(monitor, "127.0.0.1", port)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
            assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            families = parse_exposition(response.read().decode())
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=30) as response:
            status_doc = json.loads(response.read())
    finally:
        server.shutdown()
        server.server_close()
        monitor.close()
    lag = {
        (s[0]["pipeline_job"], s[0]["partition"]): s[1]
        for s in families["upsert_kafka_ops_consumer_lag_records"]["samples"]
    }
    # 'other' never ran and its topic is empty: nothing waits (NOTFOUND, not judged)
    assert lag == {("users", "0"): float(new[0]), ("users", "1"): float(new[1]), ("other", "0"): 0.0}
    group_lag_samples = families["upsert_kafka_ops_consumer_group_lag_records"]["samples"]
    assert sorted((s[0]["pipeline_job"], s[1]) for s in group_lag_samples) == [
        ("other", 0.0),
        ("users", 12.0),
    ]
    current = {
        s[0]["pipeline_job"]: s[0]["status"]
        for s in families["upsert_kafka_ops_consumer_group_status"]["samples"]
        if s[1] == 1
    }
    assert current == {"users": "OK", "other": "NOTFOUND"}
    assert sorted((s[0]["pipeline_job"], s[1]) for s in families["upsert_kafka_ops_lag_up"]["samples"]) == [
        ("other", 1.0), ("users", 1.0)
    ]  # fmt: skip
    ends = families["upsert_kafka_ops_partition_end_offset"]["samples"]
    assert {s[0]["pipeline_job"] for s in ends} == {"users", "other"}
    # no `job` label: the scrape target's own would rename it; `pipeline` names the file
    assert all("job" not in s[0] and s[0]["pipeline"] == file.stem for f in families.values() for s in f["samples"]
               if "pipeline_job" in s[0])  # fmt: skip
    assert [j["job"] for j in status_doc["jobs"]] == ["users", "other"]


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_openlineage_events_come_from_the_cli_run_not_from_run_job(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    spark: SparkSession,
    jars_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    servers = kafka.bootstrap_servers
    topic = new_topic(partitions=2)
    n = produce(servers, topic, random_changes(random.Random(8), 25, 10))
    delta = tmp_path / "users"
    broken = _materialize(servers, "no-such-topic", tmp_path / "broken", name="broken")
    p = pipeline(servers, [_materialize(servers, topic, delta), broken])
    file = tmp_path / "pipeline.yaml"
    file.write_text(p.to_yaml())
    events_file = tmp_path / "lineage" / "events.jsonl"

    # in-process (how Airflow and Dagster run jobs): no events even with a transport configured
    monkeypatch.setenv("UKO_OPENLINEAGE_FILE", str(events_file))
    in_process = run_job(Pipeline.load(file), "users", spark=spark)
    assert in_process.records_read == n
    assert _events(events_file) == []

    # the CLI: START and COMPLETE for users, then START and FAIL for the broken job
    env = {**os.environ, "UPSERT_KAFKA_OPS_JARS_DIR": str(jars_dir), "UKO_OPENLINEAGE_FILE": str(events_file)}
    env.pop("OPENLINEAGE_URL", None)
    proc = subprocess.run([sys.executable, "-m", "upsert_kafka_ops.cli", "run", str(file), "--json"],
                          capture_output=True, text=True, check=False, timeout=600, env=env)  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]
    results = json.loads(proc.stdout)["results"]
    assert [(r["job"], r["status"]) for r in results] == [("users", "succeeded"), ("broken", "failed")]
    events = _events(events_file)
    assert [(e["job"]["name"], e["eventType"]) for e in events] == [
        ("users", "START"), ("users", "COMPLETE"), ("broken", "START"), ("broken", "FAIL"),
    ]  # fmt: skip
    start, complete, broken_start, fail = events
    assert (
        start["run"]["runId"]
        == complete["run"]["runId"]
        != broken_start["run"]["runId"]
        == fail["run"]["runId"]
    )
    host_port = servers.split(",")[0]
    for e in (start, complete):
        assert e["inputs"] == [{"namespace": f"kafka://{host_port}", "name": topic}]
        assert [(o["namespace"], o["name"]) for o in e["outputs"]] == [("file", str(delta.absolute()))]
        assert e["job"]["namespace"] == "upsert-kafka-ops"
    assert "no-such-topic" in fail["run"]["facets"]["errorMessage"]["message"]
    assert fail["inputs"] == [{"namespace": f"kafka://{host_port}", "name": "no-such-topic"}]


def test_a_rebuild_starts_the_jobs_window_over_instead_of_paging_rewind(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path
) -> None:
    from upsert_kafka_ops.jobs.lag_monitor import PipelineLagMonitor
    from upsert_kafka_ops.kafka.evaluation import check
    from upsert_kafka_ops.metrics.exporter import WatchOptions

    servers = kafka.bootstrap_servers
    topic = new_topic(partitions=1)
    produce(servers, topic, random_changes(random.Random(11), 40, 10))
    back = {"name": "rebuild", "kind": "backfill", "source": source(topic, servers), "rewind": True,
            "target": {"kind": "delta", "path": str(tmp_path / "users")}, "until": {"offsets": {topic: {"0": 10}}}}  # fmt: skip
    p = pipeline(servers, [_materialize(servers, topic, tmp_path / "users"), back])
    run_job(p, "users", spark=spark)
    window = tmp_path / "windows.json"
    monitor = PipelineLagMonitor(
        p, ["users"], WatchOptions(min_interval_s=0, time_lag=False, window_file=window)
    )
    try:
        ((first, status),) = monitor.evaluate()
        assert (first.stored_run, first.stored_mode, status.status) == (1, "full", "OK")
        run_job(p, "rebuild", spark=spark)  # a planned backfill takes the target back to offset 10
        ((again, status),) = monitor.evaluate()
    finally:
        monitor.close()
    assert (again.stored_run, again.stored_mode) == (2, "full")
    assert again.report is not None and again.report.total_lag == 30
    assert status.worst != "REWIND", status.summary
    assert [s.offset for s in monitor.windows["users"].partitions[(topic, 0)].samples] == [10]
    assert json.loads(window.read_text())["runs"] == {"users": 2}  # a restarted exporter knows it too
    # the same two observations in one window: Burrow's REWIND, which the reset spared the on-call
    assert first.report is not None
    replay, _ = check(check(None, first.report)[1], again.report)
    assert replay.worst == "REWIND"
