"""The sink's producer settings: a table's properties.* are passed through, not overridden."""

from __future__ import annotations

from upsert_kafka_ops.engine.sink import producer_options
from upsert_kafka_ops.spec.connection import KafkaConnection
from upsert_kafka_ops.spec.table import UpsertKafkaTable

CONN = KafkaConnection(bootstrap_servers="b:9092")


def _table(**props: str) -> UpsertKafkaTable:
    options = {"topic": "t", "key.format": "json", "value.format": "json"}
    options.update({f"properties.{k}": v for k, v in props.items()})
    return UpsertKafkaTable.from_options(options, [{"name": "id", "type": "BIGINT"}], ["id"])


def test_by_default_every_write_is_acknowledged_by_all_replicas_and_idempotent() -> None:
    opts = producer_options(_table(), CONN)
    assert (opts["kafka.acks"], opts["kafka.enable.idempotence"]) == ("all", "true")


def test_a_table_that_turns_idempotence_off_gets_it_off() -> None:
    assert (
        producer_options(_table(**{"enable.idempotence": "false"}), CONN)["kafka.enable.idempotence"]
        == "false"
    )


def test_acks_other_than_all_turn_the_idempotence_default_off_as_kafka_does() -> None:
    opts = producer_options(_table(acks="1"), CONN)
    assert (opts["kafka.acks"], opts["kafka.enable.idempotence"]) == ("1", "false")


def test_other_producer_properties_pass_through() -> None:
    opts = producer_options(_table(**{"linger.ms": "50", "compression.type": "zstd"}), CONN)
    assert (opts["kafka.linger.ms"], opts["kafka.compression.type"]) == ("50", "zstd")
    assert opts["kafka.bootstrap.servers"] == "b:9092"
