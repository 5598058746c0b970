"""A run on an S3 target killed where S3 holds something of it (a real CLI process SIGKILLs itself),
then rerun in this process: the killed run's lease expires, and the table equals the oracle's with
the stored offsets at the topic's end, nothing lost or doubled.

The point is after Parquet's data files: the files and the lease are on S3, the commit is not. A run
killed after its read has written nothing to S3 but its lease, which this point leaves too; that
point comes before any target's write and is killed on a local Delta table
(``tests/integration/test_continuous.py``) and a history table. A run killed after its commit has
released its lease and committed its data and offsets; the point is the same for every target
(``jobs/to_warehouse.py``), killed on a local Iceberg table (``tests/integration/test_jobs_faults.py``,
every Spark line's lane); each target's stored offsets and released lease on S3 are read back by
``test_s3_targets.py`` and ``test_iceberg.py``."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from tests.devservices import LocalS3
from tests.integration.jobs_support import oracle_table, produce, random_changes, rows_as_table, source
from tests.storage.test_s3_targets import end_offsets, pipeline_file

from upsert_kafka_ops.jobs import Pipeline, run_job
from upsert_kafka_ops.jobs import object_lock as object_lock_module
from upsert_kafka_ops.jobs.object_lock import lock_key
from upsert_kafka_ops.jobs.targets import read_stored_offsets, read_target
from upsert_kafka_ops.local import LocalKafka


def test_a_parquet_run_on_s3_killed_after_its_data_files_is_repaired_by_the_rerun(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    s3: LocalS3,
    spark: SparkSession,
    jars_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    servers, topic = kafka.bootstrap_servers, new_topic(partitions=2)
    rnd = random.Random("parquet-after-data")
    produce(servers, topic, random_changes(rnd, 200, 30))
    prefix = f"f{uuid.uuid4().hex[:8]}"
    target = {"kind": "parquet", "path": f"s3a://lake/{prefix}/users", "storage": "lake"}
    job = {"name": "users", "kind": "materialize", "source": source(topic, servers), "target": target}
    file = pipeline_file(tmp_path, s3, servers, [job])
    pipeline = Pipeline.load(file)
    path = str(pipeline.location_of(pipeline.job("users").target))  # type: ignore[union-attr]
    assert run_job(pipeline, "users", spark=spark).status == "succeeded"
    produce(servers, topic, random_changes(rnd, 150, 45))

    killed = subprocess.run(
        [sys.executable, "-m", "upsert_kafka_ops.cli", "run", str(file), "--job", "users", "--json"],
        env={**os.environ, "UPSERT_KAFKA_OPS_JARS_DIR": str(jars_dir), "UKO_FAULT_POINT": "after-data"},
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    bucket, key = lock_key(path)
    # killed while it held the table: its lease stays until it expires
    assert s3.client().list_objects_v2(Bucket=bucket, Prefix=key)["KeyCount"] == 1

    monkeypatch.setattr(object_lock_module, "LEASE_S", 3.0)
    rerun = run_job(pipeline, "users", spark=spark, lock_timeout_s=60)
    assert rerun.status == "succeeded"
    got = read_target(spark, pipeline, pipeline.job("users").target)  # type: ignore[union-attr,arg-type]
    got = got.select("id", "name", "region", "score").collect()
    assert len(got) == len({r[0] for r in got}), "duplicate keys"
    assert rows_as_table(got) == oracle_table(servers, topic)
    stored = read_stored_offsets(pipeline.job("users"), pipeline)
    assert stored is not None and stored.offsets == end_offsets(servers, topic, 2)
