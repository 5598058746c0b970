"""Local services for development, demos and tests: a real Kafka broker and a real PostgreSQL on
127.0.0.1."""

from __future__ import annotations

from upsert_kafka_ops.local.kafka import LocalKafka, free_port
from upsert_kafka_ops.local.postgres import LocalPostgres

__all__ = ["LocalKafka", "LocalPostgres", "free_port"]
