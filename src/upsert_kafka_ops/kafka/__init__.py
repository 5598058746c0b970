"""Kafka-side helpers on confluent-kafka (admin, offsets, lag). Needs no JVM."""

from __future__ import annotations

from upsert_kafka_ops.kafka.admin import probe

__all__ = ["probe"]
