"""Job functions for the spark-submit tests, run by the driver with ``--callable submit_app:NAME``.

spark-submit ships this file with ``--py-files``, so the driver imports it as ``submit_app``.
"""

from __future__ import annotations

import os
from typing import Any

from upsert_kafka_ops.spec.connection import KafkaConnection


def count_topic(spec: dict[str, Any], spark: Any) -> dict[str, Any]:
    """Count a topic's records with Spark's Kafka source; the connection's secrets resolve here."""
    options = KafkaConnection.model_validate(spec["connection"]).to_spark_options()
    reader = spark.read.format("kafka").option("subscribe", spec["topic"])
    for key, value in options.items():
        reader = reader.option(key, value)
    df = reader.load()
    sc = spark.sparkContext
    return {
        "count": int(df.count()),
        "keys": sorted(r.key.decode() for r in df.select("key").collect()),
        "master": sc.master,
        "app_id": sc.applicationId,
        # executors that registered with this driver (the driver itself is not one)
        "executors": int(sc._jsc.sc().getExecutorMemoryStatus().size()) - 1,
    }


def fail(spec: dict[str, Any], spark: Any) -> dict[str, Any]:
    """A job that fails with a message of its own, quoting a secret from its environment."""
    raise ValueError(f"no table named {spec['table']!r} (token {os.environ.get('UKO_TEST_TOKEN')})")
