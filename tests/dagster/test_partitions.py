"""Time-window partitions on a snapshot asset (a backfill job whose Delta target has an as-of
column): partitions launched later-first and then as one range run each write the snapshot as of
their window's end, equal to the plain-Python fold of the records before it; a latest-state job
with partitions is refused."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from tests.dagster.support import RESOURCES, metadata
from tests.integration.jobs_support import (
    oracle_table,
    pipeline,
    produce,
    random_changes,
    rows_as_table,
    source,
)

import dagster as dg
from upsert_kafka_ops.dagster import KEYS_CHECK, UpsertKafkaResource, op_name, upsert_kafka_assets
from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.local import LocalKafka

DAY = 86_400_000


def _snapshots(spark: Any, path: Path) -> dict[int, dict[int, tuple[str, str, str]]]:
    out: dict[int, list[Any]] = {}
    for r in (
        spark.read.format("delta").load(str(path)).select("as_of", "id", "name", "region", "score").collect()
    ):
        out.setdefault(int(r[0].replace(tzinfo=timezone.utc).timestamp() * 1000), []).append(r[1:])
    return {k: rows_as_table(v) for k, v in out.items()}


def _day(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d")


def test_daily_snapshot_partitions_out_of_order_and_as_a_range(
    kafka: LocalKafka,
    kafka_resource: UpsertKafkaResource,
    new_topic: Callable[..., str],
    spark: Any,
    instance: dg.DagsterInstance,
    tmp_path: Path,
) -> None:
    servers = kafka.bootstrap_servers
    topic = new_topic(partitions=3, config={"cleanup.policy": "compact"})
    today = datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    base = int(today.timestamp() * 1000) - 2 * DAY  # recent: inside the topic's retention
    rnd = random.Random(5)
    produce(servers, topic, random_changes(rnd, 80, 20), timestamp_ms=base + 9 * 3_600_000)
    produce(servers, topic, random_changes(rnd, 80, 30), timestamp_ms=base + DAY + 15 * 3_600_000)
    path = tmp_path / "users_daily"
    job = {"name": "users-daily", "kind": "backfill", "source": source(topic, servers),
           "target": {"kind": "delta", "path": str(path), "as_of_column": "as_of"}}  # fmt: skip
    pipe = pipeline(servers, [job])
    daily = dg.DailyPartitionsDefinition(start_date=_day(base - 5 * DAY))
    assets = upsert_kafka_assets(pipeline=pipe, kafka_resources=RESOURCES, partitions_def=daily)
    (asset,) = [a for a in assets if isinstance(a, dg.AssetsDefinition)]
    assert asset.partitions_def == daily and asset.backfill_policy == dg.BackfillPolicy.single_run()
    resources = {"kafka": kafka_resource}
    first, second = _day(base), _day(base + DAY)
    end1, end2 = base + DAY, base + 2 * DAY
    want = {
        end1: oracle_table(servers, topic, before_ms=end1),
        end2: oracle_table(servers, topic, before_ms=end2),
    }
    assert want[end1] != want[end2]

    # the later partition first, then the earlier one: neither touches the other's snapshot
    r2 = dg.materialize(assets, resources=resources, instance=instance, partition_key=second)
    r1 = dg.materialize(assets, resources=resources, instance=instance, partition_key=first)
    assert r1.success and r2.success
    assert _snapshots(spark, path) == want
    m1 = metadata(r1, op_name("users-daily"))
    assert set(m1["upsert_kafka/snapshots"]) == {first} and m1["upsert_kafka/records_read"] == 80
    assert m1["upsert_kafka/snapshots"][first]["rows"] == len(want[end1])
    assert {e.check_name for e in r1.get_asset_check_evaluations()} == {KEYS_CHECK}

    # a backfill of the range as one run (BackfillPolicy.single_run): both snapshots rebuilt, equal
    tags = {"dagster/asset_partition_range_start": first, "dagster/asset_partition_range_end": second}
    r3 = dg.materialize(assets, resources=resources, instance=instance, tags=tags)
    assert r3.success
    mats = r3.asset_materializations_for_node(op_name("users-daily"))
    assert sorted(m.partition for m in mats) == [first, second]  # one materialization per partition
    assert set(mats[0].metadata["upsert_kafka/snapshots"].value) == {first, second}  # type: ignore[arg-type]
    assert _snapshots(spark, path) == want
    assert spark.read.format("delta").load(str(path)).count() == len(want[end1]) + len(want[end2])

    # the end comes from the partition: run config until is refused
    bad = {"ops": {op_name("users-daily"): {"config": {"until": "latest"}}}}
    failed = dg.materialize(assets, resources=resources, instance=instance, partition_key=first,
                            run_config=bad, raise_on_error=False)  # fmt: skip
    assert not failed.success


def test_partitions_on_a_latest_state_job_are_refused(tmp_path: Path) -> None:
    job = {"name": "users", "kind": "materialize", "source": source("users", "b:9092"),
           "target": {"kind": "delta", "path": str(tmp_path / "users")}}  # fmt: skip
    daily = dg.DailyPartitionsDefinition(start_date="2026-11-01")
    with pytest.raises(SpecError, match=r"partitions_def.*'users' keeps a latest-state target.*as_of_column"):
        upsert_kafka_assets(pipeline=pipeline("b:9092", [job]), partitions_def=daily)
