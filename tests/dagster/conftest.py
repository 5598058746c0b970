"""Dagster tests: the shared real broker and Spark (``tests/services.py``; never mocked, never
skipped), assets run with ``dg.materialize`` in a temporary Dagster instance."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import dagster as dg
from upsert_kafka_ops.dagster import UpsertKafkaResource
from upsert_kafka_ops.local import LocalKafka


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as inst:
        yield inst


@pytest.fixture
def kafka_resource(kafka: LocalKafka) -> UpsertKafkaResource:
    return UpsertKafkaResource(bootstrap_servers=kafka.bootstrap_servers)
