"""The main job on the embedded default: FLIP-149's examples on a local KRaft broker and local Spark.

1. The users changelog (four inserts, Alice moves, Richard is deleted) is written with
   ``write_changelog`` to the compacted upsert topic ``users`` and materialized.
2. Pageview events (a plain JSON topic) are joined with the users and aggregated into PV and UV per
   region, written with ``write_snapshot`` to the upsert topic ``pageviews_per_region``.
3. More events arrive; the second run writes only the regions whose numbers changed.

The users table is FLIP-149's own: a csv key and an avro value.
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from upsert_kafka_ops.errors import LocalServiceError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

USERS_DDL = """
CREATE TABLE users (
  user_id BIGINT,
  user_name STRING,
  region STRING,
  PRIMARY KEY (user_id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'users',
  'properties.bootstrap.servers' = '{servers}',
  'key.format' = 'csv',
  'value.format' = 'avro'
)"""
PAGEVIEWS_DDL = """
CREATE TABLE pageviews (
  user_id BIGINT,
  page_id BIGINT,
  viewtime TIMESTAMP(3)
) WITH (
  'connector' = 'kafka',
  'topic' = 'pageviews',
  'properties.bootstrap.servers' = '{servers}',
  'format' = 'json'
)"""
PER_REGION_DDL = """
CREATE TABLE pageviews_per_region (
  user_region STRING,
  pv BIGINT,
  uv BIGINT,
  PRIMARY KEY (user_region) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'pageviews_per_region',
  'properties.bootstrap.servers' = '{servers}',
  'key.format' = 'json',
  'value.format' = 'json'
)"""

#: FLIP-149's dbz_users changelog: (op, user_id, user_name, region).
USERS_CHANGELOG = [
    ("+I", 100, "Bob", "Beijing"),
    ("+I", 101, "Alice", "Shanghai"),
    ("+I", 102, "Greg", "Berlin"),
    ("+I", 103, "Richard", "Berlin"),
    ("-U", 101, "Alice", "Shanghai"),
    ("+U", 101, "Alice", "Hangzhou"),
    ("-D", 103, "Richard", "Berlin"),
]
PAGEVIEWS_1 = [(100, 10001), (101, 10002), (102, 10002), (101, 10003), (100, 10004)]
PAGEVIEWS_2 = [(102, 10005), (102, 10006)]


def _show(title: str, df: DataFrame, order: list[str]) -> None:
    print(f"\n{title}")
    rows = df.orderBy(*order).collect()
    names = df.columns
    print("  " + " | ".join(f"{n:>12}" for n in names))
    for r in rows:
        print("  " + " | ".join(f"{r[n]!s:>12}" for n in names))


def _metrics(result: Any) -> None:
    keys = ("records_in", "tombstones_in", "distinct_keys", "records_out", "tombstones_out", "duration_s")
    print("  metrics: " + ", ".join(f"{k}={getattr(result, k)}" for k in keys))


def _produce_pageviews(config: dict[str, Any], events: list[tuple[int, int]], minute: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({**config, "logger": logging.getLogger(__name__)})
    for i, (user, page) in enumerate(events):
        view = {"user_id": user, "page_id": page, "viewtime": f"2026-11-22 10:{minute:02d}:{i:02d}"}
        producer.produce("pageviews", value=json.dumps(view).encode())
    if producer.flush(30) != 0:
        raise LocalServiceError("The demo pageviews were not all delivered within 30s.")


def run_demo(jars_dir: Path | None = None) -> dict[str, Any]:
    """Run the demo; returns the final users and per-region tables and the second run's result."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from upsert_kafka_ops import jars
    from upsert_kafka_ops.engine import materialize, read_append, write_changelog, write_snapshot
    from upsert_kafka_ops.local import LocalKafka
    from upsert_kafka_ops.runtime import build_spark_session
    from upsert_kafka_ops.spec.connection import KafkaConnection
    from upsert_kafka_ops.spec.table import KafkaTable, UpsertKafkaTable

    jars.fetch(jars_dir=jars_dir, log=True)
    with (
        tempfile.TemporaryDirectory(prefix="uko-demo-") as tmp,
        LocalKafka(Path(tmp), jars_dir=jars_dir) as kafka,
    ):
        servers = kafka.bootstrap_servers
        print(f"demo: local Kafka broker on {servers}")
        for topic, config in (("users", {"cleanup.policy": "compact"}), ("pageviews", {}),
                              ("pageviews_per_region", {"cleanup.policy": "compact"})):  # fmt: skip
            kafka.create_topic(topic, partitions=2, config=config)
        conn = KafkaConnection(bootstrap_servers=servers)
        users = UpsertKafkaTable.from_flink_ddl(USERS_DDL.format(servers=servers))
        pageviews = KafkaTable.from_flink_ddl(PAGEVIEWS_DDL.format(servers=servers))
        per_region = UpsertKafkaTable.from_flink_ddl(PER_REGION_DDL.format(servers=servers))

        ours = SparkSession.getActiveSession() is None  # never stop a session someone else created
        spark = build_spark_session(jars_dir=jars_dir, app_name="upsert-kafka-ops-demo")
        try:
            changelog = spark.createDataFrame(
                [(op, uid, name, region, seq) for seq, (op, uid, name, region) in enumerate(USERS_CHANGELOG)],
                "op STRING, user_id BIGINT, user_name STRING, region STRING, seq INT",
            )
            written = write_changelog(changelog, users, conn, order_by="seq")
            print(
                f"\ndemo: wrote the users changelog ({len(USERS_CHANGELOG)} changes) to the upsert topic 'users'"
            )
            _metrics(written)
            users_df, read = materialize(spark, users, conn)
            _show("users, materialized from the topic:", users_df, ["user_id"])
            _metrics(read)

            def per_region_run(minute: int, events: list[tuple[int, int]]) -> tuple[DataFrame, Any]:
                _produce_pageviews(kafka.client_config(), events, minute)
                views, _ = read_append(spark, pageviews, conn)
                joined = views.join(users_df, "user_id")
                agg = joined.groupBy(F.col("region").alias("user_region")).agg(
                    F.count(F.lit(1)).alias("pv"), F.countDistinct("user_id").alias("uv")
                )
                return agg, write_snapshot(agg, per_region, conn)

            _, first = per_region_run(0, PAGEVIEWS_1)
            print("\ndemo: PV/UV per region, first run")
            _metrics(first)
            _, second = per_region_run(1, PAGEVIEWS_2)
            print("demo: more pageviews arrived; the second run writes only the regions that changed")
            _metrics(second)
            final, _ = materialize(spark, per_region, conn)
            _show("pageviews_per_region, materialized from the topic:", final, ["user_region"])
            return {
                "users": [r.asDict() for r in users_df.orderBy("user_id").collect()],
                "per_region": [r.asDict() for r in final.orderBy("user_region").collect()],
                "second_run": second.to_dict(),
            }
        finally:
            if ours:
                spark.stop()
