"""The shipped Flink SQL script (``pipelines/pageviews.sql``) run by real Flink and, imported by
``import-flink-sql``, as this project's job over the same topic: the two upsert topics hold the same
bytes per key, and the PV and UV of a plain-Python count."""

from __future__ import annotations

import json
import random
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import yaml
from confluent_kafka import Producer
from tests.conformance import flink
from tests.integration.oracle import read_all

from upsert_kafka_ops import Pipeline, UpsertKafkaTable, materialize, run_job
from upsert_kafka_ops.jobs.flink_sql import import_flink_sql
from upsert_kafka_ops.local import LocalKafka
from upsert_kafka_ops.spec.ddl import split_statements

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROOT = Path(__file__).resolve().parents[2]


def _last_per_key(bootstrap: str, topic: str) -> dict[bytes, bytes]:
    out: dict[bytes, bytes | None] = {}
    for r in sorted(read_all(bootstrap, [topic]), key=lambda r: (r.partition, r.offset)):
        assert r.key is not None
        out[r.key] = r.value
    return {k: v for k, v in out.items() if v is not None}


def test_the_imported_script_writes_the_bytes_flink_writes_for_it(
    kafka: LocalKafka, flink_jars: list[Path], spark: SparkSession, tmp_path: Path
) -> None:
    bootstrap = kafka.bootstrap_servers
    topics = {n: f"script-{n}-{uuid.uuid4().hex[:6]}" for n in ("views", "flink", "ours")}
    kafka.create_topic(topics["views"], partitions=2)
    for name in ("flink", "ours"):
        kafka.create_topic(topics[name], partitions=2, config={"cleanup.policy": "compact"})
    rnd = random.Random(11)
    events = [
        (rnd.randrange(30), rnd.choice(["Berlin", "Beijing", "Hangzhou", "Lisbon", "Lima"]))
        for _ in range(400)
    ]
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, (user, region) in enumerate(events):
        view = {
            "user_id": user,
            "page_id": i % 9,
            "viewtime": f"2026-11-26 09:{i % 60:02d}:00",
            "user_region": region,
        }
        producer.produce(topics["views"], value=json.dumps(view).encode())
    assert producer.flush(30) == 0

    script = (ROOT / "pipelines" / "pageviews.sql").read_text().replace("localhost:9092", bootstrap)
    script = script.replace("'pageviews'", f"'{topics['views']}'")

    def sink_topic(text: str, name: str) -> str:
        return text.replace("'pageviews_per_region'", f"'{topics[name]}'")

    statements = {s.split()[0].upper() + " " + s.split()[2]: s for _, _, s in split_statements(script)}
    source = statements["CREATE pageviews"].replace("'format' = 'json'",
                                                    "'format' = 'json',\n  'scan.bounded.mode' = 'latest-offset'")  # fmt: skip
    case = flink.Case("pv_uv", "pageviews_per_region", sink_topic(statements["CREATE pageviews_per_region"], "flink"),
                      (source,), statements["INSERT pageviews_per_region"])  # fmt: skip
    outcome = flink.run([case], flink_jars, tmp_path / "flink.log")["pv_uv"]
    assert outcome.error is None and outcome.written, outcome.error

    pipeline = Pipeline.from_yaml(yaml.safe_dump(import_flink_sql(sink_topic(script, "ours")).pipeline))
    result = run_job(pipeline, "pageviews-per-region", spark=spark)
    assert (result.status, result.records_read) == ("succeeded", 400)
    assert _last_per_key(bootstrap, topics["ours"]) == _last_per_key(bootstrap, topics["flink"])
    sink = pipeline.job("pageviews-per-region").sink.table  # type: ignore[union-attr]
    rows = materialize(spark, sink, pipeline.connections["kafka"]).df.collect()
    expected = {region: (sum(1 for _, r in events if r == region), len({u for u, r in events if r == region}))
                for region in {r for _, r in events}}  # fmt: skip
    assert {r.user_region: (r.pv, r.uv) for r in rows} == expected
    assert isinstance(sink, UpsertKafkaTable)
