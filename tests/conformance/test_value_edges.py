"""Values at their edges, written as other producers write them, through real Flink and through the
engine: the same table, or both refuse the read. A case where the engine differs on purpose says so
in DIFFERENCES, with the difference it expects (docs/semantics.md explains each)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Producer
from tests.conformance import engine, flink

from upsert_kafka_ops.local import LocalKafka

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Records = list[tuple[bytes, bytes | None]]


def _case(
    columns: str, key: str, key_format: str, value_format: str, records: Records, **options: str
) -> dict[str, Any]:
    return {"columns": columns, "key": key, "key_format": key_format, "value_format": value_format,
            "records": records, "options": options}  # fmt: skip


CASES: dict[str, dict[str, Any]] = {
    "timestamp_micros_json": _case(
        "`id` BIGINT, `ts` TIMESTAMP(3)", "id", "json", "json",
        [(b'{"id":1}', b'{"id":1,"ts":"2024-01-02 03:04:05.123456"}'),
         (b'{"id":2}', b'{"id":2,"ts":"2024-01-02T03:04:05.999999"}')],
    ),
    "timestamp_micros_csv": _case(
        "`id` BIGINT, `ts` TIMESTAMP(3)", "id", "csv", "csv",
        [(b"1", b"1,2024-01-02 03:04:05.123456"), (b"2", b"2,2024-01-02 03:04:05.9")],
    ),
    "timestamp0_json": _case(
        "`id` BIGINT, `ts` TIMESTAMP(0)", "id", "json", "json",
        [(b'{"id":1}', b'{"id":1,"ts":"2024-01-02 03:04:05.987"}')],
    ),
    "time3_json": _case(
        "`id` BIGINT, `t` TIME(3)", "id", "json", "json", [(b'{"id":1}', b'{"id":1,"t":"03:04:05.123"}')],
    ),
    "time3_csv": _case("`id` BIGINT, `t` TIME(3)", "id", "csv", "csv", [(b"1", b"1,03:04:05.123")]),
    "csv_boolean_empty": _case(
        "`id` BIGINT, `b` BOOLEAN", "id", "csv", "csv", [(b"1", b"1,"), (b"2", b"2,true"), (b"3", b"3,yes")],
    ),
    "decimal_overflow_json": _case(
        "`id` BIGINT, `d` DECIMAL(5, 2)", "id", "json", "json",
        [(b'{"id":1}', b'{"id":1,"d":12345.6}'), (b'{"id":2}', b'{"id":2,"d":123.456}'),
         (b'{"id":3}', b'{"id":3,"d":"999.99"}')],
    ),
    "decimal_overflow_csv": _case(
        "`id` BIGINT, `d` DECIMAL(5, 2)", "id", "csv", "csv", [(b"1", b"1,12345.6"), (b"2", b"2,-0.005")],
    ),
    "null_key_field_json": _case(
        "`id` BIGINT, `v` STRING", "id", "json", "json", [(b'{"id":1}', b'{"v":"a"}'), (b'{"id":null}', b'{"v":"b"}')],
        **{"value.fields-include": "EXCEPT_KEY"},
    ),
    "missing_key_field_json": _case(
        "`id` BIGINT, `v` STRING", "id", "json", "json", [(b'{"other":1}', b'{"v":"b"}')],
        **{"value.fields-include": "EXCEPT_KEY"},
    ),
    "double_zero_keys": _case(
        "`k` DOUBLE, `v` STRING", "k", "json", "json",
        [(b'{"k":0.0}', b'{"v":"plus"}'), (b'{"k":-0.0}', b'{"v":"minus"}')],
        **{"value.fields-include": "EXCEPT_KEY"},
    ),
    "null_key_field_ignored": _case(
        "`id` BIGINT, `v` STRING", "id", "json", "json", [(b'{"id":1}', b'{"v":"a"}'), (b'{"id":"x"}', b'{"v":"b"}')],
        **{"value.fields-include": "EXCEPT_KEY", "key.json.ignore-parse-errors": "true"},
    ),
    "all_value_without_key": _case(
        "`id` BIGINT, `v` STRING", "id", "json", "json", [(b'{"id":1}', b'{"v":"a"}')],
    ),
    "all_value_other_key": _case(
        "`id` BIGINT, `v` STRING", "id", "json", "json", [(b'{"id":1}', b'{"id":2,"v":"a"}')],
    ),
    "empty_value_json": _case(
        "`id` BIGINT, `v` STRING", "id", "json", "json", [(b'{"id":1}', b'{"id":1,"v":"a"}'), (b'{"id":1}', b"")],
    ),
    "raw_strings": _case(
        "`id` BIGINT, `v` STRING", "id", "json", "raw",
        [(b'{"id":1}', b"ok\xff\xfe"), (b'{"id":2}', b""), (b'{"id":3}', "ünï €".encode())],
        **{"value.fields-include": "EXCEPT_KEY"},
    ),
    "raw_numbers": _case(
        "`id` BIGINT, `b` BOOLEAN", "id", "json", "raw",
        [(b'{"id":1}', b"\x01"), (b'{"id":2}', b"\x00"), (b'{"id":3}', b"\x02"), (b'{"id":4}', b"\xff")],
        **{"value.fields-include": "EXCEPT_KEY"},
    ),
    "raw_ints": _case(
        "`id` BIGINT, `v` INT", "id", "json", "raw",
        [(b'{"id":1}', b"\x00\x00\x00\x07"), (b'{"id":2}', b"\xff\xff\xff\xff"), (b'{"id":3}', b"\x80\x00\x00\x00")],
        **{"value.fields-include": "EXCEPT_KEY"},
    ),
    "raw_int_short": _case(
        "`id` BIGINT, `v` INT", "id", "json", "raw", [(b'{"id":1}', b"\x00\x07")],
        **{"value.fields-include": "EXCEPT_KEY"},
    ),
    "raw_boolean_long": _case(
        "`id` BIGINT, `b` BOOLEAN", "id", "json", "raw", [(b'{"id":1}', b"\x01\x01")],
        **{"value.fields-include": "EXCEPT_KEY"},
    ),
    "raw_smallint_empty": _case(
        "`id` BIGINT, `v` SMALLINT", "id", "json", "raw", [(b'{"id":1}', b"")],
        **{"value.fields-include": "EXCEPT_KEY"},
    ),
    "aborted_transaction": _case(
        "`id` BIGINT, `v` STRING", "id", "json", "json",
        [(b'{"id":1}', b'{"id":1,"v":"committed"}'), (b'{"id":2}', b'{"id":2,"v":"aborted"}')],
        transaction="abort the second record",
    ),
}  # fmt: skip

# docs/semantics.md, "Deliberate differences": what the engine gives instead of Flink's table
# ("error": the read fails naming topic, partition and offset)
DIFFERENCES: dict[str, Any] = {
    # -0.0 and 0.0 are one key, as in SQL equality and every warehouse's primary key; Flink compares
    # the key's bytes. The later record wins
    "double_zero_keys": [["float:-0.0", "minus"]],
    # Flink fails the job on a NULL key column even with ignore-parse-errors (its NOT NULL check);
    # here the record is skipped and counted, as the option asks
    "null_key_field_ignored": [[1, "a"]],
    # Flink's row takes the value's copy of the key columns; here rows are grouped by the key
    "all_value_other_key": [[1, "a"]],
    # Flink's JSON decoder drops an empty value silently; here it is a bad record
    "empty_value_json": "error",
    # Flink's source reads uncommitted records unless isolation.level is set; here read_committed
    "aborted_transaction": [[1, "committed"]],
}


def _ddl(name: str, topic: str, bootstrap: str, case: dict[str, Any]) -> str:
    opts = {"connector": "upsert-kafka", "topic": topic, "properties.bootstrap.servers": bootstrap,
            "key.format": case["key_format"], "value.format": case["value_format"],
            "scan.bounded.mode": "latest-offset", **case["options"]}  # fmt: skip
    with_ = ", ".join(f"'{k}' = '{v}'" for k, v in opts.items())
    return f"CREATE TABLE `{name}` ({case['columns']}, PRIMARY KEY (`{case['key']}`) NOT ENFORCED) WITH ({with_})"


def _abort(kafka: LocalKafka, topic: str, record: tuple[bytes, bytes | None]) -> None:
    """Write ``record`` in a transaction that is then aborted."""
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": f"edge-{topic}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, key=record[0], value=record[1])
    producer.flush(30)
    producer.abort_transaction(30)


@pytest.fixture(scope="module")
def runs(
    kafka: LocalKafka, flink_jars: list[Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    ddl = {}
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for name, case in CASES.items():
        topic = f"edge-{name}-{uuid.uuid4().hex[:8]}".replace("_", "-")
        kafka.create_topic(topic, partitions=1, config={"cleanup.policy": "compact"})
        records = case["records"]
        if case["options"].pop("transaction", None):
            _abort(kafka, topic, records[-1])
            records = records[:-1]
        for key, value in records:
            producer.produce(topic, key=key, value=value)
        ddl[name] = _ddl(name, topic, kafka.bootstrap_servers, case)
    assert producer.flush(30) == 0
    log = tmp_path_factory.mktemp("flink") / "flink.log"
    return {"ddl": ddl, "flink": flink.run([flink.Case(n, n, d) for n, d in ddl.items()], flink_jars, log)}


@pytest.mark.parametrize("name", CASES)
def test_an_edge_value_reads_as_flink_reads_it(runs: dict[str, Any], spark: SparkSession, name: str) -> None:
    outcome: flink.Outcome = runs["flink"][name]
    got = engine.outcome(spark, runs["ddl"][name])
    context = f"{name}: {runs['ddl'][name]}\nFlink: {outcome.error or outcome.changes}\nengine: {got}"
    if name in DIFFERENCES:
        flink_gave = outcome.error or sorted(outcome.table([CASES[name]["key"]]).values(), key=repr)
        assert flink_gave != DIFFERENCES[name], f"{context}\nno longer a difference: update docs/semantics.md"
        assert isinstance(got, str) if DIFFERENCES[name] == "error" else got == DIFFERENCES[name], context
        return
    if outcome.error is not None:
        assert isinstance(got, str), context
        assert "topic 'edge-" in got and ", partition 0, offset " in got, context  # names the record
        return
    want = sorted(outcome.table([CASES[name]["key"]]).values(), key=repr)
    assert got == want, context
