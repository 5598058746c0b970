"""The engine against the independent oracle, on hypothesis-generated changelogs.

Each example draws dozens of independent changelogs (cases), namespaces their keys by case id, and
writes them to topics of 1 to 8 partitions with confluent-kafka's murmur2 partitioner (as Java
clients do). One Spark job then reads all cases at once, and each case is compared with the oracle.
Cases cover composite keys, tombstones, re-inserts after deletes, deletes of unseen keys, identical
re-sends, null keys, and numbers sent as JSON strings (which also give the same logical key a second
byte encoding, landing it in another partition).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Producer
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from tests.integration.oracle import Record, changelog, decode_json, fold, json_int, read_all

from upsert_kafka_ops.engine import materialize, read_changelog, read_changes, source
from upsert_kafka_ops.engine.session import static_plans
from upsert_kafka_ops.local import LocalKafka
from upsert_kafka_ops.spec.connection import KafkaConnection
from upsert_kafka_ops.spec.table import UpsertKafkaTable

#: each Spark line's lane runs the engine against its oracle too (make lanes)
pytestmark = pytest.mark.lines

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# 4 hypothesis examples (the first is Hypothesis' minimal one) x 60 changelogs = 240 changelogs per test
CASES = 60
PARTITION_COUNTS = [1, 2, 3, 8]

# one event: (k2 index, value or None); value = (v, s, quote_numbers)
event = st.one_of(
    st.tuples(st.integers(0, 3), st.none()),
    st.tuples(
        st.integers(0, 3), st.tuples(st.integers(-5, 5), st.sampled_from(["a", "b", "ü€", ""]), st.booleans())
    ),
    st.tuples(st.just(-1), st.tuples(st.integers(0, 1), st.just("nk"), st.booleans())),  # null key
)
case = st.lists(event, min_size=1, max_size=12)
SETTINGS = settings(
    max_examples=4,
    deadline=None,
    phases=[Phase.generate],  # a failure prints its example; shrinking would rerun Spark jobs for long
    suppress_health_check=list(HealthCheck),
)


def _table(topics: list[str], servers: str) -> UpsertKafkaTable:
    return UpsertKafkaTable.from_options(
        {
            "connector": "upsert-kafka",
            "topic": ";".join(topics),
            "properties.bootstrap.servers": servers,
            "key.format": "json",
            "value.format": "json",
        },
        columns=[
            {"name": "k1", "type": "BIGINT"},
            {"name": "k2", "type": "STRING"},
            {"name": "v", "type": "INT"},
            {"name": "s", "type": "STRING"},
        ],
        primary_key=["k1", "k2"],
    )


def _produce(kafka: LocalKafka, cases: list[list[Any]], topics: list[str], quote_keys: bool = True) -> None:
    producer = Producer({**kafka.client_config(), "partitioner": "murmur2_random", "linger.ms": 5})
    ts = int(time.time() * 1000) - 3_600_000  # recent: the broker's retention deletes old timestamps
    for case_id, events in enumerate(cases):
        topic = topics[case_id % len(topics)]
        for k2_index, value in events:
            ts += 1000
            quote = value is not None and value[2]
            k1: Any = str(case_id) if quote and quote_keys and case_id % 2 else case_id
            key = None if k2_index < 0 else json.dumps({"k1": k1, "k2": f"k{k2_index}"}).encode()
            payload = None
            if value is not None:
                v = str(value[0]) if quote else value[0]
                payload = json.dumps(
                    {"k1": k1, "k2": f"k{k2_index}", "v": v, "s": value[1]}, ensure_ascii=False
                ).encode()
            producer.produce(topic, key=key, value=payload, timestamp=ts)
    assert producer.flush(60) == 0


def _key(data: bytes) -> tuple[int, str]:
    d = decode_json(data)
    k1 = json_int(d["k1"])
    assert k1 is not None
    return k1, str(d["k2"])


def _value(data: bytes) -> tuple[int | None, str | None]:
    d = decode_json(data)
    return json_int(d["v"]), d["s"]


@pytest.fixture(params=["here", "spark"])
def fold_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Where a small range folds: in this process (engine.fold_here; ranges up to SMALL_RANGE
    offsets, as these are), or in Spark's jobs, as every larger range does."""
    if request.param == "spark":
        monkeypatch.setattr(source, "SMALL_RANGE", 0)
    return str(request.param)


@given(st.lists(case, min_size=CASES, max_size=CASES))
@SETTINGS
def test_materialize_and_changelogs_equal_the_oracle(
    kafka: LocalKafka,
    spark: SparkSession,
    new_topic: Callable[..., str],
    fold_path: str,
    cases: list[list[Any]],
) -> None:
    topics = [new_topic(partitions=n) for n in PARTITION_COUNTS]
    _produce(kafka, cases, topics)
    records = read_all(kafka.bootstrap_servers, topics)
    table = _table(topics, kafka.bootstrap_servers)
    conn = KafkaConnection(bootstrap_servers=kafka.bootstrap_servers)

    expected = fold(records, _key, _value)
    df, result = materialize(spark, table, conn)
    got = {(r.k1, r.k2): (r.v, r.s) for r in df.collect()}
    assert got == expected
    assert result.records_in == len(records)
    assert result.null_keys_dropped == sum(1 for r in records if r.key is None)
    assert result.tombstones_in == sum(1 for r in records if r.value is None)
    assert result.records_out == len(expected)
    multi = {k for k, parts in _partitions_per_key(records).items() if len(parts) > 1}
    assert result.keys_in_several_partitions == len(multi)
    assert result.folded_by == ("python" if fold_path == "here" and hasattr(df, "toArrow") else "spark")

    for mode in ("upsert", "retract"):
        want = sorted(
            (pos, _rank(op), op, key_row)
            for op, key_row, pos in changelog(records, _key, lambda b: (_key_of_value(b), _value(b)), mode)
        )
        cl, _ = read_changelog(spark, table, conn, mode=mode)  # type: ignore[arg-type]
        have = sorted(
            ((r._topic, r._partition, r._offset), _rank(r.op), r.op, ((r.k1, r.k2), (r.v, r.s)))
            for r in cl.collect()
        )
        assert have == want, mode


def _key_of_value(data: bytes) -> tuple[int, str]:
    d = decode_json(data)
    k1 = json_int(d["k1"])
    assert k1 is not None
    return k1, str(d["k2"])


def _rank(op: str) -> int:
    return {"-U": 0, "+U": 1, "+I": 1, "-D": 1}[op]


def _partitions_per_key(records: list[Record]) -> dict[Any, set[tuple[str, int]]]:
    out: dict[Any, set[tuple[str, int]]] = {}
    for r in records:
        if r.key is not None:
            out.setdefault(_key(r.key), set()).add((r.topic, r.partition))
    return out


@given(st.lists(case, min_size=CASES, max_size=CASES), st.data())
@SETTINGS
def test_incremental_ranges_merge_to_the_full_table(
    kafka: LocalKafka,
    spark: SparkSession,
    new_topic: Callable[..., str],
    fold_path: str,
    cases: list[list[Any]],
    data: st.DataObject,
) -> None:
    topics = [new_topic(partitions=n) for n in (1, 4)]
    # one encoding per key: a key spread over partitions has no order that survives a split at
    # independent offsets per partition (see docs/semantics.md)
    _produce(kafka, cases, topics, quote_keys=False)
    records = read_all(kafka.bootstrap_servers, topics)
    table = _table(topics, kafka.bootstrap_servers)
    conn = KafkaConnection(bootstrap_servers=kafka.bootstrap_servers)
    ends: dict[tuple[str, int], int] = {}
    for r in records:
        ends[(r.topic, r.partition)] = max(ends.get((r.topic, r.partition), 0), r.offset + 1)
    split = {tp: data.draw(st.integers(0, end), label=f"split {tp}") for tp, end in sorted(ends.items())}

    first, r1 = materialize(spark, table, conn, until=split)
    state = {(r.k1, r.k2): (r.v, r.s) for r in first.collect()}
    changes, r2 = read_changes(spark, table, conn, start=split)
    for r in changes.collect():
        if r.op == "-D":
            state.pop((r.k1, r.k2), None)
        else:
            state[(r.k1, r.k2)] = (r.v, r.s)
    assert state == fold(records, _key, _value)
    assert r1.end_offsets == r2.start_offsets
    folder = "python" if fold_path == "here" and hasattr(first, "toArrow") else "spark"
    assert [r.folded_by for r in (r1, r2)] == [folder if r.records_in else "" for r in (r1, r2)]
    assert r1.records_in + r2.records_in == len(records)


def test_the_fold_plans_without_adaptive_execution_and_gives_the_session_its_setting_back(
    spark: SparkSession, kafka: LocalKafka, new_topic: Callable[..., str]
) -> None:
    """The fold's queries run under :func:`static_plans`: the same rows whatever the session's setting,
    which is the session's again afterwards, also after a failure and when blocks overlap (two folds
    in two threads of one session)."""
    key = "spark.sql.adaptive.enabled"
    topic = new_topic(partitions=2)
    _produce(kafka, [[(0, (1, "a", False)), (1, (2, "b", False)), (0, None)]], [topic])
    table = _table([topic], kafka.bootstrap_servers)
    conn = KafkaConnection(bootstrap_servers=kafka.bootstrap_servers)
    try:
        for setting in ("true", "false"):
            spark.conf.set(key, setting)
            df, _ = materialize(spark, table, conn)
            assert sorted(map(tuple, df.collect())) == [(0, "k1", 2, "b")], setting
            df.unpersist()
            assert spark.conf.get(key) == setting

        spark.conf.set(key, "true")
        with pytest.raises(RuntimeError, match="inside"), static_plans(spark):
            assert spark.conf.get(key) == "false"
            raise RuntimeError("a failure inside the block")
        assert spark.conf.get(key) == "true"

        first, second = static_plans(spark), static_plans(spark)
        first.__enter__()
        second.__enter__()
        first.__exit__(None, None, None)
        assert spark.conf.get(key) == "false"  # the second block still runs
        second.__exit__(None, None, None)
        assert spark.conf.get(key) == "true"
    finally:
        spark.conf.set(key, "true")


def test_a_range_folded_here_has_the_schema_of_sparks_fold(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fold in this process builds its result's schema from the decoded rows' own
    (``source.output_schema``: no analysis, a round trip less on Spark Connect); it is the schema
    Spark's fold gives, types, nullability and all, for the rows (``materialize``) and with the
    deletes (``read_changes``)."""
    topic = new_topic(partitions=2)
    table = UpsertKafkaTable.from_options(
        {"connector": "upsert-kafka", "topic": topic, "properties.bootstrap.servers": kafka.bootstrap_servers,
         "key.format": "json", "value.format": "json"},
        columns=[{"name": "id", "type": "BIGINT NOT NULL"}, {"name": "amount", "type": "DECIMAL(12, 2)"},
                 {"name": "at", "type": "TIMESTAMP(3)"}, {"name": "tags", "type": "ARRAY<STRING>"},
                 {"name": "attrs", "type": "MAP<STRING, INT>"}, {"name": "pos", "type": "ROW<x INT, y STRING>"},
                 {"name": "name", "type": "STRING NOT NULL"}],
        primary_key=["id"],
    )  # fmt: skip
    producer = Producer(kafka.client_config())
    value = {"id": 1, "amount": 2.5, "at": "2024-01-02 03:04:05.123", "tags": ["a"], "attrs": {"b": 1},
             "pos": {"x": 1, "y": "z"}, "name": "n"}  # fmt: skip
    for i in range(1, 5):
        producer.produce(topic, key=json.dumps({"id": i}), value=json.dumps({**value, "id": i}))
    producer.produce(topic, key=json.dumps({"id": 2}), value=None)
    producer.flush()
    conn = KafkaConnection(bootstrap_servers=kafka.bootstrap_servers)
    schemas = {}
    for where in ("here", "spark"):
        if where == "spark":
            monkeypatch.setattr(source, "SMALL_RANGE", 0)
        rows, r1 = materialize(spark, table, conn)
        changes, r2 = read_changes(spark, table, conn, start={(topic, 0): 0, (topic, 1): 0})
        folder = "python" if where == "here" and hasattr(rows, "toArrow") else "spark"  # 3.5: Spark folds
        assert (r1.folded_by, r2.folded_by) == (folder, folder)
        assert sorted(r.id for r in rows.collect()) == [1, 3, 4]
        assert sorted((r.op, r.id) for r in changes.collect()) == [("+U", 1), ("+U", 3), ("+U", 4), ("-D", 2)]
        schemas[where] = (rows.schema, changes.schema)
    assert schemas["here"] == schemas["spark"]
    assert not schemas["here"][1]["op"].nullable and schemas["here"][1]["name"].nullable
