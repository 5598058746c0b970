"""The local broker's generated configuration (no JVM started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from upsert_kafka_ops.errors import LocalServiceError
from upsert_kafka_ops.local import LocalKafka
from upsert_kafka_ops.local.tls import generate


def _props(broker: LocalKafka) -> dict[str, str]:
    return dict(line.split("=", 1) for line in broker._properties().splitlines())


def test_plain_broker_listens_on_loopback_only(tmp_path: Path) -> None:
    broker = LocalKafka(tmp_path)
    broker.ports = {"PLAINTEXT": 1111, "CONTROLLER": 2222}
    props = _props(broker)
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:1111,CONTROLLER://127.0.0.1:2222"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:1111"
    assert props["process.roles"] == "broker,controller"
    assert props["auto.create.topics.enable"] == "false"
    assert "sasl.enabled.mechanisms" not in props
    assert broker.bootstrap_servers == "127.0.0.1:1111"
    with pytest.raises(LocalServiceError, match="SASL_PLAINTEXT listener is not enabled"):
        _ = broker.sasl_bootstrap_servers


def test_scram_and_ssl_listeners(tmp_path: Path) -> None:
    broker = LocalKafka(
        tmp_path, scram_users={"alice": "s3cret"}, ssl=True, properties={"num.partitions": "3"}
    )
    broker.ports = {"PLAINTEXT": 1, "CONTROLLER": 2, "SASL_PLAINTEXT": 3, "SSL": 4}
    broker.tls = generate(tmp_path / "tls")
    props = _props(broker)
    assert props["sasl.enabled.mechanisms"] == "SCRAM-SHA-256,SCRAM-SHA-512"
    assert "ScramLoginModule" in props["listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config"]
    assert props["listener.name.ssl.ssl.keystore.type"] == "PEM"
    assert props["num.partitions"] == "3"
    assert "s3cret" not in broker._properties()  # users are created at format time, not configured


def test_server_certificate_is_valid_for_127_0_0_1_and_signed_by_the_ca(tmp_path: Path) -> None:
    from cryptography import x509

    files = generate(tmp_path)
    ca = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
    chain = x509.load_pem_x509_certificates(files.server_keystore.read_bytes())
    server = chain[0]
    san = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "127.0.0.1" in [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]
    server.verify_directly_issued_by(ca)
    assert b"BEGIN PRIVATE KEY" in files.server_keystore.read_bytes()
    assert files.server_keystore.stat().st_mode & 0o077 == 0
