"""Helpers of the Dagster tests: a one-job pipeline on a fresh topic, metadata and check lookups."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from tests.integration.jobs_support import pipeline, source

import dagster as dg
from upsert_kafka_ops.jobs import Pipeline

RESOURCES = {"main": "kafka"}


def one_job(servers: str, topic: str, path: Path) -> Pipeline:
    job = {"name": f"load-{topic}", "kind": "materialize", "source": source(topic, servers),
           "target": {"kind": "delta", "path": str(path)}}  # fmt: skip
    return pipeline(servers, [job])


def metadata(result: dg.ExecuteInProcessResult, op: str) -> dict[str, Any]:
    """The first materialization's metadata of ``op``, as plain values."""
    (mat,) = result.asset_materializations_for_node(op)
    return {k: getattr(v, "value", v) for k, v in mat.metadata.items()}


def checks(result: dg.ExecuteInProcessResult) -> dict[str, bool]:
    return {e.check_name: e.passed for e in result.get_asset_check_evaluations()}


def produce_at(servers: str, topic: str, partition: int, key: int, row: dict[str, Any] | None) -> None:
    """One record to an explicit partition (what a producer with a custom partitioner would do)."""
    producer = Producer({"bootstrap.servers": servers})
    value = None if row is None else json.dumps({"id": key, **row}).encode()
    producer.produce(topic, key=json.dumps({"id": key}).encode(), value=value, partition=partition)
    assert producer.flush(30) == 0
