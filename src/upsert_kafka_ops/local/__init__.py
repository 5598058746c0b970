"""Local services users run for development, demos and quick starts, on 127.0.0.1: a real Kafka
broker (``upsert-kafka-ops local kafka``, the demo's broker), a real PostgreSQL (``local postgres``,
the local warehouse), a Schema-Registry-compatible server (``local registry``) and a Spark Connect
server (``spark-connect``, the command the Helm chart runs), with the JVM process helpers and the TLS
files they use.

The services only the test suites start (a KDC, YARN, a Spark standalone cluster and History Server,
Prometheus, MinIO) live in the repository's ``tests/devservices`` and are not installed."""

from __future__ import annotations

from upsert_kafka_ops.local.kafka import LocalKafka
from upsert_kafka_ops.local.postgres import LocalPostgres
from upsert_kafka_ops.local.process import free_port, free_ports
from upsert_kafka_ops.local.schema_registry import LocalSchemaRegistry
from upsert_kafka_ops.local.spark_connect import LocalSparkConnect

__all__ = [
    "LocalKafka",
    "LocalPostgres",
    "LocalSchemaRegistry",
    "LocalSparkConnect",
    "free_port",
    "free_ports",
]
