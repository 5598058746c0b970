"""The broker restarted under running jobs (issue 23, item 1): a materialize into Delta, a topic-to-topic
job and a publish of a Delta change feed (``write_changelog``) run side by side, with a continuous
materialize job (issue 43) running throughout, while the broker is stopped (SIGTERM, or SIGKILL: a
crash) at a random moment of the runs, stays down up to 3 s, and comes back on its ports with its log
folder. One restart per trial hits every kind: a broker start costs about 12 CPU s.

The runs under test are ``run_job`` in a thread of this process, on its SparkSession: the broker's
restart is the fault, not the run's process, so the run needs no JVM of its own (the CLI's process
boundary is tested where it is the behaviour: killed runs in ``tests/integration/test_jobs_faults.py``,
its output in ``tests/integration/test_secret_scan.py``).

Each run either finishes or fails with a clear error; the rerun (in this process) converges; the
target then equals the plain-Python fold of its source (no key lost, none doubled), and an output
topic holds each key in the one partition Kafka's partitioner gives it with the key's records in the
order they were made (each value carries its change's sequence number).

``UKO_FAULT_TRIALS`` trials (default 2: one SIGTERM, one SIGKILL; later trials choose at random; the
issue's figure was measured with 10), from a fixed seed;
``UKO_FAULT_REPORT`` names a JSON file for the trials' outcomes.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from tests.integration.jobs_support import oracle_table, pipeline, rows_as_table, source
from tests.integration.oracle import kafka_partition, read_all

from upsert_kafka_ops.errors import UpsertKafkaOpsError
from upsert_kafka_ops.jobs import Pipeline, run_job
from upsert_kafka_ops.jobs.core import JobResult
from upsert_kafka_ops.local import LocalKafka

TRIALS = int(os.environ.get("UKO_FAULT_TRIALS", "2"))
KEYS = 30
REPORT: dict[str, list[dict[str, Any]]] = {}


@dataclass
class Flow:
    """One job kind under test: its pipeline file, how a trial changes its source, and its check."""

    name: str
    pipeline: Pipeline
    change: Callable[[random.Random], None]
    check: Callable[[], None]
    seq: list[int] = field(default_factory=lambda: [0])


def _row(seq: int, rnd: random.Random) -> dict[str, Any]:
    return {
        "name": f"s{seq:06d}",
        "region": rnd.choice(["Berlin", "Paris"]),
        "score": f"{rnd.randrange(9999) / 100:.2f}",
    }


def _produce(servers: str, topic: str, rnd: random.Random, seq: list[int], n: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True, "linger.ms": 5})
    for _ in range(n):
        seq[0] += 1
        key = rnd.randrange(KEYS)
        row = None if rnd.random() < 0.1 else {"id": key, **_row(seq[0], rnd)}
        producer.produce(
            topic,
            key=json.dumps({"id": key}).encode(),
            value=None if row is None else json.dumps(row).encode(),
        )
    assert producer.flush(60) == 0


def _check_topic(servers: str, topic: str, partitions: int) -> None:
    """Each key in its partition, its records in the order their changes were made."""
    last: dict[bytes, int] = {}
    for rec in sorted(read_all(servers, [topic]), key=lambda r: (r.partition, r.offset)):
        assert rec.key is not None
        assert rec.partition == kafka_partition(rec.key, partitions), (
            f"key {rec.key!r} in partition {rec.partition}"
        )
        if rec.value is not None:
            seq = int(json.loads(rec.value)["name"][1:])
            assert seq >= last.get(rec.key, 0), f"key {rec.key!r}: change {seq} after {last[rec.key]}"
            last[rec.key] = seq


@pytest.fixture(scope="module")
def flows(
    kafka: LocalKafka, spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Flow]]:
    servers, work = kafka.bootstrap_servers, tmp_path_factory.mktemp("flows")
    out: dict[str, Flow] = {}
    for name in ("users-m", "users-t", "copy-t", "copy-p"):
        kafka.create_topic(name, partitions=3)

    # materialize into Delta
    delta = work / "users"
    p = pipeline(servers, [{"name": "users", "kind": "materialize", "source": source("users-m", servers),
                            "target": {"kind": "delta", "path": str(delta)}}])  # fmt: skip

    def delta_rows(path: Path) -> dict[int, tuple[str, str, str]]:
        got = spark.read.format("delta").load(str(path)).select("id", "name", "region", "score").collect()
        assert len(got) == len({r[0] for r in got}), "a key twice in the Delta table"
        return rows_as_table(got)

    m = Flow("materialize", p, lambda rnd: None, lambda: None)
    m.change = lambda rnd: _produce(servers, "users-m", rnd, m.seq, 80)
    m.check = lambda: _check_equal(delta_rows(delta), oracle_table(servers, "users-m"))
    out[m.name] = m

    # topic to topic (a recompute written with write_snapshot)
    p = pipeline(servers, [{"name": "copy", "kind": "topic-to-topic", "execution": "snapshot",
                            "query": "SELECT * FROM users", "sources": {"users": source("users-t", servers)},
                            "sink": source("copy-t", servers)}])  # fmt: skip
    t = Flow("topic-to-topic", p, lambda rnd: None, lambda: None)
    t.change = lambda rnd: _produce(servers, "users-t", rnd, t.seq, 80)

    def check_t() -> None:
        _check_equal(oracle_table(servers, "copy-t"), oracle_table(servers, "users-t"))
        _check_topic(servers, "copy-t", 3)

    t.check = check_t
    out[t.name] = t

    # a Delta change feed published with write_changelog
    feed = work / "feed"
    spark.sql(f"CREATE TABLE delta.`{feed}` (id BIGINT, name STRING, region STRING, score DECIMAL(10, 2)) "
              "USING delta TBLPROPERTIES (delta.enableChangeDataFeed = true)")  # fmt: skip
    p = pipeline(servers, [{"name": "publish", "kind": "publish", "source": {"kind": "delta-cdf", "path": str(feed)},
                            "sink": source("copy-p", servers), "state_path": str(work / "publish-state")}])  # fmt: skip
    pub = Flow("publish", p, lambda rnd: None, lambda: None)

    def change_p(rnd: random.Random) -> None:
        for _ in range(3):  # three Delta versions
            rows, deletes = [], []
            for key in rnd.sample(range(KEYS), 8):
                pub.seq[0] += 1
                if rnd.random() < 0.15:
                    deletes.append(key)
                else:
                    r = _row(pub.seq[0], rnd)
                    rows.append(f"({key}, '{r['name']}', '{r['region']}', {r['score']})")
            if rows:
                spark.sql(f"MERGE INTO delta.`{feed}` t USING (SELECT * FROM VALUES {', '.join(rows)} AS s(id, name, region, score)) s "
                          "ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")  # fmt: skip
            if deletes:
                spark.sql(f"DELETE FROM delta.`{feed}` WHERE id IN ({', '.join(map(str, deletes))})")

    def check_p() -> None:
        _check_equal(oracle_table(servers, "copy-p"), delta_rows(feed))
        _check_topic(servers, "copy-p", 3)

    pub.change, pub.check = change_p, check_p
    out[pub.name] = pub
    yield out
    report = os.environ.get("UKO_FAULT_REPORT")
    if report:
        Path(report).write_text(json.dumps(REPORT, indent=2))


def _check_equal(got: dict[int, Any], want: dict[int, Any]) -> None:
    lost, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
    wrong = sorted(k for k in set(got) & set(want) if got[k] != want[k])
    assert (lost, extra, wrong) == ([], [], []), "lost keys, extra keys, keys with another value"


class _Run:
    """``run_job`` of a flow's job in a thread: its result, or the error it ended with."""

    def __init__(self, flow: Flow, spark: SparkSession) -> None:
        self.result: JobResult | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(flow, spark), name=f"run-{flow.name}")
        self.thread.start()

    def _run(self, flow: Flow, spark: SparkSession) -> None:
        try:
            self.result = run_job(flow.pipeline, spark=spark)
        except BaseException as exc:  # the test reports what the run ended with
            self.error = exc

    def wait(self, timeout: float = 600.0) -> None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"the run did not end within {timeout:.0f} s"


def test_a_broker_restarted_under_runs_and_a_continuous_job_leaves_every_target_exact(
    flows: dict[str, Flow], kafka: LocalKafka, spark: SparkSession, tmp_path: Path
) -> None:
    """Each trial restarts the broker once under a run of each job kind at the same time (in threads of
    this process, on its session) and under a continuous materialize job (``jobs.continuous``, a thread
    too) that runs through every trial, records arriving before and after each restart. A run finishes
    or fails with a clear error, and its rerun converges; the continuous job tries its failed batches
    again. Every target then equals the fold of its source. The first trial stops the broker, the
    second kills it, later ones choose at random."""
    from upsert_kafka_ops.engine.sink import producer_options
    from upsert_kafka_ops.jobs.continuous import ContinuousJobs
    from upsert_kafka_ops.jobs.targets.delta import read_delta_log
    from upsert_kafka_ops.kafka import offsets as ko

    rnd = random.Random("broker-restart")
    # a first run of each kind without a fault: how long a run takes (the restarts fall within it)
    spans = []
    for flow in flows.values():
        flow.change(rnd)
        began = time.monotonic()
        assert run_job(flow.pipeline, spark=spark).status == "succeeded"
        spans.append(time.monotonic() - began)
        if flow.name != "materialize":  # the writer's producer is idempotent and waits for every replica
            sink = flow.pipeline.jobs[0].sink  # type: ignore[union-attr]
            options = producer_options(sink.table, flow.pipeline.connections[sink.connection])
            assert (options["kafka.enable.idempotence"], options["kafka.acks"]) == ("true", "all")
        flow.check()

    servers, topic, path = kafka.bootstrap_servers, "users-c", tmp_path / "users"
    kafka.create_topic(topic, partitions=3)
    trigger = {"continuous": True, "interval": "200ms", "retries": 30}
    p = pipeline(servers, [{"name": "users-live", "kind": "materialize", "source": source(topic, servers),
                            "target": {"kind": "delta", "path": str(path)}, "trigger": trigger}])  # fmt: skip
    seq = [0]
    jobs = ContinuousJobs(p, ["users-live"], spark, lock_timeout_s=30)
    stop, ended = threading.Event(), []
    thread = threading.Thread(target=lambda: ended.append(_ended(jobs, stop)), name="continuous")

    def caught_up(timeout: float = 300.0) -> None:
        config = {"bootstrap.servers": servers}
        deadline = time.monotonic() + timeout
        while True:
            assert thread.is_alive(), ended
            want = ko.end_offsets(config, ko.topic_partitions(config, topics=[topic]))
            state = read_delta_log(path).state if (path / "_delta_log").exists() else None
            if state is not None and state.offsets == want:
                return
            assert time.monotonic() < deadline, f"not caught up with {want}: {state}"
            time.sleep(0.3)

    _produce(servers, topic, rnd, seq, 80)
    thread.start()
    for trial in range(TRIALS):
        caught_up()
        kill = (False, True)[trial] if trial < 2 else rnd.random() < 0.5
        for flow in flows.values():
            flow.change(rnd)
        _produce(servers, topic, rnd, seq, 60)
        # the restart falls within every run: the shortest (an incremental materialize, well under its
        # first run's span) starts up to half a second before it, the others up to their span before
        at, lead = rnd.uniform(0, min(spans[1:])), rnd.uniform(0, 0.5)
        runs = {name: _Run(flow, spark) for name, flow in flows.items() if name != "materialize"}
        time.sleep(max(0.0, at - lead))
        runs["materialize"] = _Run(flows["materialize"], spark)
        time.sleep(min(at, lead))
        during = {name: run.thread.is_alive() for name, run in runs.items()}
        down = round(rnd.uniform(0, 3), 1)
        kafka.restart(down_s=down, kill=kill)
        _produce(servers, topic, rnd, seq, 40)  # and records after it, for the continuous job
        for name, run in runs.items():
            run.wait()
            said = "" if run.error is None else f"{type(run.error).__name__}: {run.error}"
            if run.error is not None:  # a clear error: the project's own, or what went wrong with the broker
                assert isinstance(run.error, UpsertKafkaOpsError) or "Error" in said or "Exception" in said, (
                    said
                )
            else:
                assert run.result is not None and run.result.status == "succeeded"
            REPORT.setdefault(name, []).append(
                {"trial": trial, "during_run": during[name], "kill": kill, "down_s": down,
                 "run": "finished" if run.error is None else "failed",
                 "error": said.splitlines()[0][:300] if said else ""}
            )  # fmt: skip
        for flow in flows.values():
            rerun = run_job(flow.pipeline, spark=spark)
            assert rerun.status == "succeeded"
            flow.check()
    caught_up()
    stop.set()
    thread.join(120)
    assert ended == ["stopped"], ended
    (result,) = jobs.results
    REPORT["continuous"] = [
        {"batches": result.batches, "failures": result.failures, "last_error": result.last_error}
    ]
    got = spark.read.format("delta").load(str(path)).select("id", "name", "region", "score").collect()
    assert len(got) == len({r[0] for r in got}), "a key twice in the Delta table"
    _check_equal(rows_as_table(got), oracle_table(servers, topic))
    assert all(len(REPORT[name]) == TRIALS for name in flows)


def _ended(jobs: Any, stop: threading.Event) -> str:
    try:
        jobs.run(stop)
    except BaseException as exc:  # the test reports what the loop ended with
        return f"{type(exc).__name__}: {exc}"
    return "stopped"
