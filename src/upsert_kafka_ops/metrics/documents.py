"""Lag and run results as versioned JSON documents (no secrets: offsets, counts and names only)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from upsert_kafka_ops.kafka.evaluation import LagStatus
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
