"""Real components for the monitoring suite: its own Kafka broker (the test stops it), one
SparkSession, and Debian's Prometheus and Pushgateway (``make prometheus``; never skipped)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from tests.jvm import SESSION_SHUFFLE_PARTITIONS

from upsert_kafka_ops import jars
from upsert_kafka_ops.local import LocalKafka
from upsert_kafka_ops.runtime import build_spark_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def jars_dir() -> Path:
    jars.fetch(log=False)
    return jars.default_jars_dir()


@pytest.fixture
def kafka(jars_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    """A broker of its own: the test stops it to see the exporter lose it."""
    with LocalKafka(tmp_path_factory.mktemp("kafka"), jars_dir=jars_dir) as broker:
        yield broker


@pytest.fixture(scope="session")
def spark(jars_dir: Path) -> Iterator[SparkSession]:
    # a small driver: this suite runs beside the integration, Airflow, Dagster and conformance suites
    # (a default-sized one here ran the machine out of memory)
    session = build_spark_session(jars_dir=jars_dir, app_name="upsert-kafka-ops-monitoring-tests",
                                  shuffle_partitions=SESSION_SHUFFLE_PARTITIONS,
                                  extra={"spark.driver.memory": "1g"})  # fmt: skip
    yield session
    session.stop()
