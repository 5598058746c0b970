"""Snapshot tables (DeltaTarget.as_of_column): each backfill writes the state as of its end into
its own rows; ends written in any order leave every other snapshot as it was, and each equals the
plain-Python fold of the records before that time. A rerun replaces its snapshot (idempotent)."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

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
from upsert_kafka_ops.local import LocalKafka
from upsert_kafka_ops.pipeline import as_backfill

DAY = 86_400_000


def _midnight_days_ago(n: int) -> int:
    """Midnight UTC ``n`` days ago, in ms (recent: the topic's 7-day retention keeps the records)."""
    today = datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    return int(today.timestamp() * 1000) - n * DAY


def _snapshots(spark: SparkSession, path: Path) -> dict[int, dict[int, tuple[str, str, str]]]:
    df = spark.read.format("delta").load(str(path))
    out: dict[int, list[object]] = {}
    for r in df.select("as_of", "id", "name", "region", "score").collect():
        out.setdefault(int(r[0].replace(tzinfo=timezone.utc).timestamp() * 1000), []).append(r[1:])
    return {k: rows_as_table(v) for k, v in out.items()}


def test_snapshots_written_out_of_order_each_equal_the_fold_before_their_end(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path
) -> None:
    servers = kafka.bootstrap_servers
    topic = new_topic(partitions=3)
    rnd = random.Random(23)
    base = _midnight_days_ago(2)
    day3, day4 = base + 10 * 3_600_000, base + DAY + 10 * 3_600_000
    produce(servers, topic, random_changes(rnd, 150, 30), timestamp_ms=day3)
    produce(servers, topic, random_changes(rnd, 150, 40), timestamp_ms=day4)
    path = tmp_path / "users_daily"
    job = {"name": "users-daily", "kind": "backfill", "source": source(topic, servers),
           "target": {"kind": "delta", "path": str(path), "as_of_column": "as_of"}}  # fmt: skip
    p = pipeline(servers, [job])
    end4, end5 = base + DAY, base + 2 * DAY

    def snapshot(end: int) -> None:
        one = as_backfill(p.job("users-daily"), end)  # type: ignore[arg-type]
        r = run_job(p.model_copy(update={"jobs": [one]}), "users-daily", spark=spark)
        assert r.write["as_of_ms"] == end and r.mode == "full"

    snapshot(end5)  # the later end first
    snapshot(end4)  # then an earlier one: it must not touch the later snapshot
    want4, want5 = oracle_table(servers, topic, before_ms=end4), oracle_table(servers, topic, before_ms=end5)
    assert want4 != want5 and want4 and want5
    assert _snapshots(spark, path) == {end4: want4, end5: want5}
    # a rerun of one end replaces its rows (no duplicates), the other stays
    snapshot(end4)
    assert _snapshots(spark, path) == {end4: want4, end5: want5}
    assert spark.read.format("delta").load(str(path)).count() == len(want4) + len(want5)
