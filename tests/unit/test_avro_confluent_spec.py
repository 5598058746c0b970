"""avro-confluent options: Flink's names, credentials only as references, clear refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.formats import schema_registry as sr
from upsert_kafka_ops.formats.avro_codec import avro_schema
from upsert_kafka_ops.formats.avro_confluent import AvroConfluentCodec, missing_fields
from upsert_kafka_ops.spec.table import UpsertKafkaTable
from upsert_kafka_ops.spec.types import parse_type


def _table(**options: str) -> UpsertKafkaTable:
    base = {
        "connector": "upsert-kafka",
        "topic": "users",
        "key.format": "avro-confluent",
        "key.avro-confluent.url": "http://registry:8081",
        "value.format": "avro-confluent",
        "value.avro-confluent.url": "http://registry:8081",
    }
    return UpsertKafkaTable.from_options(
        {**base, **options},
        columns=[{"name": "id", "type": "BIGINT"}, {"name": "name", "type": "STRING"}],
        primary_key=["id"],
    )


def test_flink_options_are_accepted() -> None:
    table = _table(
        **{
            "value.avro-confluent.subject": "users-value",
            "value.avro-confluent.basic-auth.credentials-source": "USER_INFO",
            "value.avro-confluent.basic-auth.user-info": "env:SR_USER_INFO",
            "value.avro-confluent.properties.timeout": "10",
            "value.avro-confluent.properties.ssl.ca.location": "/etc/ssl/registry-ca.pem",
        }
    )
    assert table.format_options["value.avro-confluent.subject"] == "users-value"


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("value.avro-confluent.basic-auth.user-info", "user:secret-pw", "a literal secret is not allowed"),
        ("value.avro-confluent.bearer-auth.token", "tok-123", "a literal secret is not allowed"),
        ("value.avro-confluent.properties.ssl.key.password", "pw", "a literal secret is not allowed"),
        ("value.avro-confluent.ssl.truststore.password", "changeit", "a literal secret is not allowed"),
        ("value.avro-confluent.ssl.keystore.location", "/etc/client.jks", "is required with ssl.keystore"),
        ("value.avro-confluent.schema", '"string"', "derived from the table's columns"),
        ("value.avro-confluent.basic-auth.credentials-source", "SASL_INHERIT", "USER_INFO or URL"),
        ("value.avro-confluent.bearer-auth.credentials-source", "OAUTHBEARER", "STATIC_TOKEN"),
        ("value.avro-confluent.colour", "red", "is not an option of the value format"),
    ],
)
def test_bad_options_name_the_option_and_the_fix(option: str, value: str, message: str) -> None:
    with pytest.raises(SpecError) as info:
        _table(**{option: value})
    field = option.replace("keystore.location", "keystore.password") if "is required" in message else option
    assert info.value.field == field and message in str(info.value)
    assert info.value.fix
    if "secret" in message:
        assert value not in str(info.value)


def test_the_url_is_required() -> None:
    with pytest.raises(SpecError) as info:
        UpsertKafkaTable.from_options(
            {
                "connector": "upsert-kafka",
                "topic": "users",
                "key.format": "raw",
                "value.format": "avro-confluent",
            },
            columns=[{"name": "id", "type": "STRING"}, {"name": "name", "type": "STRING"}],
            primary_key=["id"],
        )
    assert info.value.field == "value.avro-confluent.url"


def test_credentials_resolve_in_the_client_conf_and_stay_out_of_reprs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SR_USER_INFO", "svc:hunter2")
    config = sr.RegistryConfig.from_options(
        {
            "url": "https://registry:8081",
            "basic-auth.user-info": "env:SR_USER_INFO",
            "properties.timeout": "5",
        }
    )
    assert config.client_conf() == {
        "url": "https://registry:8081",
        "basic.auth.user.info": "svc:hunter2",
        "timeout": "5",
    }
    assert "hunter2" not in repr(config) and "SR_USER_INFO" not in repr(config)
    assert (
        sr.safe_url("https://svc:hunter2@registry:8081/sr,http://b:1")
        == "https://registry:8081/sr,http://b:1"
    )


def test_default_subjects_follow_flink() -> None:
    fields = [("id", parse_type("BIGINT NOT NULL"))]
    key = AvroConfluentCodec(fields, {"url": "mock://s"}, ("users",), "key")
    assert (key.write_subject, key.read_subjects) == ("users-key", ["users-key"])
    many = AvroConfluentCodec(fields, {"url": "mock://s"}, ("a", "b"), "value")
    assert many.write_subject is None and many.read_subjects == ["a-value", "b-value"]
    with pytest.raises(SpecError) as info:
        many.schema_id()
    assert info.value.field == "value.avro-confluent.subject"
    named = AvroConfluentCodec(fields, {"url": "mock://s", "subject": "shared"}, ("a", "b"), "value")
    assert (named.write_subject, named.read_subjects) == ("shared", ["shared"])


def test_missing_not_null_fields_are_found() -> None:
    reader = avro_schema(
        [
            ("id", parse_type("BIGINT NOT NULL")),
            ("name", parse_type("STRING")),
            ("address", parse_type("ROW<city STRING NOT NULL, zip STRING>")),
        ]
    )
    writer = {
        "type": "record",
        "name": "Other",
        "fields": [
            {"name": "name", "type": "string"},
            {"name": "address", "type": ["null", {"type": "record", "name": "A", "fields": [{"name": "zip", "type": "string"}]}]},
        ],
    }  # fmt: skip
    assert missing_fields(writer, reader) == ["id", "address.city"]
    assert missing_fields(reader, reader) == []


def test_a_store_and_its_pem_property_together_are_refused() -> None:
    with pytest.raises(SpecError) as info:
        _table(
            **{
                "value.avro-confluent.ssl.truststore.location": "/etc/trust.jks",
                "value.avro-confluent.properties.ssl.ca.location": "/etc/ca.pem",
            }
        )
    assert info.value.field == "value.avro-confluent.ssl.truststore.location" and "keep one" in str(
        info.value
    )


def test_a_pem_truststore_is_used_as_it_is(tmp_path: Path) -> None:
    pem = tmp_path / "ca.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    config = sr.RegistryConfig.from_options({"url": "https://r:1", "ssl.truststore.location": str(pem)})
    assert config.client_conf() == {"url": "https://r:1", "ssl.ca.location": str(pem)}
