"""The asset factory: one multi-asset per pipeline job, its outputs as assets, its inputs as deps.

A materialization calls :func:`upsert_kafka_ops.runtime.execute_job` (the same core as the CLI and
the Airflow operators) and reports the run's numbers as ``MaterializeResult`` metadata. This module
does not use ``from __future__ import annotations``: Dagster reads the asset function's ``config``
annotation at definition time.
"""

import contextlib
import hashlib
import json
import logging
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

import dagster as dg
from upsert_kafka_ops.dagster._plan import (
    JobPlan,
    check_kafka_resources,
    load_pipeline,
    plan,
    resolve_connections,
)
from upsert_kafka_ops.dagster.resources import SparkRuntimeResource
from upsert_kafka_ops.dagster.translator import DagsterUpsertKafkaTranslator
from upsert_kafka_ops.errors import SpecError, UpsertKafkaOpsError
from upsert_kafka_ops.jobs.targets import previewed
from upsert_kafka_ops.pipeline import (
    AnyJob,
    BackfillJob,
    MaterializeJob,
    Pipeline,
    PublishJob,
    WarehouseTarget,
    as_backfill,
)
from upsert_kafka_ops.runtime.factory import Runtime
from upsert_kafka_ops.runtime.pipes import result_metadata

KEYS_CHECK = "keys_in_single_partition"
ROW_COUNT_CHECK = "row_count_matches_live_keys"
PREVIEW_ROWS = 5


class UpsertKafkaRunConfig(dg.Config):
    """Run configuration of an upsert-kafka asset (``ops: {<op>: {config: {...}}}``)."""

    mode: str | None = Field(
        default=None,
        description="incremental, or full: rebuild the target from the earliest offset (materialize jobs).",
    )
    until: str | None = Field(
        default=None,
        description="Backfill: read earliest -> this end and rebuild the target. latest, epoch ms, an "
        "ISO-8601 time or offsets JSON.",
    )
    rewind: bool = Field(default=False, description="Backfill: allow an end older than the target's offsets.")


def op_name(job: str) -> str:
    return "upsert_kafka_" + re.sub(r"\W", "_", job)


def pool_name(job: str) -> str:
    """The Dagster concurrency pool of a job's runs (set its limit to 1: ``dagster instance
    concurrency set upsert_kafka/<job> 1``); the core also locks the target."""
    return f"upsert_kafka/{job}"


def upsert_kafka_assets(
    *,
    pipeline_file: str | Path | None = None,
    pipeline: Pipeline | None = None,
    jobs: Sequence[str] | None = None,
    translator: DagsterUpsertKafkaTranslator | None = None,
    kafka_resources: Mapping[str, str] | None = None,
    spark_runtime: str | None = None,
    row_count_check: bool = True,
    partitions_def: dg.TimeWindowPartitionsDefinition | None = None,
    group_name: str | None = None,
) -> list[dg.AssetsDefinition | dg.AssetSpec]:
    """Assets for the jobs of a pipeline (all, or ``jobs``).

    :param kafka_resources: pipeline connection name -> resource key of an
        :class:`~upsert_kafka_ops.dagster.UpsertKafkaResource`; connections not named keep the file's
        own definition.
    :param spark_runtime: resource key of a :class:`~upsert_kafka_ops.dagster.SparkRuntimeResource`
        (default: the local runtime, i.e. the run's process).
    :param row_count_check: add the blocking ``row_count_matches_live_keys`` check to Delta and Iceberg
        targets (it re-folds the topic up to the run's end offsets: one more full read).
    :param partitions_def: time-window partitions, for snapshot jobs only (a backfill job whose
        Delta target has ``as_of_column``): each partition writes the snapshot as of its window's
        end, so partitions run late, out of order or as a range never rewind anything. A
        latest-state job is refused: a late partition would take its table back in time.
    :param group_name: one asset group for the pipeline's assets, its external sources included (so
        the graph reads as the flow); default: the translator's (the writing job's name).
    :returns: one multi-asset per job (its outputs: a warehouse table or a sink topic) and an
        external ``AssetSpec`` for each input nobody in the pipeline writes. A continuous job's outputs
        are ``AssetSpec``s too, with no function to materialize them: the job runs outside Dagster
        (docs/streaming.md) and :func:`~upsert_kafka_ops.dagster.continuous_commits_sensor` reports
        each of its commits as a materialization.
    """
    pipe = load_pipeline(pipeline_file, pipeline)
    tr = translator or DagsterUpsertKafkaTranslator()
    kres = dict(kafka_resources or {})
    check_kafka_resources(pipe, kres)
    out: list[dg.AssetsDefinition | dg.AssetSpec] = []
    external: dict[dg.AssetKey, dg.AssetSpec] = {}
    plans = plan(pipe, jobs, tr)
    if partitions_def is not None:
        latest = [p.job for p in plans if not _is_snapshot(pipe.job(p.job))]
        if latest:
            raise SpecError(
                "partitions_def",
                f"{', '.join(map(repr, latest))} keeps a latest-state target: a partition run late or out of "
                "order would take it back in time.",
                "select only snapshot jobs (kind: backfill, a Delta target with as_of_column) with jobs=[...], "
                "or drop partitions_def and rebuild with run config until.",
            )
    for p in plans:
        for ds in p.external:
            spec = tr.get_asset_spec(ds)
            if group_name is not None:
                spec = spec.replace_attributes(group_name=group_name)
            external.setdefault(spec.key, spec)
        job = pipe.job(p.job)
        if job.continuous:  # it runs outside Dagster: its commits are reported (continuous_commits_sensor)
            out.extend(_asset_specs(job, p, tr, partitions_def, group_name))
            continue
        out.append(_job_asset(pipe, p, tr, kres, spark_runtime, row_count_check, partitions_def, group_name))
    return [*external.values(), *out]


def _is_snapshot(spec: AnyJob) -> bool:
    return isinstance(spec, BackfillJob) and spec.snapshot


def _checks_for(spec: AnyJob, row_count_check: bool) -> list[str]:
    names = []
    if isinstance(spec, MaterializeJob | BackfillJob):
        names.append(KEYS_CHECK)
        # a snapshot or history table holds more rows than live keys: verify checks those
        history = getattr(spec, "history", None) is not None
        if row_count_check and previewed(spec.target) and not _is_snapshot(spec) and not history:
            names.append(ROW_COUNT_CHECK)
    return names


_CHECK_DESCRIPTIONS = {
    KEYS_CHECK: "Every key read by the run was in a single partition (upsert-kafka's ordering "
    "guarantee holds only within a partition).",
    ROW_COUNT_CHECK: "The Delta or Iceberg target's row count equals the live keys of the topic up to "
    "the run's end offsets.",
}


def _asset_specs(
    spec: AnyJob,
    p: JobPlan,
    tr: DagsterUpsertKafkaTranslator,
    partitions_def: dg.TimeWindowPartitionsDefinition | None,
    group_name: str | None,
) -> list[dg.AssetSpec]:
    """The job's outputs as asset specs: its partitions, its group, and the job's spec as their code
    version (a changed spec shows its assets as stale in the UI)."""
    specs_kw: dict[str, Any] = {"partitions_def": partitions_def} if partitions_def is not None else {}
    specs_kw["code_version"] = hashlib.sha256(spec.model_dump_json().encode()).hexdigest()[:16]
    if group_name is not None:
        specs_kw["group_name"] = group_name
    return [tr.get_asset_spec(o, deps=p.deps).replace_attributes(**specs_kw) for o in p.outputs]


def _job_asset(
    pipe: Pipeline,
    p: JobPlan,
    tr: DagsterUpsertKafkaTranslator,
    kres: Mapping[str, str],
    spark_runtime: str | None,
    row_count_check: bool,
    partitions_def: dg.TimeWindowPartitionsDefinition | None,
    group_name: str | None,
) -> dg.AssetsDefinition:
    spec = pipe.job(p.job)
    specs = _asset_specs(spec, p, tr, partitions_def, group_name)
    check_names = _checks_for(spec, row_count_check)
    check_specs = [
        dg.AssetCheckSpec(name, asset=k, blocking=True, description=_CHECK_DESCRIPTIONS[name])
        for k in p.output_keys
        for name in check_names
    ]
    required = set(kres.values()) | ({spark_runtime} if spark_runtime else set())
    job = p.job

    @dg.multi_asset(
        name=op_name(job),
        specs=specs,
        check_specs=check_specs,
        pool=pool_name(job),
        backfill_policy=dg.BackfillPolicy.single_run(),
        required_resource_keys=required,
        op_tags={"upsert_kafka/job": job},
    )
    def _asset(
        context: dg.AssetExecutionContext, config: UpsertKafkaRunConfig
    ) -> Iterator[dg.MaterializeResult[Any]]:
        live = resolve_connections(pipe, kres, context.resources)
        res = runtime_resource(context, spark_runtime)
        runtime = res.runtime_spec() if res is not None else None
        if partitions_def is None:
            result, reported = run(context, live, job, config, runtime)
            link = res.history_link(result.get("spark_app_id", "")) if res is not None else None
            if link:  # the run's application in the Spark History Server
                url = {"upsert_kafka/spark_history": dg.MetadataValue.url(link)}
                reported = {k: {**reported.get(k, {}), **url} for k in p.output_keys}
            yield from results_for(context, live, job, p.output_keys, result, check_names, reported)
            return
        if config.until is not None or config.mode is not None:
            raise SpecError(
                "until",
                "a partitioned snapshot asset takes its end from the partition.",
                "launch the partitions (or a range) instead of setting until or mode.",
            )
        snapshots: dict[str, dict[str, Any]] = {}
        for key in context.partition_keys:  # one bounded snapshot per partition, in order
            window = partitions_def.time_window_for_partition_key(key)
            end_ms = int(window.end.timestamp() * 1000)
            one = config.model_copy(update={"until": str(end_ms)})
            result, reported = run(context, live, job, one, runtime)
            snapshots[key] = {
                "as_of": window.end.isoformat(),
                "records_read": result["records_read"],
                "rows": result["rows_upserted"],
            }
        yield from results_for(context, live, job, p.output_keys, result, check_names, reported, snapshots)

    return _asset


def runtime_resource(
    context: dg.AssetExecutionContext | dg.OpExecutionContext, key: str | None
) -> SparkRuntimeResource | None:
    """The run's :class:`SparkRuntimeResource` under resource ``key`` (None: no key, the local runtime)."""
    if not key:
        return None
    res = getattr(context.resources, key)
    if not isinstance(res, SparkRuntimeResource):
        raise SpecError("spark_runtime", f"resource {key!r} is not a SparkRuntimeResource.")
    return res


def _mode(value: str | None) -> Any:
    if value not in (None, "incremental", "full"):
        raise SpecError("mode", f"{value!r} is not a mode.", "use incremental or full.")
    return value


def run(
    context: dg.AssetExecutionContext | dg.OpExecutionContext,
    pipe: Pipeline,
    job: str,
    config: UpsertKafkaRunConfig,
    runtime: Runtime | None,
) -> tuple[dict[str, Any], dict[dg.AssetKey, Mapping[str, Any]]]:
    """Run the job (a bounded backfill when ``config.until`` is set): the run result as a dict, and
    the metadata the Spark driver reported through Dagster Pipes per asset (spark-submit runs)."""
    from upsert_kafka_ops.runtime import RunHandle, execute_job

    mode = _mode(config.mode)
    target = pipe
    if config.until is not None:
        if mode is not None:
            raise SpecError(
                "until", "a backfill always rebuilds: mode does not apply.", "give until or mode."
            )
        backfill = as_backfill(pipe.job(job), config.until, config.rewind)
        jobs = [backfill if j.name == job else j for j in pipe.jobs]
        target = Pipeline(connections=pipe.connections, jobs=jobs)
    context.log.info(
        f"upsert-kafka job {job!r}: running ({mode or 'backfill' if config.until else 'default mode'})"
    )
    handle = RunHandle()
    reported: dict[dg.AssetKey, Mapping[str, Any]] = {}
    try:
        with _to_event_log(context):
            if runtime is not None and runtime.launches_driver:  # the driver reports through Pipes
                result, reported = _submit_with_pipes(context, target, job, mode, runtime, handle, config)
            else:
                result = execute_job(target, job, mode=mode, runtime=runtime, handle=handle).to_dict()
    except BaseException:  # a terminated run (Dagster raises in the step): stop its Spark work too
        handle.kill()
        raise
    context.log.info(
        f"upsert-kafka job {job!r}: {result['records_read']} records read, {result['rows_upserted']} rows "
        f"upserted, {result['rows_deleted']} deleted, {result['records_written']} records written "
        f"({result['mode']}, {result['execution']}, {result['duration_s']:.1f}s)"
    )
    return result, reported


class _EventLogHandler(logging.Handler):
    """This package's log records into a run's Dagster event log, at their level."""

    def __init__(self, log: Any) -> None:
        super().__init__(logging.INFO)
        self.log = log

    def emit(self, record: logging.LogRecord) -> None:
        try:
            level = (
                "error"
                if record.levelno >= logging.ERROR
                else "warning"
                if record.levelno >= logging.WARNING
                else "info"
            )
            getattr(self.log, level)(self.format(record))
        except Exception:  # a log line never breaks a run
            self.handleError(record)


@contextlib.contextmanager
def _to_event_log(context: dg.AssetExecutionContext | dg.OpExecutionContext) -> Iterator[None]:
    """The run's progress lines (the lock wait, the phases, read progress) and the Spark driver's
    warnings in the Dagster event log while the job runs, as the Airflow task log has them."""
    package = logging.getLogger("upsert_kafka_ops")
    handler = _EventLogHandler(context.log)
    level = package.level
    package.addHandler(handler)
    if package.getEffectiveLevel() > logging.INFO:
        package.setLevel(logging.INFO)
    try:
        yield
    finally:
        package.removeHandler(handler)
        package.setLevel(level)


def _submit_with_pipes(
    context: dg.AssetExecutionContext | dg.OpExecutionContext,
    pipe: Pipeline,
    job: str,
    mode: Any,
    runtime: Runtime,
    handle: Any,
    config: UpsertKafkaRunConfig,
) -> tuple[dict[str, Any], dict[dg.AssetKey, Mapping[str, Any]]]:
    """spark-submit with a Dagster Pipes session: its bootstrap variables go into the driver's
    environment (client mode: the driver runs here and writes the messages file; cluster mode
    needs the file on storage both sides see), the driver reports metadata and log lines."""
    from upsert_kafka_ops.runtime import execute_job

    extras = {"job": job, "mode": mode, "until": config.until, "rewind": config.rewind}
    with dg.open_pipes_session(
        context=context,
        context_injector=dg.PipesEnvContextInjector(),
        message_reader=dg.PipesTempFileMessageReader(),
        extras=extras,
    ) as session:
        rt = runtime.with_driver_env(session.get_bootstrap_env_vars())
        result = execute_job(pipe, job, mode=mode, runtime=rt, handle=handle).to_dict()
    reported: dict[dg.AssetKey, Mapping[str, Any]] = {}
    for r in session.get_results(implicit_materializations=False):
        if isinstance(r, dg.MaterializeResult) and r.asset_key is not None:
            reported[r.asset_key] = dict(r.metadata or {})
    if not reported:
        context.log.warning(
            f"upsert-kafka job {job!r}: the driver reported nothing through Pipes; "
            "the metadata comes from its run result."
        )
    return result, reported


def local_spark(jar_groups: tuple[str, ...] = ("spark",)) -> Any:
    """The session the metadata reads use: the core's (the active one, else a local one stopped after)."""
    from upsert_kafka_ops.engine.session import session_for

    return session_for("dagster-metadata", "local[1]", jar_groups=jar_groups)


def _cell(v: Any) -> Any:
    return v if v is None or isinstance(v, bool | int | float | str) else str(v)


def _table_facts(pipe: Pipeline, job: str, target: WarehouseTarget) -> tuple[int, dg.MetadataValue]:
    from upsert_kafka_ops.jobs.targets import read_target

    with local_spark(pipe.jar_groups(job)) as spark:
        df = read_target(spark, pipe, target)
        count = df.count()
        rows = df.limit(PREVIEW_ROWS).collect()
        schema = dg.TableSchema(
            columns=[dg.TableColumn(f.name, f.dataType.simpleString()) for f in df.schema]
        )
    records = [dg.TableRecord({k: _cell(v) for k, v in r.asDict().items()}) for r in rows]
    return count, dg.MetadataValue.table(records=records, schema=schema)


def _live_keys(pipe: Pipeline, spec: MaterializeJob | BackfillJob, end: dict[str, dict[str, int]]) -> int:
    from upsert_kafka_ops.jobs.to_warehouse import fold_source

    with local_spark() as spark:
        conn = pipe.connections[spec.source.connection]
        read = fold_source(spark, spec.source, conn, until=end or None)
        try:
            return int(read.df.count())
        finally:
            read.release()


def results_for(
    context: dg.AssetExecutionContext,
    pipe: Pipeline,
    job: str,
    keys: list[dg.AssetKey],
    result: dict[str, Any],
    check_names: list[str],
    reported: Mapping[dg.AssetKey, Mapping[str, Any]] | None = None,
    snapshots: Mapping[str, Any] | None = None,
) -> Iterator[dg.MaterializeResult[Any]]:
    """One ``MaterializeResult`` per output: the run's metadata (as the Spark driver reported it
    through Pipes, else from the run result), lag after the run, the row count and preview of a Delta
    or Iceberg table, and the check results."""
    from upsert_kafka_ops.jobs.gates import new_data

    spec = pipe.job(job)
    read = result.get("read") or {}
    meta: dict[str, Any] = {
        k: dg.MetadataValue.json(v) if isinstance(v, dict) else v
        for k, v in result_metadata(result, job).items()
    }
    if not isinstance(spec, PublishJob):
        try:
            lag = new_data(pipe, job)
            meta["upsert_kafka/lag_after_run"] = lag.new_records
            meta["upsert_kafka/lag_after_run_partitions"] = dg.MetadataValue.json(lag.partitions)
        except UpsertKafkaOpsError as exc:  # the run succeeded: say why the lag is missing, do not fail it
            context.log.warning(f"upsert-kafka job {job!r}: lag after the run unknown: {exc}")
    row_count: int | None = None
    target = getattr(spec, "target", None)
    if snapshots is not None:  # snapshot runs: rows per partition; the table holds every snapshot
        meta["upsert_kafka/snapshots"] = dg.MetadataValue.json(dict(snapshots))
    elif previewed(target):
        row_count, preview = _table_facts(pipe, job, target)
        meta["dagster/row_count"] = row_count
        meta["upsert_kafka/preview"] = preview
    for key in keys:
        checks = []
        if KEYS_CHECK in check_names:
            n = int(read.get("keys_in_several_partitions", 0))
            checks.append(
                dg.AssetCheckResult(
                    check_name=KEYS_CHECK,
                    asset_key=key,
                    passed=n == 0,
                    metadata={
                        "keys_in_several_partitions": n,
                        "distinct_keys": int(read.get("distinct_keys", 0)),
                    },
                    description="every key in one partition"
                    if n == 0
                    else f"{n} key(s) were found in more than one partition: their order is not defined.",
                )
            )
        if ROW_COUNT_CHECK in check_names and isinstance(spec, MaterializeJob | BackfillJob):
            live = _live_keys(pipe, spec, result["end_offsets"])
            checks.append(
                dg.AssetCheckResult(
                    check_name=ROW_COUNT_CHECK,
                    asset_key=key,
                    passed=row_count == live,
                    metadata={
                        "target_rows": row_count if row_count is not None else -1,
                        "live_keys": live,
                        "end_offsets": dg.MetadataValue.json(result["end_offsets"]),
                    },
                    description=f"target rows {row_count}, live keys of the topic {live}",
                )
            )
        own = {**meta, **(reported or {}).get(key, {})}
        yield dg.MaterializeResult(asset_key=key, metadata=own, check_results=checks)


def result_json(result: dict[str, Any]) -> str:
    return json.dumps(result, sort_keys=True, default=str)
