"""Lag and run results as versioned JSON documents (no secrets: offsets, counts and names only)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from upsert_kafka_ops.kafka.evaluation import STATUS_ORDER, LagStatus
from upsert_kafka_ops.kafka.lag import LagReport

#: Version of the documents' shape; bump it when a field changes meaning or is removed.
DOCUMENT_VERSION = 1


def lag_document(report: LagReport, status: LagStatus | None = None) -> dict[str, Any]:
    """``{"version", "kind": "lag", "report": ..., "status": ...}``; ``status`` is null without one."""
    return {
        "version": DOCUMENT_VERSION,
        "kind": "lag",
        "report": report.to_dict(),
        "status": None if status is None else status.to_dict(),
    }


def run_document(result: Any) -> dict[str, Any]:
    """A run result (``engine.results.RunResult`` or its ``to_dict()``) as a document."""
    data = result.to_dict() if hasattr(result, "to_dict") else dict(result)
    if not isinstance(data, Mapping):
        raise TypeError("a run result must be a RunResult or a mapping")
    return {"version": DOCUMENT_VERSION, "kind": "run", "result": dict(data)}


def jobs_lag_document(jobs: Sequence[tuple[Any, LagStatus | None]]) -> dict[str, Any]:
    """A pipeline's jobs' lag: ``{"version", "kind": "jobs-lag", "status", "jobs": [...]}``.

    Each entry is a ``jobs.lag.JobLag`` (or its ``to_dict()``) with its status: the entry's fields
    (``job``, ``kind``, ``offsets_from``, ``group``, ``target``, ``stored_run``, ``error``,
    ``report``) plus ``status``. The top ``status`` is the worst job status; ``ERR`` when a job's lag
    could not be read.
    """
    out = []
    worst = "NOTFOUND"
    for job, status in jobs:
        data = dict(job.to_dict() if hasattr(job, "to_dict") else job)
        data["status"] = None if status is None else status.to_dict()
        level = "ERR" if data.get("error") else (status.status if status is not None else "NOTFOUND")
        if STATUS_ORDER[level] > STATUS_ORDER[worst]:
            worst = level
        out.append(data)
    return {"version": DOCUMENT_VERSION, "kind": "jobs-lag", "status": worst, "jobs": out}


def pipelines_lag_document(pipelines: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Several pipeline files' jobs' lag: ``{"version", "kind": "pipelines-lag", "status", "pipelines":
    {name: jobs-lag document}}``; the top ``status`` is the worst of theirs."""
    worst = max((d["status"] for d in pipelines.values()), key=STATUS_ORDER.__getitem__, default="NOTFOUND")
    return {
        "version": DOCUMENT_VERSION,
        "kind": "pipelines-lag",
        "status": worst,
        "pipelines": dict(pipelines),
    }
