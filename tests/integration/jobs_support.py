"""Shared helpers for the job tests: a users changelog producer, pipelines, and the oracle's table."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from tests.integration.oracle import fold, read_all

from upsert_kafka_ops.jobs import Pipeline

COLUMNS = [
    {"name": "id", "type": "BIGINT"},
    {"name": "name", "type": "STRING"},
    {"name": "region", "type": "STRING"},
    {"name": "score", "type": "DECIMAL(10, 2)"},
]


def source(topic: str, servers: str) -> dict[str, Any]:
    return {
        "connection": "main",
        "table": {
            "name": "users",
            "options": {
                "connector": "upsert-kafka",
                "topic": topic,
                "key.format": "json",
                "value.format": "json",
            },
            "columns": COLUMNS,
            "primary_key": ["id"],
        },
    }


def pipeline(servers: str, jobs: list[dict[str, Any]]) -> Pipeline:
    return Pipeline.model_validate({"connections": {"main": {"bootstrap_servers": servers}}, "jobs": jobs})


def produce(
    servers: str,
    topic: str,
    changes: Iterable[tuple[int, dict[str, Any] | None]],
    timestamp_ms: int | None = None,
) -> int:
    """Write (id, row or None) records, key {"id": id} (with this record timestamp, if given);
    returns how many were written."""
    producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True, "linger.ms": 5})
    n = 0
    stamp = {"timestamp": timestamp_ms} if timestamp_ms is not None else {}
    for key, row in changes:
        value = None if row is None else json.dumps({"id": key, **row}).encode()
        producer.produce(topic, key=json.dumps({"id": key}).encode(), value=value, **stamp)
        n += 1
    assert producer.flush(30) == 0
    return n


def random_changes(rnd: random.Random, n: int, keys: int) -> list[tuple[int, dict[str, Any] | None]]:
    out: list[tuple[int, dict[str, Any] | None]] = []
    for _ in range(n):
        k = rnd.randrange(keys)
        if rnd.random() < 0.15:
            out.append((k, None))
        else:
            out.append(
                (
                    k,
                    {
                        "name": f"user-{rnd.randrange(1000)}",
                        "region": rnd.choice(["Berlin", "Paris", "Beijing"]),
                        "score": f"{rnd.randrange(100000) / 100:.2f}",
                    },
                )
            )
    return out


def oracle_table(servers: str, topic: str, before_ms: int | None = None) -> dict[int, tuple[str, str, str]]:
    """id -> (name, region, score as text with 2 decimals), from a plain-Python fold (of the
    records with a timestamp before ``before_ms``, if given)."""
    records = read_all(servers, [topic])
    if before_ms is not None:
        records = [r for r in records if r.timestamp < before_ms]
    state = fold(records, lambda k: json.loads(k)["id"], json.loads)
    return {k: (v["name"], v["region"], f"{float(v['score']):.2f}") for k, v in state.items()}


def rows_as_table(rows: Iterable[Any]) -> dict[int, tuple[str, str, str]]:
    return {int(r[0]): (r[1], r[2], f"{float(r[3]):.2f}") for r in rows}


def cli_run(pipeline_file: Path, jars_dir: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """``upsert-kafka-ops run PIPELINE --json ARGS`` in a new process (with ``env`` added to this one's)."""
    return subprocess.Popen(
        [sys.executable, "-m", "upsert_kafka_ops.cli", "run", str(pipeline_file), "--json", *args],
        env={**os.environ, "UPSERT_KAFKA_OPS_JARS_DIR": str(jars_dir), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
