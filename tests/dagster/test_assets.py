"""Assets against the real broker, Spark and Delta: the target equals the plain-Python oracle, the
metadata values are the run's, an incremental run reads only new records, the lag check turns red
when records wait, the blocking row count check catches a drifted target, and a bounded backfill
rebuilds it (the first run of a job is a full one)."""

from __future__ import annotations

import json
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
    pool_name,
    upsert_kafka_assets,
    upsert_kafka_lag_checks,
)
from upsert_kafka_ops.jobs.gates import LagCondition
from upsert_kafka_ops.local import LocalKafka


def _delta(spark: Any, path: Path) -> dict[int, tuple[str, str, str]]:
    df = spark.read.format("delta").load(str(path)).select("id", "name", "region", "score")
    return rows_as_table(df.collect())


def test_materialize_incremental_drift_check_and_bounded_backfill_against_the_oracle(
    kafka: LocalKafka,
    kafka_resource: UpsertKafkaResource,
    new_topic: Callable[..., str],
    spark: Any,
    instance: dg.DagsterInstance,
    tmp_path: Path,
) -> None:
    servers = kafka.bootstrap_servers
    topic = new_topic(partitions=3, config={"cleanup.policy": "compact"})
    path = tmp_path / "users"
    pipe = one_job(servers, topic, path)
    job = pipe.jobs[0].name
    assets = upsert_kafka_assets(pipeline=pipe, kafka_resources=RESOURCES)
    # the source topic nobody writes is an external asset; the Delta table depends on it
    (external,) = [a for a in assets if isinstance(a, dg.AssetSpec)]
    (table,) = [a for a in assets if isinstance(a, dg.AssetsDefinition)]
    assert external.key == dg.AssetKey(["kafka", topic])
    assert table.key == dg.AssetKey(["warehouse", tmp_path.name, "users"])
    assert table.asset_deps[table.key] == {external.key}
    assert table.op.pool == pool_name(job) and table.backfill_policy == dg.BackfillPolicy.single_run()
    assert {c.name for c in table.check_specs} == {KEYS_CHECK, ROW_COUNT_CHECK}
    assert all(c.blocking for c in table.check_specs)
    resources = {"kafka": kafka_resource}

    changes = random_changes(random.Random(7), 60, keys=15)
    produce(servers, topic, changes)
    first = oracle_table(servers, topic)
    r1 = dg.materialize(assets, resources=resources, instance=instance)
    assert r1.success
    assert _delta(spark, path) == first
    m = metadata(r1, op_name(job))
    assert m["upsert_kafka/records_read"] == 60
    assert m["upsert_kafka/tombstones_in"] == sum(1 for _, row in changes if row is None) > 0
    assert m["upsert_kafka/distinct_keys"] == len({k for k, _ in changes})
    assert sum(m["upsert_kafka/end_offsets"][topic].values()) == 60
    assert len(m["upsert_kafka/end_offsets"][topic]) == 3
    assert m["upsert_kafka/lag_after_run"] == 0
    assert m["dagster/row_count"] == len(first)
    assert m["upsert_kafka/rows_upserted"] + m["upsert_kafka/rows_deleted"] >= len(first)
    # the first run has no stored offsets: the core reads from the earliest and says why
    assert m["upsert_kafka/mode"] == "full" and m["upsert_kafka/reason"] and m["upsert_kafka/duration_s"] > 0
    assert m["upsert_kafka/spark_app_id"] == spark.sparkContext.applicationId  # the run's application
    history = SparkRuntimeResource(history_url="http://history:18080/")
    assert history.history_link(m["upsert_kafka/spark_app_id"]) == (
        f"http://history:18080/history/{spark.sparkContext.applicationId}/"
    )
    assert SparkRuntimeResource().history_link("app-1") is None  # no server configured: no link
    # the run's phase lines are in the Dagster event log, as in an Airflow task log
    messages = [e.user_message for e in instance.all_logs(r1.run_id)]
    assert any(f"job {job}: run 1, full into file://" in msg for msg in messages), messages[-20:]
    assert any(f"job {job}: read 60 of 60 records" in msg for msg in messages)
    preview = m["upsert_kafka/preview"]
    assert 0 < len(preview.records) <= 5 and {"id", "name", "region", "score"} <= {
        c.name for c in preview.schema.columns
    }
    assert all(int(rec.data["id"]) in first for rec in preview.records)
    assert checks(r1) == {KEYS_CHECK: True, ROW_COUNT_CHECK: True}
    ends_after_first = m["upsert_kafka/end_offsets"]

    # five records wait: the lag check fails with that lag; after the next run it passes again
    (lag_check,) = upsert_kafka_lag_checks(
        condition=LagCondition(max_offset_lag=2), pipeline=pipe, kafka_resources=RESOURCES
    )
    produce(servers, topic, [(100 + i, {"name": "n", "region": "Paris", "score": "1.00"}) for i in range(5)])
    red = lag_check(dg.build_asset_check_context(resources=resources))
    assert red.passed is False and red.metadata["total_lag"].value == 5
    # the target drifts behind the job's back (a row deleted): the incremental run reads only the
    # new records, and its blocking row count check fails the run
    dropped = sorted(first)[0]
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = {dropped}")
    r2 = dg.materialize(assets, resources=resources, instance=instance, raise_on_error=False)
    assert not r2.success
    m2 = metadata(r2, op_name(job))
    assert m2["upsert_kafka/records_read"] == 5 and m2["upsert_kafka/mode"] == "incremental"
    assert checks(r2) == {KEYS_CHECK: True, ROW_COUNT_CHECK: False}
    (count,) = [e for e in r2.get_asset_check_evaluations() if e.check_name == ROW_COUNT_CHECK]
    assert count.metadata["live_keys"].value == len(first) + 5
    assert count.metadata["target_rows"].value == len(first) + 4
    green = lag_check(dg.build_asset_check_context(resources=resources))
    assert green.passed is True and green.metadata["total_lag"].value == 0

    # a bad mode fails before any read, naming the field
    bad = {"ops": {op_name(job): {"config": {"mode": "rebuild"}}}}
    failed = dg.materialize(
        assets, resources=resources, instance=instance, run_config=bad, raise_on_error=False
    )
    assert not failed.success
    (failure,) = [e for e in failed.all_events if e.event_type_value == "STEP_FAILURE"]
    assert "mode" in str(failure.step_failure_data.error) and "incremental or full" in str(
        failure.step_failure_data.error
    )

    # a bounded backfill back to the first batch's end (rewind) rebuilds the table as it was then,
    # repairing the drift
    until = json.dumps(ends_after_first)
    config = {"ops": {op_name(job): {"config": {"until": until, "rewind": True}}}}
    r4 = dg.materialize(assets, resources=resources, instance=instance, run_config=config)
    m4 = metadata(r4, op_name(job))
    assert m4["upsert_kafka/records_read"] == 60 and m4["upsert_kafka/end_offsets"] == ends_after_first
    assert _delta(spark, path) == first
    assert checks(r4) == {KEYS_CHECK: True, ROW_COUNT_CHECK: True}
