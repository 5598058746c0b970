"""The upsert-kafka connector page's Kerberos example (its Example 3: an MRS cluster with Kerberos,
SASL_PLAINTEXT), against a real MIT KDC and a broker's GSSAPI listener: real Flink reads the topic
through Kafka's Krb5LoginModule (open-source Flink has no ``connector.kerberos.*`` keys: it takes the
JAAS line, and the JVM its krb5.conf), the engine reads the documented DDL as written, with local
paths for the keytab and the krb5.conf. Both give the table the page prints after its three records."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Producer
from tests.conformance import engine, flink
from tests.conformance.values import canon
from tests.devservices import LocalKdc

from upsert_kafka_ops.local import LocalKafka

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DDL = """CREATE TABLE upsertKafkaSource ( order_id string, order_channel string, order_time string,
pay_amount double, real_pay double, pay_time string, user_id string, user_name string, area_id string,
PRIMARY KEY(order_id) NOT ENFORCED ) WITH ( 'connector' = 'upsert-kafka', 'topic' = '{topic}',
'properties.bootstrap.servers' = '{bootstrap}', 'key.format' = 'csv', 'value.format' = 'json',
'properties.sasl.mechanism' = 'GSSAPI', 'properties.security.protocol' = 'SASL_PLAINTEXT',
'properties.sasl.kerberos.service.name' = 'kafka', 'properties.connector.auth.open' = 'true',
'properties.connector.kerberos.principal' = '{principal}', 'properties.connector.kerberos.krb5' = '{krb5}',
'properties.connector.kerberos.keytab' = '{keytab}'{extra} )"""
#: the three records the page inserts (keyed by order_id, csv)
RECORDS = [
    '{"order_id":"202303251202020001", "order_channel":"miniAppShop", "order_time":"2023-03-25 12:02:02", '
    '"pay_amount":"60.00", "real_pay":"60.00", "pay_time":"2023-03-25 12:03:00", "user_id":"0002", '
    '"user_name":"Bob", "area_id":"330110"}',
    '{"order_id":"202303251505050001", "order_channel":"appshop", "order_time":"2023-03-25 15:05:05", '
    '"pay_amount":"500.00", "real_pay":"400.00", "pay_time":"2023-03-25 15:10:00", "user_id":"0003", '
    '"user_name":"Cindy", "area_id":"330108"}',
    '{"order_id":"202303251202020001", "order_channel":"miniAppShop", "order_time":"2023-03-25 12:02:02", '
    '"pay_amount":"60.00", "real_pay":"60.00", "pay_time":"2023-03-25 12:03:00", "user_id":"0002", '
    '"user_name":"Bob", "area_id":"330111"}',
]
#: the page's output folded: +I Bob 330110, +I Cindy, -U/+U Bob 330111
DOCUMENTED = [
    ["202303251202020001", "miniAppShop", "2023-03-25 12:02:02", 60.0, 60.0, "2023-03-25 12:03:00", "0002", "Bob", "330111"],
    ["202303251505050001", "appshop", "2023-03-25 15:05:05", 500.0, 400.0, "2023-03-25 15:10:00", "0003", "Cindy", "330108"],
]  # fmt: skip


@pytest.fixture(scope="module")
def kerberos(
    jars_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LocalKdc, LocalKafka, str]]:
    """A KDC with the example's user, a broker with a GSSAPI listener, and the example's topic."""
    saved = {k: os.environ.get(k) for k in ("KRB5_CONFIG", "KRB5CCNAME")}
    with LocalKdc(tmp_path_factory.mktemp("kdc")) as kdc:
        kdc.add_principal("username")
        os.environ["KRB5CCNAME"] = f"FILE:{kdc.work_dir / 'krb5cc'}"
        os.environ.pop("KRB5_CONFIG", None)
        work = tmp_path_factory.mktemp("kafka-kerberos")
        with LocalKafka(work, jars_dir=jars_dir, kerberos=kdc) as broker:
            topic = f"kerberos-example-{uuid.uuid4().hex[:6]}"
            broker.create_topic(topic, partitions=2)
            producer = Producer(broker.client_config())
            for record in RECORDS:
                order_id = record.split('"order_id":"')[1].split('"')[0]
                producer.produce(topic, key=order_id.encode(), value=record.encode())
            assert producer.flush(30) == 0
            yield kdc, broker, topic
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _ddl(kdc: LocalKdc, broker: LocalKafka, topic: str, extra: str = "") -> str:
    return DDL.format(topic=topic, bootstrap=broker.kerberos_bootstrap_servers, principal=kdc.principal("username"),
                      krb5=kdc.krb5_conf, keytab=kdc.keytab("username"), extra=extra)  # fmt: skip


def test_the_documented_kerberos_example_gives_flinks_and_the_documented_table(
    kerberos: tuple[LocalKdc, LocalKafka, str],
    flink_jars: list[Path],
    spark: SparkSession,
    tmp_path: Path,
) -> None:
    kdc, broker, topic = kerberos
    jaas = (
        "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
        f'keyTab="{kdc.keytab("username")}" principal="{kdc.principal("username")}";'
    )
    flink_ddl = _ddl(kdc, broker, topic, f", 'properties.sasl.jaas.config' = '{jaas}', "
                     "'scan.bounded.mode' = 'latest-offset'")  # fmt: skip
    outcome = flink.run(
        [flink.Case("kerberos", "upsertKafkaSource", flink_ddl)],
        flink_jars,
        tmp_path / "flink.log",
        env={"JAVA_TOOL_OPTIONS": f"-Djava.security.krb5.conf={kdc.krb5_conf}"},
    )["kerberos"]
    assert outcome.error is None, outcome.error
    flink_rows = sorted(([canon(c) for c in row] for row in outcome.table(["order_id"]).values()), key=repr)
    assert outcome.kinds() == {"+I": 2, "-U": 1, "+U": 1}  # as the page prints
    ours = engine.outcome(spark, _ddl(kdc, broker, topic))
    assert ours == flink_rows == sorted(([canon(c) for c in row] for row in DOCUMENTED), key=repr)
