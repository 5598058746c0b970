"""Sensors and lag checks. Each evaluation is one bounded admin query (offsets, no consumer poll
loop), so it fits the code server's sensor time limit; the sensors keep their state in a JSON
cursor (the end offsets seen, the Burrow window of earlier observations).

No ``from __future__ import annotations`` here: Dagster reads the ``context`` annotations of the
decorated functions as objects, and refuses strings."""

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
from upsert_kafka_ops.dagster._plan import (
    check_kafka_resources,
    definition_name,
    load_pipeline,
    plan,
    resolve_connections,
)
from upsert_kafka_ops.dagster.translator import DagsterUpsertKafkaTranslator
from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.jobs.gates import Backlog, LagCondition, LagGate, backlog, lag_gate
from upsert_kafka_ops.jobs.lag import lag_jobs
from upsert_kafka_ops.kafka.evaluation import STATUS_ORDER
from upsert_kafka_ops.pipeline import Pipeline

LAG_CHECK = "lag_within_threshold"


def _keys(pipe: Pipeline, job: str, translator: DagsterUpsertKafkaTranslator | None) -> list[dg.AssetKey]:
    return plan(pipe, [job], translator or DagsterUpsertKafkaTranslator())[0].output_keys


def _fingerprint(offsets: Any) -> str:
    return hashlib.sha256(json.dumps(offsets, sort_keys=True).encode()).hexdigest()[:16]


def _cursor(text: str | None, field: str) -> dict[str, Any]:
    if not text:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise SpecError("cursor", f"the {field} cursor is not a JSON object.", "reset the sensor's cursor.")
    return data


def new_data_sensor(
    *,
    job: str,
    pipeline_file: str | Path | None = None,
    pipeline: Pipeline | None = None,
    asset_keys: Sequence[dg.AssetKey] | None = None,
    translator: DagsterUpsertKafkaTranslator | None = None,
    kafka_resources: Mapping[str, str] | None = None,
    min_records: int | None = 1,
    max_age_s: float | None = None,
    name: str | None = None,
    minimum_interval_seconds: int = 30,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.STOPPED,
) -> dg.SensorDefinition:
    """Request a run of ``job``'s assets when its topic calls for one (the core's
    :class:`~upsert_kafka_ops.jobs.gates.Backlog`): at least ``min_records`` arrived in its source
    topics past the offsets it processed, or the oldest of them waited ``max_age_s`` seconds (with
    ``min_records=None``, age alone decides). The cursor keeps the end offsets of the last request,
    so the same data is requested once."""
    pipe = load_pipeline(pipeline_file, pipeline)
    kres = dict(kafka_resources or {})
    check_kafka_resources(pipe, kres)
    keys = list(asset_keys) if asset_keys is not None else _keys(pipe, job, translator)
    rule = Backlog(min_records=min_records, max_age_s=max_age_s)

    @dg.sensor(
        name=name or definition_name("upsert_kafka_new_data", job),
        target=keys,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        required_resource_keys=set(kres.values()),
        description=f"New records in the source topics of upsert-kafka job {job!r}.",
    )
    def _sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        # the daemon's tick fills only annotated parameters, never **kwargs: read context.resources
        live = resolve_connections(pipe, kres, context.resources)
        state = _cursor(context.cursor, "new_data")
        verdict = backlog(live, job, rule)
        found = verdict.data
        requested = state.get("requested")
        context.log.info(
            f"upsert-kafka job {job!r}: {verdict.reason} "
            f"{json.dumps(found.partitions, sort_keys=True)}; never ran: {found.never_ran}"
        )
        cursor = {"end_offsets": found.end_offsets, "requested": requested}
        if not verdict.due:
            return dg.SensorResult(
                skip_reason=dg.SkipReason(verdict.reason), cursor=json.dumps(cursor, sort_keys=True)
            )
        if requested == found.end_offsets:
            why = "a run was already requested for these end offsets"
            return dg.SensorResult(skip_reason=dg.SkipReason(why), cursor=json.dumps(cursor, sort_keys=True))
        cursor["requested"] = found.end_offsets
        request = dg.RunRequest(
            run_key=f"{job}:{_fingerprint(found.end_offsets)}",
            asset_selection=keys,
            tags={"upsert_kafka/job": job, "upsert_kafka/new_records": str(found.new_records)},
        )
        return dg.SensorResult(run_requests=[request], cursor=json.dumps(cursor, sort_keys=True))

    return _sensor


def continuous_commits_sensor(
    *,
    job: str,
    pipeline_file: str | Path | None = None,
    pipeline: Pipeline | None = None,
    asset_keys: Sequence[dg.AssetKey] | None = None,
    translator: DagsterUpsertKafkaTranslator | None = None,
    name: str | None = None,
    minimum_interval_seconds: int = 30,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.RUNNING,
) -> dg.SensorDefinition:
    """Report the commits of the continuous job ``job`` (``trigger: {continuous: true}``, run outside
    Dagster) as materializations of its assets: each evaluation reads the offsets its target stored
    (no broker, no Spark) and, when the target holds a run newer than the cursor, reports one
    materialization per output with the run, its mode, the commit's time and end offsets. Freshness
    policies and checks then judge the asset by the job's own commits. It starts no run, so it is on
    by default."""
    from upsert_kafka_ops.jobs.targets import target_for
    from upsert_kafka_ops.pipeline import MaterializeJob

    pipe = load_pipeline(pipeline_file, pipeline)
    spec = pipe.job(job)
    if not isinstance(spec, MaterializeJob) or not spec.continuous:
        raise SpecError(
            "job",
            f"{job!r} is not a continuous materialize job: Dagster runs it and records its materializations.",
            "use new_data_sensor or a schedule for it.",
        )
    keys = list(asset_keys) if asset_keys is not None else _keys(pipe, job, translator)
    table = target_for(spec.target, pipe)

    @dg.sensor(
        name=name or definition_name("upsert_kafka_commits", job),
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        description=f"The commits of the continuous upsert-kafka job {job!r}, as materializations.",
    )
    def _sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        seen = int(context.cursor or 0)
        state = table.read_state()
        if state is None or state.job != job or state.run <= seen:
            why = "no commit yet" if state is None else f"no commit after run {seen}"
            return dg.SensorResult(skip_reason=dg.SkipReason(f"upsert-kafka job {job!r}: {why}"))
        metadata: dict[str, Any] = {
            "upsert_kafka/run": state.run,
            "upsert_kafka/mode": state.mode,
            "upsert_kafka/committed_at": state.committed_at,
            "upsert_kafka/end_offsets": dg.MetadataValue.json(state.offsets_json()),
            "upsert_kafka/target": table.uri,
        }
        context.log.info(f"upsert-kafka job {job!r}: run {state.run} committed at {state.committed_at}")
        events = [dg.AssetMaterialization(asset_key=k, metadata=metadata) for k in keys]
        return dg.SensorResult(asset_events=events, cursor=str(state.run))

    return _sensor


def _window_ends(window: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    ends: dict[str, dict[str, int]] = {}
    for topic, parts in (window.get("partitions") or {}).items():
        for p, w in parts.items():
            offsets = w.get("broker_offsets") or []
            if offsets:
                ends.setdefault(topic, {})[p] = int(offsets[-1][0])
    return ends


@dataclass(frozen=True)
class _LagSubject:
    """Whose lag a sensor judges: a job's (its pipeline's offsets) or a consumer group's on one of
    the pipeline's connections; and the Kafka resources that give the live connections."""

    job: str
    pipe: Pipeline
    kres: dict[str, str]
    group: str | None
    connection: str | None
    topics: list[str] | None

    @classmethod
    def of(
        cls,
        job: str,
        pipe: Pipeline,
        group: str | None,
        connection: str | None,
        topics: Sequence[str] | None,
        kafka_resources: Mapping[str, str] | None,
    ) -> "_LagSubject":
        kres = dict(kafka_resources or {})
        check_kafka_resources(pipe, kres)
        if group is not None and connection not in pipe.connections:
            raise SpecError(
                "connection",
                f"{connection!r} is not a connection of the pipeline.",
                f"name the group's cluster: one of {', '.join(sorted(pipe.connections))}.",
            )
        return cls(job, pipe, kres, group, connection, list(topics) if topics else None)

    def gate(self, context: dg.SensorEvaluationContext, condition: LagCondition, window: Any) -> LagGate:
        # the daemon's tick fills only annotated parameters, never **kwargs: read context.resources
        live = resolve_connections(self.pipe, self.kres, context.resources)
        if self.group is not None and self.connection is not None:
            return lag_gate(
                condition,
                connection=live.connections[self.connection],
                group=self.group,
                topics=self.topics,
                window=window,
            )
        return lag_gate(condition, pipeline=live, job=self.job, window=window)


def consumer_lag_sensor(
    *,
    job: str,
    condition: LagCondition,
    pipeline_file: str | Path | None = None,
    pipeline: Pipeline | None = None,
    group: str | None = None,
    connection: str | None = None,
    topics: Sequence[str] | None = None,
    asset_keys: Sequence[dg.AssetKey] | None = None,
    translator: DagsterUpsertKafkaTranslator | None = None,
    kafka_resources: Mapping[str, str] | None = None,
    name: str | None = None,
    minimum_interval_seconds: int = 30,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.STOPPED,
) -> dg.SensorDefinition:
    """Request a run of ``job``'s assets when a lag condition holds: the job's own lag (default), or
    a consumer ``group``'s on the pipeline ``connection`` (e.g. run when a downstream application
    caught up: ``LagCondition(max_offset_lag=0)``; or when enough waits: ``min_offset_lag=1000``).
    The cursor keeps the Burrow window (so ``max_status`` is judged over earlier ticks) and the end
    offsets of the last request; the status summary goes to the evaluation's log."""
    lag = _LagSubject.of(
        job, load_pipeline(pipeline_file, pipeline), group, connection, topics, kafka_resources
    )
    keys = list(asset_keys) if asset_keys is not None else _keys(lag.pipe, job, translator)

    @dg.sensor(
        name=name or definition_name("upsert_kafka_lag", job),
        target=keys,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        required_resource_keys=set(lag.kres.values()),
        description=f"Lag condition for upsert-kafka job {job!r}.",
    )
    def _sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        state = _cursor(context.cursor, "consumer_lag")
        gate = lag.gate(context, condition, state.get("window"))
        context.log.info(f"upsert-kafka lag of {group or job!r}: {gate.status.status}: {gate.reason}")
        ends = _window_ends(gate.window)
        cursor: dict[str, Any] = {"window": gate.window, "requested": state.get("requested")}
        if not gate.passed:
            return dg.SensorResult(skip_reason=dg.SkipReason(gate.reason), cursor=json.dumps(cursor))
        if state.get("requested") == ends:
            why = f"a run was already requested for these end offsets ({gate.reason})"
            return dg.SensorResult(skip_reason=dg.SkipReason(why), cursor=json.dumps(cursor))
        cursor["requested"] = ends
        request = dg.RunRequest(
            run_key=f"{job}:lag:{_fingerprint(ends)}",
            asset_selection=keys,
            tags={"upsert_kafka/job": job, "upsert_kafka/lag_status": gate.status.status},
        )
        return dg.SensorResult(run_requests=[request], cursor=json.dumps(cursor))

    return _sensor


def lag_status_sensor(
    *,
    job: str,
    pipeline_file: str | Path | None = None,
    pipeline: Pipeline | None = None,
    group: str | None = None,
    connection: str | None = None,
    topics: Sequence[str] | None = None,
    asset_keys: Sequence[dg.AssetKey] | None = None,
    translator: DagsterUpsertKafkaTranslator | None = None,
    kafka_resources: Mapping[str, str] | None = None,
    target: Any = None,
    name: str | None = None,
    minimum_interval_seconds: int = 30,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.STOPPED,
) -> dg.SensorDefinition:
    """Fire when the Burrow status of ``job``'s lag (or of a consumer ``group`` on ``connection``)
    changes: Burrow's group status (OK, WARN, ERR) or its worst partition's (STOP, STALL, REWIND...).
    Each change is an ``AssetObservation`` on the job's outputs (``asset_keys``) with the new and the
    previous status, the lag and the summary, so the asset's history shows when it fell behind and
    recovered; with a ``target`` (an alerting job, or the job's assets to catch up) it also requests a
    run tagged with both statuses. The first evaluation fires only for a status worse than OK. The
    cursor keeps the Burrow window and the last status."""
    lag = _LagSubject.of(
        job, load_pipeline(pipeline_file, pipeline), group, connection, topics, kafka_resources
    )
    keys = list(asset_keys) if asset_keys is not None else _keys(lag.pipe, job, translator)
    anything = LagCondition(max_status="REWIND")  # always passes: only the status is wanted

    @dg.sensor(
        name=name or definition_name("upsert_kafka_lag_status", job),
        target=target,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        required_resource_keys=set(lag.kres.values()),
        description=f"Burrow status changes of the lag of upsert-kafka job {job!r}"
        + (f" (consumer group {group!r})." if group else "."),
    )
    def _sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        state = _cursor(context.cursor, "lag_status")
        gate = lag.gate(context, anything, state.get("window"))
        now = {"status": gate.status.status, "worst": gate.status.worst}
        before = state.get("last")
        changes = int(state.get("changes") or 0)
        cursor: dict[str, Any] = {"window": gate.window, "last": now, "changes": changes}
        changed = now != before if before else STATUS_ORDER[now["worst"]] > STATUS_ORDER["OK"]
        line = f"{now['status']} (worst partition {now['worst']})"
        if not changed:
            return dg.SensorResult(
                skip_reason=dg.SkipReason(f"lag status unchanged: {line}; {gate.status.summary}"),
                cursor=json.dumps(cursor),
            )
        was = f"{before['status']} (worst partition {before['worst']})" if before else "not yet evaluated"
        context.log.info(f"upsert-kafka lag of {group or job!r}: {was} -> {line}: {gate.status.summary}")
        cursor["changes"] = changes + 1
        metadata = {
            "upsert_kafka/lag_status": now["status"],
            "upsert_kafka/lag_worst_partition_status": now["worst"],
            "upsert_kafka/previous_lag_status": before["status"] if before else "",
            "upsert_kafka/previous_worst_partition_status": before["worst"] if before else "",
            "upsert_kafka/total_lag": gate.status.total_lag,
            "upsert_kafka/max_time_lag_s": float(gate.status.max_time_lag_s or 0.0),
            "upsert_kafka/lag_summary": gate.status.summary,
        }
        events = [dg.AssetObservation(asset_key=k, metadata=metadata) for k in keys]
        runs = []
        if target is not None:
            runs.append(
                dg.RunRequest(
                    run_key=f"{group or job}:lag-status:{changes + 1}",
                    tags={
                        "upsert_kafka/job": job,
                        "upsert_kafka/lag_status": now["status"],
                        "upsert_kafka/lag_worst_partition_status": now["worst"],
                        "upsert_kafka/previous_lag_status": before["status"] if before else "",
                        "upsert_kafka/previous_worst_partition_status": before["worst"] if before else "",
                    },
                )
            )
        return dg.SensorResult(run_requests=runs, asset_events=events, cursor=json.dumps(cursor))

    return _sensor


def upsert_kafka_lag_checks(
    *,
    condition: LagCondition,
    pipeline_file: str | Path | None = None,
    pipeline: Pipeline | None = None,
    jobs: Sequence[str] | None = None,
    translator: DagsterUpsertKafkaTranslator | None = None,
    kafka_resources: Mapping[str, str] | None = None,
    blocking: bool = False,
) -> list[dg.AssetChecksDefinition]:
    """A ``lag_within_threshold`` check on each output of a job that reads topics (not publish jobs):
    the job's offset lag and time lag (how old the oldest unprocessed record is: freshness) against
    ``condition``. Severity WARN unless ``blocking``."""
    pipe = load_pipeline(pipeline_file, pipeline)
    kres = dict(kafka_resources or {})
    check_kafka_resources(pipe, kres)
    out: list[dg.AssetChecksDefinition] = []
    with_lag = set(lag_jobs(pipe))  # a publish job reads no topic: it has no lag
    for p in plan(pipe, jobs, translator or DagsterUpsertKafkaTranslator()):
        if p.job not in with_lag:
            continue
        for key in p.output_keys:
            out.append(_lag_check(pipe, p.job, key, condition, kres, blocking))
    return out


def _lag_check(
    pipe: Pipeline,
    job: str,
    key: dg.AssetKey,
    condition: LagCondition,
    kres: Mapping[str, str],
    blocking: bool,
) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=key,
        name=LAG_CHECK,
        blocking=blocking,
        required_resource_keys=set(kres.values()),
        description=f"Lag of upsert-kafka job {job!r} within {condition.model_dump(exclude_none=True)}.",
    )
    def _check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        live = resolve_connections(pipe, kres, context.resources)
        gate = lag_gate(condition, pipeline=live, job=job)
        context.log.info(f"upsert-kafka lag of {job!r}: {gate.reason}")
        return dg.AssetCheckResult(
            passed=gate.passed,
            severity=dg.AssetCheckSeverity.ERROR if blocking else dg.AssetCheckSeverity.WARN,
            description=gate.reason,
            metadata={
                "total_lag": gate.status.total_lag,
                "max_time_lag_s": float(gate.status.max_time_lag_s or 0.0),
                "status": gate.status.status,
            },
        )

    return _check
