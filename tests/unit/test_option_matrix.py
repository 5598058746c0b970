"""docs/options.md, the option matrix, is generated from the code that validates options; every
refused option is refused by that code, naming itself; and the matrix covers every format option."""

from __future__ import annotations

from pathlib import Path

import pytest

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.formats.registry import FORMATS
from upsert_kafka_ops.spec.options import CONNECTOR_OPTIONS, METADATA, connector_option, render
from upsert_kafka_ops.spec.table import METADATA_KEYS, KafkaTable, UpsertKafkaTable

DOC = Path(__file__).parents[2] / "docs" / "options.md"
UPSERT_BASE = {"connector": "upsert-kafka", "topic": "t", "key.format": "json", "value.format": "json"}
COLUMNS = [{"name": "id", "type": "BIGINT"}, {"name": "v", "type": "STRING"}]


def test_the_option_matrix_is_up_to_date() -> None:
    assert DOC.read_text() == render(), (
        "stale: run `.venv/bin/upsert-kafka-ops docs options > docs/options.md`"
    )


def _refused_keys(connector: str) -> list[str]:
    keys = []
    for o in CONNECTOR_OPTIONS:
        if connector in o.connectors and o.status == "refused":
            keys.append(o.key.replace("*", "anything"))
    return keys


@pytest.mark.parametrize("key", _refused_keys("upsert-kafka"))
def test_each_refused_upsert_kafka_option_is_refused_by_name(key: str) -> None:
    with pytest.raises(SpecError) as info:
        UpsertKafkaTable.from_options({**UPSERT_BASE, key: "1"}, COLUMNS, ["id"])
    assert info.value.field == key and info.value.fix


@pytest.mark.parametrize("key", _refused_keys("kafka"))
def test_each_refused_kafka_option_is_refused_by_name(key: str) -> None:
    with pytest.raises(SpecError) as info:
        KafkaTable.from_options({"connector": "kafka", "topic": "t", "format": "json", key: "1"}, COLUMNS)
    assert info.value.field == key and info.value.fix


def test_an_exact_row_wins_over_its_family() -> None:
    assert connector_option("kafka", "scan.startup.mode") is not None
    assert connector_option("kafka", "sink.partitioner").key == "sink.partitioner"  # type: ignore[union-attr]
    assert connector_option("kafka", "sink.buffer-flush.max-rows").key == "sink.*"  # type: ignore[union-attr]
    assert connector_option("upsert-kafka", "scan.bounded.mode").key == "scan.bounded.mode"  # type: ignore[union-attr]
    assert connector_option("upsert-kafka", "no.such.option") is None


def test_every_metadata_key_and_format_option_has_a_row() -> None:
    assert sorted(m.key for m in METADATA) == sorted(METADATA_KEYS)
    text = render()
    for fmt, info in FORMATS.items():
        for name in info.options if info.supported else ["*"]:
            assert f"| {fmt} | `{name}` |" in text
        for name, _, _ in info.notes:
            assert name in info.options or name == "*", f"{fmt}: a note on an unknown option {name}"
