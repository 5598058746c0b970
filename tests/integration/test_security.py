"""SCRAM and SSL smoke connections: right credentials work, wrong ones fail clearly.

Both clients are checked: librdkafka (confluent-kafka) and the Java client inside Spark.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Producer

from upsert_kafka_ops.engine import materialize, write_changelog
from upsert_kafka_ops.errors import KafkaConnectionError, SpecError
from upsert_kafka_ops.kafka import probe
from upsert_kafka_ops.local import LocalKafka
from upsert_kafka_ops.local.tls import generate
from upsert_kafka_ops.spec.connection import KafkaConnection
from upsert_kafka_ops.spec.table import UpsertKafkaTable

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


def _secured_table(topic: str, servers: str, security: str) -> UpsertKafkaTable:
    return UpsertKafkaTable.from_flink_ddl(
        f"CREATE TABLE t (id BIGINT, v STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = "
        f"'upsert-kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{servers}', {security}, "
        "'key.format' = 'json', 'value.format' = 'json', 'value.fields-include' = 'EXCEPT_KEY')"
    )


def test_security_given_only_in_the_ddl_reaches_every_client(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Flink users write security in the WITH clause: the SCRAM and the SSL listener are read and
    written with nothing else given (Spark's reader and writer, the bounds lookups through
    librdkafka), the JAAS line through an environment variable, never in the DDL."""
    topic = new_topic(partitions=2)
    producer = Producer(kafka.client_config())
    for i in range(5):
        producer.produce(topic, key=f'{{"id":{i}}}'.encode(), value=f'{{"v":"x{i}"}}'.encode())
    assert producer.flush(30) == 0
    monkeypatch.setenv(
        "UKO_TEST_JAAS",
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="bob" password="bob-secret";',
    )
    scram = _secured_table(
        topic, kafka.sasl_bootstrap_servers,
        "'properties.security.protocol' = 'SASL_PLAINTEXT', 'properties.sasl.mechanism' = 'SCRAM-SHA-512', "
        "'properties.sasl.jaas.config' = 'env:UKO_TEST_JAAS'",
    )  # fmt: skip
    assert "bob-secret" not in scram.to_flink_ddl()
    read = materialize(spark, scram)
    assert sorted(tuple(r) for r in read.df.collect()) == [(i, f"x{i}") for i in range(5)]
    tls = _secured_table(
        topic, kafka.ssl_bootstrap_servers,
        f"'properties.security.protocol' = 'SSL', 'properties.ssl.truststore.type' = 'PEM', "
        f"'properties.ssl.truststore.location' = '{kafka.ca_file}'",
    )  # fmt: skip
    written = write_changelog(spark.createDataFrame([("+I", 9, "y")], "op STRING, id BIGINT, v STRING"), tls)
    assert written.records_out == 1
    assert sorted(tuple(r) for r in materialize(spark, tls).df.collect())[-1] == (9, "y")
    # before, the connection's PLAINTEXT default overrode the DDL and the run failed
    # ("Broker transport failure") without naming the dropped setting
    with pytest.raises(SpecError, match=r"properties\.security\.protocol.*security_protocol = 'PLAINTEXT'"):
        materialize(spark, tls, KafkaConnection(bootstrap_servers=kafka.ssl_bootstrap_servers,
                                               security_protocol="PLAINTEXT"))  # fmt: skip


@pytest.mark.parametrize("store_type", ["JKS", "PKCS12"])
def test_a_java_truststore_in_the_ddl_serves_every_client(
    kafka: LocalKafka,
    spark: SparkSession,
    new_topic: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    store_type: str,
) -> None:
    """A Flink table names a Java truststore (JKS when no type is given, as Kafka's Java client reads
    it): Spark reads it, and librdkafka's clients (the bounds and offset lookups) get its certificates
    as PEM exported by keytool, the password through the environment only."""
    store = tmp_path / f"trust.{store_type.lower()}"
    monkeypatch.setenv("UKO_TEST_TRUST_PW", "trust-secret")
    keytool = subprocess.run(
        ["keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", str(kafka.ca_file), "-keystore",
         str(store), "-storetype", store_type, "-storepass:env", "UKO_TEST_TRUST_PW"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert keytool.returncode == 0, keytool.stderr
    topic = new_topic(partitions=2)
    producer = Producer(kafka.client_config())
    for i in range(3):
        producer.produce(topic, key=f'{{"id":{i}}}'.encode(), value=f'{{"v":"s{i}"}}'.encode())
    assert producer.flush(30) == 0
    typed = "" if store_type == "JKS" else f"'properties.ssl.truststore.type' = '{store_type}', "
    table = _secured_table(
        topic, kafka.ssl_bootstrap_servers,
        f"'properties.security.protocol' = 'SSL', {typed}'properties.ssl.truststore.location' = '{store}', "
        "'properties.ssl.truststore.password' = 'env:UKO_TEST_TRUST_PW'",
    )  # fmt: skip
    assert "trust-secret" not in table.to_flink_ddl()
    read = materialize(spark, table)
    assert sorted(tuple(r) for r in read.df.collect()) == [(i, f"s{i}") for i in range(3)]
    assert sum(sum(p.values()) for p in read.result.end_offsets.values()) == 3
