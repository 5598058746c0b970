"""Delta, Parquet and Iceberg tables on a real S3 server (MinIO) as Dagster assets: materialized
twice (the second Delta and Iceberg runs incremental), equal to the oracle's table, the Delta and
Iceberg row counts, previews and checks read from S3, the lag after each run from the offsets stored
there, and the store's secret key in no metadata."""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable
from typing import Any

from tests.dagster.support import RESOURCES, metadata
from tests.devservices import LocalS3
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
from upsert_kafka_ops.jobs.targets import read_target
from upsert_kafka_ops.local import LocalKafka


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
        "catalogs": {"lake": {"type": "hadoop", "warehouse": f"s3a://lake/{prefix}/iceberg", "storage": "lake",
                              "catalog_name": f"dagster_{prefix}"}},
        "jobs": [{"name": "users", "kind": "materialize", "source": source(topic, servers),
                  "target": {"kind": "delta", "path": path, "storage": "lake"}},
                 {"name": "users_iceberg", "kind": "materialize", "source": source(topic, servers),
                  "target": {"kind": "iceberg", "catalog": "lake", "table": "crm.users"}},
                 {"name": "users_parquet", "kind": "materialize", "source": source(topic, servers),
                  "target": {"kind": "parquet", "path": f"s3a://lake/{prefix}/parquet/users", "storage": "lake"}}],
    })  # fmt: skip
    assets = upsert_kafka_assets(pipeline=pipe, kafka_resources=RESOURCES)
    tables = {a.key for a in assets if isinstance(a, dg.AssetsDefinition)}
    # as tables on disk: the last two parts of their locations
    assert tables == {dg.AssetKey(["warehouse", prefix, "users"]), dg.AssetKey(["warehouse", "crm", "users"]),
                      dg.AssetKey(["warehouse", "parquet", "users"])}  # fmt: skip

    for round_, (n, keys) in enumerate(((150, 25), (80, 35)), start=1):
        produce(servers, topic, random_changes(rnd, n, keys))
        expected = oracle_table(servers, topic)
        run = dg.materialize(assets, resources={"kafka": kafka_resource}, instance=instance)
        assert run.success
        for job in ("users", "users_iceberg", "users_parquet"):
            m = metadata(run, op_name(job))
            mode = "full" if round_ == 1 or job == "users_parquet" else "incremental"
            assert (m["upsert_kafka/mode"], m["upsert_kafka/lag_after_run"]) == (mode, 0), job
            if job != "users_parquet":  # the tables Dagster counts and previews
                assert m["dagster/row_count"] == len(expected), job
            assert rows_as_table(read_target(spark, pipe, pipe.job(job).target).select(  # type: ignore[arg-type,union-attr]
                "id", "name", "region", "score").collect()) == expected, job  # fmt: skip
            shown = json.dumps({k: str(v) for k, v in m.items()})
            assert s3.secret_key not in shown and s3.access_key not in shown
        evaluated = [(e.asset_key.path[1], e.check_name, e.passed) for e in run.get_asset_check_evaluations()]
        want = [(part, name, True) for part in (prefix, "crm") for name in (KEYS_CHECK, ROW_COUNT_CHECK)]
        assert sorted(evaluated) == sorted([*want, ("parquet", KEYS_CHECK, True)])
