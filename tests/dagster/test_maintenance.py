"""A maintain job as Dagster runs it: no asset of its own (the table stays its writer's asset), a job
of one op in the writer's concurrency pool, a schedule from its ``schedule:``, and a real run that
deletes the files a Delta table's older versions left (broker, Spark, Delta)."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tests.dagster.support import RESOURCES
from tests.integration.jobs_support import (
    oracle_table,
    pipeline,
    produce,
    random_changes,
    rows_as_table,
    source,
)

import dagster as dg
from upsert_kafka_ops.dagster import (
    UpsertKafkaResource,
    pool_name,
    upsert_kafka_assets,
    upsert_kafka_maintenance_jobs,
    upsert_kafka_maintenance_schedules,
)
from upsert_kafka_ops.jobs import run_job
from upsert_kafka_ops.local import LocalKafka


def test_a_maintain_job_is_a_scheduled_op_in_its_writers_pool_that_cleans_the_table(
    kafka: LocalKafka,
    kafka_resource: UpsertKafkaResource,
    new_topic: Callable[..., str],
    spark: Any,
    instance: dg.DagsterInstance,
    tmp_path: Path,
) -> None:
    servers, topic = kafka.bootstrap_servers, new_topic(partitions=2)
    path = tmp_path / "users"
    pipe = pipeline(servers, [
        {"name": "users", "kind": "materialize", "source": source(topic, servers),
         "target": {"kind": "delta", "path": str(path)}},
        {"name": "tidy", "kind": "maintain", "job": "users", "schedule": "0 3 * * *", "retain_hours": 0},
    ])  # fmt: skip
    assets = upsert_kafka_assets(pipeline=pipe, kafka_resources=RESOURCES)
    (writer,) = [a for a in assets if isinstance(a, dg.AssetsDefinition)]
    (job,) = upsert_kafka_maintenance_jobs(pipeline=pipe, kafka_resources=RESOURCES)
    (schedule,) = upsert_kafka_maintenance_schedules(pipeline=pipe)
    assert job.name == "upsert_kafka_tidy" and schedule.job_name == job.name
    (op,) = job.graph.node_defs
    assert op.pool == pool_name("users") == writer.op.pool  # Dagster never runs them side by side
    defs = dg.Definitions(
        assets=assets, jobs=[job], schedules=[schedule], resources={"kafka": kafka_resource}
    )
    tick = defs.resolve_schedule_def(schedule.name).evaluate_tick(
        dg.build_schedule_context(scheduled_execution_time=datetime(2026, 1, 1, 3, tzinfo=timezone.utc))
    )
    (request,) = tick.run_requests or []
    assert request.tags["upsert_kafka/job"] == "tidy"

    rnd = random.Random(3)
    for _ in range(4):  # the writer's runs (its asset's code, without Dagster's run around it)
        produce(servers, topic, random_changes(rnd, 20, 15))
        run_job(pipe, "users", spark=spark)
    result = defs.resolve_job_def(job.name).execute_in_process(
        instance=instance, resources={"kafka": kafka_resource}
    )
    assert result.success
    (output,) = [e for e in result.all_node_events if e.is_successful_output]
    meta = {k: getattr(v, "value", v) for k, v in output.step_output_data.metadata.items()}
    # the small runs' writer (delta-rs) leaves one file: nothing to compact, but the replaced files go
    assert meta["upsert_kafka/files_compacted"] == 0 and meta["upsert_kafka/files_deleted"] >= 3, meta
    rows = rows_as_table(
        spark.read.format("delta").load(str(path)).select("id", "name", "region", "score").collect()
    )
    assert rows == oracle_table(servers, topic)
