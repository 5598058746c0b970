"""How pipeline datasets become Dagster assets: keys, groups, tags, owners, descriptions, kinds.

Subclass :class:`DagsterUpsertKafkaTranslator` and override a ``get_*`` method, as with
``DagsterDbtTranslator``::

    class MyTranslator(DagsterUpsertKafkaTranslator):
        def get_group_name(self, dataset):
            return "streaming"
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

import dagster as dg
from upsert_kafka_ops.jobs.datasets import Dataset
from upsert_kafka_ops.pipeline import Pipeline, target_table
from upsert_kafka_ops.spec.cadence import cron_expression, shortest_gap

_UNSAFE = re.compile(r"[^A-Za-z0-9_\-.]")
#: the least freshness window of a continuous job's outputs (seconds)
CONTINUOUS_FRESH_S = 300.0


@dataclass(frozen=True)
class UpsertKafkaDataset:
    """A dataset of a pipeline as the translator sees it.

    ``job`` is the name of the pipeline job that writes it, or ``None`` for an external source (a
    topic or table nobody in the pipeline writes). ``kind`` is ``topic`` or ``table``; ``dataset``
    is the OpenLineage identifier (``kafka://host:port`` + topic, tables by URI)."""

    dataset: Dataset
    kind: Literal["topic", "table"]
    job: str | None
    pipeline: Pipeline

    @property
    def topic(self) -> str | None:
        return self.dataset.name if self.kind == "topic" else None

    @property
    def storage(self) -> str:
        """``kafka``, or the table's storage: ``delta``, ``postgres``, ``parquet``, ``file``..."""
        if self.kind == "topic":
            return "kafka"
        if self.job is not None:
            target = getattr(self.pipeline.job(self.job), "target", None)
            kind = getattr(target, "kind", None)
            if isinstance(kind, str):
                return kind
        return self.dataset.namespace.split(":", 1)[0]


def _written_columns(dataset: UpsertKafkaDataset) -> list[tuple[str, str]]:
    """The columns the writing job gives the dataset (Flink SQL types): a warehouse table holds its
    source table's columns, a sink topic its sink table's; none for an external source."""
    if dataset.job is None:
        return []
    spec = dataset.pipeline.job(dataset.job)
    sink = getattr(spec, "sink", None)
    table = sink.table if sink is not None else getattr(getattr(spec, "source", None), "table", None)
    if getattr(spec, "history", None) is not None:
        table = target_table(spec)  # type: ignore[arg-type]
    columns = getattr(table, "columns", None) or []
    return [(c.name, c.type) for c in columns if not getattr(c, "metadata", None)]


def _table_name(dataset: Dataset) -> list[str]:
    parts = [p for p in re.split(r"[/.]", dataset.name) if p]
    return parts[-2:] or ["table"]


class DagsterUpsertKafkaTranslator:
    """The default mapping: a topic is ``["kafka", <topic>]``, a warehouse table is
    ``["warehouse", <last two parts of its path or name>]`` (a Delta table at
    ``/data/warehouse/users`` is ``warehouse/warehouse/users``, PostgreSQL ``db.public.users`` is
    ``warehouse/public/users``): the key depends on the dataset only, so a table one job writes and
    another reads is one asset; the group is the writing job's name (external
    sources: ``kafka_sources``)."""

    def get_asset_key(self, dataset: UpsertKafkaDataset) -> dg.AssetKey:
        if dataset.kind == "topic":
            return dg.AssetKey(["kafka", _UNSAFE.sub("_", dataset.dataset.name)])
        return dg.AssetKey(["warehouse", *(_UNSAFE.sub("_", p) for p in _table_name(dataset.dataset))])

    def get_group_name(self, dataset: UpsertKafkaDataset) -> str | None:
        if dataset.job is None:
            return "kafka_sources" if dataset.kind == "topic" else None
        return re.sub(r"\W", "_", dataset.job)

    def get_description(self, dataset: UpsertKafkaDataset) -> str:
        where = dataset.dataset.uri
        if dataset.job is None:
            return f"External {dataset.kind} {where} (no job of the pipeline writes it)."
        spec = dataset.pipeline.job(dataset.job)
        text = f"{dataset.kind.capitalize()} {where}, written by the {spec.kind} job {spec.name!r}."
        return f"{spec.description}\n\n{text}" if spec.description else text

    def get_tags(self, dataset: UpsertKafkaDataset) -> dict[str, str]:
        tags: dict[str, str] = {"upsert_kafka/kind": dataset.kind}
        if dataset.job is not None:
            tags["upsert_kafka/job"] = dataset.job
        return tags

    def get_owners(self, dataset: UpsertKafkaDataset) -> list[str]:
        return []

    def get_kinds(self, dataset: UpsertKafkaDataset) -> set[str]:
        kinds = {dataset.storage}
        if dataset.job is not None:
            kinds.add("spark")
        return kinds

    def get_metadata(self, dataset: UpsertKafkaDataset) -> dict[str, object]:
        meta: dict[str, object] = {"dagster/uri": dataset.dataset.uri}
        if dataset.kind == "topic":
            meta["kafka/topic"] = dataset.dataset.name
        columns = _written_columns(dataset)
        if columns:
            meta["dagster/column_schema"] = dg.TableSchema(
                columns=[dg.TableColumn(name, type_) for name, type_ in columns]
            )
        return meta

    def get_freshness_policy(self, dataset: UpsertKafkaDataset) -> dg.FreshnessPolicy | None:
        """From the writing job's ``schedule:``: fresh when updated since one interval before the last
        tick (the deadline). Dagster bounds the interval by the schedule's shortest gap, so after a
        longer gap (a weekday job's weekend) the asset shows stale from the tick until that tick's run
        ends; :func:`upsert_kafka_freshness_checks` allow the longest gap. A continuous materialize
        job's outputs must have been updated (a commit its sensor reports) within 30 intervals and at
        least :data:`CONTINUOUS_FRESH_S` seconds. ``None`` for external datasets, unscheduled jobs and
        continuous topic-to-topic jobs (no commit of theirs is reported: their lag checks judge them)."""
        if dataset.job is None:
            return None
        job = dataset.pipeline.job(dataset.job)
        if job.continuous and job.trigger is not None and job.kind == "materialize":  # reported commits
            window = max(CONTINUOUS_FRESH_S, 30 * job.trigger.interval_s)
            return dg.FreshnessPolicy.time_window(fail_window=timedelta(seconds=window))
        schedule = job.schedule
        if schedule is None:
            return None
        return dg.FreshnessPolicy.cron(
            deadline_cron=cron_expression(schedule), lower_bound_delta=shortest_gap(schedule), timezone="UTC"
        )

    def get_asset_spec(
        self, dataset: UpsertKafkaDataset, deps: list[dg.AssetKey] | None = None
    ) -> dg.AssetSpec:
        return dg.AssetSpec(
            key=self.get_asset_key(dataset),
            deps=deps or [],
            description=self.get_description(dataset),
            group_name=self.get_group_name(dataset),
            tags=self.get_tags(dataset),
            owners=self.get_owners(dataset),
            kinds=self.get_kinds(dataset),
            metadata=self.get_metadata(dataset),
            freshness_policy=self.get_freshness_policy(dataset),
        )
