"""A streaming topic-to-topic job with its checkpoint on a real S3 server (MinIO), and a publish job
of a Delta table on S3 with its state beside the table: each run continues where the last one
stopped, from what it left on S3, and nothing lands on the local disk."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession
from tests.devservices import LocalS3
from tests.integration.jobs_support import oracle_table, rows_as_table, source
from tests.integration.oracle import fold, read_all
from tests.storage.test_s3_targets import pipeline_file

from upsert_kafka_ops.engine.session import use_storage
from upsert_kafka_ops.jobs import Pipeline, run_job
from upsert_kafka_ops.local import LocalKafka

QUERY = "SELECT page, COUNT(*) AS n, SUM(ms) AS total_ms FROM clicks GROUP BY page"


def keys_under(s3: LocalS3, prefix: str) -> list[str]:
    listed = s3.client().list_objects_v2(Bucket="lake", Prefix=prefix)
    return [o["Key"][len(prefix) :] for o in listed.get("Contents", [])]


def test_a_stream_keeps_its_checkpoint_on_s3_and_reset_checkpoint_deletes_it_there(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    s3: LocalS3,
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # a checkpoint written through a local path would show up here
    servers, src, sink = kafka.bootstrap_servers, new_topic(partitions=2), new_topic(partitions=2)
    prefix = f"{uuid.uuid4().hex[:8]}/checkpoints/per-page/"
    clicks = {
        "name": "clicks",
        "options": {"connector": "kafka", "topic": src, "format": "json"},
        "columns": [{"name": "page", "type": "STRING"}, {"name": "ms", "type": "BIGINT"}],
    }
    per_page = {
        "name": "per_page",
        "options": {"connector": "upsert-kafka", "topic": sink, "key.format": "json", "value.format": "json"},
        "columns": [
            {"name": "page", "type": "STRING"},
            {"name": "n", "type": "BIGINT"},
            {"name": "total_ms", "type": "BIGINT"},
        ],
        "primary_key": ["page"],
    }
    job = {"name": "per-page", "kind": "topic-to-topic", "query": QUERY,
           "sources": {"clicks": {"kind": "kafka", "connection": "main", "table": clicks}},
           "sink": {"connection": "main", "table": per_page},
           "checkpoint_location": f"s3a://lake/{prefix}", "checkpoint_storage": "lake"}  # fmt: skip
    file = pipeline_file(tmp_path, s3, servers, [job])
    pipeline = Pipeline.load(file)
    assert pipeline.jar_groups("per-page") == ("spark", "s3")

    rnd = random.Random(31)
    events = [(rnd.choice("abcde"), rnd.randrange(100)) for _ in range(40)]
    producer = Producer({"bootstrap.servers": servers})

    def send(batch: list[tuple[str, int]]) -> None:
        for page, ms in batch:
            producer.produce(src, value=json.dumps({"page": page, "ms": ms}).encode())
        assert producer.flush(30) == 0

    send(events)
    first = run_job(pipeline, "per-page", spark=spark)
    assert (first.execution, first.records_read) == ("streaming", 40)
    send([("a", 5), ("f", 7), ("f", 1)])
    events += [("a", 5), ("f", 7), ("f", 1)]
    second = run_job(pipeline, "per-page", spark=spark)  # continues from the checkpoint on S3
    assert (second.execution, second.records_read, second.records_written) == ("streaming", 3, 2)
    expected: dict[str, tuple[int, int]] = {}
    for page, ms in events:
        n, total = expected.get(page, (0, 0))
        expected[page] = (n + 1, total + ms)
    state = fold(read_all(servers, [sink]), lambda k: json.loads(k)["page"], json.loads)
    assert {k: (v["n"], v["total_ms"]) for k, v in state.items()} == expected
    stored = keys_under(s3, prefix)
    assert "_upsert_kafka_ops_query.json" in stored and any(k.startswith("offsets/") for k in stored), stored
    assert [p.name for p in tmp_path.iterdir()] == ["pipeline.yaml"]

    reset = subprocess.run([sys.executable, "-m", "upsert_kafka_ops.cli", "reset-checkpoint", str(file),
                            "--job", "per-page"], capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert (reset.returncode, reset.stdout.strip()) == (0, "deleted"), reset.stderr[-3000:]
    assert keys_under(s3, prefix) == []
    third = run_job(pipeline, "per-page", spark=spark)  # a new checkpoint: from the earliest offset
    assert (third.execution, third.records_read) == ("streaming", 43)


def test_a_delta_table_on_s3_is_published_with_its_state_beside_it(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    s3: LocalS3,
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    servers, sink = kafka.bootstrap_servers, new_topic(partitions=2)
    prefix = f"{uuid.uuid4().hex[:8]}/orders"
    path = f"s3a://lake/{prefix}"
    use_storage(spark, s3.storage(), "lake")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT NOT NULL, name STRING, region STRING, score DECIMAL(10, 2)) "
        "USING delta TBLPROPERTIES (delta.enableChangeDataFeed = true)"
    )
    rows = ", ".join(f"({i}, 'n{i}', 'r{i % 3}', {i}.25)" for i in range(30))
    spark.sql(f"INSERT INTO delta.`{path}` VALUES {rows}")
    job = {"name": "publish-orders", "kind": "publish", "sink": source(sink, servers),
           "source": {"kind": "delta-cdf", "path": path, "storage": "lake"}}  # fmt: skip
    pipeline = Pipeline.load(pipeline_file(tmp_path, s3, servers, [job]))

    first = run_job(pipeline, "publish-orders", spark=spark)
    assert (first.status, first.mode) == ("succeeded", "full")
    spark.sql(f"UPDATE delta.`{path}` SET name = 'changed' WHERE id < 5")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id >= 25")
    second = run_job(pipeline, "publish-orders", spark=spark)  # the change feed since the stored version
    assert (second.status, second.mode) == ("succeeded", "incremental")
    assert second.records_read == 10  # five updates, five deletes
    table = spark.read.format("delta").load(path).select("id", "name", "region", "score").collect()
    assert oracle_table(servers, sink) == rows_as_table(table)
    assert "_upsert_kafka_ops_publish_publish-orders.json" in keys_under(s3, prefix + "/")
    assert [p.name for p in tmp_path.iterdir()] == ["pipeline.yaml"]
