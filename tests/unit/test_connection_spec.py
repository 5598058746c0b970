"""Kafka connections and secret references: client options for Spark (Java) and librdkafka, validation,
and the rule that an in-process secret never shows up in repr, str, JSON, errors or logs."""

from __future__ import annotations

import logging
import traceback
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.spec.connection import KafkaConnection, SecretRef

SECRET = 's3cr3t-Val"ue\\with-specials'
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


def sasl(mechanism: str = "PLAIN", password: Any = None, **fields: Any) -> KafkaConnection:
    return KafkaConnection(
        bootstrap_servers="broker:9093",
        security_protocol=fields.pop("security_protocol", "SASL_SSL"),
        sasl_mechanism=mechanism,
        username=fields.pop("username", "etl"),
        password=SecretRef.from_value(SECRET) if password is None else password,
        **fields,
    )


def error(fn: Any, *args: Any, **kwargs: Any) -> SpecError:
    with pytest.raises(SpecError) as info:
        fn(*args, **kwargs)
    return info.value


# -- a reader of JAAS config as Kafka's JaasConfig reads it (java.io.StreamTokenizer) ------------------
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def _quoted(text: str, i: int) -> tuple[str, int]:
    """The quoted string starting at ``text[i]`` and the index after it, as StreamTokenizer reads it."""
    quote, i, out = text[i], i + 1, []
    while i < len(text) and text[i] not in (quote, "\n", "\r"):
        c = text[i]
        if c == "\\":
            i += 1
            c = text[i]
            if "0" <= c <= "7":  # octal escape: up to three digits (\377 at most)
                digits = c
                while len(digits) < (3 if digits[0] <= "3" else 2) and "0" <= text[i + 1] <= "7":
                    i += 1
                    digits += text[i]
                c = chr(int(digits, 8))
            else:
                c = _ESCAPES.get(c, c)
        out.append(c)
        i += 1
    assert i < len(text) and text[i] == quote, f"quoted string not closed in {text!r}"  # a line break ends it
    return "".join(out), i + 1


def parse_jaas(config: str) -> tuple[str, str, dict[str, str]]:
    """(login module, control flag, options) of a one-module JAAS config."""
    module, flag, rest = config.split(" ", 2)
    options: dict[str, str] = {}
    i = 0
    while rest[i] != ";":
        eq = rest.index("=", i)
        key = rest[i:eq].strip()
        options[key], i = _quoted(rest, eq + 1)
        while rest[i] == " ":
            i += 1
    assert rest[i + 1 :] == "", f"text after ';' in {config!r}"
    return module, flag, options


# -- PLAINTEXT ---------------------------------------------------------------------------------------
def test_plaintext() -> None:
    conn = KafkaConnection(bootstrap_servers="a:9092,b:9092")
    assert conn.to_spark_options() == {
        "kafka.bootstrap.servers": "a:9092,b:9092",
        "kafka.security.protocol": "PLAINTEXT",
    }
    assert conn.to_librdkafka() == {"bootstrap.servers": "a:9092,b:9092", "security.protocol": "PLAINTEXT"}


def test_extra_properties_go_to_their_client_only() -> None:
    conn = KafkaConnection(
        bootstrap_servers="a:9092",
        properties={"client.id": "java", "request.timeout.ms": "1000"},
        librdkafka_properties={"client.id": "rd", "socket.timeout.ms": "500"},
    )
    spark = conn.to_spark_options()
    assert spark["kafka.client.id"] == "java"
    assert spark["kafka.request.timeout.ms"] == "1000"
    assert "kafka.socket.timeout.ms" not in spark
    rd = conn.to_librdkafka()
    assert (rd["client.id"], rd["socket.timeout.ms"]) == ("rd", "500")
    assert "request.timeout.ms" not in rd
    assert conn.java_client_properties()["client.id"] == "java"


# -- SASL --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("mechanism", "module"),
    [("PLAIN", PLAIN_MODULE), ("SCRAM-SHA-256", SCRAM_MODULE), ("SCRAM-SHA-512", SCRAM_MODULE)],
)
@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_sasl_login(mechanism: str, module: str, protocol: str) -> None:
    conn = sasl(mechanism, password=SecretRef.from_value("pw"), security_protocol=protocol)
    spark = conn.to_spark_options()
    assert spark["kafka.security.protocol"] == protocol
    assert spark["kafka.sasl.mechanism"] == mechanism
    assert spark["kafka.sasl.jaas.config"] == f'{module} required username="etl" password="pw";'
    assert parse_jaas(spark["kafka.sasl.jaas.config"]) == (
        module,
        "required",
        {"username": "etl", "password": "pw"},
    )
    assert conn.to_librdkafka() == {
        "bootstrap.servers": "broker:9093",
        "security.protocol": protocol,
        "sasl.mechanism": mechanism,
        "sasl.username": "etl",
        "sasl.password": "pw",
    }


def test_jaas_quoting_of_quote_and_backslash() -> None:
    conn = sasl(password=SecretRef.from_value('p"a\\ss'), username='u"\\')
    jaas = conn.to_spark_options()["kafka.sasl.jaas.config"]
    assert jaas == f'{PLAIN_MODULE} required username="u\\"\\\\" password="p\\"a\\\\ss";'


@pytest.mark.parametrize(
    "password",
    [
        SECRET,
        'quote"',
        "back\\",
        "\\",
        "octal\\101",
        "new\nline",
        "cr\rlf",
        "tab\tand'single",
        "ünï ☃",
        "",
        "a;b=c",
    ],
)
def test_jaas_password_reads_back_as_given(password: str) -> None:
    # Bug fixed: a line break in a password ended the quoted string early for Kafka's JAAS parser.
    conn = sasl("SCRAM-SHA-256", password=SecretRef.from_value(password), username="user name")
    module, flag, options = parse_jaas(conn.java_client_properties()["sasl.jaas.config"])
    assert (module, flag) == (SCRAM_MODULE, "required")
    assert options == {"username": "user name", "password": password}
    assert conn.to_librdkafka()["sasl.password"] == password


def test_explicit_jaas_config_is_used_as_is() -> None:
    jaas = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
    conn = KafkaConnection(
        bootstrap_servers="b:9093",
        security_protocol="SASL_SSL",
        sasl_mechanism="OAUTHBEARER",
        sasl_jaas_config=SecretRef.from_value(jaas),
        password=SecretRef.from_value("client-secret"),
    )
    assert conn.to_spark_options()["kafka.sasl.jaas.config"] == jaas
    rd = conn.to_librdkafka()
    assert rd["sasl.mechanism"] == "OAUTHBEARER"
    assert rd["sasl.oauthbearer.client.secret"] == "client-secret"
    assert "sasl.username" not in rd


def test_explicit_jaas_config_replaces_username_and_password_for_plain() -> None:
    jaas = f'{PLAIN_MODULE} required username="x" password="y";'
    conn = KafkaConnection(
        bootstrap_servers="b:9093",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_jaas_config={"env": "UKO_TEST_JAAS"},
    )
    assert conn.sasl_jaas_config == SecretRef(env="UKO_TEST_JAAS")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("UKO_TEST_JAAS", jaas)
        assert conn.to_spark_options()["kafka.sasl.jaas.config"] == jaas


# -- SSL ---------------------------------------------------------------------------------------------
def test_ssl_with_pem_truststore_for_both_clients() -> None:
    conn = KafkaConnection(
        bootstrap_servers="b:9093", security_protocol="SSL", ssl_truststore_location="/ca.pem"
    )
    assert conn.to_spark_options() == {
        "kafka.bootstrap.servers": "b:9093",
        "kafka.security.protocol": "SSL",
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "/ca.pem",
    }
    assert conn.to_librdkafka() == {
        "bootstrap.servers": "b:9093",
        "security.protocol": "SSL",
        "ssl.ca.location": "/ca.pem",
    }


def test_sasl_ssl_combines_both() -> None:
    conn = sasl("SCRAM-SHA-512", ssl_truststore_location="/ca.pem", ssl_endpoint_identification=False)
    spark = conn.to_spark_options()
    assert spark["kafka.ssl.truststore.location"] == "/ca.pem"
    assert spark["kafka.ssl.endpoint.identification.algorithm"] == ""
    assert spark["kafka.sasl.jaas.config"].startswith(SCRAM_MODULE)
    rd = conn.to_librdkafka()
    assert (rd["ssl.ca.location"], rd["ssl.endpoint.identification.algorithm"]) == ("/ca.pem", "none")
    assert rd["sasl.mechanism"] == "SCRAM-SHA-512"


def test_endpoint_identification_on_by_default() -> None:
    conn = KafkaConnection(bootstrap_servers="b:9093", security_protocol="SSL")
    assert "kafka.ssl.endpoint.identification.algorithm" not in conn.to_spark_options()
    assert "ssl.endpoint.identification.algorithm" not in conn.to_librdkafka()


def test_a_jks_truststore_reaches_librdkafka_through_keytool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UKO_TEST_TRUST_PW", "changeit")
    conn = KafkaConnection(
        bootstrap_servers="b:9093",
        security_protocol="SSL",
        ssl_truststore_location="/trust.jks",
        ssl_truststore_type="JKS",
        ssl_truststore_password="env:UKO_TEST_TRUST_PW",
    )
    spark = conn.to_spark_options()
    assert spark["kafka.ssl.truststore.type"] == "JKS"
    assert spark["kafka.ssl.truststore.location"] == "/trust.jks"
    assert spark["kafka.ssl.truststore.password"] == "changeit"
    # librdkafka's clients get the store's certificates as PEM, exported by keytool: a store that is
    # not there is named (tests/integration/test_security.py converts real ones)
    err = error(conn.to_librdkafka)
    assert err.field == "ssl_truststore_location"
    assert "cannot read the store '/trust.jks'" in err.message
    assert "changeit" not in str(err)


def test_a_pkcs12_truststore_does_too() -> None:
    conn = KafkaConnection(
        bootstrap_servers="b:9093",
        security_protocol="SSL",
        ssl_truststore_location="/trust.p12",
        ssl_truststore_type="PKCS12",
    )
    assert conn.to_spark_options()["kafka.ssl.truststore.type"] == "PKCS12"
    with pytest.raises(SpecError, match=r"cannot read the store '/trust\.p12'") as info:
        conn.to_librdkafka()
    assert info.value.field == "ssl_truststore_location"


def test_a_jks_keystore_needs_its_password_for_librdkafka() -> None:
    conn = KafkaConnection(
        bootstrap_servers="b:9093",
        security_protocol="SSL",
        ssl_keystore_location="/client.jks",
        ssl_keystore_type="JKS",
        ssl_keystore_password=SecretRef.from_value("kspw"),
        ssl_key_password=SecretRef.from_value("keypw"),
    )
    spark = conn.to_spark_options()
    assert spark["kafka.ssl.keystore.type"] == "JKS"
    assert spark["kafka.ssl.keystore.location"] == "/client.jks"
    assert spark["kafka.ssl.keystore.password"] == "kspw"
    assert spark["kafka.ssl.key.password"] == "keypw"
    err = error(conn.to_librdkafka)
    assert err.field == "ssl_keystore_location"
    assert "cannot read the store '/client.jks'" in err.message
    assert "kspw" not in str(err)
    no_password = conn.model_copy(update={"ssl_keystore_password": None})
    err = error(no_password.to_librdkafka)
    assert err.field == "ssl_keystore_password" and err.fix


def test_pkcs12_keystore_both_clients() -> None:
    conn = KafkaConnection(
        bootstrap_servers="b:9093",
        security_protocol="SSL",
        ssl_keystore_location="/client.p12",
        ssl_keystore_password=SecretRef.from_value("kspw"),
    )
    spark = conn.to_spark_options()
    assert (spark["kafka.ssl.keystore.type"], spark["kafka.ssl.keystore.location"]) == (
        "PKCS12",
        "/client.p12",
    )
    rd = conn.to_librdkafka()
    assert (rd["ssl.keystore.location"], rd["ssl.keystore.password"]) == ("/client.p12", "kspw")


CERT = "-----BEGIN CERTIFICATE-----\nMIIBcert\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIBkey\n-----END ENCRYPTED PRIVATE KEY-----\n"


def test_client_certificate_pem_files(tmp_path: Path) -> None:
    cert, key = tmp_path / "client.crt", tmp_path / "client.key"
    cert.write_text(CERT)
    key.write_text(KEY)
    (tmp_path / "key.pw").write_text("keypw\n")
    conn = KafkaConnection(
        bootstrap_servers="b:9093",
        security_protocol="SSL",
        ssl_truststore_location=str(tmp_path / "ca.pem"),
        ssl_certificate_location=str(cert),
        ssl_key_location=str(key),
        ssl_key_password={"file": str(tmp_path / "key.pw")},
    )
    java = conn.java_client_properties()
    assert java["ssl.keystore.type"] == "PEM"
    assert java["ssl.keystore.certificate.chain"] == CERT
    assert java["ssl.keystore.key"] == KEY
    assert java["ssl.key.password"] == "keypw"
    assert "ssl.keystore.location" not in java
    assert java["ssl.truststore.type"] == "PEM"
    assert conn.to_spark_options()["kafka.ssl.keystore.key"] == KEY
    rd = conn.to_librdkafka()
    assert rd["ssl.certificate.location"] == str(cert)
    assert rd["ssl.key.location"] == str(key)
    assert rd["ssl.key.password"] == "keypw"
    assert rd["ssl.ca.location"] == str(tmp_path / "ca.pem")


@pytest.mark.parametrize("missing", ["ssl_certificate_location", "ssl_key_location"])
def test_unreadable_pem_file_is_a_spec_error(tmp_path: Path, missing: str) -> None:
    # Bug fixed: a FileNotFoundError escaped instead of a SpecError naming the field.
    files = {"ssl_certificate_location": tmp_path / "client.crt", "ssl_key_location": tmp_path / "client.key"}
    for field, path in files.items():
        if field != missing:
            path.write_text("pem")
    conn = KafkaConnection(
        bootstrap_servers="b:9093", security_protocol="SSL", **{k: str(v) for k, v in files.items()}
    )
    err = error(conn.to_spark_options)
    assert err.field == missing
    assert str(files[missing]) in err.message
    assert err.fix
    librdkafka_key = {
        "ssl_certificate_location": "ssl.certificate.location",
        "ssl_key_location": "ssl.key.location",
    }
    assert conn.to_librdkafka()[librdkafka_key[missing]] == str(
        files[missing]
    )  # librdkafka reads the file itself


@pytest.mark.parametrize(
    ("fields", "at_fault"),
    [
        ({"ssl_certificate_location": "/c.pem"}, "ssl_key_location"),
        ({"ssl_key_location": "/k.pem"}, "ssl_certificate_location"),
    ],
)
def test_certificate_and_key_go_together(fields: dict[str, str], at_fault: str) -> None:
    err = error(KafkaConnection, bootstrap_servers="b:9093", security_protocol="SSL", **fields)
    assert err.field == at_fault
    assert "go together" in err.message
    assert err.fix


# -- from_librdkafka (Airflow 'kafka' connection extra) ------------------------------------------------
AIRFLOW_SECRET = "airflow-pa$$word"
AIRFLOW_EXTRA: dict[str, Any] = {
    "bootstrap.servers": "broker1:9093,broker2:9093",
    "security.protocol": "SASL_SSL",
    "sasl.mechanisms": "SCRAM-SHA-512",
    "sasl.username": "etl",
    "sasl.password": AIRFLOW_SECRET,
    "ssl.ca.location": "/etc/ssl/ca.pem",
    "group.id": "uko",
    "client.id": "airflow",
    "socket.timeout.ms": 10000,
}


def test_from_librdkafka_airflow_extra() -> None:
    conn = KafkaConnection.from_librdkafka(AIRFLOW_EXTRA)
    assert conn.bootstrap_servers == "broker1:9093,broker2:9093"
    assert (conn.security_protocol, conn.sasl_mechanism, conn.username) == (
        "SASL_SSL",
        "SCRAM-SHA-512",
        "etl",
    )
    assert conn.password is not None and conn.password.resolve() == AIRFLOW_SECRET
    assert (conn.ssl_truststore_location, conn.ssl_truststore_type) == ("/etc/ssl/ca.pem", "PEM")
    assert conn.librdkafka_properties == {
        "group.id": "uko",
        "client.id": "airflow",
        "socket.timeout.ms": "10000",
    }
    assert conn.properties == {}
    assert conn.to_librdkafka() == {
        "bootstrap.servers": "broker1:9093,broker2:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "etl",
        "sasl.password": AIRFLOW_SECRET,
        "ssl.ca.location": "/etc/ssl/ca.pem",
        "group.id": "uko",
        "client.id": "airflow",
        "socket.timeout.ms": "10000",
    }
    spark = conn.to_spark_options()
    assert parse_jaas(spark["kafka.sasl.jaas.config"]) == (
        SCRAM_MODULE,
        "required",
        {"username": "etl", "password": AIRFLOW_SECRET},
    )
    assert spark["kafka.ssl.truststore.location"] == "/etc/ssl/ca.pem"
    assert "kafka.group.id" not in spark
    # the literal password became an in-process secret: usable, never shown or serialized
    assert AIRFLOW_SECRET not in repr(conn) and AIRFLOW_SECRET not in str(conn)
    err = error(conn.model_dump_json)
    assert AIRFLOW_SECRET not in str(err)


def test_from_librdkafka_normalises_case_and_aliases() -> None:
    conn = KafkaConnection.from_librdkafka(
        {
            "metadata.broker.list": "b:9092",
            "security.protocol": "sasl_plaintext",
            "sasl.mechanism": "plain",
            "sasl.username": "u",
            "sasl.password": "p",
        }
    )
    assert (conn.bootstrap_servers, conn.security_protocol, conn.sasl_mechanism) == (
        "b:9092",
        "SASL_PLAINTEXT",
        "PLAIN",
    )


def test_from_librdkafka_tls_fields() -> None:
    conn = KafkaConnection.from_librdkafka(
        {
            "bootstrap.servers": "b:9093",
            "security.protocol": "SSL",
            "ssl.certificate.location": "/c.pem",
            "ssl.key.location": "/k.pem",
            "ssl.key.password": "kp",
            "ssl.endpoint.identification.algorithm": "none",
        }
    )
    assert (conn.ssl_certificate_location, conn.ssl_key_location) == ("/c.pem", "/k.pem")
    assert conn.ssl_key_password is not None and conn.ssl_key_password.resolve() == "kp"
    assert conn.ssl_endpoint_identification is False
    rd = conn.to_librdkafka()
    assert rd["ssl.endpoint.identification.algorithm"] == "none"
    assert rd["ssl.key.password"] == "kp"


def test_from_librdkafka_plaintext_defaults() -> None:
    conn = KafkaConnection.from_librdkafka({"bootstrap.servers": "b:9092"})
    assert conn == KafkaConnection(bootstrap_servers="b:9092")
    assert conn.model_dump_json() == KafkaConnection(bootstrap_servers="b:9092").model_dump_json()


def test_from_librdkafka_without_servers() -> None:
    err = error(KafkaConnection.from_librdkafka, {"security.protocol": "PLAINTEXT"})
    assert err.field == "bootstrap.servers"
    assert "missing" in err.message


# -- validation --------------------------------------------------------------------------------------
@pytest.mark.parametrize("servers", ["", "   "])
def test_empty_bootstrap_servers(servers: str) -> None:
    err = error(KafkaConnection, bootstrap_servers=servers)
    assert (err.field, err.message) == ("bootstrap_servers", "must not be empty.")
    assert err.fix


@pytest.mark.parametrize("servers", ["localhost", "host:", ":9092", "host:port", "a:1,,b:2", "a:b:c"])
def test_bad_bootstrap_servers(servers: str) -> None:
    err = error(KafkaConnection, bootstrap_servers=servers)
    assert err.field == "bootstrap_servers"
    assert "is not host:port" in err.message
    assert err.fix


@pytest.mark.parametrize("servers", ["a:1, b:2", "[::1]:9092", "broker-1.example.com:9093"])
def test_good_bootstrap_servers(servers: str) -> None:
    assert KafkaConnection(bootstrap_servers=servers).bootstrap_servers == servers


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_sasl_without_mechanism(protocol: str) -> None:
    err = error(KafkaConnection, bootstrap_servers="b:1", security_protocol=protocol, username="u")
    assert err.field == "sasl_mechanism"
    assert f"is required with security_protocol={protocol}" in err.message
    assert err.fix is not None and "SCRAM-SHA-512" in err.fix


@pytest.mark.parametrize("protocol", ["PLAINTEXT", "SSL"])
def test_mechanism_without_sasl(protocol: str) -> None:
    err = error(KafkaConnection, bootstrap_servers="b:1", security_protocol=protocol, sasl_mechanism="PLAIN")
    assert err.field == "sasl_mechanism"
    assert f"security_protocol is {protocol}" in err.message
    assert err.fix is not None and "SASL_SSL" in err.fix


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_missing_username_or_password(mechanism: str) -> None:
    common = {"bootstrap_servers": "b:1", "security_protocol": "SASL_SSL", "sasl_mechanism": mechanism}
    err = error(KafkaConnection, **common, password="env:PW")
    assert err.field == "username"
    assert "needs username and password" in err.message
    assert err.fix
    err = error(KafkaConnection, **common, username="u")
    assert err.field == "password"
    assert err.fix is not None and "env" in err.fix


def test_oauthbearer_needs_no_username() -> None:
    conn = KafkaConnection(
        bootstrap_servers="b:1", security_protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER"
    )
    assert conn.to_librdkafka()["sasl.mechanism"] == "OAUTHBEARER"


@pytest.mark.parametrize(
    ("key", "field"),
    [
        ("sasl.jaas.config", "sasl_jaas_config"),
        ("sasl.password", "password"),
        ("SASL.PASSWORD", "password"),
        ("sasl.username", "username"),
        ("ssl.truststore.password", "ssl_truststore_password"),
        ("ssl.keystore.password", "ssl_keystore_password"),
        ("ssl.key.password", "ssl_key_password"),
        ("bootstrap.servers", "bootstrap_servers"),
        ("security.protocol", "security_protocol"),
        ("sasl.mechanisms", "sasl_mechanism"),
        ("ssl.ca.location", "ssl_truststore_location"),
        ("sasl.oauthbearer.client.secret", "password"),
    ],
)
@pytest.mark.parametrize("where", ["properties", "librdkafka_properties"])
def test_owned_properties_are_rejected(key: str, field: str, where: str) -> None:
    err = error(KafkaConnection, bootstrap_servers="b:1", **{where: {key: "x"}})
    assert err.field == f"{where}.{key}"
    assert err.message == "is owned by the connection."
    assert err.fix is not None and repr(field)[1:-1] in err.fix


@pytest.mark.parametrize(
    ("fields", "at_fault"),
    [
        ({"security_protocol": "TLS"}, "security_protocol"),
        ({"security_protocol": "SASL_SSL", "sasl_mechanism": "KERBEROS"}, "sasl_mechanism"),
        ({"kerberos_principal": "a@B"}, "kerberos_principal"),  # without GSSAPI
        ({"ssl_truststore_type": "DER"}, "ssl_truststore_type"),
        ({"ssl_keystore_type": "PEM"}, "ssl_keystore_type"),
        ({"properties": {"a": 1}}, "properties.a"),
    ],
)
def test_invalid_field_values(fields: dict[str, Any], at_fault: str) -> None:
    assert error(KafkaConnection, bootstrap_servers="b:1", **fields).field == at_fault


def test_unknown_field() -> None:
    err = error(KafkaConnection, bootstrap_servers="b:1", sasl_password="env:PW")
    assert err.field == "sasl_password"
    assert err.message == "unknown field; did you mean 'ssl_key_password'?"
    assert err.fix is not None and "password" in err.fix


def test_every_problem_is_named_with_a_suggestion_for_a_misspelling() -> None:
    err = error(KafkaConnection, bootstrap_server="b:1", securty_protocol="SSL")
    assert [(p.field, p.message) for p in err.problems] == [
        ("bootstrap_server", "unknown field; did you mean 'bootstrap_servers'?"),
        ("securty_protocol", "unknown field; did you mean 'security_protocol'?"),
    ]  # the missing bootstrap_servers is the misspelled one: not reported twice
    assert str(err).startswith("2 problems:\n  - bootstrap_server: unknown field")
    assert err.field == "bootstrap_server" and err.fix == "rename it to 'bootstrap_servers'."


def test_unknown_field_of_a_nested_secret_names_the_path() -> None:
    # Bug fixed: the nested spec's error lost its location ('bogus' instead of 'password.bogus').
    err = error(sasl, password={"env": "PW", "bogus": 1})
    assert err.field == "password.bogus"
    err = error(sasl, password={"env": "PW", "file": "/pw"})
    assert err.field == "password"
    assert "exactly one of env, file or value" in err.message


def test_frozen() -> None:
    conn = KafkaConnection(bootstrap_servers="b:1")
    with pytest.raises(ValidationError, match="frozen"):
        conn.bootstrap_servers = "c:2"  # type: ignore[misc]


# -- secrets -------------------------------------------------------------------------------------------
def test_env_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UKO_TEST_PW", SECRET)
    ref = SecretRef(env="UKO_TEST_PW")
    assert ref.resolve() == SECRET
    assert SecretRef.model_validate("env:UKO_TEST_PW") == ref
    assert sasl(password="env:UKO_TEST_PW").password == ref
    assert sasl(password={"env": "UKO_TEST_PW"}).to_librdkafka()["sasl.password"] == SECRET


def test_missing_env_secret_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("UKO_TEST_UNSET", raising=False)
    monkeypatch.setenv("UKO_TEST_OTHER", SECRET)
    conn = sasl(password="env:UKO_TEST_UNSET")
    err = error(conn.to_spark_options)
    assert err.field == "secret"
    assert "'UKO_TEST_UNSET' is not set" in err.message
    assert err.fix == "export UKO_TEST_UNSET=..."
    assert SECRET not in str(err)


def test_file_secret(tmp_path: Path) -> None:
    path = tmp_path / "pw"
    path.write_text(SECRET + "\n")
    assert SecretRef(file=str(path)).resolve() == SECRET
    assert SecretRef.model_validate(f"file:{path}") == SecretRef(file=str(path))
    path.write_text("two\n\n")
    assert SecretRef(file=str(path)).resolve() == "two\n"  # only one trailing newline is stripped
    path.write_text("none")
    assert SecretRef(file=str(path)).resolve() == "none"


def test_missing_file_secret_names_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    err = error(SecretRef(file=str(missing)).resolve)
    assert err.field == "secret"
    assert str(missing) in err.message


def test_in_process_secret() -> None:
    ref = SecretRef.from_value(SECRET)
    assert ref.resolve() == SECRET
    assert ref == SecretRef.from_value(SECRET)
    assert ref != SecretRef.from_value("other")


@pytest.mark.parametrize(
    "literal", ["hunter2", "env:", "file:", "ENV:PW", "vault:kv/pw", "pass:word:with:colons", ""]
)
def test_literal_secret_strings_are_rejected(literal: str) -> None:
    err = error(sasl, password=literal)
    assert err.field == "password"
    assert "a literal secret is not allowed" in err.message
    assert err.fix is not None and "env" in err.fix and "file" in err.fix
    if len(literal) > 5:  # 'env:' and 'file:' are in the fix itself
        assert literal not in str(err)
    err = error(SecretRef.model_validate, literal)
    assert "a literal secret is not allowed" in err.message


def test_literal_secret_never_reaches_the_exception_chain() -> None:
    # Bug fixed: the SpecError kept pydantic's ValidationError (which quotes the input) as __context__.
    literal = "hunter2-literal"
    for make in (
        lambda: sasl(password=literal),
        lambda: KafkaConnection.model_validate(
            {
                "bootstrap_servers": "b:1",
                "security_protocol": "SASL_SSL",
                "sasl_mechanism": "PLAIN",
                "username": "u",
                "password": literal,
            }
        ),
        lambda: KafkaConnection.model_validate_json(
            '{"bootstrap_servers": "b:1", "security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", '
            f'"username": "u", "password": "{literal}"}}'
        ),
    ):
        err = error(make)
        chain: list[BaseException] = []
        e: BaseException | None = err
        while e is not None and len(chain) < 10:
            chain.append(e)
            e = e.__cause__ or e.__context__
        assert all(literal not in str(x) for x in chain)
        assert literal not in "".join(traceback.format_exception(err))


@pytest.mark.parametrize("fields", [{"env": "A", "file": "/b"}, {}, {"env": "A", "value": "x"}])
def test_exactly_one_kind_of_reference(fields: dict[str, str]) -> None:
    err = error(SecretRef, **fields)
    assert "exactly one of env, file or value must be set" in err.message


def test_references_serialize_as_themselves(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("UKO_TEST_PW", SECRET)
    assert SecretRef(env="UKO_TEST_PW").model_dump_json() == '{"env":"UKO_TEST_PW"}'
    assert SecretRef(file="/run/secrets/pw").model_dump_json() == '{"file":"/run/secrets/pw"}'
    assert repr(SecretRef(env="UKO_TEST_PW")) == "SecretRef(env='UKO_TEST_PW')"
    assert str(SecretRef(file="/pw")) == "SecretRef(file='/pw')"
    conn = sasl(
        "SCRAM-SHA-256",
        password="env:UKO_TEST_PW",
        ssl_truststore_location="/ca.jks",
        ssl_truststore_type="JKS",
        ssl_truststore_password={"file": str(tmp_path / "trust.pw")},
        properties={"client.id": "x"},
    )
    text = conn.model_dump_json()
    assert SECRET not in text
    assert '"password":{"env":"UKO_TEST_PW"}' in text
    again = KafkaConnection.model_validate_json(text)
    assert again == conn
    assert KafkaConnection.model_validate(conn.model_dump()) == conn
    (tmp_path / "trust.pw").write_text("changeit\n")
    java = again.java_client_properties()
    assert parse_jaas(java["sasl.jaas.config"])[2]["password"] == SECRET
    assert java["ssl.truststore.password"] == "changeit"


@pytest.mark.parametrize(
    "field",
    ["password", "sasl_jaas_config", "ssl_key_password", "ssl_keystore_password", "ssl_truststore_password"],
)
def test_in_process_secret_is_never_shown(field: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    fields: dict[str, Any] = {
        "bootstrap_servers": "b:9093",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "PLAIN",
        "username": "u",
        "password": "env:UKO_TEST_UNUSED",
        "ssl_truststore_location": "/ca.pem",
        "ssl_keystore_location": "/client.p12",
        field: SecretRef.from_value(SECRET),
    }
    conn = KafkaConnection(**fields)
    secret_ref = getattr(conn, field)
    for text in (
        repr(conn),
        str(conn),
        repr(secret_ref),
        str(secret_ref),
        str(conn.model_dump()),
        f"{conn!r}",
    ):
        assert SECRET not in text
        assert "**********" in text
    # JSON: refused, without the value in the error
    err = error(conn.model_dump_json)
    assert err.field == "KafkaConnection"
    assert "in-process secret value cannot be serialized" in err.message
    assert SECRET not in str(err)
    assert SECRET not in "".join(traceback.format_exception(err))
    err = error(secret_ref.model_dump_json)
    assert SECRET not in str(err)
    # resolving and building options logs nothing that shows it
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("UKO_TEST_UNUSED", "other")
        assert secret_ref.resolve() == SECRET
        spark = conn.to_spark_options()
        rd = conn.to_librdkafka()
    if field not in ("sasl_jaas_config", "ssl_truststore_password"):  # librdkafka needs neither here
        assert SECRET in rd.values()
    assert any(SECRET in v or field == "password" for v in spark.values())
    assert SECRET not in caplog.text
    assert all(SECRET not in str(r.args) for r in caplog.records)


def test_secret_never_in_validation_errors() -> None:
    err = error(sasl, password=SecretRef.from_value(SECRET), bootstrap_servers_extra=1)
    assert SECRET not in str(err)
    err = error(
        KafkaConnection, bootstrap_servers="not-a-server", password=SecretRef.from_value(SECRET), username="u"
    )
    assert err.field == "bootstrap_servers"
    assert SECRET not in str(err)
    assert SECRET not in "".join(traceback.format_exception(err))
    err = error(KafkaConnection, bootstrap_servers="b:1", password=SecretRef.from_value(SECRET), colour="red")
    assert SECRET not in str(err) and SECRET not in "".join(traceback.format_exception(err))


def test_secrets_can_travel_as_kafka_config_provider_references(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UKO_T_PW", "pw-in-env")
    monkeypatch.setenv("UKO_T_STORE", "store-in-env")
    conn = KafkaConnection(bootstrap_servers="b:9093", security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                           username="u", password={"env": "UKO_T_PW"}, ssl_truststore_location="/t.p12",
                           ssl_truststore_type="PKCS12", ssl_truststore_password={"env": "UKO_T_STORE"})  # fmt: skip
    plain = conn.to_spark_options()
    assert 'password="pw-in-env"' in plain["kafka.sasl.jaas.config"] and "kafka.config.providers" not in plain
    by_ref = conn.to_spark_options(lambda ref: f"${{env:{ref.env}}}" if ref.env else None)
    assert 'password="${env:UKO_T_PW}"' in by_ref["kafka.sasl.jaas.config"]
    assert by_ref["kafka.ssl.truststore.password"] == "${env:UKO_T_STORE}"
    assert by_ref["kafka.config.providers"] == "env"
    assert by_ref["kafka.config.providers.env.class"].endswith("EnvVarConfigProvider")
    assert "pw-in-env" not in str(by_ref) and "store-in-env" not in str(by_ref)
