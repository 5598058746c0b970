"""Lag against the real broker: exact offset lag, time lag, data loss, markers, recreated topics,
statuses driven by real commits, the CLI and the Prometheus endpoint."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from upsert_kafka_ops.kafka import (
    EvaluationConfig,
    KafkaAccessDeniedError,
    KafkaAdmin,
    KafkaTimeoutError,
    LagWindow,
    TopicNotFoundError,
    check,
    compute_lag,
    group_lag,
)
from upsert_kafka_ops.kafka.lag import RECORD_TOLERANCE_S
from upsert_kafka_ops.local import LocalKafka
from upsert_kafka_ops.local.process import free_port

pytestmark = pytest.mark.integration


def _produce(
    kafka: LocalKafka, topic: str, partition: int, count: int, ts_ms: int | None = None
) -> list[int]:
    """``count`` records into one partition; returns their timestamps (ms) in offset order."""
    stamps: list[int] = []
    producer = Producer(kafka.client_config(**{"linger.ms": 0}))

    def delivered(err: Any, msg: Any) -> None:
        assert err is None, err
        stamps.append(msg.timestamp()[1])

    for i in range(count):
        extra = {} if ts_ms is None else {"timestamp": ts_ms + i}
        producer.produce(
            topic, key=f"k{i}".encode(), value=b"v", partition=partition, on_delivery=delivered, **extra
        )
    assert producer.flush(10) == 0
    return stamps


def _commit(kafka: LocalKafka, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit offsets for a group without joining it (a simple consumer group commit)."""
    consumer = Consumer(kafka.client_config(**{"group.id": group, "enable.auto.commit": False}))
    try:
        consumer.commit(
            offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False
        )
    finally:
        consumer.close()


@pytest.fixture
def group() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"


def test_offset_lag_is_exact_per_partition_and_in_total(
    kafka: LocalKafka, new_topic: Callable[..., str], group: str
) -> None:
    topic = new_topic(partitions=3)
    base = int(time.time() * 1000) - 60_000
    stamps = {p: _produce(kafka, topic, p, n, ts_ms=base + 1000 * p) for p, n in ((0, 10), (1, 7), (2, 4))}
    _commit(kafka, group, {(topic, 0): 4, (topic, 1): 7})
    report = group_lag(kafka.client_config(), group, isolation="read_committed", topics=[topic], timeout=10)
    lags = {p.partition: p.lag for p in report.partitions}
    assert lags == {0: 6, 1: 0, 2: 4}  # partition 2 has no commit: read from the earliest, all 4 wait
    assert report.total_lag == 10
    p0, p1, p2 = report.partitions
    assert (p0.committed, p0.earliest, p0.end) == (4, 0, 10)
    assert p0.time_lag_method == "record" and p0.record_timestamp_ms == stamps[0][4] == base + 4
    assert p0.time_lag_s is not None
    assert abs(p0.time_lag_s - (report.observed_at - stamps[0][4] / 1000)) <= RECORD_TOLERANCE_S
    assert (p1.time_lag_s, p1.time_lag_method) == (0.0, "caught-up")
    # no commit: the time lag is the age of the first record its consumer would read
    assert (p2.committed, p2.time_lag_method, p2.record_timestamp_ms) == (None, "record", stamps[2][0])
    latest = group_lag(kafka.client_config(), group, isolation="read_committed", topics=[topic], timeout=10,
                       uncommitted="latest")  # fmt: skip
    assert [(p.lag, p.time_lag_method) for p in latest.partitions][2] == (0, "no-commit")
    assert report.group_state == "EMPTY" and report.group_members == 0
    # the same numbers from committed offsets of another source (e.g. a job's stored offsets)
    other = compute_lag(kafka.client_config(), {(topic, 0): 4, (topic, 2): 1}, isolation="read_uncommitted")
    assert [(p.partition, p.lag) for p in other.partitions] == [(0, 6), (2, 3)]
    # without --topic: every topic the group committed to, all its partitions
    everything = group_lag(kafka.client_config(), group, isolation="read_committed", fetch_records=False)
    assert [(p.partition, p.lag) for p in everything.partitions] == [(0, 6), (1, 0), (2, 4)]


def test_offsets_requests_split_into_chunks_give_the_same_report(
    kafka: LocalKafka, new_topic: Callable[..., str], group: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Offsets are asked in chunks (one request over thousands of partitions costs the client more
    than many small ones): chunks of 2 and 3 give every partition its own numbers."""
    from upsert_kafka_ops.kafka import admin as admin_module

    topics = [new_topic(partitions=3), new_topic(partitions=4)]
    counts = {(t, p): 2 + p + 3 * i for i, t in enumerate(topics) for p in range(3 + i)}
    for (t, p), n in counts.items():
        _produce(kafka, t, p, n)
    commits = {tp: n // 2 for tp, n in counts.items() if tp[1] != 1}
    _commit(kafka, group, commits)
    whole = group_lag(kafka.client_config(), group, isolation="read_committed", topics=topics)
    monkeypatch.setattr(admin_module, "OFFSETS_CHUNK", 2)
    monkeypatch.setattr(admin_module, "GROUP_OFFSETS_CHUNK", 3)
    chunked = group_lag(kafka.client_config(), group, isolation="read_committed", topics=topics)
    got = {(p.topic, p.partition): (p.committed, p.earliest, p.end, p.lag) for p in chunked.partitions}
    assert got == {
        tp: (commits.get(tp), 0, n, n if tp not in commits else n - commits[tp]) for tp, n in counts.items()
    }
    assert [p.record_timestamp_ms for p in chunked.partitions] == [
        p.record_timestamp_ms for p in whole.partitions
    ]
    with KafkaAdmin(kafka.client_config(), timeout=10) as admin:
        assert admin.committed_offsets(group, sorted(counts)) == {tp: commits.get(tp) for tp in counts}


def test_offsets_of_a_topic_created_a_moment_ago_are_listed(kafka: LocalKafka) -> None:
    """Just after a topic is created its partitions' leadership is still settling, and the broker
    answers ListOffsets with "not leader" (most of the time on this machine): the request is asked
    again within the timeout instead of failing the run that created the topic."""
    for _ in range(5):
        name = f"t-{uuid.uuid4().hex[:12]}"
        kafka.create_topic(name, partitions=4)
        with KafkaAdmin(kafka.client_config(), timeout=10) as admin:
            parts = [(name, p) for p in range(4)]
            assert admin.earliest_offsets(parts) == {tp: 0 for tp in parts}
            assert admin.end_offsets(parts, isolation="read_committed") == {tp: 0 for tp in parts}


def test_a_reused_admin_reads_the_record_at_an_unmoved_commit_once(
    kafka: LocalKafka, new_topic: Callable[..., str], group: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lag exporter's evaluations reuse one KafkaAdmin: a partition whose commit has not moved
    (a stuck consumer: what an alert is about) is not read again; one whose commit moved is."""
    topic = new_topic(partitions=2)
    base = int(time.time() * 1000) - 60_000
    stamps = {p: _produce(kafka, topic, p, 10, ts_ms=base + 1000 * p) for p in (0, 1)}
    _commit(kafka, group, {(topic, 0): 4, (topic, 1): 2})
    admin = KafkaAdmin(kafka.client_config(), timeout=10)
    reads: list[int] = []
    real = admin.record_reader
    monkeypatch.setattr(admin, "record_reader", lambda isolation: reads.append(1) or real(isolation))

    def record_times() -> dict[int, int | None]:
        report = group_lag(admin, group, isolation="read_committed", topics=[topic])
        assert all(p.time_lag_method == "record" for p in report.partitions)
        return {p.partition: p.record_timestamp_ms for p in report.partitions}

    try:
        assert record_times() == {0: stamps[0][4], 1: stamps[1][2]} and len(reads) == 1
        assert record_times() == {0: stamps[0][4], 1: stamps[1][2]} and len(reads) == 1  # nothing read
        _commit(kafka, group, {(topic, 1): 5})
        assert record_times() == {0: stamps[0][4], 1: stamps[1][5]} and len(reads) == 2
    finally:
        admin.close()


def test_data_loss_and_time_lag_when_the_record_is_gone(
    kafka: LocalKafka, new_topic: Callable[..., str], group: str
) -> None:
    topic = new_topic(partitions=1)
    tp = (topic, 0)
    window = LagWindow()
    _produce(kafka, topic, 0, 10)
    _commit(kafka, group, {tp: 0})
    status, window = check(window, group_lag(kafka.client_config(), group, isolation="read_committed"))
    stamps = _produce(kafka, topic, 0, 10)  # offsets 10..19, written between the two observations
    status, window = check(window, group_lag(kafka.client_config(), group, isolation="read_committed"))
    (first_t, second_t) = (p[1] for p in window.points()[tp])
    _commit(kafka, group, {tp: 15})
    admin = AdminClient(kafka.client_config())
    admin.delete_records([TopicPartition(topic, 0, 18)])[TopicPartition(topic, 0, 18)].result(10)
    report = group_lag(kafka.client_config(), group, isolation="read_committed", history=window.points())
    p = report.partition(topic, 0)
    assert (p.committed, p.earliest, p.end, p.lag) == (15, 18, 20, 5)
    assert p.data_loss and p.records_lost == 3
    # record 15 is gone: the time the log end passed offset 15 is interpolated between the points
    assert p.time_lag_method == "interpolated"
    assert p.time_lag_tolerance_s == pytest.approx(second_t - first_t)
    actual = report.observed_at - stamps[5] / 1000
    assert p.time_lag_s is not None and p.time_lag_tolerance_s is not None
    assert abs(p.time_lag_s - actual) <= p.time_lag_tolerance_s + RECORD_TOLERANCE_S
    status, _ = check(window, report)
    assert status.partitions[0].status == "WARN" and "DATA LOSS on" in status.summary
    # with no recorded points, the next record's age is reported as a lower bound
    bare = group_lag(kafka.client_config(), group, isolation="read_committed")
    q = bare.partition(topic, 0)
    assert q.time_lag_method == "next-record" and q.time_lag_tolerance_s is None
    assert q.time_lag_s is not None
    assert q.time_lag_s <= bare.observed_at - stamps[5] / 1000 + RECORD_TOLERANCE_S


def test_time_lag_after_compaction_removed_the_committed_record(
    kafka: LocalKafka, new_topic: Callable[..., str], group: str
) -> None:
    topic = new_topic(
        partitions=1,
        config={"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.001",
                "min.compaction.lag.ms": "0", "delete.retention.ms": "0"},
    )  # fmt: skip
    tp = (topic, 0)
    producer = Producer(kafka.client_config(**{"linger.ms": 0}))
    window = LagWindow()
    _commit(kafka, group, {tp: 0})
    stamps: list[int] = []
    for i in range(4):  # key "a" four times (offsets 0..3), one observation after each
        producer.produce(topic, key=b"a", value=str(i).encode(), partition=0,
                         on_delivery=lambda e, m: stamps.append(m.timestamp()[1]))  # fmt: skip
        assert producer.flush(10) == 0
        _, window = check(window, group_lag(kafka.client_config(), group, isolation="read_committed"))
        time.sleep(0.15)  # past segment.ms, so the next record rolls a new segment
    _commit(kafka, group, {tp: 1})
    deadline = time.monotonic() + 90
    report = None
    while time.monotonic() < deadline:
        producer.produce(topic, key=b"b", value=b"roll", partition=0)  # rolls the active segment
        producer.flush(10)
        report = group_lag(kafka.client_config(), group, isolation="read_committed", history=window.points())
        if report.partition(topic, 0).time_lag_method != "record":
            break
        time.sleep(1)
    assert report is not None
    p = report.partition(topic, 0)
    assert report.compacted_topics == [topic]
    assert p.time_lag_method == "interpolated", "the cleaner did not compact offset 1 within 90 s"
    assert p.earliest == 0 and not p.data_loss  # compaction keeps the log start
    actual = report.observed_at - stamps[1] / 1000
    assert p.time_lag_s is not None and p.time_lag_tolerance_s is not None
    assert abs(p.time_lag_s - actual) <= p.time_lag_tolerance_s + RECORD_TOLERANCE_S


def test_transaction_markers_are_not_phantom_lag(
    kafka: LocalKafka, new_topic: Callable[..., str], group: str
) -> None:
    topic = new_topic(partitions=1)
    tp = (topic, 0)
    producer = Producer(kafka.client_config(**{"transactional.id": f"tx-{uuid.uuid4().hex[:8]}"}))
    producer.init_transactions(10)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, key=f"k{i}".encode(), value=b"v", partition=0)
    producer.commit_transaction(10)  # offsets 0..4, the commit marker at 5
    _commit(kafka, group, {tp: 5})  # last record + 1, as many consumers commit (KAFKA-6607)
    report = group_lag(kafka.client_config(), group, isolation="read_committed")
    p = report.partition(topic, 0)
    assert p.end == 6 and p.lag == 0 and p.marker_only
    # an open transaction: invisible to read_committed (end = LSO), pending for read_uncommitted
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, key=f"o{i}".encode(), value=b"v", partition=0)
    producer.flush(10)
    try:
        committed_view = group_lag(kafka.client_config(), group, isolation="read_committed").partition(
            topic, 0
        )
        dirty_view = group_lag(kafka.client_config(), group, isolation="read_uncommitted").partition(topic, 0)
    finally:
        producer.abort_transaction(10)
    assert (committed_view.end, committed_view.lag) == (6, 0)
    assert (dirty_view.end, dirty_view.lag, dirty_view.time_lag_method) == (9, 4, "next-record")


def test_recreated_topic_is_detected(kafka: LocalKafka, group: str) -> None:
    topic = f"t-{uuid.uuid4().hex[:12]}"
    kafka.create_topic(topic, partitions=1)
    _produce(kafka, topic, 0, 5)
    _commit(kafka, group, {(topic, 0): 2})
    first = group_lag(kafka.client_config(), group, isolation="read_committed", topics=[topic])
    _, window = check(None, first)
    admin = AdminClient(kafka.client_config())
    admin.delete_topics([topic], operation_timeout=10)[topic].result(10)
    deadline = time.monotonic() + 30
    while True:
        try:
            kafka.create_topic(topic, partitions=1)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    second = group_lag(kafka.client_config(), group, isolation="read_committed", topics=[topic])
    assert second.topic_ids[topic] != first.topic_ids[topic]
    status, window = check(window.to_json(), second)
    assert status.recreated_topics == (topic,) and window.recreated == (topic,)


def test_statuses_from_real_commits_over_injected_time(
    kafka: LocalKafka, new_topic: Callable[..., str], group: str
) -> None:
    topic = new_topic(partitions=1)
    tp = (topic, 0)
    conf = kafka.client_config()
    cfg = EvaluationConfig(intervals=4)

    def observe(window: LagWindow, at: float) -> tuple[str, LagWindow]:
        status, window = check(
            window, group_lag(conf, group, isolation="read_committed", now=at, fetch_records=False), cfg
        )
        return status.partitions[0].status, window

    statuses = []
    window = LagWindow()
    for i in range(4):  # keeps up: commits reach the end every time -> OK
        _produce(kafka, topic, 0, 10)
        _commit(kafka, group, {tp: 10 * (i + 1)})
        s, window = observe(window, 1000.0 + 60 * i)
        statuses.append(s)
    for i in range(4):  # falls behind: offsets move, lag grows -> WARN
        _produce(kafka, topic, 0, 20)
        _commit(kafka, group, {tp: 40 + 10 * (i + 1)})
        s, window = observe(window, 1240.0 + 60 * i)
    statuses.append(s)
    s, window = observe(window, 1240.0 + 60 * 3 + 600)  # no commit for 10 min, nobody owns it -> STOP
    statuses.append(s)
    _commit(kafka, group, {tp: 30})  # someone reset the group backwards -> REWIND
    s, window = observe(window, 2100.0)
    statuses.append(s)
    assert statuses == ["OK", "OK", "OK", "OK", "WARN", "STOP", "REWIND"]


@pytest.fixture
def member(kafka: LocalKafka, group: str) -> Iterator[Callable[[str], Consumer]]:
    consumers: list[Consumer] = []

    def join(topic: str) -> Consumer:
        c = Consumer(kafka.client_config(**{"group.id": group, "enable.auto.commit": False,
                                            "auto.offset.reset": "earliest", "session.timeout.ms": 6000}))  # fmt: skip
        c.subscribe([topic])
        deadline = time.monotonic() + 30
        while not c.assignment():
            assert time.monotonic() < deadline, "the member got no assignment in 30 s"
            c.poll(0.2)
        consumers.append(c)
        return c

    yield join
    for c in consumers:
        c.close()


def test_stall_when_a_live_member_commits_the_same_offset(
    kafka: LocalKafka, new_topic: Callable[..., str], group: str, member: Callable[[str], Consumer]
) -> None:
    topic = new_topic(partitions=1)
    consumer = member(topic)
    _produce(kafka, topic, 0, 5)
    window = LagWindow()
    statuses = []
    for i in range(4):
        _produce(kafka, topic, 0, 5)
        consumer.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
        report = group_lag(kafka.client_config(), group, isolation="read_committed", now=500.0 + 60 * i)
        status, window = check(window, report, EvaluationConfig(intervals=4))
        statuses.append(status.partitions[0].status)
    assert report.partition(topic, 0).owner is not None and report.group_members == 1
    assert statuses[-1] == "STALL" and status.status == "ERR"


def test_errors_are_bounded_and_named(kafka: LocalKafka, new_topic: Callable[..., str]) -> None:
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError, match=r"127\.0\.0\.1:1"):
        KafkaAdmin({"bootstrap.servers": "127.0.0.1:1"}, timeout=2).end_offsets(
            [("t", 0)], isolation="read_committed"
        )
    assert time.monotonic() - started < 30  # bounded (a generous bound: this is no speed test)
    with pytest.raises(TopicNotFoundError, match="no-such-topic"):
        group_lag(kafka.client_config(), "g", isolation="read_committed", topics=["no-such-topic"])
    bad = {"bootstrap.servers": kafka.sasl_bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
           "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice", "sasl.password": "wrong-secret"}  # fmt: skip
    with pytest.raises(KafkaAccessDeniedError) as info:
        KafkaAdmin(bad, timeout=5).describe_topics([new_topic()])
    assert "wrong-secret" not in str(info.value) and "wrong-secret" not in repr(KafkaAdmin(bad))


# -- CLI and the Prometheus endpoint ---------------------------------------------------------------------
def parse_exposition(text: str) -> dict[str, dict[str, Any]]:
    """Parse with Prometheus' own text parser; families keyed by their exposed name (counters with
    ``_total``), each checked against the naming conventions."""
    from prometheus_client.parser import text_string_to_metric_families

    families: dict[str, dict[str, Any]] = {}
    for family in text_string_to_metric_families(text):
        assert family.type in ("counter", "gauge"), family
        name = family.name + ("_total" if family.type == "counter" else "")
        assert re.fullmatch(r"upsert_kafka_ops_[a-z0-9_]+", name)
        assert all(s.name == name for s in family.samples), (name, family.samples)
        families[name] = {
            "help": family.documentation,
            "type": family.type,
            "samples": [(dict(s.labels), s.value) for s in family.samples],
        }
    return families


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "upsert_kafka_ops.cli.lag", "lag", *args],
                          capture_output=True, text=True, check=False, timeout=120)  # fmt: skip


def test_cli_table_json_and_fail_on(
    kafka: LocalKafka, new_topic: Callable[..., str], group: str, tmp_path: Any
) -> None:
    topic = new_topic(partitions=2)
    _produce(kafka, topic, 0, 8)
    _commit(kafka, group, {(topic, 0): 3})
    table = _cli("--bootstrap-servers", kafka.bootstrap_servers, "--group", group)
    assert table.returncode == 0, table.stderr
    assert re.search(rf"^{topic}\s+0\s+3\s+8\s+5\s", table.stdout, re.M)
    assert re.search(rf"^{topic}\s+1\s+-\s+0\s+0\s", table.stdout, re.M)  # no commit, nothing to read
    assert "lag 5 over 2 partitions, 1 without a commit" in table.stdout
    window = tmp_path / "window.json"
    args = ("--bootstrap-servers", kafka.bootstrap_servers, "--group", group, "--topic", topic, "--json",
            "--window", str(window), "--fail-on", "WARN")  # fmt: skip
    first = _cli(*args)
    assert first.returncode == 0, first.stderr
    doc = json.loads(first.stdout)
    assert doc["report"]["total_lag"] == 5 and doc["status"]["status"] == "OK"
    _produce(kafka, topic, 0, 8)
    _commit(kafka, group, {(topic, 0): 6})
    second = _cli(*args)  # offsets moved, lag grew 5 -> 10: WARN, read from the persisted window
    assert second.returncode == 1, second.stdout + second.stderr
    assert json.loads(second.stdout)["status"]["status"] == "WARN"
    assert len(json.loads(window.read_text())["partitions"][topic]["0"]["samples"]) == 2
    down = _cli("--bootstrap-servers", "127.0.0.1:1", "--group", group, "--timeout", "2")
    assert down.returncode == 2 and "127.0.0.1:1" in down.stderr
    # a mistyped group is an error, not a NOTFOUND that passes --fail-on WARN
    typo = _cli(
        "--bootstrap-servers", kafka.bootstrap_servers, "--group", group + "-typo", "--fail-on", "WARN"
    )
    assert typo.returncode == 2 and f"consumer group '{group}-typo' does not exist" in typo.stderr
    assert "--allow-missing-group" in typo.stderr
    allowed = _cli("--bootstrap-servers", kafka.bootstrap_servers, "--group", group + "-typo", "--json",
                   "--allow-missing-group")  # fmt: skip
    assert allowed.returncode == 0 and json.loads(allowed.stdout)["status"]["status"] == "NOTFOUND"


def test_prometheus_endpoint_is_scraped_over_http(
    kafka: LocalKafka, new_topic: Callable[..., str], group: str
) -> None:
    from upsert_kafka_ops.metrics.exporter import LagMonitor, WatchOptions, serve
    from upsert_kafka_ops.spec.connection import KafkaConnection

    topic = new_topic(partitions=2)
    _produce(kafka, topic, 1, 6)
    _commit(kafka, group, {(topic, 0): 0, (topic, 1): 2})
    port = free_port()
    monitor = LagMonitor(KafkaConnection(bootstrap_servers=kafka.bootstrap_servers), group,
                         options=WatchOptions(min_interval_s=0))  # fmt: skip
    server = serve(monitor, "127.0.0.1", port)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
            assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            families = parse_exposition(response.read().decode())
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=30) as response:
            assert json.loads(response.read())["status"]["group"] == group
    finally:
        server.shutdown()
        server.server_close()
    lag = {s[0]["partition"]: s[1] for s in families["upsert_kafka_ops_consumer_lag_records"]["samples"]}
    assert lag == {"0": 0.0, "1": 4.0}
    assert families["upsert_kafka_ops_consumer_group_lag_records"]["samples"] == [({"group": group}, 4.0)]
    current = [s for s in families["upsert_kafka_ops_consumer_group_status"]["samples"] if s[1] == 1.0]
    assert current == [({"group": group, "status": "OK"}, 1.0)]
    assert families["upsert_kafka_ops_lag_scrape_errors_total"]["type"] == "counter"
    assert families["upsert_kafka_ops_lag_up"]["samples"] == [({"group": group}, 1.0)]
    seconds = families["upsert_kafka_ops_consumer_lag_seconds"]["samples"]
    assert [s[0]["partition"] for s in seconds] == ["0", "1"] and all(v >= 0 for _, v in seconds)


def test_a_group_exporter_without_its_broker_answers_up_0_and_not_ready() -> None:
    """The broker is gone: /metrics still answers 200 with ``lag_up`` 0 and the error counted (an alert
    sees the exporter's verdict, not a failed scrape); /ready is 503; /healthz stays 200."""
    from upsert_kafka_ops.metrics.exporter import LagMonitor, WatchOptions, serve
    from upsert_kafka_ops.spec.connection import KafkaConnection

    nobody = f"127.0.0.1:{free_port()}"
    port = free_port()
    monitor = LagMonitor(
        KafkaConnection(bootstrap_servers=nobody), "g", options=WatchOptions(min_interval_s=0, timeout_s=2)
    )
    server = serve(monitor, "127.0.0.1", port)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://127.0.0.1:{port}/metrics", timeout=60) as response:
            assert response.status == 200
            families = parse_exposition(response.read().decode())
        with pytest.raises(urllib.error.HTTPError) as ready:
            opener.open(f"http://127.0.0.1:{port}/ready", timeout=30)
        with opener.open(f"http://127.0.0.1:{port}/healthz", timeout=30) as response:
            assert response.status == 200
    finally:
        server.shutdown()
        server.server_close()
        monitor.close()
    assert ready.value.code == 503
    assert families["upsert_kafka_ops_lag_up"]["samples"] == [({"group": "g"}, 0.0)]
    assert families["upsert_kafka_ops_lag_scrape_errors_total"]["samples"][0][1] >= 1.0  # renewed meanwhile
    assert "upsert_kafka_ops_consumer_lag_records" not in families
