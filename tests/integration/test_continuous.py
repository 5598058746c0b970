"""Continuous materialize jobs (``trigger: {continuous: true}``) run by the CLI until stopped: a
Delta and a PostgreSQL table follow the topic batch after batch in one process, SIGTERM ends it
cleanly, and a SIGKILL in a later batch leaves only whole batches, which the next run continues
exactly.

The jobs run in a real ``upsert-kafka-ops run`` process; each table is checked against the
plain-Python fold of the topic. Continuous topic-to-topic jobs are checked against real Flink
(``tests/conformance/test_continuous_topic_to_topic.py``).
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
import yaml
from pyspark.sql import SparkSession
from tests.integration.jobs_support import (
    cli_run,
    oracle_table,
    pipeline,
    produce,
    random_changes,
    rows_as_table,
    source,
)
from tests.integration.test_jobs_postgres import pg_rows, pg_target

from upsert_kafka_ops.jobs import Pipeline, run_job
from upsert_kafka_ops.jobs.state import StoredState
from upsert_kafka_ops.jobs.targets.delta import read_delta_log
from upsert_kafka_ops.jobs.targets.postgres import read_postgres_state
from upsert_kafka_ops.kafka import offsets as ko
from upsert_kafka_ops.local import LocalKafka, LocalPostgres
from upsert_kafka_ops.local.process import free_port


def _ends(servers: str, topic: str) -> dict[tuple[str, int], int]:
    config = {"bootstrap.servers": servers}
    return dict(ko.end_offsets(config, ko.topic_partitions(config, topics=[topic])))


def _caught_up(
    proc: subprocess.Popen[str], states: list[Callable[[], StoredState | None]], servers: str, topic: str
) -> list[int]:
    """Wait until each table's stored offsets are the topic's end (while ``proc`` runs); their runs."""
    want = _ends(servers, topic)
    deadline = time.monotonic() + 300
    while True:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        got = [state() for state in states]
        if all(g is not None and g.offsets == want for g in got):
            return [g.run for g in got if g is not None]
        assert time.monotonic() < deadline, f"the tables never reached {want}: {got}"
        time.sleep(0.2)


@pytest.mark.lines
def test_continuous_jobs_follow_their_topic_stop_on_sigterm_and_continue_after_a_kill(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    spark: SparkSession,
    postgres: LocalPostgres,
    jars_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("UKO_TEST_PG_PASSWORD", postgres.password)
    servers = kafka.bootstrap_servers
    topic = new_topic(partitions=2)
    rnd = random.Random(43)
    path, pg_table = tmp_path / "users", f"users_{topic.replace('-', '_')[-12:]}"
    trigger = {"continuous": True, "interval": "500ms"}
    jobs = [
        {"name": "users-delta", "kind": "materialize", "source": source(topic, servers),
         "target": {"kind": "delta", "path": str(path)}, "trigger": trigger},
        {"name": "users-pg", "kind": "materialize", "source": source(topic, servers),
         "target": pg_target(postgres, pg_table), "trigger": trigger},
    ]  # fmt: skip
    file = tmp_path / "pipeline.yaml"
    file.write_text(yaml.safe_dump(pipeline(servers, jobs).to_json_dict()))

    def delta() -> StoredState | None:
        return read_delta_log(path).state if (path / "_delta_log").exists() else None

    def pg() -> StoredState | None:
        with psycopg.connect(postgres.conninfo) as c:
            return read_postgres_state(c, "upsert_kafka_ops_offsets", pg_table)

    def delta_rows() -> dict[int, tuple[str, str, str]]:
        return rows_as_table(
            spark.read.format("delta").load(str(path)).select("id", "name", "region", "score").collect()
        )

    produced = produce(servers, topic, random_changes(rnd, 150, 40))

    # 1. both tables follow the topic while records arrive; SIGTERM ends the run with exit 0
    port = free_port()
    live = cli_run(file, jars_dir, {}, "--metrics-port", str(port))
    runs = [_caught_up(live, [delta, pg], servers, topic)]
    for n in (30, 1, 45):
        last_round = time.time()
        produced += produce(servers, topic, random_changes(rnd, n, 40))
        runs.append(_caught_up(live, [delta, pg], servers, topic))
    caught_up = time.time()
    time.sleep(1.5)  # three intervals with nothing new: no batch, no commit
    assert [delta().run, pg().run] == runs[-1]  # type: ignore[union-attr]

    # ... and while it runs it says so: its batches at /metrics and /status, and the probes' answers
    def get(path: str) -> tuple[int, str]:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
            return r.status, r.read().decode()

    assert get("/healthz") == (200, "ok\n") and get("/ready") == (200, "ready\n")
    status = json.loads(get("/status")[1])
    assert [(j["job"], j["batches"], j["records_read"]) for j in status["jobs"]] == [
        ("users-delta", runs[-1][0], produced),
        ("users-pg", runs[-1][1], produced),
    ]
    assert all(j["idle_checks"] >= 2 and time.time() - j["last_check_at"] < 30 for j in status["jobs"]), (
        status
    )
    # each first batch built its table from the earliest offset: the run says so, with that batch's reason
    assert [(j["mode"], j["reason"].split(":")[0]) for j in status["jobs"]] == [
        ("full", "no stored offsets")
    ] * 2
    # the last batch read the last round's records, produced after last_round: its latency runs from
    # the oldest of them to the batch's end (its target's commit, then its group's: the table can be
    # caught up a moment before). A record's timestamp is in whole milliseconds, the latency rounded
    # to one: the first record can read up to 1 ms before last_round, the figure 0.5 ms more
    latencies = [(j["job"], j["last_latency_s"], j["last_batch_at"] - last_round) for j in status["jobs"]]
    assert all(0 < j["last_latency_s"] <= j["last_batch_at"] - last_round + 0.0015 for j in status["jobs"]), (
        latencies
    )
    assert all(last_round < j["last_batch_at"] < caught_up + 30 for j in status["jobs"]), latencies
    time.sleep(1.2)  # the exposition is renewed every second
    metrics = get("/metrics")[1]
    sample = 'upsert_kafka_ops_continuous_batches_total{pipeline="pipeline",pipeline_job="users-delta"}'
    assert f"{sample} {runs[-1][0]}\n" in metrics, metrics
    assert (
        'upsert_kafka_ops_continuous_records_read_total{pipeline="pipeline",pipeline_job="users-pg"} '
        + str(produced)
        in metrics
    )
    latency = 'upsert_kafka_ops_continuous_latency_seconds{pipeline="pipeline",pipeline_job="users-pg"} '
    [value] = [line.removeprefix(latency) for line in metrics.splitlines() if line.startswith(latency)]
    assert float(value) == status["jobs"][1]["last_latency_s"], metrics
    live.send_signal(signal.SIGTERM)
    out, err = live.communicate(timeout=120)
    assert live.returncode == 0, err[-3000:]
    assert "SIGTERM: stopping after the current batch" in err
    results = json.loads(out)["results"]
    assert [r["job"] for r in results] == ["users-delta", "users-pg"]
    for i, r in enumerate(results):
        ran = [each[i] for each in runs]
        assert (r["status"], r["execution"]) == ("succeeded", "continuous"), r
        assert ran == sorted(set(ran)) and r["run"] == r["batches"] == ran[-1], (ran, r)
        assert len(ran) <= r["batches"] <= 2 * len(ran), (ran, r)
        assert r["records_read"] == produced  # every record read once, by exactly one batch of each job
    expected = oracle_table(servers, topic)
    assert delta_rows() == expected
    assert pg_rows(postgres, pg_table) == expected
    for job in ("users-delta", "users-pg"):  # each group at the end: lag 0, as lag and the sensors see it
        group = ko.committed_offsets(
            {"bootstrap.servers": servers}, f"upsert-kafka-ops.{job}", sorted(_ends(servers, topic))
        )
        assert group == _ends(servers, topic), job

    # 2. killed after the read of its second batch: the first batch stays committed, the second is not seen
    produce(servers, topic, random_changes(rnd, 40, 60))
    killed = cli_run(file, jars_dir, {"UKO_FAULT_POINT": "after-read@2"}, "--job", "users-delta")
    [committed] = _caught_up(killed, [delta], servers, topic)
    assert committed == runs[-1][0] + 1
    before = delta()
    second = produce(servers, topic, random_changes(rnd, 25, 60))
    _, err = killed.communicate(timeout=300)
    assert killed.returncode == -9, err[-3000:]
    assert delta() == before  # nothing of the killed batch

    # ... and the next run (here one batch, as --once or a scheduler runs it) reads exactly the rest
    rerun = run_job(Pipeline.load(file), "users-delta", spark=spark)
    assert (rerun.mode, rerun.run, rerun.records_read) == ("incremental", committed + 1, second)
    assert delta_rows() == oracle_table(servers, topic)


def test_a_failed_batch_is_tried_again_and_too_many_in_a_row_end_the_run(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path
) -> None:
    """Another holder of the table's lock (a maintenance, here this test) past the lock timeout fails
    the batch: it is tried again after a pause, commits once the lock is free, and more failures in a
    row than ``retries`` end the run with the error (in this process: the loop the CLI runs). A
    failure no pause mends (an undecodable key) ends it at once. The batch's end-to-end latency runs
    from its oldest record's timestamp (100 s before it was produced) to its commit."""
    import threading

    from confluent_kafka import Producer

    from upsert_kafka_ops.engine.source import DataError
    from upsert_kafka_ops.jobs.continuous import ContinuousJobs
    from upsert_kafka_ops.jobs.core import ConcurrentRunError
    from upsert_kafka_ops.jobs.targets import target_for

    servers, topic, path = kafka.bootstrap_servers, new_topic(partitions=2), tmp_path / "users"
    job = {"name": "users-live", "kind": "materialize", "source": source(topic, servers),
           "target": {"kind": "delta", "path": str(path)},
           "trigger": {"continuous": True, "interval": "200ms", "retries": 2}}  # fmt: skip
    p = pipeline(servers, [job])
    rnd = random.Random(7)
    began = time.time()
    produce(servers, topic, random_changes(rnd, 50, 20), timestamp_ms=int((began - 100) * 1000))
    jobs = ContinuousJobs(p, ["users-live"], spark, lock_timeout_s=0.5)
    (live,) = jobs.results
    stop, ended = threading.Event(), []

    def loop() -> None:
        try:
            jobs.run(stop)
            ended.append(None)
        except BaseException as exc:  # what the loop ended with
            ended.append(exc)

    table = target_for(p.jobs[0].target, p)  # type: ignore[union-attr]
    with table.hold(spark, 5):  # the lock held before the first batch
        thread = threading.Thread(target=loop, name="continuous")
        thread.start()
        deadline = time.monotonic() + 120
        while live.failures < 2:  # two failed tries (after a 1 s pause), both within its retries
            assert thread.is_alive() and time.monotonic() < deadline, (ended, live)
            time.sleep(0.1)
        assert live.failing == 2 and "being written by another run" in live.last_error
        assert not jobs.ready()  # /ready answers 503 while it fails
        held_until = time.time()
    deadline = time.monotonic() + 120
    while live.batches < 1:  # the lock is free: the third try commits
        assert thread.is_alive() and time.monotonic() < deadline, (ended, live)
        time.sleep(0.1)
    assert (live.failing, live.failures) == (0, 2) and jobs.ready()
    # from the records' timestamp (whole milliseconds, so up to 1 ms before began - 100; the figure
    # rounded to one) to a commit after the lock was freed
    assert live.last_latency_s is not None
    assert held_until - began + 100 <= live.last_latency_s <= time.time() - began + 100.0015, live
    table_rows = spark.read.format("delta").load(str(path)).select("id", "name", "region", "score").collect()
    assert rows_as_table(table_rows) == oracle_table(servers, topic)

    with table.hold(spark, 5):  # now held for longer than three tries in a row
        produce(servers, topic, random_changes(rnd, 5, 20))
        thread.join(120)
        assert not thread.is_alive()
    (error,) = ended
    assert isinstance(error, ConcurrentRunError) and live.failing == 3 and live.batches == 1

    # a key that is not JSON fails the batch the same way each time: the run ends at the first try
    producer = Producer({"bootstrap.servers": servers})
    producer.produce(topic, key=b"{not json", value=b"{}")
    assert producer.flush(30) == 0
    jobs, ended = ContinuousJobs(p, ["users-live"], spark), []
    thread = threading.Thread(target=loop, name="continuous")
    thread.start()
    thread.join(120)
    assert not thread.is_alive()
    (error,) = ended
    (live,) = jobs.results
    assert isinstance(error, DataError) and (live.failures, live.batches) == (1, 0), (error, live)


def test_a_continuous_publish_sends_each_new_delta_version_and_continues_from_its_state(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path
) -> None:
    """A publish of a Delta change feed, run continuously in this process (the CLI's loop, in a
    session of its own beside the test's writes): its topic folds to the table after every round of
    MERGEs and DELETEs, an idle table costs no batch, and a new process continues with the versions
    committed after the one its state stored."""
    import threading

    from upsert_kafka_ops.jobs.continuous import ContinuousJobs
    from upsert_kafka_ops.jobs.publish import latest_version, published_version
    from upsert_kafka_ops.pipeline import PublishJob

    servers, topic, feed = kafka.bootstrap_servers, new_topic(partitions=3), tmp_path / "feed"
    spark.sql(f"CREATE TABLE delta.`{feed}` (id BIGINT, name STRING, region STRING, score DECIMAL(10, 2)) "
              "USING delta TBLPROPERTIES (delta.enableChangeDataFeed = true)")  # fmt: skip
    job = {"name": "publish-live", "kind": "publish", "source": {"kind": "delta-cdf", "path": str(feed)},
           "sink": source(topic, servers), "state": {"path": str(tmp_path / "state")},
           "trigger": {"continuous": True, "interval": "300ms"}}  # fmt: skip
    p = pipeline(servers, [job])
    spec = p.job("publish-live")
    assert isinstance(spec, PublishJob)
    rnd = random.Random(17)

    def change() -> None:
        """One Delta version of upserts, and one of deletes when some are drawn."""
        rows = {
            rnd.randrange(30): (rnd.choice("abc"), rnd.choice("xyz"), rnd.randrange(10_000)) for _ in range(8)
        }
        values = ", ".join(f"({k}, '{n}', '{r}', {s / 100:.2f})" for k, (n, r, s) in rows.items())
        spark.sql(f"MERGE INTO delta.`{feed}` t USING (SELECT * FROM VALUES {values} AS s(id, name, region, score)) s "
                  "ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")  # fmt: skip
        gone = [k for k in range(30) if rnd.random() < 0.1]
        if gone:
            spark.sql(f"DELETE FROM delta.`{feed}` WHERE id IN ({', '.join(map(str, gone))})")

    def table() -> dict[int, tuple[str, str, str]]:
        return rows_as_table(
            spark.read.format("delta").load(str(feed)).select("id", "name", "region", "score").collect()
        )

    def run(rounds: int) -> ContinuousJobs:
        """The loop in a thread over ``rounds`` rounds of changes, each waited for; stopped after."""
        jobs = ContinuousJobs(p, ["publish-live"], spark.newSession())
        (live,) = jobs.results
        stop = threading.Event()
        thread = threading.Thread(target=jobs.run, args=(stop,), name="continuous-publish")
        thread.start()
        try:
            for round_ in range(rounds + 1):
                if round_:
                    change()
                want, deadline = latest_version(spark, p, spec), time.monotonic() + 120
                while published_version(p, spec) != want:
                    assert thread.is_alive() and time.monotonic() < deadline, (jobs.failed, live)
                    time.sleep(0.1)
                assert oracle_table(servers, topic) == table(), round_
            batches = live.batches
            time.sleep(1.2)  # four intervals with no new version: no batch
            assert live.batches == batches and live.idle_checks >= 2, live
        finally:
            stop.set()
            thread.join(120)
        assert not thread.is_alive() and live.failures == 0, (jobs.failed, live)
        return jobs

    first = run(3)
    (live,) = first.results
    # the first batch publishes the (empty) table as of its version; each round is one or two
    # versions (a MERGE, maybe a DELETE), published in one batch or two
    assert 4 <= live.batches <= 7 and live.records_written > 0, live
    change()  # committed while no process runs
    stored, latest = published_version(p, spec), latest_version(spark, p, spec)
    assert stored is not None and latest > stored
    (again,) = run(0).results  # started again: its one batch sends exactly the versions after the stored one
    assert again.batches == 1 and again.last is not None, again
    assert again.last.reason == f"change data feed of versions {stored + 1}..{latest}", again.last.reason


def test_a_postgres_outage_mid_stream_fails_batches_until_it_is_back_and_the_table_ends_exact(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The target's server stops while a continuous job writes to it and records keep arriving: its
    batches fail (committing nothing) and are tried again, and once the server is back the job
    catches up with every record applied once and the table equal to the fold of the topic."""
    import shutil
    import tempfile
    import threading

    from upsert_kafka_ops.jobs.continuous import ContinuousJobs

    servers, topic = kafka.bootstrap_servers, new_topic(partitions=2)
    folder = Path(tempfile.mkdtemp(prefix="uko-pg-outage-"))  # kept over a stop, reachable by its user
    folder.chmod(0o711)
    pg = LocalPostgres(folder, port=free_port()).start()  # its own: this test stops it
    try:
        monkeypatch.setenv("UKO_TEST_PG_PASSWORD", pg.password)
        job = {"name": "users-pg", "kind": "materialize", "source": source(topic, servers),
               "target": pg_target(pg, "users_live"),
               "trigger": {"continuous": True, "interval": "200ms", "retries": 30}}  # fmt: skip
        rnd = random.Random(29)
        produced = produce(servers, topic, random_changes(rnd, 60, 25))
        jobs = ContinuousJobs(pipeline(servers, [job]), ["users-pg"], spark, lock_timeout_s=10)
        (live,) = jobs.results
        stop = threading.Event()
        thread = threading.Thread(target=jobs.run, args=(stop,), name="continuous-pg")

        def state() -> StoredState | None:
            with psycopg.connect(pg.conninfo) as c:
                return read_postgres_state(c, "upsert_kafka_ops_offsets", "users_live")

        def wait(done: Callable[[], bool], what: str) -> None:
            deadline = time.monotonic() + 180
            while not done():
                assert thread.is_alive() and time.monotonic() < deadline, (what, jobs.failed, live)
                time.sleep(0.2)

        thread.start()
        try:
            wait(
                lambda: (s := state()) is not None and s.offsets == _ends(servers, topic), "the first records"
            )
            pg.stop()  # the outage: the server goes away between two batches
            produced += produce(servers, topic, random_changes(rnd, 40, 25))
            wait(lambda: live.failing >= 2, "two failed batches")
            assert not jobs.ready() and live.last_error and pg.password not in live.last_error, live
            pg.start()
            wait(lambda: (s := state()) is not None and s.offsets == _ends(servers, topic), "catching up")
        finally:
            stop.set()
            thread.join(120)
        assert not thread.is_alive() and not jobs.failed, jobs.failed
        assert live.failures >= 2 and live.failing == 0 and live.records_read == produced, live
        assert pg_rows(pg, "users_live") == oracle_table(servers, topic)
    finally:
        pg.stop()
        shutil.rmtree(folder, ignore_errors=True)
