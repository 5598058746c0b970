"""The demo pipeline's data and plain-Python oracles, shared by the Airflow and Dagster tests: the
users topic (CSV key, Avro value read by a small decoder written here, from Flink's schema rather
than the code under test), JSON topics, and the expected PV/UV per region."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import Any

from confluent_kafka import Producer
from tests.integration.oracle import fold, read_all

# Flink's Avro schema of the users value (user_id is NOT NULL as part of the primary key); written
# out here so the oracle does not take it from the code under test
USERS_VALUE = {"type": "record", "name": "record", "fields": [
    {"name": "user_id", "type": "long"},
    {"name": "user_name", "type": ["null", "string"]},
    {"name": "region", "type": ["null", "string"]},
]}  # fmt: skip
USERS_1 = [
    (100, "Bob", "Beijing"),
    (101, "Alice", "Shanghai"),
    (102, "Greg", "Berlin"),
    (103, "Richard", "Berlin"),
]
PAGEVIEWS = [(100, 10001), (101, 10002), (102, 10002), (101, 10003), (100, 10004)]
DEMO_TOPICS = (("users", {"cleanup.policy": "compact"}), ("pageviews", {}),
               ("pageviews_per_region", {"cleanup.policy": "compact"}),
               ("pageviews_per_page", {"cleanup.policy": "compact"}))  # fmt: skip


def produce_pageviews(servers: str, events: list[tuple[int, int]], minute: int) -> None:
    producer = Producer({"bootstrap.servers": servers})
    for i, (user, page) in enumerate(events):
        view = {"user_id": user, "page_id": page, "viewtime": f"2026-11-22 10:{minute:02d}:{i:02d}"}
        producer.produce("pageviews", value=json.dumps(view).encode())
    assert producer.flush(30) == 0


def expected_per_region(
    users: dict[int, tuple[str, str]], views: list[tuple[int, int]]
) -> dict[str, dict[str, Any]]:
    pv: Counter[str] = Counter()
    uv: dict[str, set[int]] = defaultdict(set)
    for user, _page in views:
        if user in users:
            region = users[user][1]
            pv[region] += 1
            uv[region].add(user)
    return {r: {"user_region": r, "pv": pv[r], "uv": len(uv[r])} for r in pv}


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
