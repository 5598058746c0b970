"""Local services for development, demos and tests: a real Kafka broker on 127.0.0.1."""

from __future__ import annotations

from upsert_kafka_ops.local.kafka import LocalKafka, free_port

__all__ = ["LocalKafka", "free_port"]
