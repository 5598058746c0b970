"""The spark-submit runtime from Dagster: the driver (a separate process started by spark-submit)
reports its materialization metadata and a log line through Dagster Pipes; the target equals the
plain-Python oracle."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.dagster.support import RESOURCES, checks, metadata, one_job
from tests.integration.jobs_support import oracle_table, produce, random_changes, rows_as_table

import dagster as dg
from upsert_kafka_ops.dagster import (
    KEYS_CHECK,
    ROW_COUNT_CHECK,
    SparkRuntimeResource,
    UpsertKafkaResource,
    op_name,
    upsert_kafka_assets,
)
from upsert_kafka_ops.local import LocalKafka


def test_spark_submit_driver_reports_through_pipes(
    kafka: LocalKafka,
    kafka_resource: UpsertKafkaResource,
    new_topic: Callable[..., str],
    spark: Any,
    instance: dg.DagsterInstance,
    tmp_path: Path,
) -> None:
    servers = kafka.bootstrap_servers
    topic = new_topic(partitions=2, config={"cleanup.policy": "compact"})
    changes = random_changes(random.Random(11), 120, keys=25)
    produce(servers, topic, changes)
    path = tmp_path / "users"
    pipe = one_job(servers, topic, path)
    job = pipe.jobs[0].name
    assets = upsert_kafka_assets(pipeline=pipe, kafka_resources=RESOURCES, spark_runtime="spark")
    resources = {
        "kafka": kafka_resource,
        "spark": SparkRuntimeResource(runtime="spark-submit", master="local[1]", timeout_s=600),
    }
    result = dg.materialize(assets, resources=resources, instance=instance)
    assert result.success
    table = spark.read.format("delta").load(str(path)).select("id", "name", "region", "score")
    assert rows_as_table(table.collect()) == oracle_table(servers, topic)

    m = metadata(result, op_name(job))
    assert m["upsert_kafka/records_read"] == 120 and m["upsert_kafka/job"] == job
    assert m["upsert_kafka/tombstones_in"] == sum(1 for _, row in changes if row is None)
    assert m["upsert_kafka/distinct_keys"] == len({k for k, _ in changes})
    assert sum(m["upsert_kafka/end_offsets"][topic].values()) == 120
    assert m["dagster/row_count"] == len(oracle_table(servers, topic))
    assert checks(result) == {KEYS_CHECK: True, ROW_COUNT_CHECK: True}

    # the driver's own Pipes messages reached this run's log: the metadata came through Pipes
    messages = [e.user_message for e in instance.all_logs(result.run_id)]
    driver_lines = [t for t in messages if t.startswith("upsert-kafka driver:")]
    assert driver_lines and f"job {job!r} read 120 records" in driver_lines[0], messages[-20:]
    assert not [t for t in messages if "reported nothing through Pipes" in t]
