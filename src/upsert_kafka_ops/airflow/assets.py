"""Airflow Assets for what a job reads and writes, so the Assets page shows the flow and a DAG can be
scheduled on an upstream topic or table (``schedule=[job_assets(...)[1][0]]``).

An asset's name and URI are the dataset's OpenLineage name as one URI (``kafka://host:port/topic``,
``file:///path``, ``s3://bucket/key``, ``postgres://host:port/db.schema.table``), the names the
task's OpenLineage events use. The operators declare them as inlets and outlets when the DAG is
parsed, from the pipeline file and the Airflow connections the task names (a connection that cannot
be read at parse time leaves the file's own ``bootstrap_servers``).
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import Asset

from upsert_kafka_ops.airflow._jobs import JobRef
from upsert_kafka_ops.errors import UpsertKafkaOpsError
from upsert_kafka_ops.jobs.datasets import Dataset, job_datasets
from upsert_kafka_ops.pipeline import Pipeline

_LOG = logging.getLogger(__name__)


def dataset_asset(dataset: Dataset) -> Asset:
    """The Airflow Asset of an OpenLineage dataset: name and URI both the dataset's URI."""
    return Asset(name=dataset.uri, uri=dataset.uri)


def job_assets(pipeline: Pipeline, job: str) -> tuple[list[Asset], list[Asset]]:
    """(inlets, outlets): the topics and tables ``job`` of ``pipeline`` reads and writes."""
    inputs, outputs = job_datasets(pipeline, job)
    return [dataset_asset(d) for d in inputs], [dataset_asset(d) for d in outputs]


def pipeline_job_assets(
    pipeline_file: str,
    job_name: str | None = None,
    *,
    kafka_config_id: str | None = None,
    kafka_config_ids: dict[str, str] | None = None,
) -> tuple[list[Asset], list[Asset]]:
    """(inlets, outlets) of a pipeline file's job, named as the operator for the same arguments names
    them: e.g. a DAG's ``schedule=AssetAny(*inlets)``."""
    found = declared_assets(JobRef.of(None, pipeline_file, job_name, kafka_config_id, kafka_config_ids))
    if found is None:
        pipeline, name = JobRef.of(None, pipeline_file, job_name).resolve(airflow_connections=False)
        return job_assets(pipeline, name)  # raises the file's error
    return found


def declared_assets(ref: JobRef) -> tuple[list[Asset], list[Asset]] | None:
    """The assets an operator declares for its job at parse time, or None when the job's file is
    templated or cannot be read yet (the task then declares none; its run still reports lineage)."""
    if ref.pipeline_file is None or "{{" in ref.pipeline_file or "{%" in ref.pipeline_file:
        return None
    try:
        try:  # one read of the file when the task's Airflow connections can be read while parsing
            pipeline, name = ref.resolve()
        except UpsertKafkaOpsError:
            raise
        except Exception as exc:  # an Airflow connection not readable while parsing: the file's servers
            _LOG.debug("assets of %s from the file's own connections: %s", ref.pipeline_file, exc)
            pipeline, name = ref.resolve(airflow_connections=False)
    except UpsertKafkaOpsError as exc:
        _LOG.warning("no assets declared for %s: %s", ref.pipeline_file, exc)
        return None
    return job_assets(pipeline, name)


def assets_of(found: tuple[list[Asset], list[Asset]] | None, kwargs: dict[str, Any]) -> None:
    """Set ``inlets``/``outlets`` in an operator's ``kwargs`` unless the DAG author gave them."""
    if found is not None:
        kwargs.setdefault("inlets", found[0])
        kwargs.setdefault("outlets", found[1])
