"""Security in a table's WITH clause: one precedence (the table over the connection's defaults, two
explicit different values an error naming both), secrets only as references, and every client's
configuration built from the result."""

from __future__ import annotations

import os
from typing import Any

import pytest

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.spec.connection import KafkaConnection, SecretRef, client_properties, for_table
from upsert_kafka_ops.spec.table import KafkaTable, UpsertKafkaTable

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


KRB5 = "com.sun.security.auth.module.Krb5LoginModule"
KERBEROS = {"connector": "upsert-kafka", "topic": "t", "key.format": "json", "value.format": "json",
            "properties.bootstrap.servers": "kdc-host:9092", "properties.security.protocol": "SASL_PLAINTEXT",
            "properties.sasl.mechanism": "GSSAPI", "properties.sasl.kerberos.service.name": "kafka-svc"}  # fmt: skip


@pytest.fixture(autouse=True)
def _kerberos_environment(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The code sets KRB5_CONFIG and KRB5CCNAME for its process: each test starts without the first
    and with a ticket cache of its own, and both are put back after it (setenv records the absence
    that a bare delenv of an unset variable would not)."""
    monkeypatch.setenv("KRB5_CONFIG", "unset")
    monkeypatch.delenv("KRB5_CONFIG")
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path}/krb5cc")


def _kerberos_table(**properties: str) -> UpsertKafkaTable:
    options = {**KERBEROS, **{f"properties.{k}": v for k, v in properties.items()}}
    return UpsertKafkaTable.from_options(options, [{"name": "id", "type": "BIGINT"}], ["id"])


def test_kerberos_as_dli_writes_it_reaches_both_clients() -> None:
    table = _kerberos_table(**{
        "connector.auth.open": "true", "connector.kerberos.principal": "etl@EXAMPLE.COM",
        "connector.kerberos.keytab": "/etc/etl.keytab", "connector.kerberos.krb5": "/etc/example-krb5.conf",
    })  # fmt: skip
    conn = for_table(KafkaConnection(bootstrap_servers="b:9092"), table.properties)
    assert (conn.sasl_mechanism, conn.kerberos_principal, conn.kerberos_keytab, conn.kerberos_service_name) == (
        "GSSAPI", "etl@EXAMPLE.COM", "/etc/etl.keytab", "kafka-svc"
    )  # fmt: skip
    java = conn.java_client_properties()
    assert java["sasl.jaas.config"] == (
        f'{KRB5} required useKeyTab=true storeKey=true refreshKrb5Config=true keyTab="/etc/etl.keytab" '
        'principal="etl@EXAMPLE.COM";'
    )
    assert java["sasl.kerberos.service.name"] == "kafka-svc"
    rdk = conn.to_librdkafka()
    assert (rdk["sasl.kerberos.principal"], rdk["sasl.kerberos.keytab"]) == (
        "etl@EXAMPLE.COM",
        "/etc/etl.keytab",
    )
    assert rdk["sasl.kerberos.service.name"] == "kafka-svc" and rdk["sasl.mechanism"] == "GSSAPI"
    assert os.environ["KRB5_CONFIG"] == "/etc/example-krb5.conf"  # MIT's library reads it from there
    assert client_properties(table.properties) == {}  # none of them is a Java client property


def test_kerberos_as_apache_kafka_writes_it_a_jaas_line_is_no_secret() -> None:
    jaas = f'{KRB5} required useKeyTab=true storeKey=true keyTab="/k/etl.keytab" principal="etl@EX.COM";'
    table = _kerberos_table(**{"sasl.jaas.config": jaas})
    conn = for_table(KafkaConnection(bootstrap_servers="b:9092"), table.properties)
    assert conn.java_client_properties()["sasl.jaas.config"] == jaas
    rdk = conn.to_librdkafka()  # librdkafka has no JAAS: the principal and keytab come out of it
    assert (rdk["sasl.kerberos.principal"], rdk["sasl.kerberos.keytab"]) == ("etl@EX.COM", "/k/etl.keytab")
    cache = f'{KRB5} required useTicketCache=true principal="etl@EX.COM";'
    rdk = for_table(KafkaConnection(bootstrap_servers="b:9092"), {"sasl.mechanism": "GSSAPI",
                    "security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": cache}).to_librdkafka()  # fmt: skip
    assert "sasl.kerberos.keytab" not in rdk and rdk["sasl.kerberos.min.time.before.relogin"] == "0"
    assert "password" not in repr(table) and "etl.keytab" in table.to_flink_ddl()


@pytest.mark.parametrize(
    ("properties", "field", "message"),
    [
        ({"connector.auth.open": "yes"}, "properties.connector.auth.open", "is 'yes'"),
        ({"connector.auth.open": "false", "connector.kerberos.principal": "a@B"},
         "properties.connector.auth.open", "connector.kerberos.principal is set"),
        ({"connector.kerberos.keytab": "obs://bucket/user.keytab", "connector.kerberos.principal": "a@B"},
         "properties.connector.kerberos.keytab", "obs:// files are not downloaded"),
        ({"connector.kerberos.krb5": "s3://b/krb5.conf"}, "properties.connector.kerberos.krb5", "s3://"),
        ({"connector.kerberos.krb5": "file:///etc/krb5.conf"}, "properties.connector.kerberos.krb5", "a URL"),
    ],
)  # fmt: skip
def test_kerberos_mistakes_in_a_table_are_refused_when_it_is_built(
    properties: dict[str, str], field: str, message: str
) -> None:
    with pytest.raises(SpecError, match=message) as info:
        _kerberos_table(**properties)
    assert info.value.field == field and info.value.fix


@pytest.mark.parametrize(
    ("properties", "connection", "field", "message"),
    [
        ({"connector.kerberos.principal": "a@B"}, {}, "kerberos_keytab", "go together"),
        ({}, {}, "kerberos_principal", "GSSAPI needs a principal and its keytab"),
        ({"sasl.jaas.config": f'{KRB5} required useKeyTab=true keyTab="/t.keytab" principal="t@B";'},
         {"kerberos_principal": "c@B", "kerberos_keytab": "/c.keytab", "security_protocol": "SASL_PLAINTEXT",
          "sasl_mechanism": "GSSAPI"}, "sasl_jaas_config", "could log in as different principals"),
    ],
)  # fmt: skip
def test_kerberos_mistakes_across_table_and_connection_are_refused_when_they_meet(
    properties: dict[str, str], connection: dict[str, str], field: str, message: str
) -> None:
    table = _kerberos_table(**properties)
    with pytest.raises(SpecError, match=message) as info:
        for_table(KafkaConnection(bootstrap_servers="b:9092", **connection), table.properties)
    assert info.value.field == field and info.value.fix


def test_gssapi_with_another_login_module_is_refused_for_librdkafka() -> None:
    conn = KafkaConnection(bootstrap_servers="b:9092", security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI",
                           sasl_jaas_config=SecretRef.from_value(JAAS))  # fmt: skip
    with pytest.raises(
        SpecError, match=r"is not a com\.sun\.security\.auth\.module\.Krb5LoginModule line"
    ) as info:
        conn.to_librdkafka()
    assert info.value.field == "sasl_jaas_config" and "password" not in str(info.value)


def test_one_ticket_cache_holds_one_principal_and_a_process_gets_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def conn(principal: str) -> KafkaConnection:
        return KafkaConnection(bootstrap_servers="b:9092", security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI",
                               kerberos_principal=principal, kerberos_keytab="/k.keytab")  # fmt: skip

    conn("one@EX.COM").to_librdkafka()
    conn("one@EX.COM").to_librdkafka()  # the same principal again: its cache
    with pytest.raises(SpecError, match=r"already holds 'one@EX\.COM'") as info:
        conn("two@EX.COM").to_librdkafka()
    assert info.value.field == "kerberos_principal"
    monkeypatch.delenv("KRB5CCNAME")
    conn("two@EX.COM").to_librdkafka()  # no cache named: a private one, never /tmp/krb5cc_<uid>
    assert os.environ["KRB5CCNAME"].startswith("FILE:") and "uko-krb5cc-" in os.environ["KRB5CCNAME"]


def test_a_second_krb5_conf_in_one_process_is_an_error_naming_both(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KRB5_CONFIG", "/etc/krb5-one.conf")
    conn = KafkaConnection(bootstrap_servers="b:9092", security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI",
                           kerberos_principal="a@B", kerberos_keytab="/a.keytab",
                           kerberos_krb5_conf="/etc/krb5-two.conf")  # fmt: skip
    with pytest.raises(SpecError, match=r"krb5-two\.conf.*KRB5_CONFIG='/etc/krb5-one\.conf'") as info:
        conn.to_librdkafka()
    assert info.value.field == "kerberos_krb5_conf"


def test_an_airflow_kafka_connections_kerberos_keys_become_the_fields() -> None:
    conn = KafkaConnection.from_librdkafka({
        "bootstrap.servers": "b:9092", "security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI",
        "sasl.kerberos.principal": "etl@EX.COM", "sasl.kerberos.keytab": "/k/etl.keytab",
        "sasl.kerberos.service.name": "kafka-svc",
    })  # fmt: skip
    assert (conn.kerberos_principal, conn.kerberos_keytab, conn.kerberos_service_name) == (
        "etl@EX.COM", "/k/etl.keytab", "kafka-svc"
    )  # fmt: skip
    assert conn.librdkafka_properties == {}
    assert 'principal="etl@EX.COM"' in conn.java_client_properties()["sasl.jaas.config"]


@pytest.mark.parametrize(
    ("jaas", "principal", "keytab"),
    [
        (f'{KRB5} required useKeyTab=true keyTab="/my dir/etl.keytab" principal="etl@EX.COM";',
         "etl@EX.COM", "/my dir/etl.keytab"),
        (f"{KRB5} required useKeyTab=true keyTab=/k/etl.keytab principal=etl@EX.COM;", "etl@EX.COM", "/k/etl.keytab"),
        (f'{KRB5} required useKeyTab=false keyTab="/k/etl.keytab" principal="etl@EX.COM";', "etl@EX.COM", None),
    ],
)  # fmt: skip
def test_librdkafka_reads_the_principal_and_keytab_of_any_krb5_jaas_line(
    jaas: str, principal: str, keytab: str | None
) -> None:
    conn = KafkaConnection(bootstrap_servers="b:9092", security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI",
                           sasl_jaas_config=SecretRef.from_value(jaas))  # fmt: skip
    rdk = conn.to_librdkafka()
    assert (rdk["sasl.kerberos.principal"], rdk.get("sasl.kerberos.keytab")) == (principal, keytab)


@pytest.mark.parametrize("connector", ["kafka", "upsert-kafka"])
def test_dlis_dew_secret_keys_are_refused_with_what_to_write_instead(connector: str) -> None:
    options = {"connector": connector, "topic": "t", "properties.bootstrap.servers": "b:9092", "format": "json",
               "key.format": "json", "value.format": "json", "dew.endpoint": "kms.example.com",
               "dew.csms.secretName": "kafka-secrets"}  # fmt: skip
    if connector == "kafka":
        options.pop("key.format")
    with pytest.raises(SpecError, match=r"dew\.csms\.secretName") as info:
        if connector == "kafka":
            KafkaTable.from_options({k: v for k, v in options.items() if k != "value.format"},
                                    [{"name": "id", "type": "BIGINT"}])  # fmt: skip
        else:
            UpsertKafkaTable.from_options({k: v for k, v in options.items() if k != "format"},
                                          [{"name": "id", "type": "BIGINT"}], ["id"])  # fmt: skip
    assert info.value.fix is not None and "'env:TRUST_PASSWORD'" in info.value.fix
