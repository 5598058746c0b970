"""Security in a table's WITH clause: one precedence (the table over the connection's defaults, two
explicit different values an error naming both), secrets only as references, and every client's
configuration built from the result."""

from __future__ import annotations

import pytest

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.spec.connection import KafkaConnection, SecretRef, client_properties, for_table
from upsert_kafka_ops.spec.table import UpsertKafkaTable

JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="etl" password="p\\"w";'
DDL = """CREATE TABLE t (id BIGINT, v STRING, PRIMARY KEY (id) NOT ENFORCED) WITH (
  'connector' = 'upsert-kafka', 'topic' = 't', 'properties.bootstrap.servers' = 'b:9093',
  'properties.security.protocol' = 'SASL_SSL', 'properties.sasl.mechanism' = 'SCRAM-SHA-256',
  'properties.sasl.jaas.config' = 'env:UKO_TEST_JAAS', 'properties.ssl.truststore.location' = '/ca.pem',
  'properties.ssl.endpoint.identification.algorithm' = '', 'properties.client.id' = 'me',
  'key.format' = 'json', 'value.format' = 'json')"""


def test_the_tables_security_wins_over_the_connections_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UKO_TEST_JAAS", JAAS)
    table = UpsertKafkaTable.from_flink_ddl(DDL)
    conn = for_table(KafkaConnection(bootstrap_servers="other:9092"), table.properties)
    assert conn.bootstrap_servers == "other:9092"  # the connection's brokers stay
    assert (conn.security_protocol, conn.sasl_mechanism) == ("SASL_SSL", "SCRAM-SHA-256")
    assert conn.sasl_jaas_config == SecretRef(env="UKO_TEST_JAAS")
    java = conn.java_client_properties()
    assert java["security.protocol"] == "SASL_SSL" and java["sasl.jaas.config"] == JAAS
    assert (
        java["ssl.truststore.location"] == "/ca.pem" and java["ssl.endpoint.identification.algorithm"] == ""
    )
    rdk = conn.to_librdkafka()  # librdkafka has no JAAS: the credentials come out of it
    assert (rdk["sasl.username"], rdk["sasl.password"]) == ("etl", 'p"w')
    assert rdk["ssl.ca.location"] == "/ca.pem" and rdk["ssl.endpoint.identification.algorithm"] == "none"
    assert client_properties(table.properties) == {"client.id": "me"}


def test_two_explicit_different_values_are_an_error_naming_both() -> None:
    conn = KafkaConnection(bootstrap_servers="b:9092", security_protocol="SSL")
    with pytest.raises(SpecError) as info:
        for_table(conn, {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"})
    text = str(info.value)
    assert (
        "properties.security.protocol" in text
        and "'SASL_SSL'" in text
        and "security_protocol = 'SSL'" in text
    )
    same = for_table(conn, {"security.protocol": "ssl"})  # the same value twice is fine
    assert same.security_protocol == "SSL"


def test_a_literal_secret_in_a_table_is_refused_naming_the_property_and_never_shown() -> None:
    literal = DDL.replace("'env:UKO_TEST_JAAS'", "'" + JAAS.replace("'", "''") + "'")
    with pytest.raises(SpecError) as info:
        UpsertKafkaTable.from_flink_ddl(literal)
    assert "properties.sasl.jaas.config" in str(info.value) and "env:NAME" in str(info.value)
    assert 'p\\"w' not in str(info.value) and 'password="' not in str(info.value)


def test_a_reference_stays_a_reference_in_the_tables_ddl(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UKO_TEST_JAAS", JAAS)
    ddl = UpsertKafkaTable.from_flink_ddl(DDL).to_flink_ddl()
    assert "'properties.sasl.jaas.config' = 'env:UKO_TEST_JAAS'" in ddl and "etl" not in ddl


def test_a_jaas_line_without_credentials_names_the_field_for_librdkafka(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(
        "UKO_TEST_JAAS", "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
    )
    conn = for_table(KafkaConnection(bootstrap_servers="b:9092"), {"security.protocol": "SASL_SSL",
                     "sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": "env:UKO_TEST_JAAS"})  # fmt: skip
    with pytest.raises(SpecError, match="sasl_jaas_config"):
        conn.to_librdkafka()


def test_a_store_without_its_type_is_read_as_kafkas_java_client_reads_it() -> None:
    base = KafkaConnection(bootstrap_servers="b:9092")
    jks = for_table(
        base, {"security.protocol": "SSL", "ssl.truststore.location": "/etc/kafka/truststore.jks"}
    )
    assert jks.ssl_truststore_type == "JKS"  # Kafka's default, as a Flink table relies on
    with pytest.raises(SpecError, match=r"cannot read the store '/etc/kafka/truststore\.jks'"):
        jks.to_librdkafka()  # the admin and lag clients read the JKS store through keytool
    pem = for_table(base, {"security.protocol": "SSL", "ssl.truststore.location": "/etc/kafka/ca.pem"})
    assert pem.ssl_truststore_type == "PEM"
    typed = KafkaConnection(bootstrap_servers="b:9092", ssl_truststore_type="PKCS12")
    assert for_table(typed, {"ssl.truststore.location": "/x.jks"}).ssl_truststore_type == "PKCS12"


@pytest.mark.parametrize(
    ("properties", "field"),
    [
        ({"properties.sasl.mechanism": "GSSAPI"}, "properties.sasl.mechanism"),
        ({"properties.sasl.kerberos.service.name": "kafka"}, "properties.sasl.kerberos.service.name"),
    ],
)
def test_kerberos_in_a_table_is_refused_at_validation_not_at_the_first_connection(
    properties: dict[str, str], field: str
) -> None:
    options = {"connector": "upsert-kafka", "topic": "t", "key.format": "json", "value.format": "json",
               "properties.security.protocol": "SASL_PLAINTEXT", **properties}  # fmt: skip
    with pytest.raises(SpecError, match=r"Kerberos \(GSSAPI\) is not supported yet") as info:
        UpsertKafkaTable.from_options(options, [{"name": "id", "type": "BIGINT"}], ["id"])
    assert info.value.field == field and info.value.fix
