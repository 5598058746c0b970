"""Kerberos (SASL GSSAPI) against a real MIT KDC and a broker's GSSAPI listener.

A Flink table gives Kerberos in its WITH clause, as the connector pages write it (Huawei DLI's
``connector.kerberos.*`` keys, or Apache Kafka's Krb5LoginModule JAAS line): Spark's Java client reads
and writes through it, and the librdkafka clients (bounds and partition lookups, the lag and admin
clients) log in with the same principal, which needs confluent-kafka built against a librdkafka with
GSSAPI (``make kerberos``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from tests.devservices import LocalKdc

from upsert_kafka_ops.engine import materialize, write_changelog
from upsert_kafka_ops.errors import KafkaConnectionError
from upsert_kafka_ops.kafka import KafkaAdmin, compute_lag
from upsert_kafka_ops.local import LocalKafka
from upsert_kafka_ops.spec.connection import KafkaConnection, for_table
from upsert_kafka_ops.spec.table import UpsertKafkaTable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="module")
def kdc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKdc]:
    with LocalKdc(tmp_path_factory.mktemp("kdc")) as server:
        server.add_principal("etl")
        yield server


@pytest.fixture(scope="module")
def broker(kdc: LocalKdc, jars_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    """A broker whose KERBEROS listener takes GSSAPI only (its PLAINTEXT one seeds the topics)."""
    with LocalKafka(tmp_path_factory.mktemp("kafka-kerberos"), jars_dir=jars_dir, kerberos=kdc) as server:
        yield server


@pytest.fixture(autouse=True)
def _process_kerberos(kdc: LocalKdc, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tickets librdkafka's kinit gets go to a cache of this test's own; KRB5_CONFIG is put back
    after each test (the engine sets it from the table's krb5.conf)."""
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'krb5cc'}")
    monkeypatch.setenv("KRB5_CONFIG", "unset")  # recorded as absent, so put back as absent
    monkeypatch.delenv("KRB5_CONFIG")


def _topic(broker: LocalKafka, rows: int) -> str:
    topic = f"kerberos-{time.monotonic_ns()}"
    broker.create_topic(topic, partitions=2)
    producer = Producer(broker.client_config())
    for i in range(rows):
        producer.produce(topic, key=f'{{"id":{i}}}'.encode(), value=f'{{"v":"k{i}"}}'.encode())
    producer.produce(topic, key=b'{"id":0}', value=None)  # a tombstone: key 0 is gone
    assert producer.flush(30) == 0
    return topic


def _table(topic: str, broker: LocalKafka, security: str) -> UpsertKafkaTable:
    return UpsertKafkaTable.from_flink_ddl(
        f"CREATE TABLE t (id BIGINT, v STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = "
        f"'upsert-kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = "
        f"'{broker.kerberos_bootstrap_servers}', 'properties.security.protocol' = 'SASL_PLAINTEXT', "
        f"'properties.sasl.mechanism' = 'GSSAPI', 'properties.sasl.kerberos.service.name' = 'kafka', {security}, "
        "'key.format' = 'json', 'value.format' = 'json', 'value.fields-include' = 'EXCEPT_KEY')"
    )


def _dli(kdc: LocalKdc, principal: str = "etl") -> str:
    """DLI's keys, as its upsert-kafka page's Kerberos example writes them (paths on this machine)."""
    return (
        f"'properties.connector.auth.open' = 'true', 'properties.connector.kerberos.principal' = "
        f"'{kdc.principal(principal)}', 'properties.connector.kerberos.krb5' = '{kdc.krb5_conf}', "
        f"'properties.connector.kerberos.keytab' = '{kdc.keytab('etl')}'"
    )


def test_kerberos_given_only_in_the_ddl_reaches_every_client(
    kdc: LocalKdc, broker: LocalKafka, spark: SparkSession
) -> None:
    """Read (Spark's Java client, bounds through librdkafka), write (Spark's writer, partition lookup
    through librdkafka) and the lag and admin clients, all over the GSSAPI listener with nothing but
    the DDL's keys."""
    topic = _topic(broker, 6)
    table = _table(topic, broker, _dli(kdc))
    read = materialize(spark, table)
    assert sorted(tuple(r) for r in read.df.collect()) == [(i, f"k{i}") for i in range(1, 6)]
    assert sum(sum(p.values()) for p in read.result.end_offsets.values()) == 7
    changes = spark.createDataFrame([("+I", 9, "new"), ("-D", 1, None)], "op STRING, id BIGINT, v STRING")
    written = write_changelog(changes, table)
    assert (written.records_out, written.tombstones_out) == (2, 1)
    rows = sorted(tuple(r) for r in materialize(spark, table).df.collect())
    assert rows == [(2, "k2"), (3, "k3"), (4, "k4"), (5, "k5"), (9, "new")]

    conn = for_table(KafkaConnection(bootstrap_servers=broker.kerberos_bootstrap_servers), table.properties)
    group = f"kerberos-group-{time.monotonic_ns()}"
    consumer = Consumer({**conn.to_librdkafka(), "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(
            offsets=[TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)], asynchronous=False
        )
    finally:
        consumer.close()
    with KafkaAdmin(conn, timeout=30) as admin:
        assert admin.describe_topics({topic})[topic].partitions == 2
        report = compute_lag(
            admin, admin.committed_offsets(group, [(topic, 0), (topic, 1)]), isolation="read_committed"
        )
    assert report.total_lag == 9  # the seven seeded records and the two written, none consumed


def test_the_apache_kafka_jaas_form_works_too(kdc: LocalKdc, broker: LocalKafka, spark: SparkSession) -> None:
    """Apache Kafka's own form: a Krb5LoginModule line (keytab and principal, no secret, so it may be
    literal); librdkafka takes the principal and keytab out of it, the JVM its krb5.conf from the
    session (set by the first test in this module, or here)."""
    spark.sparkContext._jvm.java.lang.System.setProperty("java.security.krb5.conf", str(kdc.krb5_conf))  # type: ignore[union-attr]
    os.environ["KRB5_CONFIG"] = str(kdc.krb5_conf)  # put back by the fixture
    topic = _topic(broker, 3)
    jaas = (
        "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
        f'keyTab="{kdc.keytab("etl")}" principal="{kdc.principal("etl")}";'
    )
    table = _table(topic, broker, f"'properties.sasl.jaas.config' = '{jaas}'")
    assert str(kdc.keytab("etl")) in table.to_flink_ddl()
    rows = sorted(tuple(r) for r in materialize(spark, table).df.collect())
    assert rows == [(1, "k1"), (2, "k2")]


def test_an_unknown_principal_fails_clearly_in_bounded_time(
    kdc: LocalKdc, broker: LocalKafka, spark: SparkSession
) -> None:
    """A principal the keytab does not hold: the first client (librdkafka's bounds lookup) fails with
    Kafka's authentication error within its timeout, and no record was read."""
    topic = _topic(broker, 2)
    table = _table(topic, broker, _dli(kdc, principal="nobody"))
    started = time.monotonic()
    with pytest.raises(
        KafkaConnectionError, match=r"authentication failed.*Kerberos principal, keytab.*GSSAPI Error"
    ):
        materialize(spark, table)
    assert time.monotonic() - started < 15  # the failure ends the wait; the timeout is 30 s
