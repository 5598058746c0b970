"""Real components for the object-storage suite: a real S3 server (MinIO, ``make minio``; never
skipped), a broker, PostgreSQL (an Iceberg JDBC catalog's database), and one SparkSession with
Spark's S3A connector and Iceberg's runtime (the ``s3`` and ``iceberg`` jar groups)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from tests.integration.conftest import postgres, s3  # noqa: F401
from tests.jvm import SESSION_SHUFFLE_PARTITIONS

from upsert_kafka_ops import jars
from upsert_kafka_ops.local import LocalKafka
from upsert_kafka_ops.runtime import build_spark_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def jars_dir() -> Path:
    jars.fetch(["kafka", "spark", "s3", "iceberg"], log=False)
    return jars.default_jars_dir()


@pytest.fixture(scope="session")
def kafka(jars_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    with LocalKafka(tmp_path_factory.mktemp("kafka"), jars_dir=jars_dir, heap="512m") as broker:
        yield broker


@pytest.fixture
def new_topic(kafka: LocalKafka) -> Callable[..., str]:
    def make(partitions: int = 1) -> str:
        name = f"t-{uuid.uuid4().hex[:12]}"
        kafka.create_topic(name, partitions=partitions)
        return name

    return make


@pytest.fixture(scope="session")
def spark(jars_dir: Path) -> Iterator[SparkSession]:
    # a small driver: the suite runs beside the others (see scripts/run-suites.sh)
    session = build_spark_session(jars_dir=jars_dir, app_name="upsert-kafka-ops-storage-tests",
                                  jar_groups=("spark", "s3", "iceberg"), shuffle_partitions=SESSION_SHUFFLE_PARTITIONS,
                                  extra={"spark.driver.memory": "1g"})  # fmt: skip
    yield session
    session.stop()
