"""``avro_schema`` against the writer schemas Flink's ``AvroSchemaConverter`` gave for the golden vectors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.formats.avro_codec import avro_schema
from upsert_kafka_ops.spec.types import SqlType, parse_type

VECTORS = [
    v
    for v in json.loads((Path(__file__).parents[1] / "golden" / "flink_formats.json").read_text())
    if v["format"] == "avro"
]


def _fields(vector: dict[str, Any]) -> list[tuple[str, SqlType]]:
    return [(name, parse_type(type_text)) for name, type_text in vector["columns"]]


def _legacy(vector: dict[str, Any]) -> bool:
    return str(vector["options"].get("avro.timestamp_mapping.legacy", "true")).lower() == "true"


def test_there_are_avro_vectors() -> None:
    assert len(VECTORS) >= 10


@pytest.mark.parametrize(
    "vector", [v for v in VECTORS if v["avro_schema"] is not None], ids=lambda v: v["id"]
)
def test_schema_is_flinks(vector: dict[str, Any]) -> None:
    assert avro_schema(_fields(vector), legacy_timestamps=_legacy(vector)) == vector["avro_schema"]


@pytest.mark.parametrize("vector", [v for v in VECTORS if v.get("expected_error")], ids=lambda v: v["id"])
def test_schema_refuses_what_flink_refuses(vector: dict[str, Any]) -> None:
    with pytest.raises(SpecError, match="TIMESTAMP_LTZ"):
        avro_schema(_fields(vector), legacy_timestamps=_legacy(vector))


def test_not_null_key_columns_are_plain_types() -> None:
    key = [("user_id", parse_type("STRING NOT NULL")), ("n", parse_type("BIGINT NOT NULL"))]
    assert avro_schema(key)["fields"] == [
        {"name": "user_id", "type": "string"},
        {"name": "n", "type": "long"},
    ]
    nullable = avro_schema([("user_id", parse_type("STRING"))])
    assert nullable["fields"] == [{"name": "user_id", "type": ["null", "string"], "default": None}]


def test_deeper_rows_are_named_after_their_path() -> None:
    schema = avro_schema([("a", parse_type("ROW<b ROW<c INT NOT NULL> NOT NULL> NOT NULL"))])
    inner = schema["fields"][0]["type"]
    assert inner["name"] == "record_a"
    assert inner["fields"][0]["type"] == {
        "type": "record",
        "name": "record_a_b",
        "fields": [{"name": "c", "type": "int"}],
    }


@pytest.mark.parametrize("text", ["TIMESTAMP(6)", "TIME(6)", "MAP<INT, STRING>"])
def test_unsupported_types_are_refused(text: str) -> None:
    with pytest.raises(SpecError):
        avro_schema([("x", parse_type(text))])
