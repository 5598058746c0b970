"""The conformance suite: the engine against real Flink (PyFlink 2.2.1 in its own virtualenv) on the
same topics of one real broker (``tests/services.py``'s; in ``make test`` the one the suites share).
Nothing here skips: without PyFlink or the jars the suite fails."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from tests.jvm import SESSION_HEAP, SESSION_SHUFFLE_PARTITIONS

from upsert_kafka_ops import jars
from upsert_kafka_ops.runtime import build_spark_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def jars_dir() -> Path:
    jars.fetch(["kafka", "spark", "flink"], log=False)
    return jars.default_jars_dir()


@pytest.fixture(scope="session")
def flink_jars(jars_dir: Path) -> list[Path]:
    return jars.jar_paths("flink", jars_dir)


@pytest.fixture(scope="session")
def spark(jars_dir: Path) -> Iterator[SparkSession]:
    session = build_spark_session(jars_dir=jars_dir, app_name="upsert-kafka-ops-conformance",
                                  shuffle_partitions=SESSION_SHUFFLE_PARTITIONS,
                                  extra={"spark.driver.memory": SESSION_HEAP})  # fmt: skip
    yield session
    session.stop()
