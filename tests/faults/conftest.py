"""Real components for the fault suite: a broker of its own (the tests restart it) and a small
SparkSession. The runs under test are CLI processes; this process produces, restarts the broker,
reruns and checks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from upsert_kafka_ops import jars
from upsert_kafka_ops.local import LocalKafka
from upsert_kafka_ops.runtime import build_spark_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def jars_dir() -> Path:
    jars.fetch(log=False)
    return jars.default_jars_dir()


@pytest.fixture(scope="module")
def kafka(jars_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    with LocalKafka(tmp_path_factory.mktemp("kafka"), jars_dir=jars_dir, heap="512m") as broker:
        yield broker


@pytest.fixture(scope="session")
def spark(jars_dir: Path) -> Iterator[SparkSession]:
    """For the reruns and for reading Delta tables back (1 GB: the suite runs beside others)."""
    session = build_spark_session(jars_dir=jars_dir, app_name="upsert-kafka-ops-fault-tests",
                                  extra={"spark.driver.memory": "1g"})  # fmt: skip
    yield session
    session.stop()
