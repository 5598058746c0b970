"""FLIP-149's documented examples, run by real Flink and as this project's jobs: the same tables.

"Aggregate on the upsert-kafka connector": ``pageviews_per_region_5min`` (a csv key and an avro value)
is written by Flink from the rows its documentation shows, then summed per region into
``pageviews_per_region``, by Flink and by a topic-to-topic job over the same topic (an upsert source,
so the job recomputes and writes what changed). Both sink topics must hold the same record per key,
and the table the documentation prints: Beijing 1, Berlin 3, Hangzhou 1.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from tests.conformance import flink
from tests.integration.oracle import last_values

from upsert_kafka_ops import Pipeline, UpsertKafkaTable, materialize, run_job
from upsert_kafka_ops.local import LocalKafka

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FIVE_MIN = """CREATE TABLE pageviews_per_region_5min (
  window_start STRING,
  region STRING,
  view_count BIGINT,
  PRIMARY KEY (window_start, region) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = '{topic}',
  'properties.bootstrap.servers' = '{bootstrap}',
  'key.format' = 'csv',
  'value.format' = 'avro'{extra}
)"""
PER_REGION = """CREATE TABLE {name} (
  region STRING,
  view_count BIGINT,
  PRIMARY KEY (region) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = '{topic}',
  'properties.bootstrap.servers' = '{bootstrap}',
  'key.format' = 'csv',
  'value.format' = 'avro'
)"""
QUERY = "SELECT region, SUM(view_count) FROM pageviews_per_region_5min GROUP BY region"
#: the 5-minute counts as the stream reached them (Berlin's second window counted 1, then 2)
FIVE_MIN_ROWS = [("2020-10-01 08:00:00", "Beijing", 1), ("2020-10-01 08:00:00", "Berlin", 1),
                 ("2020-10-01 08:00:00", "Hangzhou", 1), ("2020-10-01 08:05:00", "Berlin", 1),
                 ("2020-10-01 08:05:00", "Berlin", 2)]  # fmt: skip
DOCUMENTED = {"Beijing": 1, "Berlin": 3, "Hangzhou": 1}


@pytest.fixture(scope="module")
def example(
    kafka: LocalKafka, flink_jars: list[Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    bootstrap = kafka.bootstrap_servers
    topics = {n: f"flip149-{n}-{uuid.uuid4().hex[:6]}" for n in ("5min", "flink", "ours")}
    for t in topics.values():
        kafka.create_topic(t, partitions=2, config={"cleanup.policy": "compact"})
    # one sink task, writing each job's rows in their order
    source = FIVE_MIN.format(topic=topics["5min"], bootstrap=bootstrap,
                             extra=",\n  'sink.parallelism' = '1',\n  'scan.bounded.mode' = 'latest-offset'")  # fmt: skip

    def values(rows: list[tuple[str, str, int]]) -> str:
        return ", ".join(f"('{w}', '{r}', CAST({n} AS BIGINT))" for w, r, n in rows)

    sink = PER_REGION.format(name="pageviews_per_region", topic=topics["flink"], bootstrap=bootstrap)
    cases = [
        # the last count of Berlin's second window in a job of its own, after the others: within one
        # job Flink may pass one key's rows through two subtasks (parallelism 2) and swap them
        flink.Case("write_5min", "pageviews_per_region_5min", source, (),
                   f"INSERT INTO pageviews_per_region_5min VALUES {values(FIVE_MIN_ROWS[:-1])}"),
        flink.Case("write_5min_last", "pageviews_per_region_5min", source.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1), (),
                   f"INSERT INTO pageviews_per_region_5min VALUES {values(FIVE_MIN_ROWS[-1:])}"),
        flink.Case("aggregate", "pageviews_per_region", sink, (), f"INSERT INTO pageviews_per_region {QUERY}"),
    ]  # fmt: skip
    outcomes = flink.run(cases, flink_jars, tmp_path_factory.mktemp("flink") / "flink.log")
    return {"topics": topics, "flink": outcomes, "source": source, "bootstrap": bootstrap}


def test_the_aggregate_over_an_upsert_topic_gives_flinks_and_the_documented_table(
    example: dict[str, Any], spark: SparkSession
) -> None:
    for case in ("write_5min", "write_5min_last", "aggregate"):
        outcome: flink.Outcome = example["flink"][case]
        assert outcome.error is None and outcome.written, outcome.error
    bootstrap, topics = example["bootstrap"], example["topics"]
    ours = PER_REGION.format(name="pageviews_per_region", topic=topics["ours"], bootstrap=bootstrap)
    pipeline = Pipeline.model_validate({
        "connections": {"main": {"bootstrap_servers": bootstrap}},
        "jobs": [{"name": "per-region", "kind": "topic-to-topic", "query": QUERY,
                  "sources": {"pageviews_per_region_5min": {"connection": "main", "table": {"ddl": example["source"]}}},
                  "sink": {"connection": "main", "table": {"ddl": ours}}}],
    })  # fmt: skip
    result = run_job(pipeline, spark=spark)
    assert result.execution == "snapshot"  # an aggregation over an upsert table
    assert last_values(bootstrap, topics["ours"]) == last_values(bootstrap, topics["flink"])
    table = materialize(spark, UpsertKafkaTable.from_flink_ddl(ours)).df.collect()
    assert {r["region"]: r["view_count"] for r in table} == DOCUMENTED
