"""docs/configuration.md is generated from the spec models and must not go stale."""

from __future__ import annotations

from pathlib import Path

from upsert_kafka_ops.cli.docs import MODELS, render
from upsert_kafka_ops.spec.connection import KafkaConnection

DOC = Path(__file__).parents[2] / "docs" / "configuration.md"


def test_configuration_reference_is_up_to_date() -> None:
    assert DOC.read_text() == render(), (
        "stale: run `.venv/bin/upsert-kafka-ops docs config > docs/configuration.md`"
    )


def test_every_field_is_described_in_the_reference() -> None:
    text = render()
    for model in MODELS:
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no description"
            assert f"| `{name}` |" in text
    assert "`'PLAINTEXT'`" in text and KafkaConnection.__name__ in text
