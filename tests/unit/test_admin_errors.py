"""The typed errors KafkaAdmin gives for a topic the broker does not know: the topic is named (no
broker is asked: ``failure`` only turns an error into the project's own)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from upsert_kafka_ops.kafka.admin import KafkaAdmin, TopicNotFoundError


@pytest.mark.parametrize(
    ("what", "topic", "named"),
    [
        ("list offsets", "users", "users"),  # an error inside a result: its topic
        ("describe topic clicks", "clicks", "clicks"),
        ("list offsets", None, "one of those asked for (while trying to list offsets)"),
    ],
)
def test_a_topic_not_found_is_named(what: str, topic: str | None, named: str) -> None:
    admin = KafkaAdmin({"bootstrap.servers": "127.0.0.1:9"})
    error = admin.failure(KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)), what, topic)
    assert isinstance(error, TopicNotFoundError) and error.topics == [named]
    assert str(error).startswith(f"topic: topic(s) not found: {named}.")
