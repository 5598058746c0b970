"""A pipeline's jobs as Dagster asset keys: which job writes which dataset, what each job reads.
Shared by the asset factory, the checks and the sensors so they agree on keys."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
from upsert_kafka_ops.dagster.translator import DagsterUpsertKafkaTranslator, UpsertKafkaDataset
from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.jobs.datasets import Dataset, job_datasets
from upsert_kafka_ops.pipeline import AnyJob, MaintainJob, Pipeline


def load_pipeline(pipeline_file: str | Path | None, pipeline: Pipeline | None) -> Pipeline:
    if (pipeline_file is None) == (pipeline is None):
        raise SpecError(
            "pipeline",
            "give exactly one of pipeline_file or pipeline.",
            "e.g. pipeline_file='pipelines/demo.yaml'.",
        )
    return pipeline if pipeline is not None else Pipeline.load(pipeline_file)  # type: ignore[arg-type]


def definition_name(prefix: str, job: str) -> str:
    """A sensor's or schedule's name for ``job`` (Dagster names allow letters, digits and '_')."""
    return prefix + "_" + "".join(c if c.isalnum() else "_" for c in job)


def is_maintenance(job: AnyJob) -> bool:
    """Whether ``job`` is a maintain job: a Dagster job of one op, not an asset."""
    return isinstance(job, MaintainJob)


def _kind(d: Dataset) -> str:
    return "topic" if d.namespace.startswith("kafka://") else "table"


@dataclass(frozen=True)
class JobPlan:
    job: str
    outputs: list[UpsertKafkaDataset]
    output_keys: list[dg.AssetKey]
    deps: list[dg.AssetKey]
    external: list[UpsertKafkaDataset]  # inputs no job of the pipeline writes


def plan(
    pipeline: Pipeline, jobs: Sequence[str] | None, translator: DagsterUpsertKafkaTranslator
) -> list[JobPlan]:
    """One :class:`JobPlan` per selected job (file order; by default every job but the maintain
    jobs, which make no asset: :func:`upsert_kafka_ops.dagster.upsert_kafka_maintenance_jobs`)."""
    names = [j.name for j in pipeline.jobs]
    selected = list(jobs) if jobs is not None else [j.name for j in pipeline.jobs if not is_maintenance(j)]
    unknown = [j for j in selected if j not in names]
    if unknown:
        raise SpecError(
            "jobs",
            f"{', '.join(map(repr, unknown))} is not a job of the pipeline.",
            f"use some of: {', '.join(names)}.",
        )
    maintained = [j for j in selected if is_maintenance(pipeline.job(j))]
    if maintained:
        raise SpecError(
            "jobs",
            f"{', '.join(map(repr, maintained))} is a maintain job: it makes no asset (it rewrites a table's "
            "files, not its data).",
            "leave it out here; upsert_kafka_maintenance_jobs gives it a Dagster job and its schedule.",
        )
    io = {n: job_datasets(pipeline, n) for n in names}
    writer: dict[tuple[str, str], str] = {}
    for n, (_, outputs) in io.items():
        for d in outputs:
            writer.setdefault((d.namespace, d.name), n)
    out: list[JobPlan] = []
    seen: dict[dg.AssetKey, str] = {}
    for n in selected:
        inputs, outputs = io[n]
        if not outputs:
            raise SpecError(f"jobs.{n}", "the job has no output dataset to make an asset of.")
        outs = [UpsertKafkaDataset(d, _kind(d), n, pipeline) for d in outputs]  # type: ignore[arg-type]
        keys = [translator.get_asset_key(o) for o in outs]
        for k in keys:
            if k in seen:
                raise SpecError(
                    "translator",
                    f"jobs {seen[k]!r} and {n!r} both map to asset key {k.to_user_string()}.",
                    "override get_asset_key so that every output has its own key.",
                )
            seen[k] = n
        deps: list[dg.AssetKey] = []
        external: list[UpsertKafkaDataset] = []
        for d in inputs:
            w = writer.get((d.namespace, d.name))
            if w == n:  # a job reading its own output: no self-dependency
                continue
            ds = UpsertKafkaDataset(d, _kind(d), w, pipeline)  # type: ignore[arg-type]
            if w is None:
                external.append(ds)
            deps.append(translator.get_asset_key(ds))
        out.append(JobPlan(n, outs, keys, list(dict.fromkeys(deps)), external))
    return out


def resolve_connections(pipeline: Pipeline, kafka_resources: Mapping[str, str], resources: Any) -> Pipeline:
    """``pipeline`` with the connections named in ``kafka_resources`` taken from Dagster resources."""
    from upsert_kafka_ops.dagster.resources import UpsertKafkaResource

    conns = {}
    for name, key in kafka_resources.items():
        res = getattr(resources, key, None)
        if res is None:
            raise SpecError(
                f"kafka_resources.{name}",
                f"resource {key!r} was not provided to this evaluation.",
                f"bind resources={{{key!r}: UpsertKafkaResource(...)}} in Definitions, and list "
                f"{key!r} in the definition's required_resource_keys.",
            )
        if not isinstance(res, UpsertKafkaResource):
            raise SpecError(
                f"kafka_resources.{name}",
                f"resource {key!r} is a {type(res).__name__}, not an UpsertKafkaResource.",
                f"bind resources={{{key!r}: UpsertKafkaResource(...)}} in Definitions.",
            )
        conns[name] = res.connection()
    return pipeline.with_connections(conns) if conns else pipeline


def check_kafka_resources(pipeline: Pipeline, kafka_resources: Mapping[str, str]) -> None:
    unknown = sorted(set(kafka_resources) - set(pipeline.connections))
    if unknown:
        raise SpecError(
            "kafka_resources",
            f"{', '.join(map(repr, unknown))} is not a connection of the pipeline.",
            f"use one of: {', '.join(sorted(pipeline.connections))}.",
        )
