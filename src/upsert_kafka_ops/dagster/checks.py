"""The ``matches_topic`` asset check: a warehouse table compared with the fold of its topic.

Each warehouse table a materialize or backfill job keeps at its topic's latest state (not a topic
target, not a snapshot table) gets one check that calls
:func:`upsert_kafka_ops.jobs.verify.verify_job` in the check's process on local Spark: counts, a
hash of each row per key, and the first keys of each difference as metadata. Run it from the
asset's page, in a job of its own, or on a schedule (``dg.build_asset_check_job`` or an
``AssetSelection.checks_for_assets`` selection); it re-reads the topic up to the table's stored
offsets, so it costs about one full run.
"""

from collections.abc import Mapping, Sequence
from pathlib import Path

import dagster as dg
from upsert_kafka_ops.dagster._plan import check_kafka_resources, load_pipeline, plan, resolve_connections
from upsert_kafka_ops.dagster.assets import local_spark
from upsert_kafka_ops.dagster.translator import DagsterUpsertKafkaTranslator
from upsert_kafka_ops.jobs.verify import NotVerifiableError, refusal, verify_job
from upsert_kafka_ops.pipeline import Pipeline

VERIFY_CHECK = "matches_topic"


def upsert_kafka_verify_checks(
    *,
    pipeline_file: str | Path | None = None,
    pipeline: Pipeline | None = None,
    jobs: Sequence[str] | None = None,
    translator: DagsterUpsertKafkaTranslator | None = None,
    kafka_resources: Mapping[str, str] | None = None,
    show: int = 10,
    blocking: bool = False,
) -> list[dg.AssetChecksDefinition]:
    """A ``matches_topic`` check on each warehouse table a job of the pipeline keeps at its topic's
    latest state. ``show``: keys listed per kind of difference. Severity ERROR: a difference means
    the table no longer says what the topic says."""
    pipe = load_pipeline(pipeline_file, pipeline)
    kres = dict(kafka_resources or {})
    check_kafka_resources(pipe, kres)
    out: list[dg.AssetChecksDefinition] = []
    for p in plan(pipe, jobs, translator or DagsterUpsertKafkaTranslator()):
        if refusal(pipe.job(p.job)) is not None:  # no latest-state warehouse table to compare
            continue
        out.extend(_verify_check(pipe, p.job, key, kres, show, blocking) for key in p.output_keys)
    return out


def _verify_check(
    pipe: Pipeline, job: str, key: dg.AssetKey, kres: Mapping[str, str], show: int, blocking: bool
) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=key,
        name=VERIFY_CHECK,
        blocking=blocking,
        required_resource_keys=set(kres.values()),
        description=f"The table equals the fold of upsert-kafka job {job!r}'s topic up to the offsets "
        "stored with it (row hashes per key).",
    )
    def _check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        live = resolve_connections(pipe, kres, context.resources)
        try:
            with local_spark(live.jar_groups(job)) as spark:
                outcome = verify_job(spark, live, job, show=show)
        except NotVerifiableError as exc:
            return dg.AssetCheckResult(
                passed=False, severity=dg.AssetCheckSeverity.WARN, description=str(exc)
            )
        summary = outcome.summary()
        context.log.info(f"upsert-kafka verify of {job!r}: {summary}")
        return dg.AssetCheckResult(
            passed=outcome.ok,
            severity=dg.AssetCheckSeverity.ERROR,
            description=summary,
            metadata={
                "table_rows": outcome.table_rows,
                "topic_rows": outcome.topic_rows,
                **{f"{kind}_keys": n for kind, n in outcome.differences.items()},
                "keys": dg.MetadataValue.json(outcome.to_dict()["keys"]),
                "stored_offsets": dg.MetadataValue.json(outcome.offsets),
                "run": outcome.run,
                "duration_s": outcome.duration_s,
            },
        )

    return _check
