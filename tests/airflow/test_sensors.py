"""Deferrable sensors against the real broker: they defer when nothing is there, their triggers fire
on real changes (records produced, offsets committed), and the task completes with what they saw.
Poke mode works too. Connections come from ``AIRFLOW_CONN_KAFKA_DEFAULT`` (SASL, a password)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import Asset, AssetWatcher
from airflow.sdk.exceptions import AirflowException, TaskDeferred
from confluent_kafka import Consumer, TopicPartition
from tests.integration.jobs_support import oracle_table, produce, rows_as_table, source

from upsert_kafka_ops.airflow.operators import UpsertKafkaMaterializeOperator
from upsert_kafka_ops.airflow.sensors import ConsumerLagSensor, NewDataSensor
from upsert_kafka_ops.airflow.triggers import LagTrigger, NewDataEventTrigger, NewDataTrigger
from upsert_kafka_ops.local import LocalKafka

CONNS = {"main": "kafka_default"}


def _job(topic: str, path: Path) -> dict[str, Any]:
    return {"name": f"load-{topic}", "kind": "materialize", "source": source(topic, ""),
            "target": {"kind": "delta", "path": str(path)}}  # fmt: skip


def _round_trip(trigger: Any) -> Any:
    classpath, kwargs = trigger.serialize()
    module, _, name = classpath.rpartition(".")
    import importlib

    rebuilt = getattr(importlib.import_module(module), name)(**kwargs)
    assert rebuilt.serialize() == (classpath, kwargs)
    json.dumps(kwargs)  # plain JSON: what the triggerer stores
    return rebuilt


async def _fires_after(trigger: Any, change: Callable[[], None], quiet_s: float = 2.0) -> dict[str, Any]:
    """Run the trigger; it must not fire for ``quiet_s``; then make ``change`` and wait for its event."""
    task = asyncio.ensure_future(trigger.run().__anext__())
    await asyncio.sleep(quiet_s)
    assert not task.done(), task.result() if task.done() else None
    await asyncio.to_thread(change)
    event = await asyncio.wait_for(task, timeout=60)
    return dict(event.payload)


def test_new_data_sensor_defers_fires_on_new_records_and_the_job_then_catches_up(
    kafka: LocalKafka,
    kafka_default: dict[str, str],
    new_topic: Callable[..., str],
    spark: Any,
    tmp_path: Path,
) -> None:
    topic = new_topic(partitions=3, config={"cleanup.policy": "compact"})
    job = _job(topic, tmp_path / "users")
    sensor = NewDataSensor(task_id="s", job=job, kafka_config_ids=CONNS, deferrable=True, poke_interval=0.5,
                           min_records=5, timeout=120)  # fmt: skip
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute(context={})  # type: ignore[arg-type]
    trigger = _round_trip(deferred.value.trigger)
    assert isinstance(trigger, NewDataTrigger) and deferred.value.method_name == "execute_complete"
    assert deferred.value.timeout is not None and deferred.value.timeout.total_seconds() == 120
    assert "alice-secret" not in json.dumps(trigger.serialize()[1])  # only connection ids travel

    changes = [(k % 4, {"name": f"n{k}", "region": "Berlin", "score": "1.50"}) for k in range(6)] + [
        (1, None)
    ]
    event = asyncio.run(_fires_after(trigger, lambda: produce(kafka.bootstrap_servers, topic, changes)))
    assert event["status"] == "success" and event["new_data"]["new_records"] == 7
    assert event["new_data"]["never_ran"] is True
    assert sum(event["new_data"]["partitions"][topic].values()) == 7
    assert sensor.execute_complete({}, event)["new_records"] == 7  # type: ignore[arg-type]

    result = UpsertKafkaMaterializeOperator(task_id="m", job=job, kafka_config_ids=CONNS).execute(context={})  # type: ignore[arg-type]
    assert result["records_read"] == 7 and result["status"] == "succeeded"
    delta = spark.read.format("delta").load(str(tmp_path / "users")).select("id", "name", "region", "score")
    assert rows_as_table(delta.collect()) == oracle_table(kafka.bootstrap_servers, topic)
    assert spark.sparkContext._jsc is not None  # the shared session was used, not stopped

    # caught up: poke mode says no; new records make it say yes, with what arrived as XCom
    poke = NewDataSensor(task_id="p", job=job, kafka_config_ids=CONNS, deferrable=False)
    assert poke.poke(context={}).is_done is False  # type: ignore[arg-type]
    produce(kafka.bootstrap_servers, topic, [(9, {"name": "z", "region": "Paris", "score": "2.00"})])
    found = poke.poke(context={})  # type: ignore[arg-type]
    assert found.is_done and found.xcom_value is not None and found.xcom_value["new_records"] == 1


def _commit(servers: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    c = Consumer({"bootstrap.servers": servers, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        c.close()


def test_consumer_lag_sensor_waits_for_a_group_to_catch_up(
    kafka: LocalKafka, kafka_default: dict[str, str], new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=2)
    produce(
        kafka.bootstrap_servers,
        topic,
        [(k, {"name": "n", "region": "r", "score": "1.00"}) for k in range(10)],
    )
    from upsert_kafka_ops.kafka.admin import KafkaAdmin
    from upsert_kafka_ops.spec.connection import KafkaConnection

    with KafkaAdmin(KafkaConnection(bootstrap_servers=kafka.bootstrap_servers)) as admin:
        ends = admin.end_offsets([(topic, 0), (topic, 1)], isolation="read_committed")
    _commit(kafka.bootstrap_servers, "app", {tp: 0 for tp in ends})

    # enough new data: 10 records wait, 5 were asked for
    enough = ConsumerLagSensor(task_id="e", group="app", topics=[topic], min_offset_lag=5)
    assert enough.poke(context={}).is_done  # type: ignore[arg-type]

    sensor = ConsumerLagSensor(task_id="l", group="app", topics=[topic], max_offset_lag=0, max_status="WARN",
                               deferrable=True, poke_interval=0.5)  # fmt: skip
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute(context={})  # type: ignore[arg-type]
    trigger = _round_trip(deferred.value.trigger)
    assert isinstance(trigger, LagTrigger) and trigger.window is not None  # the first look is kept
    event = asyncio.run(_fires_after(trigger, lambda: _commit(kafka.bootstrap_servers, "app", dict(ends))))
    assert event["status"] == "success"
    lag = sensor.execute_complete({}, event)  # type: ignore[arg-type]
    assert lag["passed"] and lag["total_lag"] == 0 and lag["status"] in ("OK", "WARN")


def test_a_trigger_reports_a_broker_error_and_the_sensor_fails_with_it(
    monkeypatch: pytest.MonkeyPatch, kafka_default: dict[str, str]
) -> None:
    from upsert_kafka_ops.local.process import free_port

    down = f"127.0.0.1:{free_port()}"
    monkeypatch.setenv(
        "AIRFLOW_CONN_DOWN", json.dumps({"conn_type": "kafka", "extra": {"bootstrap.servers": down}})
    )
    trigger = LagTrigger({"max_offset_lag": 0}, group="g", kafka_config_id="down", poll_interval=0.1)
    event = asyncio.run(asyncio.wait_for(trigger.run().__anext__(), timeout=60)).payload
    assert event["status"] == "error" and down in event["message"]
    with pytest.raises(AirflowException, match=down):
        ConsumerLagSensor(task_id="l", group="g", max_offset_lag=0).execute_complete({}, event)  # type: ignore[arg-type]


def test_new_data_event_trigger_drives_an_asset_watcher(
    kafka: LocalKafka, kafka_default: dict[str, str], new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=1, config={"cleanup.policy": "compact"})
    ref = {"job": _job(topic, tmp_path / "t"), "pipeline_file": None, "job_name": None,
           "kafka_config_id": None, "kafka_config_ids": CONNS}  # fmt: skip
    trigger = NewDataEventTrigger(ref, min_records=1, poll_interval=0.5)
    asset = Asset(name=topic, uri=f"kafka://{kafka.bootstrap_servers}/{topic}",
                  watchers=[AssetWatcher(name=f"{topic}-new-data", trigger=trigger)])  # fmt: skip
    assert asset.watchers[0].trigger is trigger
    assert _round_trip(trigger).serialize()[0] == "upsert_kafka_ops.airflow.triggers.NewDataEventTrigger"
    event = asyncio.run(
        _fires_after(
            trigger,
            lambda: produce(
                kafka.bootstrap_servers,
                topic,
                [(1, None), (2, {"name": "a", "region": "b", "score": "0.10"})],
            ),
        )
    )
    # a tombstone for a key the job never saw still counts as a record to process
    assert event["new_data"]["new_records"] == 2


def test_backlog_trigger_fires_once_per_backlog_by_count_and_by_age(
    kafka: LocalKafka, kafka_default: dict[str, str], new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """Count: quiet below min_records, one event when the third record arrives, none again for the
    same end offsets, another when more arrive. Age: one record that waited past max_age_s (its
    timestamp two minutes back) fires a trigger whose count alone would wait."""
    import time

    from upsert_kafka_ops.airflow.triggers import BacklogTrigger

    topic = new_topic(partitions=1, config={"cleanup.policy": "compact"})
    ref = {"job": _job(topic, tmp_path / "t"), "pipeline_file": None, "job_name": None,
           "kafka_config_id": None, "kafka_config_ids": CONNS}  # fmt: skip
    row = {"name": "a", "region": "b", "score": "0.10"}
    produce(kafka.bootstrap_servers, topic, [(1, row), (2, row)])
    trigger = _round_trip(BacklogTrigger(ref, min_records=3, poll_interval=0.3))

    async def count() -> tuple[dict[str, Any], dict[str, Any]]:
        events = trigger.run()
        first = asyncio.ensure_future(events.__anext__())
        await asyncio.sleep(2)
        assert not first.done()  # 2 records wait, 3 wanted
        await asyncio.to_thread(produce, kafka.bootstrap_servers, topic, [(3, row)])
        fired = (await asyncio.wait_for(first, timeout=60)).payload
        again = asyncio.ensure_future(events.__anext__())
        await asyncio.sleep(2)
        assert not again.done()  # the same backlog: no second event
        await asyncio.to_thread(produce, kafka.bootstrap_servers, topic, [(4, row)])
        more = (await asyncio.wait_for(again, timeout=60)).payload
        await events.aclose()
        return fired, more

    fired, more = asyncio.run(count())
    assert fired["backlog"]["due"] and fired["backlog"]["new_records"] == 3
    assert fired["backlog"]["end_offsets"] == {topic: {"0": 3}}
    assert more["backlog"]["new_records"] == 4 and more["backlog"]["end_offsets"] == {topic: {"0": 4}}

    old = new_topic(partitions=1, config={"cleanup.policy": "compact"})
    produce(kafka.bootstrap_servers, old, [(1, row)], timestamp_ms=int(time.time() * 1000) - 120_000)
    aged = BacklogTrigger({**ref, "job": _job(old, tmp_path / "o")}, min_records=100, max_age_s=60,
                          poll_interval=0.3)  # fmt: skip
    event = asyncio.run(asyncio.wait_for(aged.run().__anext__(), timeout=60)).payload["backlog"]
    assert event["new_records"] == 1 and event["oldest_age_s"] >= 119
    assert "the oldest 1" in event["reason"] and "60s or older calls for a run" in event["reason"]
