"""The shipped Flink SQL script, imported, runs: its topic-to-topic job computes PV and UV per region
from a real topic and its materialize job keeps that upsert topic as a Delta table, equal to a
plain-Python count of the records produced."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

import yaml
from confluent_kafka import Producer
from pyspark.sql import SparkSession

from upsert_kafka_ops.jobs import Pipeline, run_job
from upsert_kafka_ops.jobs.flink_sql import import_flink_sql
from upsert_kafka_ops.local import LocalKafka

ROOT = Path(__file__).resolve().parents[2]


def test_the_imported_pageviews_script_runs_and_its_lake_table_holds_the_counts(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path
) -> None:
    servers = kafka.bootstrap_servers
    views, per_region = new_topic(partitions=2), new_topic(partitions=2, config={"cleanup.policy": "compact"})
    script = (ROOT / "pipelines" / "pageviews.sql").read_text()
    script = (script.replace("localhost:9092", servers).replace("'pageviews_per_region'", f"'{per_region}'")
              .replace("'pageviews'", f"'{views}'").replace("/tmp/lake", str(tmp_path / "lake")).replace("/tmp/pageviews", str(tmp_path)))  # fmt: skip
    pipeline = Pipeline.from_yaml(yaml.safe_dump(import_flink_sql(script).pipeline))

    rnd = random.Random(7)
    events = [
        (rnd.randrange(20), rnd.choice(["Berlin", "Beijing", "Hangzhou", "Lisbon"])) for _ in range(300)
    ]
    producer = Producer({"bootstrap.servers": servers})
    for i, (user, region) in enumerate(events):
        value = {
            "user_id": user,
            "page_id": i % 7,
            "viewtime": f"2026-11-26 08:{i % 60:02d}:00",
            "user_region": region,
        }
        producer.produce(views, value=json.dumps(value).encode())
    assert producer.flush(30) == 0

    flow = run_job(pipeline, "pageviews-per-region", spark=spark)
    lake = run_job(pipeline, "pageviews-per-region-lake", spark=spark)
    assert (flow.status, flow.records_read, lake.status) == ("succeeded", 300, "succeeded")
    expected = {region: (sum(1 for _, r in events if r == region), len({u for u, r in events if r == region}))
                for region in {r for _, r in events}}  # fmt: skip
    rows = spark.read.format("delta").load(str(tmp_path / "lake" / "pageviews_per_region")).collect()
    assert {r.user_region: (r.pv, r.uv) for r in rows} == expected
