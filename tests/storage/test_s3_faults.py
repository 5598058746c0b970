"""Runs on S3 targets (Delta, Parquet, Iceberg) killed at the named fault points (a real CLI process SIGKILLs itself), then
rerun in this process: the killed run's lease expires, and the table equals the oracle's with the
stored offsets at the topic's end, nothing lost or doubled.

The points are those where S3 holds something of the killed run: after its commit (Delta, Parquet,
Iceberg) and after Parquet's data files, with its lease left behind. A run killed after its read
has written nothing to S3 but its lease, which ``parquet-after-data`` leaves too; that point comes
before any target's write, and is killed and rerun on a local Delta table
(``tests/integration/test_jobs_faults.py``, every Spark line's lane) and a history table."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from tests.devservices import LocalS3
from tests.integration.jobs_support import oracle_table, produce, random_changes, rows_as_table, source
from tests.storage.test_iceberg import iceberg_catalogs
from tests.storage.test_s3_targets import end_offsets, pipeline_file

from upsert_kafka_ops.jobs import Pipeline, run_job
from upsert_kafka_ops.jobs import object_lock as object_lock_module
from upsert_kafka_ops.jobs.object_lock import lock_key
from upsert_kafka_ops.jobs.targets import read_stored_offsets, read_target
from upsert_kafka_ops.local import LocalKafka, LocalPostgres


@pytest.mark.parametrize(
    ("kind", "point"),
    [
        ("delta", "after-commit"),
        ("parquet", "after-data"),
        ("parquet", "after-commit"),
        ("iceberg", "after-commit"),
    ],
)
def test_a_run_on_s3_killed_at_a_fault_point_is_repaired_by_the_rerun(
    kind: str,
    point: str,
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    s3: LocalS3,
    spark: SparkSession,
    postgres: LocalPostgres,
    jars_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    servers, topic = kafka.bootstrap_servers, new_topic(partitions=2)
    rnd = random.Random(f"{kind}-{point}")
    produce(servers, topic, random_changes(rnd, 200, 30))
    prefix = f"f{uuid.uuid4().hex[:8]}"
    if kind == "iceberg":  # in a JDBC catalog on PostgreSQL, the table's files on S3
        sections = {"catalogs": {"db": iceberg_catalogs(postgres, prefix, monkeypatch)["db"]}}
        target: dict[str, Any] = {"kind": "iceberg", "catalog": "db", "table": "crm.users"}
    else:
        sections, target = {}, {"kind": kind, "path": f"s3a://lake/{prefix}/users", "storage": "lake"}
    job = {"name": "users", "kind": "materialize", "source": source(topic, servers), "target": target}
    file = pipeline_file(tmp_path, s3, servers, [job], **sections)
    pipeline = Pipeline.load(file)
    path = str(pipeline.location_of(pipeline.job("users").target))  # type: ignore[union-attr]
    assert run_job(pipeline, "users", spark=spark).status == "succeeded"
    produce(servers, topic, random_changes(rnd, 150, 45))

    killed = subprocess.run(
        [sys.executable, "-m", "upsert_kafka_ops.cli", "run", str(file), "--job", "users", "--json"],
        env={**os.environ, "UPSERT_KAFKA_OPS_JARS_DIR": str(jars_dir), "UKO_FAULT_POINT": point},
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    bucket, key = lock_key(path)
    # killed while it held the table, its lease stays; after the commit it had released it
    held = point != "after-commit"
    assert s3.client().list_objects_v2(Bucket=bucket, Prefix=key)["KeyCount"] == int(held)

    monkeypatch.setattr(object_lock_module, "LEASE_S", 3.0)
    rerun = run_job(pipeline, "users", spark=spark, lock_timeout_s=60)
    assert rerun.status == "succeeded"
    got = read_target(spark, pipeline, pipeline.job("users").target)  # type: ignore[union-attr,arg-type]
    got = got.select("id", "name", "region", "score").collect()
    assert len(got) == len({r[0] for r in got}), "duplicate keys"
    assert rows_as_table(got) == oracle_table(servers, topic)
    stored = read_stored_offsets(pipeline.job("users"), pipeline)
    assert stored is not None and stored.offsets == end_offsets(servers, topic, 2)
