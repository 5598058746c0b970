"""A Delta table on a real S3 server (MinIO) as a Dagster asset: materialized twice (the second run
incremental), equal to the oracle's table, its row count, preview and checks read from S3, its lag
after the run from the offsets stored there, and the store's secret key in no metadata."""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable
from typing import Any

from tests.dagster.support import RESOURCES, checks, metadata
from tests.integration.jobs_support import oracle_table, produce, random_changes, rows_as_table, source

import dagster as dg
from upsert_kafka_ops.dagster import (
    KEYS_CHECK,
    ROW_COUNT_CHECK,
    UpsertKafkaResource,
    op_name,
    upsert_kafka_assets,
)
from upsert_kafka_ops.jobs import Pipeline
from upsert_kafka_ops.jobs.to_warehouse import read_target
from upsert_kafka_ops.local import LocalKafka, LocalS3


def test_an_asset_on_s3_materializes_incrementally_with_its_facts_read_from_s3(
    kafka: LocalKafka,
    kafka_resource: UpsertKafkaResource,
    new_topic: Callable[..., str],
    s3: LocalS3,
    spark: Any,
    instance: dg.DagsterInstance,
) -> None:
    servers, topic = kafka.bootstrap_servers, new_topic(partitions=2)
    rnd = random.Random(23)
    prefix = uuid.uuid4().hex[:8]
    path = f"s3a://lake/{prefix}/users"
    pipe = Pipeline.model_validate({
        "connections": {"main": {"bootstrap_servers": servers}},
        "storage": {"lake": s3.storage().model_dump(mode="json", exclude_none=True)},
        "jobs": [{"name": "users", "kind": "materialize", "source": source(topic, servers),
                  "target": {"kind": "delta", "path": path, "storage": "lake"}}],
    })  # fmt: skip
    assets = upsert_kafka_assets(pipeline=pipe, kafka_resources=RESOURCES)
    (table,) = [a for a in assets if isinstance(a, dg.AssetsDefinition)]
    assert table.key == dg.AssetKey(["warehouse", prefix, "users"])  # as a table on disk: its last two parts

    for round_, (n, keys) in enumerate(((150, 25), (80, 35)), start=1):
        produce(servers, topic, random_changes(rnd, n, keys))
        expected = oracle_table(servers, topic)
        run = dg.materialize(assets, resources={"kafka": kafka_resource}, instance=instance)
        assert run.success
        m = metadata(run, op_name("users"))
        assert m["upsert_kafka/mode"] == ("full" if round_ == 1 else "incremental")
        assert (m["dagster/row_count"], m["upsert_kafka/lag_after_run"]) == (len(expected), 0)
        assert checks(run) == {KEYS_CHECK: True, ROW_COUNT_CHECK: True}
        assert rows_as_table(read_target(spark, pipe, pipe.job("users").target).select(
            "id", "name", "region", "score").collect()) == expected  # fmt: skip
        shown = json.dumps({k: str(v) for k, v in m.items()})
        assert s3.secret_key not in shown and s3.access_key not in shown
