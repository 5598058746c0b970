"""SCRAM and SSL smoke connections: right credentials work, wrong ones fail clearly.

Both clients are checked: librdkafka (confluent-kafka) and the Java client inside Spark.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Producer

from upsert_kafka_ops.errors import KafkaConnectionError
from upsert_kafka_ops.kafka import probe
from upsert_kafka_ops.local import LocalKafka
from upsert_kafka_ops.local.tls import generate

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _scram(kafka: LocalKafka, mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": kafka.sasl_bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_user_connects(kafka: LocalKafka, mechanism: str) -> None:
    md = probe(_scram(kafka, mechanism, "alice", "alice-secret"), timeout=20)
    assert [b.port for b in md.brokers.values()] == [kafka.ports["SASL_PLAINTEXT"]]


def test_scram_wrong_password_fails_clearly_without_leaking_it(kafka: LocalKafka) -> None:
    with pytest.raises(KafkaConnectionError) as info:
        probe(_scram(kafka, "SCRAM-SHA-256", "alice", "not-the-password"), timeout=15)
    text = str(info.value)
    assert "authentication failed" in text
    assert kafka.sasl_bootstrap_servers in text
    assert "not-the-password" not in text


def test_ssl_connects_with_the_generated_ca(kafka: LocalKafka) -> None:
    conf = {
        "bootstrap.servers": kafka.ssl_bootstrap_servers,
        "security.protocol": "SSL",
        "ssl.ca.location": str(kafka.ca_file),
    }
    md = probe(conf, timeout=20)
    assert [b.port for b in md.brokers.values()] == [kafka.ports["SSL"]]


def test_ssl_with_another_ca_fails_clearly(kafka: LocalKafka, tmp_path: Any) -> None:
    other = generate(tmp_path / "other-ca", common_name="some other CA")
    conf = {
        "bootstrap.servers": kafka.ssl_bootstrap_servers,
        "security.protocol": "SSL",
        "ssl.ca.location": str(other.ca_cert),
    }
    with pytest.raises(KafkaConnectionError, match="TLS handshake failed"):
        probe(conf, timeout=15)


def test_unreachable_broker_fails_within_the_timeout() -> None:
    from upsert_kafka_ops.local import free_port

    with pytest.raises(KafkaConnectionError, match="no broker answered within 3s"):
        probe({"bootstrap.servers": f"127.0.0.1:{free_port()}"}, timeout=3)


def _spark_count(spark: SparkSession, topic: str, options: dict[str, str]) -> int:
    reader = spark.read.format("kafka").option("subscribe", topic)
    for k, v in options.items():
        reader = reader.option(k, v)
    return int(reader.load().count())


def _produce(kafka: LocalKafka, topic: str, n: int) -> None:
    p = Producer(kafka.client_config())
    for i in range(n):
        p.produce(topic, key=str(i).encode(), value=b"v")
    assert p.flush(30) == 0


def test_spark_reads_over_scram_and_ssl(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=2)
    _produce(kafka, topic, 7)
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="bob" password="bob-secret";'
    scram = {
        "kafka.bootstrap.servers": kafka.sasl_bootstrap_servers,
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": jaas,
    }
    ssl = {
        "kafka.bootstrap.servers": kafka.ssl_bootstrap_servers,
        "kafka.security.protocol": "SSL",
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(kafka.ca_file),
    }
    assert _spark_count(spark, topic, scram) == 7
    assert _spark_count(spark, topic, ssl) == 7


def test_spark_with_a_wrong_scram_password_fails(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    topic = new_topic()
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="bob" password="wrong";'
    options = {
        "kafka.bootstrap.servers": kafka.sasl_bootstrap_servers,
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": jaas,
        "kafka.default.api.timeout.ms": "15000",
        "kafka.request.timeout.ms": "10000",
        "fetchOffset.numRetries": "1",
    }
    with pytest.raises(Exception, match=r"(?i)authentication"):
        _spark_count(spark, topic, options)
