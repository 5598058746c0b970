"""Dagster tests: the real broker and Spark of the integration suite (never mocked, never skipped),
assets run with ``dg.materialize`` in a temporary Dagster instance."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.integration.conftest import jars_dir, kafka, new_topic, s3, spark  # noqa: F401

import dagster as dg
from upsert_kafka_ops.dagster import UpsertKafkaResource
from upsert_kafka_ops.local import LocalKafka


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as inst:
        yield inst


@pytest.fixture
def kafka_resource(kafka: LocalKafka) -> UpsertKafkaResource:  # noqa: F811
    return UpsertKafkaResource(bootstrap_servers=kafka.bootstrap_servers)
