"""The chart's values.schema.json and values.yaml come from the pydantic models
(upsert_kafka_ops.deploy.helm_values): stale files fail, every value has a description and a
default, and the defaults validate against the schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from upsert_kafka_ops.deploy.helm_values import default_values, values_schema, values_schema_json

CHART = Path(__file__).resolve().parents[2] / "charts" / "upsert-kafka-ops"


def test_values_schema_json_is_up_to_date() -> None:
    assert (CHART / "values.schema.json").read_text() == values_schema_json(), (
        "charts/upsert-kafka-ops/values.schema.json is stale: "
        "upsert-kafka-ops docs helm-schema > charts/upsert-kafka-ops/values.schema.json"
    )


def test_values_yaml_holds_exactly_the_defaults_and_validates() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values == default_values()
    jsonschema.Draft202012Validator(values_schema()).validate(values)


def _leaves(node: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = []
    for name, sub in node.get("properties", {}).items():
        out.append((path + name, sub))
        out += _leaves(sub, path + name + ".")
        if isinstance(sub.get("items"), dict):
            out += _leaves(sub["items"], path + name + "[].")
    return out


def test_every_value_has_a_description_and_a_default() -> None:
    leaves = _leaves(values_schema())
    assert len(leaves) > 30
    missing = [p for p, s in leaves if not s.get("description") or "default" not in s]
    assert missing == []


def test_the_schema_refuses_unknown_keys_and_bad_ports() -> None:
    validator = jsonschema.Draft202012Validator(values_schema())
    typo = {**default_values(), "kafka": {**default_values()["kafka"], "bootstrapServer": "x"}}
    assert any("bootstrapServer" in e.message for e in validator.iter_errors(typo))
    port = json.loads(json.dumps(default_values()))
    port["spark"]["driverService"]["port"] = 70000
    assert list(validator.iter_errors(port))
