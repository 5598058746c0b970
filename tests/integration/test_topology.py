"""Topology changes between incremental runs, against the real broker and Delta: a topic deleted and
created again, partitions added, truncation past the stored offsets. Each is found before any write:
the run fails naming the fix, or rebuilds on its own where the job says ``on_reset: rebuild``; the
table then equals the plain-Python fold of the topic as it is."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions
from pyspark.sql import SparkSession
from tests.integration.jobs_support import (
    oracle_table,
    pipeline,
    produce,
    random_changes,
    rows_as_table,
    source,
)

from upsert_kafka_ops.jobs import run_job
from upsert_kafka_ops.jobs.core import OffsetsError
from upsert_kafka_ops.jobs.targets.delta import read_delta_log
from upsert_kafka_ops.local import LocalKafka

pytestmark = pytest.mark.integration


def _delta(spark: SparkSession, path: Path) -> dict[int, tuple[str, str, str]]:
    rows = spark.read.format("delta").load(str(path)).select("id", "name", "region", "score").collect()
    return rows_as_table(rows)


def _job(servers: str, topic: str, path: Path, **extra: Any) -> dict[str, Any]:
    return {"name": "users", "kind": "materialize", "source": source(topic, servers),
            "target": {"kind": "delta", "path": str(path)}, **extra}  # fmt: skip


def _recreate(kafka: LocalKafka, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    for f in admin.delete_topics([topic], operation_timeout=30).values():
        f.result(timeout=30)
    deadline = time.monotonic() + 60
    while True:  # the broker forgets a deleted topic asynchronously
        try:
            kafka.create_topic(topic, partitions=partitions)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@pytest.mark.parametrize("on_reset", ["fail", "rebuild"])
def test_a_topic_deleted_and_created_again_is_found_before_any_write(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path, on_reset: str
) -> None:
    servers = kafka.bootstrap_servers
    topic, path = new_topic(partitions=2), tmp_path / "users"
    p = pipeline(servers, [_job(servers, topic, path, on_reset=on_reset)])
    produce(servers, topic, random_changes(random.Random(21), 60, 15))
    run_job(p, spark=spark)
    before = read_delta_log(path)
    _recreate(kafka, topic, partitions=2)
    produce(servers, topic, random_changes(random.Random(22), 8, 15))  # fewer records: offsets shrink too
    if on_reset == "fail":
        with pytest.raises(OffsetsError) as err:
            run_job(p, spark=spark)
        assert f"topic {topic} was deleted and created again" in str(err.value)
        assert "run with mode full (or set on_reset: rebuild" in str(err.value)
        after = read_delta_log(path)  # nothing written: the same version, the old offsets
        assert (after.latest_version, after.state) == (before.latest_version, before.state)
        return
    result = run_job(p, spark=spark)
    assert result.mode == "full" and "deleted and created again" in result.reason
    assert "rebuilt from the earliest offset (on_reset: rebuild)" in result.reason
    assert _delta(spark, path) == oracle_table(servers, topic)  # the new topic's records only
    state = read_delta_log(path).state
    assert state is not None and state.extra["topic_ids"][topic] != before.state.extra["topic_ids"][topic]  # type: ignore[union-attr]


def test_partitions_added_between_runs_are_read_from_their_earliest_offset(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path
) -> None:
    servers = kafka.bootstrap_servers
    topic, path = new_topic(partitions=2), tmp_path / "users"
    p = pipeline(servers, [_job(servers, topic, path)])
    produce(servers, topic, random_changes(random.Random(31), 40, 10))  # keys 0..9
    run_job(p, spark=spark)
    admin = AdminClient({"bootstrap.servers": servers})
    for f in admin.create_partitions([NewPartitions(topic, 4)], operation_timeout=30).values():
        f.result(timeout=30)
    # new keys into the new partitions only: the producer's partitioner would move old keys to the
    # new partitions too (a key in two partitions, which the sink side refuses to write)
    producer = Producer({"bootstrap.servers": servers})
    for i, key in enumerate(range(100, 112)):
        row = {"id": key, "name": f"n{key}", "region": "Paris", "score": "1.5"}
        producer.produce(topic, key=json.dumps({"id": key}).encode(), value=json.dumps(row).encode(),
                         partition=2 + i % 2)  # fmt: skip
    assert producer.flush(30) == 0
    result = run_job(p, spark=spark)
    assert result.mode == "incremental", result.reason
    assert result.start_offsets[topic]["2"] == 0 and result.end_offsets[topic]["3"] == 6
    assert _delta(spark, path) == oracle_table(servers, topic)
    state = read_delta_log(path).state
    assert state is not None and {p for t, p in state.offsets} == {0, 1, 2, 3}


def test_truncation_past_the_stored_offsets_rebuilds_when_the_job_opts_in(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path
) -> None:
    from confluent_kafka import TopicPartition

    servers = kafka.bootstrap_servers
    topic, path = new_topic(partitions=1), tmp_path / "users"
    p = pipeline(servers, [_job(servers, topic, path, on_reset="rebuild")])
    produce(servers, topic, random_changes(random.Random(41), 10, 5))
    run_job(p, spark=spark)
    produce(servers, topic, random_changes(random.Random(42), 10, 5))
    admin = AdminClient({"bootstrap.servers": servers})
    for f in admin.delete_records([TopicPartition(topic, 0, 15)]).values():
        f.result(timeout=30)
    result = run_job(p, spark=spark)
    assert result.mode == "full" and "below its log start offset 15" in result.reason
    assert _delta(spark, path) == oracle_table(servers, topic)  # what the topic still holds


# -- the sink side: partitions added to a topic a job writes ---------------------------------------
def _topic_job(servers: str, src: str, sink: str, **extra: Any) -> dict[str, Any]:
    sink_source = source(sink, servers)
    return {"name": "copy", "kind": "topic-to-topic", "execution": "snapshot", "query": "SELECT * FROM users",
            "sources": {"users": source(src, servers)}, "sink": {**sink_source, **extra}}  # fmt: skip


def _ends(servers: str, topic: str) -> dict[int, int]:
    from upsert_kafka_ops.kafka import offsets as ko

    config = {"bootstrap.servers": servers}
    return {p: o for (_, p), o in ko.end_offsets(config, ko.topic_partitions(config, [topic])).items()}


def test_partitions_added_to_a_sink_topic_stop_the_next_write_unless_the_sink_allows_it(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path
) -> None:
    from upsert_kafka_ops.jobs.sink_layout import SinkPartitionsError

    servers = kafka.bootstrap_servers
    src, sink = new_topic(partitions=2), new_topic(partitions=2)
    produce(servers, src, random_changes(random.Random(51), 60, 20))
    p = pipeline(servers, [_topic_job(servers, src, sink)])
    run_job(p, spark=spark)
    assert oracle_table(servers, sink) == oracle_table(servers, src)
    admin = AdminClient({"bootstrap.servers": servers})
    for f in admin.create_partitions([NewPartitions(sink, 4)], operation_timeout=30).values():
        f.result(timeout=30)
    produce(servers, src, random_changes(random.Random(52), 30, 20))
    written = _ends(servers, sink)
    with pytest.raises(SinkPartitionsError) as err:
        run_job(p, spark=spark)
    message = str(err.value)
    assert f"sink topic {sink!r} has 4 partitions, 2 when the job last wrote it" in message
    assert "Nothing was written" in message and "on_partitions_changed: write" in message
    assert _ends(servers, sink) == written  # not one record

    # told to write anyway: it writes, and records the new count (the next run passes by itself)
    allowed = pipeline(servers, [_topic_job(servers, src, sink, on_partitions_changed="write")])
    assert run_job(allowed, spark=spark).records_written > 0
    produce(servers, src, random_changes(random.Random(53), 10, 20))
    run_job(p, spark=spark)

    # the fix the error names: the topic created again, empty, with more partitions, and rebuilt
    _recreate(kafka, sink, partitions=6)
    result = run_job(p, spark=spark)
    assert result.records_written == len(oracle_table(servers, src))
    assert oracle_table(servers, sink) == oracle_table(servers, src)


def test_a_backfill_into_a_topic_and_a_publish_record_the_sink_partitions_too(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path
) -> None:
    from upsert_kafka_ops.jobs.sink_layout import SinkPartitionsError

    servers = kafka.bootstrap_servers
    src, sink, published = new_topic(partitions=2), new_topic(partitions=1), new_topic(partitions=1)
    produce(servers, src, random_changes(random.Random(61), 40, 10))
    table = f"delta.`{tmp_path / 'users'}`"
    spark.sql(
        f"CREATE TABLE {table} (id BIGINT, name STRING, region STRING, score DECIMAL(10, 2)) USING delta"
    )
    spark.sql(f"INSERT INTO {table} VALUES (1, 'a', 'Paris', 1.5), (2, 'b', 'Berlin', 2.5)")
    jobs = [{"name": "refill", "kind": "backfill", "source": source(src, servers), "target": {**source(sink, servers), "kind": "topic"}},
            {"name": "pub", "kind": "publish", "source": {"kind": "query", "query": f"SELECT * FROM {table}"},
             "sink": source(published, servers), "state_path": str(tmp_path / "state")}]  # fmt: skip
    p = pipeline(servers, jobs)
    run_job(p, spark=spark, job="refill")
    run_job(p, spark=spark, job="pub")
    assert oracle_table(servers, sink) == oracle_table(servers, src)
    admin = AdminClient({"bootstrap.servers": servers})
    for topic in (sink, published):
        for f in admin.create_partitions([NewPartitions(topic, 3)], operation_timeout=30).values():
            f.result(timeout=30)
    for job in ("refill", "pub"):
        with pytest.raises(SinkPartitionsError, match="has 3 partitions, 1 when the job last wrote it"):
            run_job(p, spark=spark, job=job)
