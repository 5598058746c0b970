"""``avro-confluent`` through the engine, checked against confluent-kafka's own Avro serde.

The registry is a real server on 127.0.0.1 (Apicurio Registry's Confluent-compatible API, built from
Maven Central by ``LocalSchemaRegistry``); Kafka and Spark are real. The wire format is checked both
ways against confluent-kafka's own ``AvroSerializer`` / ``AvroDeserializer``, never against this
package's decoder. Each test writes its own topics, so its subjects are its own.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.integration.oracle import fold, read_all

from upsert_kafka_ops.engine import materialize, write_changelog
from upsert_kafka_ops.engine.source import DataError
from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.formats import schema_registry as sr
from upsert_kafka_ops.local import LocalKafka, LocalSchemaRegistry
from upsert_kafka_ops.spec.connection import KafkaConnection
from upsert_kafka_ops.spec.table import UpsertKafkaTable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

COLUMNS_V1 = [
    {"name": "user_id", "type": "BIGINT"},
    {"name": "region", "type": "STRING"},
    {"name": "user_name", "type": "STRING"},
    {"name": "score", "type": "INT"},
]
COLUMNS_V2 = [*COLUMNS_V1, {"name": "email", "type": "STRING"}]  # a nullable column added


EXCEPT_KEY = {"value.fields-include": "EXCEPT_KEY"}


def _table(
    topic: str, url: str, columns: list[dict[str, str]], extra: dict[str, str] | None = None
) -> UpsertKafkaTable:
    return UpsertKafkaTable.from_options(
        {
            "connector": "upsert-kafka",
            "topic": topic,
            "key.format": "avro-confluent",
            "key.avro-confluent.url": url,
            "value.format": "avro-confluent",
            "value.avro-confluent.url": url,
            **(extra or {}),
        },
        columns=columns,
        primary_key=["user_id", "region"],
    )


def _registry(url: str) -> Any:
    """confluent-kafka's client for ``url`` (the process's cached one, as the engine uses)."""
    return sr.client(sr.RegistryConfig.from_options({"url": url}))


def _confluent_decoders(url: str, topic: str) -> tuple[Callable[[bytes], Any], Callable[[bytes], Any]]:
    """Key and value decoders built on confluent-kafka's AvroDeserializer (writer schema by id)."""
    deserializer = AvroDeserializer(_registry(url))

    def key(data: bytes) -> Any:
        d = deserializer(data, SerializationContext(topic, MessageField.KEY))
        return (d["user_id"], d["region"])

    def value(data: bytes) -> Any:
        return deserializer(data, SerializationContext(topic, MessageField.VALUE))

    return key, value


def test_round_trip_with_a_column_added_between_writes(
    kafka: LocalKafka,
    spark: SparkSession,
    new_topic: Callable[..., str],
    schema_registry: LocalSchemaRegistry,
) -> None:
    url = schema_registry.url
    topic = new_topic(partitions=3)
    conn = KafkaConnection(bootstrap_servers=kafka.bootstrap_servers)
    v1, v2 = _table(topic, url, COLUMNS_V1), _table(topic, url, COLUMNS_V2)

    first = [
        ("+I", 1, 100, "eu", "Bob", 1),
        ("+I", 2, 101, "us", "Alice", None),
        ("+I", 3, 102, "eu", "Carol", 7),
    ]
    write_changelog(
        spark.createDataFrame(first, "op STRING, seq INT, user_id BIGINT, region STRING, user_name STRING, score INT"),
        v1, conn, order_by="seq",
    )  # fmt: skip
    second = [
        ("+U", 4, 100, "eu", "Bob", 2, "bob@example.com"),
        ("-D", 5, 102, "eu", "Carol", 7, None),
        ("+I", 6, 103, "us", "Dan", 3, None),
    ]
    write_changelog(
        spark.createDataFrame(
            second,
            "op STRING, seq INT, user_id BIGINT, region STRING, user_name STRING, score INT, email STRING",
        ),
        v2, conn, order_by="seq",
    )  # fmt: skip

    records = read_all(kafka.bootstrap_servers, [topic])
    assert len(records) == 6
    # the wire format: magic byte 0, the id registered under Flink's default subject, Avro binary
    registry = _registry(url)
    key_id = registry.get_latest_version(f"{topic}-key").schema_id
    value_ids = [
        registry.get_version(f"{topic}-value", v).schema_id for v in registry.get_versions(f"{topic}-value")
    ]
    assert len(value_ids) == 2  # the added column registered a second version
    for r in records:
        assert r.key is not None and r.key[:1] == b"\x00"
        assert int.from_bytes(r.key[1:5], "big") == key_id
        if r.value is not None:
            assert r.value[:1] == b"\x00" and int.from_bytes(r.value[1:5], "big") in value_ids
    # the same key has the same bytes in both writes (one key schema id): compaction and partitions hold
    by_key: dict[bytes, set[int]] = {}
    for r in records:
        assert r.key is not None
        by_key.setdefault(r.key, set()).add(r.partition)
    assert len(by_key) == 4 and all(len(p) == 1 for p in by_key.values())

    # confluent-kafka's deserializer reads what the engine wrote
    decode_key, decode_value = _confluent_decoders(url, topic)
    oracle = fold(records, decode_key, decode_value)
    assert oracle == {
        # value.fields-include ALL (the default): the key columns are in the value too
        (100, "eu"): {
            "user_id": 100,
            "region": "eu",
            "user_name": "Bob",
            "score": 2,
            "email": "bob@example.com",
        },
        (101, "us"): {"user_id": 101, "region": "us", "user_name": "Alice", "score": None},
        (103, "us"): {"user_id": 103, "region": "us", "user_name": "Dan", "score": 3, "email": None},
    }

    # the engine reads both schema versions with the new columns (email NULL where the writer lacked it)
    df, _ = materialize(spark, v2, conn)
    assert sorted(tuple(r) for r in df.collect()) == [
        (100, "eu", "Bob", 2, "bob@example.com"),
        (101, "us", "Alice", None, None),
        (103, "us", "Dan", 3, None),
    ]
    # and with the old columns (the writer's extra field skipped)
    df, _ = materialize(spark, v1, conn)
    assert sorted(tuple(r) for r in df.collect()) == [
        (100, "eu", "Bob", 2),
        (101, "us", "Alice", None),
        (103, "us", "Dan", 3),
    ]


# -- records produced by confluent-kafka's AvroSerializer, folded by the engine --------------------
PRODUCER_KEY = {
    "type": "record",
    "name": "UserKey",
    "namespace": "com.example",
    "fields": [{"name": "user_id", "type": "long"}, {"name": "region", "type": "string"}],
}
PRODUCER_VALUE = {
    "type": "record",
    "name": "User",
    "namespace": "com.example",
    "fields": [
        {"name": "user_name", "type": ["null", "string"], "default": None},
        {"name": "score", "type": ["null", "int"], "default": None},
        {"name": "tier", "type": "string", "default": "basic"},  # a field the table does not declare
    ],
}
STEP = st.tuples(
    st.integers(0, 5),  # user id
    st.sampled_from(["eu", "us"]),
    st.one_of(
        st.none(),  # a delete (tombstone)
        st.fixed_dictionaries(
            {
                "user_name": st.one_of(st.none(), st.text(max_size=6)),
                "score": st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)),
                "tier": st.sampled_from(["basic", "gold"]),
            }
        ),
    ),
)


def _produce_with_confluent(servers: str, topic: str, url: str, steps: list[tuple[int, str, Any]]) -> None:

    registry = _registry(url)
    key_ser = AvroSerializer(registry, json.dumps(PRODUCER_KEY))
    value_ser = AvroSerializer(registry, json.dumps(PRODUCER_VALUE))
    producer = Producer({"bootstrap.servers": servers, "partitioner": "murmur2_random", "linger.ms": 5})
    for user_id, region, value in steps:
        key = key_ser({"user_id": user_id, "region": region}, SerializationContext(topic, MessageField.KEY))
        data = None if value is None else value_ser(value, SerializationContext(topic, MessageField.VALUE))
        producer.produce(topic, key=key, value=data)
    assert producer.flush(30) == 0


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(steps=st.lists(STEP, min_size=1, max_size=40))
def test_confluent_serialized_changelog_folds_like_the_oracle(
    steps: list[tuple[int, str, Any]],
    kafka: LocalKafka,
    spark: SparkSession,
    new_topic: Callable[..., str],
    schema_registry: LocalSchemaRegistry,
) -> None:
    url = schema_registry.url
    topic = new_topic(partitions=4)
    _produce_with_confluent(kafka.bootstrap_servers, topic, url, steps)
    decode_key, decode_value = _confluent_decoders(url, topic)
    expected = {
        (*k, v["user_name"], v["score"])
        for k, v in fold(read_all(kafka.bootstrap_servers, [topic]), decode_key, decode_value).items()
    }
    conn = KafkaConnection(bootstrap_servers=kafka.bootstrap_servers)
    # the producer's value record holds the non-key columns only (and a field the table lacks)
    table = _table(topic, url, COLUMNS_V1, EXCEPT_KEY)
    df, result = materialize(spark, table, conn)
    assert {tuple(r) for r in df.collect()} == expected
    assert result.records_in == len(steps)


@pytest.mark.parametrize("bad", ["no-header", "unregistered-id", "garbage-body"])
def test_a_record_that_is_not_in_the_wire_format_names_its_position(
    bad: str,
    kafka: LocalKafka,
    spark: SparkSession,
    new_topic: Callable[..., str],
    schema_registry: LocalSchemaRegistry,
) -> None:
    """Plain Avro without the 5-byte header, an id the subject never registered, or a registered id
    followed by bytes that are not Avro of its schema (Spark's from_avro would give a row of NULLs for
    those) is a bad record."""
    url = schema_registry.url
    topic = new_topic()
    rows = [(i, "eu", {"user_name": "a", "score": i, "tier": "gold"}) for i in (1, 2)]
    _produce_with_confluent(kafka.bootstrap_servers, topic, url, rows)
    value_id = _registry(url).get_latest_version(f"{topic}-value").schema_id
    data = {
        "no-header": b"\x02\x02a\x02\x02",
        "unregistered-id": b"\x00\x00\x00\x03\xe7\x02\x02a\x02\x02",
        "garbage-body": b"\x00" + value_id.to_bytes(4, "big") + b"\x09\x09\x09",
    }[bad]
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    producer.produce(topic, key=read_all(kafka.bootstrap_servers, [topic])[1].key, value=data)
    assert producer.flush(30) == 0
    conn = KafkaConnection(bootstrap_servers=kafka.bootstrap_servers)
    with pytest.raises(DataError) as info:
        materialize(spark, _table(topic, url, COLUMNS_V1, EXCEPT_KEY), conn)
    assert f"topic {topic!r}, partition 0, offset 2" in str(info.value)
    assert "'value.avro-confluent.subject'" in str(info.value)  # the hint, not a skip option Flink lacks


def test_a_writer_schema_without_a_not_null_column_gives_bad_records(
    kafka: LocalKafka,
    spark: SparkSession,
    new_topic: Callable[..., str],
    schema_registry: LocalSchemaRegistry,
) -> None:
    """The producer's value lacks the key columns, which value.fields-include ALL reads from the value
    as NOT NULL fields: Avro resolution cannot fill them, so the record is bad (never a row of NULLs)."""
    url = schema_registry.url
    topic = new_topic()
    _produce_with_confluent(
        kafka.bootstrap_servers, topic, url, [(1, "eu", {"user_name": "a", "score": 0, "tier": "gold"})]
    )
    conn = KafkaConnection(bootstrap_servers=kafka.bootstrap_servers)
    with pytest.raises(DataError) as info:
        materialize(spark, _table(topic, url, COLUMNS_V1), conn)
    assert "offset 0" in str(info.value)
    df, _ = materialize(spark, _table(topic, url, COLUMNS_V1, EXCEPT_KEY), conn)
    assert [tuple(r) for r in df.collect()] == [(1, "eu", "a", 0)]


def test_a_schema_the_subject_refuses_fails_before_any_record_is_sent(
    kafka: LocalKafka,
    spark: SparkSession,
    new_topic: Callable[..., str],
    schema_registry: LocalSchemaRegistry,
) -> None:
    """A column type change under a FULL compatibility rule: the registry refuses the new value schema
    and the write fails naming the subject; the topic keeps only the first write."""
    topic = new_topic()
    conn = KafkaConnection(bootstrap_servers=kafka.bootstrap_servers)
    schema = "op STRING, seq INT, user_id BIGINT, region STRING, user_name STRING, score INT"
    first = spark.createDataFrame([("+I", 1, 1, "eu", "a", 1)], schema)
    write_changelog(first, _table(topic, schema_registry.url, COLUMNS_V1), conn, order_by="seq")
    _registry(schema_registry.url).set_compatibility(f"{topic}-value", "FULL")
    changed = [c if c["name"] != "score" else {"name": "score", "type": "STRING"} for c in COLUMNS_V1]
    second = spark.createDataFrame(
        [("+I", 2, 2, "eu", "b", "x")], schema.replace("score INT", "score STRING")
    )
    with pytest.raises(sr.RegistryError) as info:
        write_changelog(second, _table(topic, schema_registry.url, changed), conn, order_by="seq")
    assert f"subject '{topic}-value'" in str(info.value) and "HTTP 409" in str(info.value)
    assert len(read_all(kafka.bootstrap_servers, [topic])) == 1


def test_the_local_registry_command_serves_until_terminated(
    schema_registry: LocalSchemaRegistry, tmp_path: Path
) -> None:
    """`upsert-kafka-ops local registry` prints the URL of a server that answers the Confluent API,
    and stops the server on SIGTERM (the session's registry is already built, so this only starts)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "upsert_kafka_ops.cli", "local", "registry", "--dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        info = json.loads(proc.stdout.readline())
        with urllib.request.urlopen(f"{info['url']}/subjects", timeout=10) as resp:
            assert resp.status == 200 and json.loads(resp.read()) == []  # its own, empty registry
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{info['url']}/subjects", timeout=5)


def _keytool(*args: str) -> None:
    subprocess.run(["keytool", *args], check=True, capture_output=True)


def test_a_tls_registry_through_flinks_java_truststore_options(
    kafka: LocalKafka,
    spark: SparkSession,
    new_topic: Callable[..., str],
    jars_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An HTTPS-only registry: Flink's ssl.truststore.location (a JKS made by keytool) and its password
    (a reference) are converted for the Python client; without them the certificate is refused."""
    conn = KafkaConnection(bootstrap_servers=kafka.bootstrap_servers)
    with LocalSchemaRegistry(tmp_path / "registry", jars_dir=jars_dir, tls=True) as registry:
        assert registry.url.startswith("https://")
        trust = tmp_path / "trust.jks"
        _keytool("-importcert", "-noprompt", "-alias", "ca", "-file", str(registry.ca_file),
                 "-keystore", str(trust), "-storetype", "JKS", "-storepass", "trust-pw")  # fmt: skip
        monkeypatch.setenv("UKO_TEST_TRUST_PASSWORD", "trust-pw")
        tls = {
            f"{side}.avro-confluent.{opt}": value
            for side in ("key", "value")
            for opt, value in (
                ("ssl.truststore.location", str(trust)),
                ("ssl.truststore.password", "env:UKO_TEST_TRUST_PASSWORD"),
            )
        }
        topic = new_topic(partitions=2)
        rows = [("+I", 1, 1, "eu", "a", 1), ("+I", 2, 2, "us", "b", None), ("-D", 3, 1, "eu", "a", 1)]
        schema = "op STRING, seq INT, user_id BIGINT, region STRING, user_name STRING, score INT"
        table = _table(topic, registry.url, COLUMNS_V1, tls)
        write_changelog(spark.createDataFrame(rows, schema), table, conn, order_by="seq")
        df, _ = materialize(spark, table, conn)
        assert [tuple(r) for r in df.collect()] == [(2, "us", "b", None)]

        untrusted = _table(new_topic(), registry.url, COLUMNS_V1)
        with pytest.raises(sr.RegistryError) as info:
            write_changelog(spark.createDataFrame(rows, schema), untrusted, conn, order_by="seq")
        assert "CERTIFICATE_VERIFY_FAILED" in str(info.value) and "trust-pw" not in str(info.value)


def test_a_java_keystore_becomes_the_pem_key_and_chain_it_holds(tmp_path: Path) -> None:
    """Flink's ssl.keystore.* for client certificates: a JKS key entry comes back as the same key and
    certificate chain in PEM (the key file private to the user)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    from upsert_kafka_ops.formats import java_stores
    from upsert_kafka_ops.local.tls import generate

    files = generate(tmp_path / "tls")
    pem = files.server_keystore.read_bytes()
    key = serialization.load_pem_private_key(pem, None)
    certs = x509_certs(pem)
    p12 = tmp_path / "client.p12"
    p12.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"client", key, certs[0], certs[1:],  # type: ignore[arg-type]
            serialization.BestAvailableEncryption(b"keystore-pw"),
        )
    )  # fmt: skip
    jks = tmp_path / "client.jks"
    _keytool("-importkeystore", "-noprompt", "-srckeystore", str(p12), "-srcstoretype", "PKCS12",
             "-srcstorepass", "keystore-pw", "-destkeystore", str(jks), "-deststoretype", "JKS",
             "-deststorepass", "keystore-pw", "-destkeypass", "keystore-pw")  # fmt: skip
    cert_pem, key_pem = java_stores.keystore_pem(jks, "keystore-pw")
    assert x509_certs(cert_pem.read_bytes()) == certs
    got = serialization.load_pem_private_key(key_pem.read_bytes(), None)
    assert got.private_numbers() == key.private_numbers()  # type: ignore[union-attr]
    assert key_pem.stat().st_mode & 0o077 == 0
    with pytest.raises(SpecError) as info:
        java_stores.keystore_pem(jks, "wrong")
    assert str(jks) in str(info.value)


def x509_certs(pem: bytes) -> list[Any]:
    from cryptography import x509

    return x509.load_pem_x509_certificates(pem[pem.index(b"-----BEGIN CERTIFICATE-----") :])


def test_materialize_job_full_then_incremental_across_a_new_producer_schema(
    kafka: LocalKafka,
    spark: SparkSession,
    new_topic: Callable[..., str],
    schema_registry: LocalSchemaRegistry,
    tmp_path: Path,
) -> None:
    """A pipeline's materialize job from an avro-confluent topic into Delta. Between the runs the
    producer registers a new value schema (a field added); the incremental run reads the new records
    with both versions registered and merges one update and one delete. Each time the table equals
    the plain-Python fold of the topic decoded by confluent-kafka."""
    from upsert_kafka_ops.jobs import Pipeline, run_job

    servers, url = kafka.bootstrap_servers, schema_registry.url
    topic = new_topic(partitions=3)
    first = [
        (i % 7, "eu" if i % 2 else "us", {"user_name": f"u{i}", "score": i, "tier": "basic"})
        for i in range(30)
    ]
    _produce_with_confluent(servers, topic, url, first)
    table = _table(topic, url, COLUMNS_V1, EXCEPT_KEY)
    pipe = Pipeline.model_validate({
        "connections": {"main": {"bootstrap_servers": servers}},
        "jobs": [{"name": "users-to-delta", "kind": "materialize",
                  "source": {"connection": "main", "table": table.model_dump(mode="json")},
                  "target": {"kind": "delta", "path": str(tmp_path / "users")}}],
    })  # fmt: skip

    def oracle() -> set[tuple[Any, ...]]:
        decode_key, decode_value = _confluent_decoders(url, topic)
        folded = fold(read_all(servers, [topic]), decode_key, decode_value)
        return {(*k, v["user_name"], v["score"]) for k, v in folded.items()}

    def target() -> set[tuple[Any, ...]]:
        df = spark.read.format("delta").load(str(tmp_path / "users"))
        return {tuple(r) for r in df.select("user_id", "region", "user_name", "score").collect()}

    run1 = run_job(pipe, "users-to-delta", spark=spark)
    assert run1.mode == "full" and run1.records_read == 30
    assert target() == oracle() and len(target()) == 14

    v2 = {
        **PRODUCER_VALUE,
        "fields": [*PRODUCER_VALUE["fields"], {"name": "email", "type": ["null", "string"], "default": None}],
    }
    registry = _registry(url)
    value_ser = AvroSerializer(registry, json.dumps(v2))
    key_ser = AvroSerializer(registry, json.dumps(PRODUCER_KEY))
    producer = Producer({"bootstrap.servers": servers, "partitioner": "murmur2_random"})
    for user_id, region, value in [
        (1, "eu", {"user_name": "new", "score": 99, "tier": "gold", "email": "x@y"}),
        (2, "us", None),
    ]:
        key = key_ser({"user_id": user_id, "region": region}, SerializationContext(topic, MessageField.KEY))
        data = None if value is None else value_ser(value, SerializationContext(topic, MessageField.VALUE))
        producer.produce(topic, key=key, value=data)
    assert producer.flush(30) == 0
    assert len(registry.get_versions(f"{topic}-value")) == 2

    run2 = run_job(pipe, "users-to-delta", spark=spark)
    assert (run2.mode, run2.records_read, run2.rows_upserted, run2.rows_deleted) == ("incremental", 2, 1, 1)
    assert target() == oracle()
    assert (1, "eu", "new", 99) in target() and all(r[:2] != (2, "us") for r in target())
