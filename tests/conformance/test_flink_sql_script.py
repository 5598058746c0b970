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
from tests.integration.oracle import last_values

from upsert_kafka_ops import Pipeline, UpsertKafkaTable, materialize, run_job
from upsert_kafka_ops.jobs.flink_sql import import_flink_sql
from upsert_kafka_ops.local import LocalKafka
from upsert_kafka_ops.spec.ddl import split_statements

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROOT = Path(__file__).resolve().parents[2]


def _topics(kafka: LocalKafka, prefix: str, source: str) -> dict[str, str]:
    """A new source topic and the two compacted sink topics, Flink's and ours, by role."""
    topics = {n: f"{prefix}-{n}-{uuid.uuid4().hex[:6]}" for n in (source, "flink", "ours")}
    kafka.create_topic(topics[source], partitions=2)
    for name in ("flink", "ours"):
        kafka.create_topic(topics[name], partitions=2, config={"cleanup.policy": "compact"})
    return topics


def test_the_imported_script_writes_the_bytes_flink_writes_for_it(
    kafka: LocalKafka, flink_jars: list[Path], spark: SparkSession, tmp_path: Path
) -> None:
    bootstrap = kafka.bootstrap_servers
    topics = _topics(kafka, "script", "views")
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
    script = script.replace("'pageviews'", f"'{topics['views']}'").replace("/tmp/pageviews", str(tmp_path))

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
    assert last_values(bootstrap, topics["ours"]) == last_values(bootstrap, topics["flink"])
    sink = pipeline.job("pageviews-per-region").sink.table  # type: ignore[union-attr]
    rows = materialize(spark, sink, pipeline.connections["kafka"]).df.collect()
    expected = {region: (sum(1 for _, r in events if r == region), len({u for u, r in events if r == region}))
                for region in {r for _, r in events}}  # fmt: skip
    assert {r.user_region: (r.pv, r.uv) for r in rows} == expected
    assert isinstance(sink, UpsertKafkaTable)


FUNCTIONS_SOURCE = """CREATE TABLE events (
  id BIGINT,
  csv STRING,
  doc STRING,
  ts_text STRING
) WITH (
  'connector' = 'kafka',
  'topic' = '{topic}',
  'properties.bootstrap.servers' = '{bootstrap}',
  'scan.startup.mode' = 'earliest-offset',
  'scan.bounded.mode' = 'latest-offset',
  'format' = 'json'
)"""
FUNCTIONS_SINK = """CREATE TABLE shaped (
  id BIGINT,
  part STRING,
  missing STRING,
  name STRING,
  ts TIMESTAMP(3),
  n_chars INT,
  tag STRING,
  on_day STRING,
  as_bytes BYTES,
  bucket STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = '{topic}',
  'properties.bootstrap.servers' = '{bootstrap}',
  'key.format' = 'json',
  'value.format' = 'json'
)"""
#: Flink's own functions and types where Spark's differ, as a job's `sql` writes them
FUNCTIONS_INSERT = """INSERT INTO shaped
SELECT
  id,
  SPLIT_INDEX(csv, ',', 1),
  SPLIT_INDEX(csv, ',', 7),
  JSON_VALUE(doc, '$.name'),
  TO_TIMESTAMP(ts_text),
  CHAR_LENGTH(csv),
  CAST(id AS STRING) || '-' || UPPER(SPLIT_INDEX(csv, ',', 0)),
  DATE_FORMAT(TO_TIMESTAMP(ts_text), 'yyyy-MM-dd'),
  CAST(csv AS BYTES),
  IF(id > 2, 'big', 'small')
FROM events"""


def test_a_job_given_as_a_flink_insert_with_flinks_functions_writes_flinks_bytes(
    kafka: LocalKafka, flink_jars: list[Path], spark: SparkSession, tmp_path: Path
) -> None:
    bootstrap = kafka.bootstrap_servers
    topics = _topics(kafka, "functions", "events")
    events = [
        {"id": 1, "csv": "a,b,c", "doc": '{"name": "Ann"}', "ts_text": "2026-11-26 08:01:02"},
        {"id": 2, "csv": "x,,z", "doc": '{"other": 1}', "ts_text": "2026-01-31 23:59:59"},
        {"id": 3, "csv": "solo", "doc": '{"name": "Bo", "n": [1]}', "ts_text": "2000-02-29 00:00:00"},
        {"id": 4, "csv": "", "doc": "not json", "ts_text": "1999-12-31 12:30:45"},
    ]
    producer = Producer({"bootstrap.servers": bootstrap})
    for event in events:
        producer.produce(topics["events"], value=json.dumps(event).encode())
    assert producer.flush(30) == 0

    source = FUNCTIONS_SOURCE.format(topic=topics["events"], bootstrap=bootstrap)
    case = flink.Case("functions", "shaped", FUNCTIONS_SINK.format(topic=topics["flink"], bootstrap=bootstrap),
                      (source,), FUNCTIONS_INSERT)  # fmt: skip
    outcome = flink.run([case], flink_jars, tmp_path / "flink.log")["functions"]
    assert outcome.error is None and outcome.written, outcome.error

    pipeline = Pipeline.model_validate({
        "connections": {"main": {"bootstrap_servers": bootstrap}},
        "tables": {"events": {"connection": "main", "ddl": source},
                   "shaped": {"connection": "main", "ddl": FUNCTIONS_SINK.format(topic=topics["ours"], bootstrap=bootstrap)}},
        "jobs": [{"name": "shape", "kind": "topic-to-topic", "sql": FUNCTIONS_INSERT,
                  "checkpoint_location": str(tmp_path / "checkpoint")}],  # a projection streams
    })  # fmt: skip
    result = run_job(pipeline, spark=spark)
    assert (result.status, result.records_read) == ("succeeded", 4)
    flinks = last_values(bootstrap, topics["flink"])
    assert len(flinks) == 4 and last_values(bootstrap, topics["ours"]) == flinks
