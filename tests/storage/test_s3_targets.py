"""Delta and Parquet targets on a real S3 server (MinIO): incremental runs from the CLI equal the
oracle's table, the stored offsets are read back from S3 without Spark (as the sensors and the lag
exporter do), one run holds a table at a time, and a store that refuses or is missing fails clearly."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession
from tests.devservices import LocalS3
from tests.integration.jobs_support import oracle_table, produce, random_changes, rows_as_table, source

from upsert_kafka_ops.engine.session import use_storage
from upsert_kafka_ops.jobs import Pipeline, run_job
from upsert_kafka_ops.jobs import object_lock as object_lock_module
from upsert_kafka_ops.jobs.core import ConcurrentRunError
from upsert_kafka_ops.jobs.lag import pipeline_lag
from upsert_kafka_ops.jobs.object_lock import ObjectStoreError, lock_key
from upsert_kafka_ops.jobs.state import StateError
from upsert_kafka_ops.jobs.targets import read_stored_offsets
from upsert_kafka_ops.kafka.admin import KafkaAdmin
from upsert_kafka_ops.local import LocalKafka, free_port
from upsert_kafka_ops.spec.connection import KafkaConnection


def pipeline_file(
    tmp_path: Path, s3: LocalS3, servers: str, jobs: list[dict[str, Any]], **sections: Any
) -> Path:
    """A pipeline file with connection ``main``, the store ``lake`` and ``sections`` (catalogs)."""
    storage = s3.storage().model_dump(mode="json", exclude_none=True)
    data = {
        "connections": {"main": {"bootstrap_servers": servers}},
        "storage": {"lake": storage},
        **sections,
        "jobs": jobs,
    }
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def run_cli(file: Path, job: str | None, jars_dir: Path, secret: str, *more: str) -> dict[str, Any]:
    """``upsert-kafka-ops run FILE [--job JOB] --json [MORE]``: each job's result by its name (every
    job of the file in one process when ``job`` is None); ``secret`` in no output."""
    done = subprocess.run(
        [sys.executable, "-m", "upsert_kafka_ops.cli", "run", str(file), *(["--job", job] if job else []),
         "--json", *more],
        env={**os.environ, "UPSERT_KAFKA_OPS_JARS_DIR": str(jars_dir)},
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, "\n".join(
        ln for ln in done.stderr.splitlines() if not ln.startswith("\tat ")
    )[-5000:]
    assert secret not in done.stdout + done.stderr  # the store's secret key, resolved in this run
    return {r["job"]: dict(r) for r in json.loads(done.stdout)["results"]}


def end_offsets(servers: str, topic: str, partitions: int) -> dict[tuple[str, int], int]:
    admin = KafkaAdmin(KafkaConnection(bootstrap_servers=servers), timeout=30)
    marks = admin.watermarks([(topic, p) for p in range(partitions)], isolation="read_uncommitted")
    return {tp: end for tp, (_, end) in marks.items()}


def test_delta_and_parquet_on_s3_run_incrementally_from_the_cli_and_hold_the_oracles_table(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    s3: LocalS3,
    spark: SparkSession,
    jars_dir: Path,
    tmp_path: Path,
) -> None:
    servers, topic, prefix = kafka.bootstrap_servers, new_topic(partitions=2), uuid.uuid4().hex[:8]
    rnd = random.Random(19)
    produce(servers, topic, random_changes(rnd, 300, 40))
    delta, parquet = f"s3a://lake/{prefix}/users", f"s3a://lake/{prefix}/users_parquet"
    jobs = [
        {"name": "users-delta", "kind": "materialize", "source": source(topic, servers),
         "target": {"kind": "delta", "path": delta, "storage": "lake"}},
        {"name": "users-parquet", "kind": "materialize", "source": source(topic, servers),
         "target": {"kind": "parquet", "path": parquet, "storage": "lake"}},
    ]  # fmt: skip
    file = pipeline_file(tmp_path, s3, servers, jobs)
    pipeline = Pipeline.load(file)
    use_storage(spark, s3.storage(), "lake")  # this test's reads

    for run in (1, 2):
        if run == 2:
            produce(servers, topic, random_changes(rnd, 200, 60))
            # both jobs in one CLI process, which resolves the store's secret from its environment and
            # continues from what this process stored
            results = run_cli(file, None, jars_dir, s3.secret_key)
        else:
            results = {j["name"]: run_job(pipeline, j["name"], spark=spark).to_dict() for j in jobs}
        first, second = results["users-delta"], results["users-parquet"]
        assert (first["status"], first["mode"], first["run"]) == (
            "succeeded", "full" if run == 1 else "incremental", run)  # fmt: skip
        assert (second["status"], second["mode"], second["run"]) == ("succeeded", "full", run)
        expected = oracle_table(servers, topic)
        for path, fmt in ((delta, "delta"), (parquet, "parquet")):
            got = spark.read.format(fmt).load(path).select("id", "name", "region", "score").collect()
            assert len(got) == len({r[0] for r in got}), f"duplicate keys in {path}"
            assert rows_as_table(got) == expected, f"{path} after run {run}"

    # the stored offsets, read from S3 without Spark: what the sensors and the lag exporter see
    ends = end_offsets(servers, topic, 2)
    for name in ("users-delta", "users-parquet"):
        stored = read_stored_offsets(pipeline.job(name), pipeline)
        assert stored is not None and (stored.job, stored.run, stored.offsets) == (name, 2, ends)
    lags = {r.job: r for r in pipeline_lag(pipeline)}
    for name in ("users-delta", "users-parquet"):
        assert (lags[name].offsets_from, lags[name].report.total_lag) == ("target", 0), lags[name].to_dict()
    # each run released its lock: nothing is left beside the tables
    listed = s3.client().list_objects_v2(Bucket="lake", Prefix=f"{prefix}/")
    keys = [o["Key"] for o in listed.get("Contents", [])]
    assert keys and not [k for k in keys if k.endswith(".upsert-kafka-ops.lock")], keys


def test_one_run_holds_a_table_on_s3_and_a_dead_runs_lease_expires(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    s3: LocalS3,
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    servers, topic, prefix = kafka.bootstrap_servers, new_topic(), uuid.uuid4().hex[:8]
    produce(servers, topic, random_changes(random.Random(7), 50, 10))
    path = f"s3a://lake/{prefix}/users"
    job = {"name": "users", "kind": "materialize", "source": source(topic, servers),
           "target": {"kind": "delta", "path": path, "storage": "lake"}}  # fmt: skip
    pipeline = Pipeline.load(pipeline_file(tmp_path, s3, servers, [job]))
    bucket, key = lock_key(path)
    assert (bucket, key) == ("lake", f"{prefix}/.users.upsert-kafka-ops.lock")
    # a run that was killed while it held the table: its lease object stays behind
    s3.client().put_object(Bucket=bucket, Key=key, Body=b'{"owner": "killed"}')

    began = time.monotonic()
    with pytest.raises(ConcurrentRunError, match="is being written by another run"):
        run_job(pipeline, "users", spark=spark, lock_timeout_s=3)
    assert time.monotonic() - began < 30
    assert read_stored_offsets(pipeline.job("users"), pipeline) is None  # nothing was written

    monkeypatch.setattr(object_lock_module, "LEASE_S", 2.0)  # the dead holder's lease runs out
    result = run_job(pipeline, "users", spark=spark, lock_timeout_s=30)
    assert (result.status, result.run) == ("succeeded", 1)
    got = spark.read.format("delta").load(path).select("id", "name", "region", "score").collect()
    assert rows_as_table(got) == oracle_table(servers, topic)
    assert s3.client().list_objects_v2(Bucket=bucket, Prefix=key).get("KeyCount", 0) == 0


def test_a_store_that_refuses_or_is_missing_fails_clearly_and_in_bounded_time(
    kafka: LocalKafka, new_topic: Callable[..., str], s3: LocalS3, spark: SparkSession,
    monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    servers, topic = kafka.bootstrap_servers, new_topic()
    produce(servers, topic, random_changes(random.Random(3), 20, 5))
    storage = s3.storage().model_dump(mode="json", exclude_none=True)
    cases = {
        "refused the credentials": ({**storage, "secret_access_key": "env:UKO_TEST_WRONG_SECRET"}, "lake"),
        "does not exist": (storage, "no-such-bucket"),
        "cannot reach": ({**storage, "endpoint": f"http://127.0.0.1:{free_port()}"}, "lake"),
    }
    monkeypatch.setenv("UKO_TEST_WRONG_SECRET", "not-the-secret-key")
    request.addfinalizer(lambda: use_storage(spark, s3.storage(), "lake"))  # the session's settings back
    for expected, (store, bucket) in cases.items():
        path = f"s3a://{bucket}/{uuid.uuid4().hex[:8]}/users"
        pipeline = Pipeline.model_validate({
            "connections": {"main": {"bootstrap_servers": servers}}, "storage": {"lake": store},
            "jobs": [{"name": "users", "kind": "materialize", "source": source(topic, servers),
                      "target": {"kind": "delta", "path": path, "storage": "lake"}}],
        })  # fmt: skip
        began = time.monotonic()
        with pytest.raises(ObjectStoreError, match=expected) as info:
            run_job(pipeline, "users", spark=spark, lock_timeout_s=5)
        took = time.monotonic() - began
        assert took < 60, f"{expected}: {took:.0f} s"
        assert s3.secret_key not in str(info.value) and "not-the-secret-key" not in str(info.value)
        # the Spark-free reader (sensors, the lag exporter) says so too
        with pytest.raises(StateError, match="cannot read"):
            read_stored_offsets(pipeline.job("users"), pipeline)
