"""The real components the suites share, as session fixtures (``tests/conftest.py`` registers this
module as a plugin), each started when a test first asks for it: a broker, a SparkSession, PostgreSQL,
MinIO and a schema registry. A suite whose tests need other settings defines its own fixture of the
same name in its conftest (the monitoring suite: a broker and a session of its own; the conformance
suite: a session with Flink's jars; the fault suite: a broker it restarts).

In ``make test`` (``scripts/run-suites.sh``) the suites' processes attach to one broker
(``tests/shared_broker.py``), and a process runs two suites where one follows another (the fault suite
after the Airflow suite, the object-storage suite after the Dagster suite) on the same session,
MinIO and PostgreSQL. Each test is isolated by its own topics, consumer groups, tables, bucket
prefixes and databases.

Nothing here skips: when Java, Maven or the jars are missing, the fixtures raise and the tests fail.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from tests import shared_broker
from tests.devservices import LocalS3
from tests.jvm import SESSION_HEAP, SESSION_SHUFFLE_PARTITIONS

from upsert_kafka_ops import jars, spark_lines
from upsert_kafka_ops.engine.session import is_connect
from upsert_kafka_ops.local import LocalKafka, LocalPostgres, LocalSchemaRegistry
from upsert_kafka_ops.runtime import build_spark_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


#: the suites' session's jar groups: S3A where the Spark line has it (Spark 3.5's lane runs no S3 tables)
SESSION_JARS = ("spark", "iceberg") + (
    ("s3",) if spark_lines.line_of(spark_lines.installed_version()).aws_sdk else ()
)


@pytest.fixture(scope="session")
def jars_dir() -> Path:
    """The jar cache, fetched if needed (a no-op when `make jars` already ran), with the S3A
    connector and Iceberg's runtime: the Airflow and Dagster suites' sessions run jobs with Delta,
    Parquet and Iceberg targets on S3."""
    jars.fetch(["kafka", *SESSION_JARS], log=False)
    return jars.default_jars_dir()


@pytest.fixture(scope="session")
def kafka(jars_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    """A real single-node KRaft broker with PLAINTEXT, SASL_PLAINTEXT (SCRAM) and SSL listeners: the
    one the suites share when ``$UKO_TEST_KAFKA`` names it (``tests/shared_broker.py``), else this
    process's own."""
    state = os.environ.get(shared_broker.ENV)
    if state:
        yield shared_broker.attach(Path(state))
        return
    with shared_broker.broker(tmp_path_factory.mktemp("kafka"), jars_dir) as broker:
        yield broker


@pytest.fixture(scope="session")
def spark(jars_dir: Path) -> Iterator[SparkSession]:
    session = build_spark_session(
        jars_dir=jars_dir,
        app_name="upsert-kafka-ops-tests",
        jar_groups=SESSION_JARS,
        shuffle_partitions=SESSION_SHUFFLE_PARTITIONS,
        extra={"spark.driver.memory": SESSION_HEAP},
    )
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _reads_released() -> Iterator[None]:
    """After each test, the session's cached DataFrames go: a test that reads with the engine itself
    (``materialize``, ``read_changes``) may keep the read's cache (``engine.source.Read``). Kept by
    every test, the reads' rows and plans filled the conformance session's 2 GB heap, and its JVM
    spent most of its CPU in full collections (CI, 2026-11-29: 735 of them, 1,180 CPU s). The jobs
    release their own reads: ``tests/integration/test_jobs_delta.py`` checks that runs leave nothing
    cached."""
    yield
    if "pyspark.sql" not in sys.modules:  # a test without Spark (the unit tests) starts none here
        return
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is not None and not is_connect(session):
        session.catalog.clearCache()


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
