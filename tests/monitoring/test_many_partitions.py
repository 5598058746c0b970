"""Lag over 10,000 partitions (issue 23, item 7): 100 topics of 100 partitions on a broker of its own,
a job whose source names them by a pattern, every partition with records and the job's group
committed on part of them. The job's lag, as the exporter reads it, must be exact on every partition
and its evaluation must see all 10,000; a second evaluation through the same window must too. (How
fast: ``make bench``, benchmarks/bench_lag.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from upsert_kafka_ops.jobs import Pipeline
from upsert_kafka_ops.jobs.lag_monitor import PipelineLagMonitor
from upsert_kafka_ops.kafka import EvaluationConfig, check
from upsert_kafka_ops.local import LocalKafka
from upsert_kafka_ops.metrics.exporter import WatchOptions

TOPICS, PARTITIONS = 100, 100


@pytest.fixture(scope="module")
def wide(jars_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    broker = LocalKafka(tmp_path_factory.mktemp("wide"), jars_dir=jars_dir, heap="1g").start()
    try:
        yield broker
    finally:
        broker.stop(timeout=5)  # a clean shutdown of 10,000 partitions takes half a minute: no need


def test_the_lag_of_a_job_over_10000_partitions_is_exact_on_each(wide: LocalKafka, tmp_path: Path) -> None:
    names = [f"wide-{t:03d}" for t in range(TOPICS)]
    for name in names:
        wide.create_topic(name, partitions=PARTITIONS)
    # idempotent: on a loaded machine a produce request can time out and be retried, and a plain
    # producer's retry can write a record twice, which would change the lag this test counts on
    producer = Producer(
        wide.client_config(
            **{"linger.ms": 20, "queue.buffering.max.messages": 200_000, "enable.idempotence": True}
        )
    )
    for t, name in enumerate(names):
        for p in range(PARTITIONS):
            for i in range(1 + (t + p) % 3):  # 1 to 3 records a partition
                producer.produce(name, key=f'{{"id": {i}}}'.encode(), value=b'{"id": 0}', partition=p)
        producer.poll(0)
    assert producer.flush(120) == 0
    # the job's group has read the first record of every other partition; the rest it never committed
    group = "upsert-kafka-ops.wide"
    consumer = Consumer(wide.client_config(**{"group.id": group, "enable.auto.commit": False}))
    committed = consumer.commit(
        offsets=[TopicPartition(n, p, 1) for n in names for p in range(0, PARTITIONS, 2)], asynchronous=False
    )
    consumer.close()
    assert committed is not None and [tp for tp in committed if tp.error is not None] == []
    want = {
        (n, p): (1 + (t + p) % 3) - (1 if p % 2 == 0 else 0)
        for t, n in enumerate(names)
        for p in range(PARTITIONS)
    }

    table = {"name": "w", "columns": [{"name": "id", "type": "INT"}], "primary_key": ["id"],
             "options": {"connector": "upsert-kafka", "topic-pattern": "wide-.*", "key.format": "json",
                         "value.format": "json"}}  # fmt: skip
    job = {"name": "wide", "kind": "topic-to-topic", "execution": "snapshot", "query": "SELECT * FROM w",
           "sources": {"w": {"connection": "main", "table": table}},
           "sink": {"connection": "main", "table": {**table, "options": {**table["options"], "topic": "out"}}}}  # fmt: skip
    del job["sink"]["table"]["options"]["topic-pattern"]  # type: ignore[index]
    pipeline = Pipeline.model_validate({"connections": {"main": {"bootstrap_servers": wide.bootstrap_servers}},
                                        "jobs": [job]})  # fmt: skip
    monitor = PipelineLagMonitor(
        pipeline, options=WatchOptions(window_file=tmp_path / "window.json", timeout_s=60)
    )
    try:
        for _ in range(2):  # the second evaluation goes through the window the first one left
            ((lag, status),) = monitor.evaluate()
            assert lag.error is None and lag.report is not None, lag.error
            got = {(p.topic, p.partition): p.lag for p in lag.report.partitions}
            assert len(got) == TOPICS * PARTITIONS
            wrong = {tp: (got.get(tp), lag) for tp, lag in want.items() if got.get(tp) != lag}
            assert wrong == {}, f"{len(wrong)} partitions' lag (got, want): {dict(list(wrong.items())[:20])}"
            assert lag.report.total_lag == sum(want.values())
            assert status is not None and len(status.partitions) == TOPICS * PARTITIONS
    finally:
        monitor.close()
    _, evaluated = check(None, lag.report, EvaluationConfig())
    assert len(evaluated.points()) == TOPICS * PARTITIONS
