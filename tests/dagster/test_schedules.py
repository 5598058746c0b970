"""A job's ``schedule:`` as Dagster sees it: a schedule materializing the job's outputs on that cron,
a freshness policy on the outputs, and a freshness check that fails before the first run and passes after a real run (broker, Spark,
Delta), with the lower bound taken from the schedule's longest gap."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from tests.dagster.support import RESOURCES
from tests.integration.jobs_support import pipeline, produce, source

import dagster as dg
from upsert_kafka_ops.dagster import (
    UpsertKafkaResource,
    upsert_kafka_assets,
    upsert_kafka_freshness_checks,
    upsert_kafka_schedules,
)
from upsert_kafka_ops.local import LocalKafka

ROW = {"name": "n", "region": "Berlin", "score": "1.00"}


def _freshness(assets: list[Any], checks: list[Any], instance: dg.DagsterInstance) -> dict[str, Any]:
    """Evaluate the freshness checks as their sensor's runs do: (passed, description, params) per asset."""
    run = dg.materialize([*assets, *checks], instance=instance, selection=dg.AssetSelection.checks(*checks),
                         resources={"kafka": UpsertKafkaResource(bootstrap_servers="127.0.0.1:9")})  # fmt: skip
    return {
        e.asset_key.path[-1]: (e.passed, e.description, e.metadata["dagster/freshness_params"].value)
        for e in run.get_asset_check_evaluations()
    }


def test_a_scheduled_job_gets_a_schedule_and_a_freshness_check_that_a_real_run_turns_green(
    kafka: LocalKafka,
    kafka_resource: UpsertKafkaResource,
    new_topic: Callable[..., str],
    spark: Any,
    instance: dg.DagsterInstance,
    tmp_path: Path,
) -> None:
    servers = kafka.bootstrap_servers
    topic = new_topic(partitions=2)
    jobs = [
        {"name": "every-minute", "kind": "materialize", "schedule": "* * * * *", "source": source(topic, servers),
         "target": {"kind": "delta", "path": str(tmp_path / "minutely")}},
        {"name": "weekdays", "kind": "materialize", "schedule": "0 9 * * 1-5", "source": source(topic, servers),
         "target": {"kind": "delta", "path": str(tmp_path / "weekdays")}},
        {"name": "by-hand", "kind": "materialize", "source": source(topic, servers),
         "target": {"kind": "delta", "path": str(tmp_path / "by_hand")}},
    ]  # fmt: skip
    pipe = pipeline(servers, jobs)
    assets = upsert_kafka_assets(pipeline=pipe, kafka_resources=RESOURCES)
    minutely = dg.AssetKey(["warehouse", tmp_path.name, "minutely"])

    schedules = upsert_kafka_schedules(pipeline=pipe)
    assert {s.name: s.cron_schedule for s in schedules} == {
        "upsert_kafka_schedule_every_minute": "* * * * *",
        "upsert_kafka_schedule_weekdays": "0 9 * * 1-5",
    }  # the job without a schedule gets none
    defs = dg.Definitions(assets=assets, schedules=schedules, resources={"kafka": kafka_resource})
    every = defs.resolve_schedule_def("upsert_kafka_schedule_every_minute")
    tick = every.evaluate_tick(
        dg.build_schedule_context(scheduled_execution_time=datetime(2026, 1, 1, 10, tzinfo=timezone.utc))
    )
    (request,) = tick.run_requests or []
    assert request.tags["upsert_kafka/job"] == "every-minute"
    assert defs.resolve_job_def(every.job_name).asset_layer.selected_asset_keys == {minutely}

    # Dagster's freshness policy on the assets: its window is at most the shortest gap (Dagster's rule)
    policies = {s.key.path[-1]: s.freshness_policy for a in assets if isinstance(a, dg.AssetsDefinition)
                for s in a.specs}  # fmt: skip
    assert policies["by_hand"] is None
    assert (policies["weekdays"].deadline_cron, policies["weekdays"].lower_bound_delta) == (
        "0 9 * * 1-5",
        timedelta(days=1),
    )
    checks = upsert_kafka_freshness_checks(pipeline=pipe)
    before = _freshness(assets, checks, instance)
    assert set(before) == {"minutely", "weekdays"}
    assert before["minutely"][0] is False and "never been observed" in before["minutely"][1]
    assert before["minutely"][2]["lower_bound_delta_seconds"] == 60
    assert before["weekdays"][2]["lower_bound_delta_seconds"] == 3 * 24 * 3600  # Friday to Monday

    produce(servers, topic, [(1, ROW), (2, ROW)])
    run = dg.materialize(assets, selection=[minutely], resources={"kafka": kafka_resource}, instance=instance)
    assert run.success
    after = _freshness(assets, checks, instance)
    assert after["minutely"][0] is True, after["minutely"][1]
    assert after["weekdays"][0] is False  # not run: still overdue
