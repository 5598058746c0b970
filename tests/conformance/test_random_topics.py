"""Randomized upsert-kafka topics read by real Flink and by the engine: the same tables, and in
changelog mode the same number of each change kind.

Flink reads each table with ``SELECT *`` in streaming mode, bounded at the end offsets
(``'scan.bounded.mode' = 'latest-offset'``), and its changelog (ChangelogNormalize's +I/-U/+U/-D) is
folded per primary key; the engine materializes the same DDL and reads it as a retract changelog.
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Producer
from tests.conformance import flink
from tests.conformance.topics import Shape, changelog, random_shape
from tests.conformance.values import canon

from upsert_kafka_ops import UpsertKafkaTable, materialize
from upsert_kafka_ops.engine.source import read_changelog
from upsert_kafka_ops.local import LocalKafka

#: each Spark line's lane runs the engine against its oracle too (make lanes)
pytestmark = pytest.mark.lines

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: the run's seed: set UKO_CONFORMANCE_SEED to repeat a run; a failure names it
SEED = int(os.environ.get("UKO_CONFORMANCE_SEED") or random.SystemRandom().randrange(2**32))
TOPICS = 16


def _produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes | None]]) -> None:
    # murmur2_random is the Java client's partitioner: a key's records land where Flink's would
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", "linger.ms": 5})
    for key, value in records:
        producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0


@pytest.fixture(scope="module")
def cases(
    kafka: LocalKafka, flink_jars: list[Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """The randomized topics, written once, and what Flink read from each."""
    rng = random.Random(SEED)
    shapes: list[Shape] = []
    for i in range(TOPICS):
        shape = random_shape(rng, i, f"conf-{SEED}-{i}")
        kafka.create_topic(shape.topic, partitions=shape.partitions, config={"cleanup.policy": "compact"})
        records = changelog(rng, shape, keys=rng.randint(3, 40), records=rng.randint(10, 250))
        _produce(kafka.bootstrap_servers, shape.topic, records)
        shapes.append(shape)
    ddl = {s.name: s.ddl(kafka.bootstrap_servers) for s in shapes}
    log = tmp_path_factory.mktemp("flink") / "flink.log"
    outcomes = flink.run([flink.Case(s.name, s.name, ddl[s.name]) for s in shapes], flink_jars, log)
    return {"shapes": shapes, "ddl": ddl, "flink": outcomes}


def _engine_table(spark: SparkSession, table: UpsertKafkaTable) -> dict[str, list[Any]]:
    df = materialize(spark, table).df
    columns = df.columns
    where = [columns.index(k) for k in table.primary_key]
    rows = {}
    for row in df.collect():
        cells = [canon(v) for v in row]
        rows[json.dumps([cells[i] for i in where])] = cells
    return rows


@pytest.mark.parametrize("index", range(TOPICS))
def test_the_engine_reads_the_table_flink_reads(
    cases: dict[str, Any], spark: SparkSession, index: int
) -> None:
    shape: Shape = cases["shapes"][index]
    ddl = cases["ddl"][shape.name]
    outcome: flink.Outcome = cases["flink"][shape.name]
    context = f"seed {SEED}, table {shape.name}:\n{ddl}"
    assert outcome.error is None, f"Flink failed ({context}): {outcome.error}"
    table = UpsertKafkaTable.from_flink_ddl(ddl)
    assert outcome.columns == [c.name for c in table.columns], context
    want = outcome.table(table.primary_key)
    got = _engine_table(spark, table)
    assert got == want, context
    changes = read_changelog(spark, table, mode="retract").df
    kinds = Counter(r["op"] for r in changes.select("op").collect())
    assert kinds == outcome.kinds(), context
