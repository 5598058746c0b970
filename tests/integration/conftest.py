"""Real components for the integration suite: one Kafka broker and one SparkSession per session.

Nothing here skips: when Java, Maven or the jars are missing, the fixtures raise and the tests fail.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from tests.jvm import SESSION_HEAP, SESSION_SHUFFLE_PARTITIONS

from upsert_kafka_ops import jars
from upsert_kafka_ops.local import LocalKafka, LocalPostgres, LocalS3, LocalSchemaRegistry
from upsert_kafka_ops.runtime import build_spark_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SCRAM_USERS = {"alice": "alice-secret", "bob": "bob-secret"}
#: the longest files first: make test gives whole files to two workers (--dist loadfile), and a long
#: file handed out last would run alone at the end
LONG_FIRST = ("test_engine_oracle.py", "test_demo.py", "test_jobs_faults.py", "test_spark_submit.py",
              "test_avro_confluent.py")  # fmt: skip


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONG_FIRST)}
    items.sort(
        key=lambda item: rank.get(item.path.name, len(LONG_FIRST))
    )  # stable: the rest keep their order


@pytest.fixture(scope="session")
def jars_dir() -> Path:
    """The jar cache, fetched if needed (a no-op when `make jars` already ran), with the S3A
    connector and Iceberg's runtime: the Airflow and Dagster suites' sessions run jobs with Delta,
    Parquet and Iceberg targets on S3."""
    jars.fetch(["kafka", "spark", "s3", "iceberg"], log=False)
    return jars.default_jars_dir()


@pytest.fixture(scope="session")
def kafka(jars_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    """A real single-node KRaft broker with PLAINTEXT, SASL_PLAINTEXT (SCRAM) and SSL listeners."""
    broker = LocalKafka(
        tmp_path_factory.mktemp("kafka"), jars_dir=jars_dir, scram_users=SCRAM_USERS, ssl=True
    )
    with broker:
        yield broker


@pytest.fixture(scope="session")
def spark(jars_dir: Path) -> Iterator[SparkSession]:
    session = build_spark_session(
        jars_dir=jars_dir,
        app_name="upsert-kafka-ops-tests",
        jar_groups=("spark", "s3", "iceberg"),
        shuffle_partitions=SESSION_SHUFFLE_PARTITIONS,
        extra={"spark.driver.memory": SESSION_HEAP},
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def schema_registry(
    jars_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalSchemaRegistry]:
    """A real Schema-Registry-compatible server (Apicurio Registry, Confluent API), built on first use."""
    with LocalSchemaRegistry(tmp_path_factory.mktemp("registry"), jars_dir=jars_dir) as registry:
        yield registry


@pytest.fixture
def new_topic(kafka: LocalKafka) -> Callable[..., str]:
    """Create a fresh topic per call: ``new_topic(partitions=1, config=None) -> name``."""

    def make(partitions: int = 1, config: dict[str, str] | None = None) -> str:
        name = f"t-{uuid.uuid4().hex[:12]}"
        kafka.create_topic(name, partitions=partitions, config=config)
        return name

    return make


@pytest.fixture(scope="session")
def postgres() -> Iterator[LocalPostgres]:
    """A real PostgreSQL on 127.0.0.1 (password over TCP), in a temporary folder. When the server
    programs are missing this fails with the install command; it never skips."""
    with LocalPostgres() as server:
        yield server


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalS3]:
    """MinIO on a free port, with a bucket ``lake``; the credentials are in this process's
    environment for the pipelines' ``env:`` references (and the CLI runs it starts)."""
    with LocalS3(tmp_path_factory.mktemp("s3")) as server, pytest.MonkeyPatch.context() as env:
        for name, value in server.credentials_env().items():
            env.setenv(name, value)
        server.create_bucket("lake")
        yield server
