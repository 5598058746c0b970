"""Triggers: wait in the triggerer (no worker slot) for new data, for a lag condition, or for a job's
YARN application to end; and :class:`BacklogTrigger`, which starts DAG runs from a job's topic
(event-driven scheduling through an ``AssetWatcher``).

Their kwargs are plain JSON: a :class:`~upsert_kafka_ops.airflow._jobs.JobRef` (a pipeline file or a
job spec, and Airflow connection ids: never a secret), the condition and the Burrow window. The
checks are the core's bounded admin queries (:mod:`upsert_kafka_ops.jobs.gates`), run in a thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseEventTrigger, BaseTrigger, TriggerEvent

from upsert_kafka_ops.airflow._jobs import DEFAULT_KAFKA_CONN, JobRef
from upsert_kafka_ops.errors import SpecError, UpsertKafkaOpsError
from upsert_kafka_ops.jobs.gates import (
    Backlog,
    BacklogVerdict,
    LagCondition,
    LagGate,
    NewData,
    backlog,
    lag_gate,
    new_data,
)
from upsert_kafka_ops.runtime.yarn import application, kill_application


def check_new_data(ref: dict[str, Any], timeout: float = 10.0) -> NewData:
    pipeline, name = JobRef(**ref).resolve()
    return new_data(pipeline, name, timeout=timeout)


def check_backlog(ref: dict[str, Any], rule: dict[str, Any], timeout: float = 10.0) -> BacklogVerdict:
    pipeline, name = JobRef(**ref).resolve()
    return backlog(pipeline, name, Backlog.model_validate(rule), timeout=timeout)


def check_lag(
    condition: dict[str, Any],
    ref: dict[str, Any] | None,
    group: str | None,
    topics: list[str] | None,
    kafka_config_id: str | None,
    window: dict[str, Any] | None,
    timeout: float = 10.0,
) -> LagGate:
    cond = LagCondition.model_validate(condition)
    if ref is not None:
        pipeline, name = JobRef(**ref).resolve()
        return lag_gate(cond, pipeline=pipeline, job=name, window=window, timeout=timeout)
    from upsert_kafka_ops.airflow.hooks import UpsertKafkaHook

    conn = UpsertKafkaHook(kafka_config_id or DEFAULT_KAFKA_CONN).get_kafka_connection()
    return lag_gate(cond, connection=conn, group=group, topics=topics, window=window, timeout=timeout)


class NewDataTrigger(BaseTrigger):
    """Fires once the job's source topics hold at least ``min_records`` records past its processed
    offsets. Event payload: ``{"status": "success", "new_data": {...}}`` or ``{"status": "error",
    "message": ...}``."""

    def __init__(self, ref: dict[str, Any], min_records: int = 1, poll_interval: float = 30.0) -> None:
        super().__init__()
        self.ref = ref
        self.min_records = min_records
        self.poll_interval = poll_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {"ref": self.ref, "min_records": self.min_records, "poll_interval": self.poll_interval},
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        while True:
            try:
                found = await asyncio.to_thread(check_new_data, self.ref)
            except UpsertKafkaOpsError as exc:
                yield TriggerEvent({"status": "error", "message": f"{type(exc).__name__}: {exc}"})
                return
            if found.new_records >= self.min_records:
                yield TriggerEvent({"status": "success", "new_data": found.to_dict()})
                return
            self.log.info(
                "%d new records for %s (waiting for %d)", found.new_records, found.job, self.min_records
            )
            await asyncio.sleep(self.poll_interval)


class NewDataEventTrigger(NewDataTrigger, BaseEventTrigger):
    """:class:`NewDataTrigger` for event-driven scheduling (``AssetWatcher``): a DAG scheduled on the
    asset runs when new data arrives for the job. It fires again while the job has not processed it
    (runs of a job are serialized and idempotent, so a repeated run only finds nothing new)."""


class BacklogTrigger(BaseEventTrigger):
    """Starts a DAG when a job's topic calls for a run: at least ``min_records`` records wait past the
    offsets the job processed, or the oldest of them waited ``max_age_s`` (its timestamp). Use it in
    an ``AssetWatcher``; a DAG scheduled on the asset runs the job::

        users = Asset("upsert_kafka_users_backlog", watchers=[AssetWatcher(
            name="users_backlog", trigger=BacklogTrigger(ref, min_records=1000, max_age_s=900))])

    It fires once per set of end offsets: the ones it fired for are kept in memory and, under a
    triggerer that offers it (Airflow 3.3), in the asset's state store, so a restarted triggerer does
    not start a second run for data the first is still reading. A broker it cannot reach is logged
    and asked again; a bad job reference fails the trigger."""

    #: the asset state store key of the end offsets the last event was for
    FIRED_KEY = "upsert_kafka_backlog_fired"

    def __init__(
        self,
        ref: dict[str, Any],
        min_records: int | None = None,
        max_age_s: float | None = None,
        poll_interval: float = 30.0,
    ) -> None:
        super().__init__()
        Backlog(min_records=min_records, max_age_s=max_age_s)  # a bad rule fails where the DAG is parsed
        self.ref = ref
        self.min_records = min_records
        self.max_age_s = max_age_s
        self.poll_interval = poll_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "ref": self.ref,
                "min_records": self.min_records,
                "max_age_s": self.max_age_s,
                "poll_interval": self.poll_interval,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        rule = {"min_records": self.min_records, "max_age_s": self.max_age_s}
        fired = await self._stored_fired()
        while True:
            try:
                verdict = await asyncio.to_thread(check_backlog, self.ref, rule)
            except SpecError:
                raise
            except UpsertKafkaOpsError as exc:
                self.log.warning(
                    "backlog unknown, asking again in %gs: %s: %s",
                    self.poll_interval,
                    type(exc).__name__,
                    exc,
                )
            else:
                ends = verdict.data.end_offsets
                if verdict.due and ends != fired:
                    fired = ends
                    await self._store_fired(ends)
                    self.log.info("job %s: %s: firing", verdict.data.job, verdict.reason)
                    yield TriggerEvent({"status": "success", "backlog": verdict.to_dict()})
                elif verdict.due:
                    self.log.info(
                        "job %s: %s, but already fired for these end offsets",
                        verdict.data.job,
                        verdict.reason,
                    )
                else:
                    self.log.info("job %s: %s", verdict.data.job, verdict.reason)
            await asyncio.sleep(self.poll_interval)

    async def _stored_fired(self) -> Any:
        store = getattr(self, "asset_state_store", None)
        return None if store is None else await store.aget(self.FIRED_KEY)

    async def _store_fired(self, ends: dict[str, dict[str, int]]) -> None:
        store = getattr(self, "asset_state_store", None)
        if store is not None:
            await store.aset(self.FIRED_KEY, ends)


class LagTrigger(BaseTrigger):
    """Fires once a lag condition passes for a job (``ref``) or a consumer group (``group``, ``topics``,
    ``kafka_config_id``), observing every ``poll_interval`` seconds into a Burrow window."""

    def __init__(
        self,
        condition: dict[str, Any],
        ref: dict[str, Any] | None = None,
        group: str | None = None,
        topics: list[str] | None = None,
        kafka_config_id: str | None = None,
        poll_interval: float = 30.0,
        window: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.condition = condition
        self.ref = ref
        self.group = group
        self.topics = topics
        self.kafka_config_id = kafka_config_id
        self.poll_interval = poll_interval
        self.window = window

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "condition": self.condition,
                "ref": self.ref,
                "group": self.group,
                "topics": self.topics,
                "kafka_config_id": self.kafka_config_id,
                "poll_interval": self.poll_interval,
                "window": self.window,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        window = self.window
        while True:
            try:
                gate = await asyncio.to_thread(
                    check_lag, self.condition, self.ref, self.group, self.topics, self.kafka_config_id, window
                )
            except UpsertKafkaOpsError as exc:
                yield TriggerEvent({"status": "error", "message": f"{type(exc).__name__}: {exc}"})
                return
            window = gate.window
            if gate.passed:
                yield TriggerEvent({"status": "success", "lag": gate.to_dict()})
                return
            self.log.info("lag condition not met: %s", gate.reason)
            await asyncio.sleep(self.poll_interval)


class SparkApplicationTrigger(BaseTrigger):
    """Follows a job's YARN application (cluster deploy mode) through the ResourceManager's REST API
    until it ends, holding no worker slot. Event payload: ``{"status": "done", "app": {...}}`` (the
    final state; the operator reads the run's result), or ``{"status": "error", "message": ...}`` when
    the ResourceManager stayed unreachable for ``max_failures`` polls in a row. A user who marks the
    deferred task failed or clears it kills the application (``on_kill``)."""

    def __init__(self, rm_url: str, app_id: str, poll_interval: float = 10.0, max_failures: int = 6) -> None:
        super().__init__()
        self.rm_url = rm_url
        self.app_id = app_id
        self.poll_interval = poll_interval
        self.max_failures = max_failures

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "rm_url": self.rm_url,
                "app_id": self.app_id,
                "poll_interval": self.poll_interval,
                "max_failures": self.max_failures,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        failures, last = 0, ""
        while True:
            try:
                app = await asyncio.to_thread(application, self.rm_url, self.app_id)
            except UpsertKafkaOpsError as exc:
                failures += 1
                if failures >= self.max_failures:
                    yield TriggerEvent({"status": "error", "message": f"{type(exc).__name__}: {exc}"})
                    return
                self.log.warning("%s (%d of %d tries)", exc, failures, self.max_failures)
            else:
                failures = 0
                if app.done:
                    yield TriggerEvent({"status": "done", "app": app.to_dict()})
                    return
                if app.state != last:
                    self.log.info("YARN application %s is %s", self.app_id, app.state)
                    last = app.state
            await asyncio.sleep(self.poll_interval)

    async def on_kill(self) -> None:
        await asyncio.to_thread(kill_application, self.rm_url, self.app_id)
        self.log.info("killed YARN application %s", self.app_id)
