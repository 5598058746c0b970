"""Start and end positions of a plain ``kafka`` source, through real Flink and through the engine: the
same records. Each case is the connector page's ``scan.startup.*`` / ``scan.bounded.*`` options over
one two-partition topic whose record timestamps and consumer-group offsets are known."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from tests.conformance import flink

from upsert_kafka_ops import KafkaTable
from upsert_kafka_ops.engine import read_append
from upsert_kafka_ops.errors import UpsertKafkaOpsError
from upsert_kafka_ops.local import LocalKafka

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: per partition, records 0..4 one second apart; group g_p0 committed partition 0 at 3, g_p1 partition 1 at 1
T0 = (int(time.time()) - 3600) * 1000
RECORDS = 5
CASES: dict[str, dict[str, str]] = {
    "earliest": {"scan.startup.mode": "earliest-offset"},
    "latest": {"scan.startup.mode": "latest-offset"},
    "timestamp": {"scan.startup.mode": "timestamp", "scan.startup.timestamp-millis": str(T0 + 2000)},
    "specific": {"scan.startup.mode": "specific-offsets", "scan.startup.specific-offsets": "partition:0,offset:2"},
    "specific_and_group": {"scan.startup.mode": "specific-offsets", "properties.group.id": "{g_p1}",
                           "scan.startup.specific-offsets": "partition:0,offset:2"},
    "group_reset_earliest": {"scan.startup.mode": "group-offsets", "properties.group.id": "{g_p0}",
                             "properties.auto.offset.reset": "earliest"},
    "group_reset_latest": {"scan.startup.mode": "group-offsets", "properties.group.id": "{g_p0}",
                           "properties.auto.offset.reset": "latest"},
    "group_without_reset": {"scan.startup.mode": "group-offsets", "properties.group.id": "{g_p0}"},
    "bounded_timestamp": {"scan.startup.mode": "earliest-offset", "scan.bounded.mode": "timestamp",
                          "scan.bounded.timestamp-millis": str(T0 + 3000)},
    "bounded_specific": {"scan.startup.mode": "timestamp", "scan.startup.timestamp-millis": str(T0 + 1000),
                         "scan.bounded.mode": "specific-offsets",
                         "scan.bounded.specific-offsets": "partition:0,offset:3;partition:1,offset:4"},
    "bounded_specific_and_group": {"scan.startup.mode": "earliest-offset", "properties.group.id": "{g_p1}",
                                   "scan.bounded.mode": "specific-offsets", "scan.bounded.specific-offsets": "partition:0,offset:3"},
    "bounded_specific_unlisted": {"scan.startup.mode": "earliest-offset", "scan.bounded.mode": "specific-offsets",
                                  "scan.bounded.specific-offsets": "partition:0,offset:3"},
}  # fmt: skip


def _ddl(name: str, topic: str, bootstrap: str, options: dict[str, str]) -> str:
    opts = {"connector": "kafka", "topic": topic, "properties.bootstrap.servers": bootstrap, "format": "json",
            "scan.bounded.mode": "latest-offset", **options}  # fmt: skip
    with_ = ", ".join(f"'{k}' = '{v}'" for k, v in opts.items())
    return f"CREATE TABLE `{name}` (`id` BIGINT, `v` STRING) WITH ({with_})"


@pytest.fixture(scope="module")
def runs(
    kafka: LocalKafka, flink_jars: list[Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    topic = f"start-{uuid.uuid4().hex[:8]}"
    bootstrap = kafka.bootstrap_servers
    kafka.create_topic(topic, partitions=2)
    producer = Producer({"bootstrap.servers": bootstrap})
    for p in (0, 1):
        for i in range(RECORDS):
            value = json.dumps({"id": 10 * p + i, "v": f"p{p}r{i}"}).encode()
            producer.produce(topic, value=value, partition=p, timestamp=T0 + 1000 * i)
    assert producer.flush(30) == 0
    groups = {"g_p0": f"g0-{topic}", "g_p1": f"g1-{topic}"}
    for group, (p, offset) in ((groups["g_p0"], (0, 3)), (groups["g_p1"], (1, 1))):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        consumer.commit(offsets=[TopicPartition(topic, p, offset)], asynchronous=False)
        consumer.close()
    ddl = {
        name: _ddl(name, topic, bootstrap, {k: v.format(**groups) for k, v in options.items()})
        for name, options in CASES.items()
    }
    log = tmp_path_factory.mktemp("flink") / "flink.log"
    outcomes = flink.run([flink.Case(n, n, d) for n, d in ddl.items()], flink_jars, log)
    return {"ddl": ddl, "flink": outcomes}


def _engine(spark: SparkSession, ddl: str) -> Counter[tuple[Any, ...]] | str:
    try:
        rows = read_append(spark, KafkaTable.from_flink_ddl(ddl)).df.collect()
    except UpsertKafkaOpsError as exc:
        return f"error: {exc}"
    return Counter((r["id"], r["v"]) for r in rows)


#: cases both refuse: Flink when it reads, the engine when it resolves where to start
REFUSED = {
    # a partition without a committed offset and Flink's default reset, 'none'
    "group_without_reset": ("partition 1", "properties.auto.offset.reset"),
    # a partition not listed, and no group to take a committed offset from
    "specific": ("partition 1", "properties.group.id"),
    "bounded_specific_unlisted": ("partition 1", "properties.group.id"),
}


@pytest.mark.parametrize("case", [c for c in CASES if c not in REFUSED])
def test_the_engine_starts_and_ends_where_flink_does(
    runs: dict[str, Any], spark: SparkSession, case: str
) -> None:
    outcome: flink.Outcome = runs["flink"][case]
    assert outcome.error is None, outcome.error
    assert outcome.kinds() <= Counter({"+I": 2 * RECORDS})
    want = Counter(tuple(cells) for _, cells in outcome.changes)
    assert _engine(spark, runs["ddl"][case]) == want


def test_the_documented_latest_offset_example_reads_nothing_in_both(
    runs: dict[str, Any], spark: SparkSession
) -> None:
    assert runs["flink"]["latest"].changes == []
    assert _engine(spark, runs["ddl"]["latest"]) == Counter()


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_start_flink_cannot_resolve_fails_in_both(
    runs: dict[str, Any], spark: SparkSession, case: str
) -> None:
    outcome: flink.Outcome = runs["flink"][case]
    assert outcome.error is not None, outcome.changes
    got = _engine(spark, runs["ddl"][case])
    assert isinstance(got, str) and all(word in got for word in REFUSED[case]), got
