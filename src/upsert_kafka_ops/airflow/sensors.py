"""Sensors: new data for a job, and consumer lag of a job or a group. Deferrable (the wait runs in
the triggerer and holds no worker slot) or poke/reschedule mode; both look once before deferring.

Example::

    NewDataSensor(task_id="users_arrived", pipeline_file=..., job_name="users-to-delta",
                  kafka_config_ids={"local": "kafka_default"}, deferrable=True, poke_interval=60)
    ConsumerLagSensor(task_id="caught_up", group="orders-app", topics=["orders"],
                      max_offset_lag=1000, max_status="WARN")
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue, conf
from airflow.sdk.exceptions import AirflowException

from upsert_kafka_ops.airflow._jobs import JobArg, JobFields
from upsert_kafka_ops.airflow.operators import JOB_FIELDS, task_error
from upsert_kafka_ops.airflow.triggers import LagTrigger, NewDataTrigger, check_lag, check_new_data
from upsert_kafka_ops.errors import SpecError, UpsertKafkaOpsError
from upsert_kafka_ops.jobs.gates import LagCondition


def _default_deferrable() -> bool:
    return conf.getboolean("operators", "default_deferrable", fallback=False)


class _Deferring(JobFields, BaseSensorOperator):
    def __init__(self, *, deferrable: bool | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.deferrable = _default_deferrable() if deferrable is None else deferrable

    def _defer_timeout(self) -> timedelta | None:
        return timedelta(seconds=float(self.timeout)) if self.timeout else None

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        if event.get("status") != "success":
            raise AirflowException(event.get("message") or f"the trigger failed: {event}")
        return event.get("new_data", event.get("lag"))


class NewDataSensor(_Deferring):
    """Wait until the job's source topics moved at least ``min_records`` past its processed offsets
    (its target's stored offsets, or its consumer group). XCom: what arrived, per partition.

    Takes the job like the operators (``pipeline_file`` + ``job_name``, or ``job``).
    """

    template_fields: Sequence[str] = (*JOB_FIELDS, "min_records")

    def __init__(
        self,
        *,
        job: JobArg = None,
        pipeline_file: str | Path | None = None,
        job_name: str | None = None,
        kafka_config_id: str | None = None,
        kafka_config_ids: dict[str, str] | None = None,
        min_records: int = 1,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._set_job(job, pipeline_file, job_name, kafka_config_id, kafka_config_ids)
        self.min_records = min_records

    def poke(self, context: Context) -> PokeReturnValue:
        try:
            found = check_new_data(self.job_ref().to_json())
        except UpsertKafkaOpsError as exc:
            raise task_error(exc) from None
        ready = found.new_records >= int(self.min_records)
        self.log.info("%d new records for job %r (need %s)", found.new_records, found.job, self.min_records)
        return PokeReturnValue(is_done=ready, xcom_value=found.to_dict() if ready else None)

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        first = self.poke(context)
        if first.is_done:
            return first.xcom_value
        self.defer(
            trigger=NewDataTrigger(
                self.job_ref().to_json(), int(self.min_records), float(self.poke_interval)
            ),
            method_name="execute_complete",
            timeout=self._defer_timeout(),
        )


class ConsumerLagSensor(_Deferring):
    """Wait until a job's or a consumer group's lag meets a condition: low lag (``max_offset_lag``,
    ``max_time_lag_s``, ``max_status`` as Burrow judges it over the observations made while
    waiting), or enough new data (``min_offset_lag``). XCom: the verdict and the lag summary.

    :param group: a consumer group (with ``topics`` to limit it, and ``kafka_config_id``); or
    :param pipeline_file: / ``job`` + ``job_name``: a job (its stored offsets or its group).
    """

    template_fields: Sequence[str] = (*JOB_FIELDS, "group", "topics")

    def __init__(
        self,
        *,
        group: str | None = None,
        topics: list[str] | None = None,
        job: JobArg = None,
        pipeline_file: str | Path | None = None,
        job_name: str | None = None,
        kafka_config_id: str | None = None,
        kafka_config_ids: dict[str, str] | None = None,
        max_offset_lag: int | None = None,
        max_time_lag_s: float | None = None,
        max_status: str | None = None,
        min_offset_lag: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.group = group
        self.topics = list(topics) if topics is not None else None
        self._set_job(job, pipeline_file, job_name, kafka_config_id, kafka_config_ids)
        self.condition = {
            "max_offset_lag": max_offset_lag,
            "max_time_lag_s": max_time_lag_s,
            "max_status": max_status,
            "min_offset_lag": min_offset_lag,
        }
        self._window: dict[str, Any] | None = None

    def _target(self) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        condition = LagCondition.model_validate(self.condition).model_dump(mode="json")
        if self.group is not None:
            if self.job is not None or self.pipeline_file is not None:
                raise SpecError("group", "give a consumer group or a job, not both.")
            return None, condition
        return self.job_ref().to_json(), condition

    def poke(self, context: Context) -> PokeReturnValue:
        try:
            ref, condition = self._target()
            gate = check_lag(condition, ref, self.group, self.topics, self.kafka_config_id, self._window)
        except UpsertKafkaOpsError as exc:
            raise task_error(exc) from None
        self._window = gate.window
        self.log.info("lag: %s", gate.reason)
        return PokeReturnValue(is_done=gate.passed, xcom_value=gate.to_dict() if gate.passed else None)

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        first = self.poke(context)
        if first.is_done:
            return first.xcom_value
        ref, condition = self._target()
        self.defer(
            trigger=LagTrigger(
                condition,
                ref,
                self.group,
                self.topics,
                self.kafka_config_id,
                float(self.poke_interval),
                self._window,
            ),
            method_name="execute_complete",
            timeout=self._defer_timeout(),
        )
