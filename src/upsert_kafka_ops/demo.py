"""The main job on the embedded default: a local KRaft broker and local Spark.

For now a smoke flow (the engine replaces it): FLIP-149's users changelog (four inserts, an
update and a delete) is produced to a compacted topic, read back with Spark's Kafka source from
the earliest offset, and printed.
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path

from upsert_kafka_ops.errors import LocalServiceError

#: FLIP-149's ``dbz_users`` example as upserts on ``user_id``; ``None`` is a delete (tombstone).
USERS_CHANGELOG: list[tuple[int, dict[str, object] | None]] = [
    (100, {"user_id": 100, "user_name": "Bob", "region": "Beijing"}),
    (101, {"user_id": 101, "user_name": "Alice", "region": "Shanghai"}),
    (102, {"user_id": 102, "user_name": "Greg", "region": "Berlin"}),
    (103, {"user_id": 103, "user_name": "Richard", "region": "Berlin"}),
    (101, {"user_id": 101, "user_name": "Alice", "region": "Hangzhou"}),
    (103, None),
]


def run_demo(jars_dir: Path | None = None) -> list[dict[str, object]]:
    """Run the smoke flow and return the records Spark read (also printed)."""
    from upsert_kafka_ops import jars
    from upsert_kafka_ops.local import LocalKafka
    from upsert_kafka_ops.runtime import build_spark_session

    jars.fetch(jars_dir=jars_dir, log=True)
    with (
        tempfile.TemporaryDirectory(prefix="uko-demo-") as tmp,
        LocalKafka(Path(tmp), jars_dir=jars_dir) as kafka,
    ):
        print(f"demo: local Kafka broker on {kafka.bootstrap_servers}")
        kafka.create_topic("users", partitions=2, config={"cleanup.policy": "compact"})
        _produce(kafka.client_config(), "users")
        print(f"demo: produced {len(USERS_CHANGELOG)} records to the compacted topic 'users'")

        spark = build_spark_session(jars_dir=jars_dir, app_name="upsert-kafka-ops-demo")
        try:
            df = (
                spark.read.format("kafka")
                .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
                .option("subscribe", "users")
                .option("startingOffsets", "earliest")
                .load()
                .selectExpr(
                    "partition", "offset", "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value"
                )
                .orderBy("partition", "offset")
            )
            rows = [r.asDict() for r in df.collect()]
        finally:
            spark.stop()
    print("demo: the users changelog as Spark reads it (value NULL = delete):")
    print(f"{'partition':>9} {'offset':>6}  {'key':<5} value")
    for r in rows:
        print(
            f"{r['partition']:>9} {r['offset']:>6}  {r['key']:<5} {r['value'] if r['value'] is not None else 'NULL'}"
        )
    return rows


def _produce(config: dict[str, object], topic: str) -> None:
    # its own function, so the producer is gone before the broker stops
    from confluent_kafka import Producer

    producer = Producer({**config, "enable.idempotence": True, "logger": logging.getLogger(__name__)})
    for key, row in USERS_CHANGELOG:
        value = None if row is None else json.dumps(row, separators=(",", ":")).encode()
        producer.produce(topic, key=str(key).encode(), value=value)
    if producer.flush(30) != 0:
        raise LocalServiceError("The demo records were not all delivered within 30s.")
