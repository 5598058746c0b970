"""Sensors against the real broker (bounded offset queries, no Spark): a skip when nothing changed,
a run request for the job's assets when data arrives, the JSON cursor advancing, one request per
set of end offsets; the lag sensor keeps its Burrow window in the cursor."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from tests.dagster.support import RESOURCES, one_job
from tests.integration.jobs_support import produce

import dagster as dg
from upsert_kafka_ops.dagster import (
    UpsertKafkaResource,
    consumer_lag_sensor,
    continuous_commits_sensor,
    lag_status_sensor,
    new_data_sensor,
)
from upsert_kafka_ops.jobs.gates import LagCondition
from upsert_kafka_ops.kafka import lag as lag_module
from upsert_kafka_ops.local import LocalKafka

ROW = {"name": "n", "region": "Berlin", "score": "1.00"}


def _tick(
    sensor: dg.SensorDefinition, cursor: str | None, res: UpsertKafkaResource, inst: dg.DagsterInstance
) -> Any:
    """One evaluation the way the daemon's code server makes it (``evaluate_tick``, which fills only
    annotated resource parameters), not a direct call (which passes every required resource)."""
    ctx = dg.build_sensor_context(cursor=cursor, instance=inst, resources={"kafka": res})
    return sensor.evaluate_tick(ctx)


def test_new_data_sensor_requests_the_jobs_assets_once_per_new_data(
    kafka: LocalKafka,
    kafka_resource: UpsertKafkaResource,
    new_topic: Callable[..., str],
    instance: dg.DagsterInstance,
    tmp_path: Path,
) -> None:
    topic = new_topic(partitions=2)
    pipe = one_job(kafka.bootstrap_servers, topic, tmp_path / "users")
    job = pipe.jobs[0].name
    sensor = new_data_sensor(job=job, pipeline=pipe, kafka_resources=RESOURCES, min_records=2)
    table = dg.AssetKey(["warehouse", tmp_path.name, "users"])

    empty = _tick(sensor, None, kafka_resource, instance)
    assert not empty.run_requests and empty.skip_message is not None
    assert "nothing waits" in str(empty.skip_message)

    produce(kafka.bootstrap_servers, topic, [(1, ROW)])
    one = _tick(sensor, empty.cursor, kafka_resource, instance)  # below min_records: still a skip
    assert (
        not one.run_requests
        and "1 record(s) wait" in str(one.skip_message)
        and "waiting for 2 record(s)" in str(one.skip_message)
    )

    produce(kafka.bootstrap_servers, topic, [(2, ROW), (3, None)])
    fired = _tick(sensor, one.cursor, kafka_resource, instance)
    (request,) = fired.run_requests
    assert request.asset_selection == [table] and request.tags["upsert_kafka/new_records"] == "3"
    cursor = json.loads(fired.cursor or "")
    assert sum(cursor["requested"][topic].values()) == 3 and cursor["end_offsets"] == cursor["requested"]

    again = _tick(sensor, fired.cursor, kafka_resource, instance)  # same offsets: no second request
    assert not again.run_requests and "already requested" in str(again.skip_message)

    produce(kafka.bootstrap_servers, topic, [(4, ROW)])
    more = _tick(sensor, again.cursor, kafka_resource, instance)
    (second,) = more.run_requests
    assert second.run_key != request.run_key and second.tags["upsert_kafka/new_records"] == "4"
    assert sum(json.loads(more.cursor or "")["requested"][topic].values()) == 4


def test_consumer_lag_sensor_on_a_group_keeps_the_window_in_its_cursor(
    kafka: LocalKafka,
    kafka_resource: UpsertKafkaResource,
    new_topic: Callable[..., str],
    instance: dg.DagsterInstance,
    tmp_path: Path,
) -> None:
    """Run the job's assets once a consumer group (e.g. a downstream application) has 3 records waiting."""
    topic = new_topic(partitions=1)
    pipe = one_job(kafka.bootstrap_servers, topic, tmp_path / "users")
    consumer = Consumer(
        {"bootstrap.servers": kafka.bootstrap_servers, "group.id": "app", "enable.auto.commit": False}
    )
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    finally:
        consumer.close()
    sensor = consumer_lag_sensor(job=pipe.jobs[0].name, condition=LagCondition(min_offset_lag=3), pipeline=pipe,
                                 group="app", connection="main", topics=[topic], kafka_resources=RESOURCES)  # fmt: skip
    produce(kafka.bootstrap_servers, topic, [(1, ROW), (2, ROW)])
    low = _tick(sensor, None, kafka_resource, instance)
    assert not low.run_requests and "offset lag 2 < 3 wanted" in str(low.skip_message)
    window = json.loads(low.cursor or "")["window"]
    assert window["group"] == "app" and topic in window["partitions"]

    produce(kafka.bootstrap_servers, topic, [(3, ROW)])
    fired = _tick(sensor, low.cursor, kafka_resource, instance)
    (request,) = fired.run_requests
    assert request.asset_selection == [dg.AssetKey(["warehouse", tmp_path.name, "users"])]
    assert json.loads(fired.cursor or "")["requested"] == {topic: {"0": 3}}
    again = _tick(sensor, fired.cursor, kafka_resource, instance)
    assert not again.run_requests and "already requested" in str(again.skip_message)


def test_new_data_sensor_with_an_age_limit_runs_for_one_record_that_waited_long_enough(
    kafka: LocalKafka,
    kafka_resource: UpsertKafkaResource,
    new_topic: Callable[..., str],
    instance: dg.DagsterInstance,
    tmp_path: Path,
) -> None:
    """The core's backlog rule through the daemon's evaluation path: age alone (``min_records=None``)
    skips a fresh record and requests a run once a record's timestamp is ``max_age_s`` old."""
    fresh, old = new_topic(partitions=1), new_topic(partitions=1)
    now_ms = int(time.time() * 1000)
    produce(kafka.bootstrap_servers, fresh, [(1, ROW)], timestamp_ms=now_ms)
    produce(kafka.bootstrap_servers, old, [(1, ROW)], timestamp_ms=now_ms - 120_000)
    ticks = {}
    for topic in (fresh, old):
        pipe = one_job(kafka.bootstrap_servers, topic, tmp_path / topic)
        sensor = new_data_sensor(job=pipe.jobs[0].name, pipeline=pipe, kafka_resources=RESOURCES,
                                 min_records=None, max_age_s=60)  # fmt: skip
        ticks[topic] = _tick(sensor, None, kafka_resource, instance)
    assert not ticks[fresh].run_requests and "waiting for an oldest record 60s old" in str(
        ticks[fresh].skip_message
    )
    (request,) = ticks[old].run_requests
    assert request.tags["upsert_kafka/new_records"] == "1"


def _commit(bootstrap: str, topic: str, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "app", "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def test_lag_status_sensor_fires_on_each_burrow_status_change_and_is_quiet_between(
    kafka: LocalKafka,
    kafka_resource: UpsertKafkaResource,
    new_topic: Callable[..., str],
    instance: dg.DagsterInstance,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A consumer group that commits backwards (REWIND) and recovers: two changes, two observations on
    the job's table and two run requests of the target; the ticks in between fire nothing.

    The ticks are 10 s apart on the observations' clock, as a daemon's would be: with real gaps (well
    under a second apart, unless the machine is busy) Burrow's STOP rule (no commit for longer than
    the window spans) decided the fourth tick by scheduling noise."""
    ticks = iter(range(1_000_000, 2_000_000, 10))
    monkeypatch.setattr(lag_module, "time", SimpleNamespace(time=lambda: float(next(ticks)),
                                                          monotonic=time.monotonic))  # fmt: skip
    topic = new_topic(partitions=1)
    pipe = one_job(kafka.bootstrap_servers, topic, tmp_path / "users")
    table = dg.AssetKey(["warehouse", tmp_path.name, "users"])
    sensor = lag_status_sensor(job=pipe.jobs[0].name, pipeline=pipe, group="app", connection="main",
                               topics=[topic], target=[table], kafka_resources=RESOURCES)  # fmt: skip
    produce(kafka.bootstrap_servers, topic, [(1, ROW), (2, ROW), (3, ROW)])
    _commit(kafka.bootstrap_servers, topic, 1)
    first = _tick(sensor, None, kafka_resource, instance)  # OK on the first look: nothing to report
    assert not first.run_requests and not first.asset_events
    assert "lag status unchanged: OK (worst partition OK)" in str(first.skip_message)
    _commit(kafka.bootstrap_servers, topic, 3)
    caught_up = _tick(sensor, first.cursor, kafka_resource, instance)
    assert not caught_up.asset_events and not caught_up.run_requests

    _commit(kafka.bootstrap_servers, topic, 1)  # the group went back: REWIND
    rewound = _tick(sensor, caught_up.cursor, kafka_resource, instance)
    (seen,) = rewound.asset_events
    assert isinstance(seen, dg.AssetObservation) and seen.asset_key == table
    meta = {k: v.value for k, v in seen.metadata.items()}
    assert meta["upsert_kafka/lag_worst_partition_status"] == "REWIND"
    assert meta["upsert_kafka/previous_worst_partition_status"] == "OK"
    assert meta["upsert_kafka/total_lag"] == 2
    (alert,) = rewound.run_requests
    assert alert.tags["upsert_kafka/lag_worst_partition_status"] == "REWIND"
    again = _tick(sensor, rewound.cursor, kafka_resource, instance)  # still rewound: quiet
    assert not again.asset_events and not again.run_requests

    _commit(kafka.bootstrap_servers, topic, 3)  # back past where it was: recovered
    recovered = _tick(sensor, again.cursor, kafka_resource, instance)
    (back,) = recovered.asset_events
    back_meta = {k: v.value for k, v in back.metadata.items()}
    assert back_meta["upsert_kafka/previous_worst_partition_status"] == "REWIND"
    assert back_meta["upsert_kafka/lag_worst_partition_status"] != "REWIND"
    (second,) = recovered.run_requests
    assert second.run_key != alert.run_key and json.loads(recovered.cursor or "")["changes"] == 2


def test_a_continuous_jobs_commits_are_reported_as_materializations_of_an_asset_dagster_never_runs(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: Any, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    """The job runs outside Dagster (its batches here are runs in this process, as its Deployment
    commits them): its output is an asset without a function, fresh by the job's own commits."""
    from datetime import timedelta

    from upsert_kafka_ops.dagster import upsert_kafka_assets
    from upsert_kafka_ops.jobs import Pipeline, run_job

    topic = new_topic(partitions=2)
    plain = one_job(kafka.bootstrap_servers, topic, tmp_path / "users").to_json_dict()
    plain["jobs"][0]["trigger"] = {"continuous": True, "interval": "1s"}
    pipe = Pipeline.model_validate(plain)
    job = pipe.jobs[0].name
    table = dg.AssetKey(["warehouse", tmp_path.name, "users"])

    (spec,) = [
        a for a in upsert_kafka_assets(pipeline=pipe) if isinstance(a, dg.AssetSpec) and a.key == table
    ]
    assert not [a for a in upsert_kafka_assets(pipeline=pipe) if isinstance(a, dg.AssetsDefinition)]
    assert spec.freshness_policy == dg.FreshnessPolicy.time_window(fail_window=timedelta(seconds=300))
    with pytest.raises(Exception, match="not a continuous materialize job"):
        continuous_commits_sensor(job=job, pipeline=one_job(kafka.bootstrap_servers, topic, tmp_path / "u2"))

    sensor = continuous_commits_sensor(job=job, pipeline=pipe)
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING and not sensor.targets

    def tick(cursor: str | None) -> Any:
        return sensor.evaluate_tick(dg.build_sensor_context(cursor=cursor, instance=instance))

    empty = tick(None)
    assert not empty.asset_events and "no commit yet" in str(empty.skip_message)
    produce(kafka.bootstrap_servers, topic, [(1, ROW), (2, ROW)])
    run_job(pipe, spark=spark)  # the job's first batch
    first = tick(empty.cursor)
    (event,) = first.asset_events
    assert isinstance(event, dg.AssetMaterialization) and event.asset_key == table
    meta = {k: getattr(v, "value", v) for k, v in event.metadata.items()}
    assert (meta["upsert_kafka/run"], meta["upsert_kafka/mode"]) == (1, "full")
    assert sum(meta["upsert_kafka/end_offsets"][topic].values()) == 2 and first.cursor == "1"
    again = tick(first.cursor)  # nothing committed since: nothing reported twice
    assert not again.asset_events and "no commit after run 1" in str(again.skip_message)
    produce(kafka.bootstrap_servers, topic, [(2, None)])
    run_job(pipe, spark=spark)
    (second,) = tick(again.cursor).asset_events
    assert second.metadata["upsert_kafka/run"].value == 2  # type: ignore[union-attr]
