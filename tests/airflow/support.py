"""Helpers for the Airflow tests: the demo's users topic decoded by a plain-Python oracle (CSV key,
Avro value read by a small decoder written here), and what dag.test() left in the metadata DB."""

from __future__ import annotations

import json
from typing import Any

from tests.integration.oracle import fold, read_all


def _long(buf: bytes, i: int) -> tuple[int, int]:
    shift = n = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return (n >> 1) ^ -(n & 1), i


def avro_decode(schema: Any, buf: bytes, i: int = 0) -> tuple[Any, int]:
    """Avro binary for the types the demo tables use: null, long, int, string, unions, records."""
    if isinstance(schema, list):
        branch, i = _long(buf, i)
        return avro_decode(schema[branch], buf, i)
    if isinstance(schema, dict):
        if schema.get("type") == "record":
            out = {}
            for f in schema["fields"]:
                out[f["name"]], i = avro_decode(f["type"], buf, i)
            return out, i
        return avro_decode(schema["type"], buf, i)
    if schema == "null":
        return None, i
    if schema in ("long", "int"):
        return _long(buf, i)
    if schema == "string":
        n, i = _long(buf, i)
        return buf[i : i + n].decode(), i + n
    raise AssertionError(f"the test decoder does not read {schema!r}")


def users_oracle(
    servers: str, value_schema: dict[str, Any], topic: str = "users"
) -> dict[int, tuple[str, str]]:
    """user_id -> (user_name, region): the latest live value per key, folded in plain Python."""

    def value(b: bytes) -> Any:
        row, end = avro_decode(value_schema, b)
        assert end == len(b), "trailing bytes after the Avro record"
        return row

    state = fold(read_all(servers, [topic]), lambda k: int(k.decode()), value)
    return {k: (v["user_name"], v["region"]) for k, v in state.items()}


def json_topic_oracle(servers: str, topic: str) -> dict[Any, dict[str, Any]]:
    state = fold(read_all(servers, [topic]), lambda k: json.dumps(json.loads(k), sort_keys=True), json.loads)
    return {json.loads(k)[next(iter(json.loads(k)))]: v for k, v in state.items()}


def xcoms(dag_id: str, run_id: str) -> dict[str, Any]:
    """task_id -> its return value, read from the metadata DB."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.query(XComModel).filter_by(dag_id=dag_id, run_id=run_id, key="return_value").all()
        return {r.task_id: XComModel.deserialize_value(r) for r in rows}


def task_states(dagrun: Any) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in dagrun.get_task_instances()}
