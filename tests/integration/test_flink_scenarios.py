"""Flink's upsert-kafka acceptance scenarios S1-S26 (research/flink-upsert-kafka.md section 5) on the engine.

Each test produces the raw Kafka records a scenario describes with confluent-kafka (murmur2 partitioner,
explicit record timestamps where the scenario depends on them), runs the engine in the mode whose output
the scenario shows (retract consumer: ``read_changelog(mode="retract")``, upsert consumer:
``mode="upsert"``, final table: ``materialize``), and asserts the exact changelog per key, in changelog
order, and the final table. Sink scenarios write a changelog DataFrame with ``write_changelog`` and read
the topic back with confluent-kafka.

Record timestamps are recent (relative to now, with fixed gaps): the broker's retention deletes segments
whose timestamps are older than 7 days, so Flink's 2020/2023 record timestamps are shifted. Flink's tests
run with json, csv and avro; csv and avro are not implemented here yet, so every scenario uses json.
Where a scenario is about a Flink feature that has no meaning here, its test checks the nearest real
property and says why in its docstring ("Flink-specific part not applicable").
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Producer
from tests.integration.oracle import Record, kafka_partition, read_all

from upsert_kafka_ops.engine import DataError, materialize, read_changelog, read_changes, write_changelog
from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.local import LocalKafka
from upsert_kafka_ops.spec.connection import KafkaConnection
from upsert_kafka_ops.spec.table import UpsertKafkaTable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SECOND = 1000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR

Change = tuple[str, tuple[Any, ...]]


# -- helpers --------------------------------------------------------------------------------------
def _now_ms() -> int:
    return int(time.time() * 1000)


def _j(**fields: Any) -> bytes:
    """Compact JSON bytes, fields in the given order (as Flink's JSON encoder writes them)."""
    return json.dumps(fields, separators=(",", ":"), ensure_ascii=False).encode()


def _ntz(ms: int) -> dt.datetime:
    """A record timestamp as a ``TIMESTAMP(3)`` metadata column reads it (session time zone UTC)."""
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).replace(tzinfo=None)


def _produce(kafka: LocalKafka, topic: str, records: Iterable[Sequence[Any]]) -> None:
    """Produce ``(key, value[, timestamp_ms[, partition]])`` records in order (None = Kafka null)."""
    producer = Producer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "partitioner": "murmur2_random",
            "enable.idempotence": True,
        }
    )
    for rec in records:
        key, value = rec[0], rec[1]
        extra: dict[str, Any] = {}
        if len(rec) > 2 and rec[2] is not None:
            extra["timestamp"] = rec[2]
        if len(rec) > 3 and rec[3] is not None:
            extra["partition"] = rec[3]
        producer.produce(topic, key=key, value=value, **extra)
    assert producer.flush(30) == 0


def _raw(kafka: LocalKafka, topic: str) -> list[Record]:
    """Every record of the topic, in (partition, offset) order."""
    return sorted(read_all(kafka.bootstrap_servers, [topic]), key=lambda r: (r.partition, r.offset))


def _table(
    kafka: LocalKafka, topic: str, columns: str, options: dict[str, str] | None = None
) -> UpsertKafkaTable:
    """An upsert-kafka table from a Flink ``CREATE TABLE`` (json key and value unless overridden)."""
    opts = {
        "connector": "upsert-kafka",
        "topic": topic,
        "properties.bootstrap.servers": kafka.bootstrap_servers,
        "key.format": "json",
        "value.format": "json",
    }
    opts.update(options or {})
    with_ = ",\n".join(f"  '{k}' = '{v}'" for k, v in opts.items())
    return UpsertKafkaTable.from_flink_ddl(f"CREATE TABLE upsert_kafka (\n{columns}\n) WITH (\n{with_}\n)")


def _conn(kafka: LocalKafka) -> KafkaConnection:
    return KafkaConnection(bootstrap_servers=kafka.bootstrap_servers)


def _rank(op: str) -> int:
    return 0 if op == "-U" else 1


def _changes(
    df: DataFrame, cols: Sequence[str], order: Sequence[str] = ("_topic", "_partition", "_offset")
) -> list[Change]:
    """The changelog as (op, row) in changelog order (a -U before the +U of the same record)."""
    rows = df.collect()
    rows.sort(key=lambda r: (*[r[c] for c in order], _rank(r["op"])))
    return [(r["op"], tuple(r[c] for c in cols)) for r in rows]


def _by_key(changes: list[Change], key_len: int = 1) -> dict[Any, list[Change]]:
    """Each key's changes, in order (a one-column key is the bare value)."""
    out: dict[Any, list[Change]] = {}
    for op, row in changes:
        key = row[0] if key_len == 1 else row[:key_len]
        out.setdefault(key, []).append((op, row))
    return out


def _table_rows(df: DataFrame, cols: Sequence[str]) -> set[tuple[Any, ...]]:
    rows = [tuple(r[c] for c in cols) for r in df.collect()]
    assert len(rows) == len(set(rows)), rows
    return set(rows)


def _retract_fold(changes: list[Change]) -> set[tuple[Any, ...]]:
    """What a retract consumer holds after applying the changes (every retraction must match a row)."""
    state: list[tuple[Any, ...]] = []
    for op, row in changes:
        if op in ("+I", "+U"):
            state.append(row)
        else:
            assert row in state, f"{op}{row} retracts a row the consumer does not hold"
            state.remove(row)
    return set(state)


def _changelog_df(spark: SparkSession, schema: str, rows: list[tuple[Any, ...]]) -> DataFrame:
    return spark.createDataFrame(rows, schema=schema)


# -- S1-S3: tables written and read back ----------------------------------------------------------
def test_s1_aggregation_changelog_read_back(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    """S1 (UpsertKafkaTableITCase.testAggregate; json here, Flink also runs csv/avro): the word counts of
    'Good good study day day up Good boy' as the aggregation writes them, 8 records on 4 partitions with
    no tombstones; read back as a retract changelog per key, the final table, and the follow-up query
    ``SELECT count, COUNT(*) FROM wc GROUP BY count HAVING COUNT(*) < 2`` = {(3, 1), (2, 1)}."""
    from pyspark.sql import functions as F

    topic = new_topic(partitions=4)
    counts: dict[str, int] = {}
    records = []
    for word in ["Good", "good", "study", "day", "day", "up", "Good", "boy"]:
        w = word.lower()
        counts[w] = counts.get(w, 0) + 1
        records.append((_j(word=w), _j(word=w, count=counts[w])))
    _produce(kafka, topic, records)
    table = _table(kafka, topic, "  `word` STRING,\n  `count` BIGINT,\n  PRIMARY KEY (`word`) NOT ENFORCED")

    raw = _raw(kafka, topic)
    assert len(raw) == 8
    assert all(r.value is not None for r in raw)  # only upsert data, no tombstones
    assert all(r.key is not None and r.partition == kafka_partition(r.key, 4) for r in raw)

    df, result = read_changelog(spark, table, _conn(kafka), mode="retract")
    assert _by_key(_changes(df, ["word", "count"])) == {
        "good": [
            ("+I", ("good", 1)),
            ("-U", ("good", 1)),
            ("+U", ("good", 2)),
            ("-U", ("good", 2)),
            ("+U", ("good", 3)),
        ],
        "study": [("+I", ("study", 1))],
        "day": [("+I", ("day", 1)), ("-U", ("day", 1)), ("+U", ("day", 2))],
        "up": [("+I", ("up", 1))],
        "boy": [("+I", ("boy", 1))],
    }
    assert result.records_in == 8
    assert result.tombstones_in == 0

    final, _ = materialize(spark, table, _conn(kafka))
    assert _table_rows(final, ["word", "count"]) == {
        ("good", 3),
        ("study", 1),
        ("day", 2),
        ("up", 1),
        ("boy", 1),
    }
    freq = final.groupBy("count").agg(F.count(F.lit(1)).alias("freq")).where("freq < 2")
    assert {(r["count"], r["freq"]) for r in freq.collect()} == {(3, 1), (2, 1)}


def test_s2_composite_key_prefix_except_key_timestamp_metadata(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    """S2 (testSourceSinkWithKeyAndPartialValue; json here): PRIMARY KEY (k_event_id, k_user_id) with
    'key.fields-prefix' = 'k_' and EXCEPT_KEY: the Kafka key is {event_id, user_id} (prefix stripped),
    the value {name, user_id (the INT column), payload}; the `timestamp` metadata column reads the record
    timestamp. Key (101, 2) is updated at offset 3: -U with its 1st version, +U with the new one."""
    topic = new_topic()
    t0 = _now_ms() - 4 * DAY
    ts = [t0, t0 + DAY, t0 + 2 * DAY, t0 + 3 * DAY]
    _produce(
        kafka,
        topic,
        [
            (_j(event_id=100, user_id=1), _j(name="name 1", user_id=41, payload="payload 1"), ts[0]),
            (_j(event_id=101, user_id=2), _j(name="name 2", user_id=42, payload="payload 2"), ts[1]),
            (_j(event_id=102, user_id=3), _j(name="name 3", user_id=43, payload="payload 3"), ts[2]),
            (_j(event_id=101, user_id=2), _j(name="name 2", user_id=42, payload="payload"), ts[3]),
        ],
    )
    table = _table(
        kafka,
        topic,
        "  `k_user_id` BIGINT,\n  `name` STRING,\n  `timestamp` TIMESTAMP(3) METADATA,\n  `k_event_id` BIGINT,\n"
        "  `user_id` INT,\n  `payload` STRING,\n  PRIMARY KEY (k_event_id, k_user_id) NOT ENFORCED",
        {"key.fields-prefix": "k_", "value.fields-include": "EXCEPT_KEY"},
    )
    cols = ["k_user_id", "name", "timestamp", "k_event_id", "user_id", "payload"]

    df, _ = read_changelog(spark, table, _conn(kafka), mode="retract")
    assert _changes(df, cols) == [
        ("+I", (1, "name 1", _ntz(ts[0]), 100, 41, "payload 1")),
        ("+I", (2, "name 2", _ntz(ts[1]), 101, 42, "payload 2")),
        ("+I", (3, "name 3", _ntz(ts[2]), 102, 43, "payload 3")),
        ("-U", (2, "name 2", _ntz(ts[1]), 101, 42, "payload 2")),
        ("+U", (2, "name 2", _ntz(ts[3]), 101, 42, "payload")),
    ]
    final, _ = materialize(spark, table, _conn(kafka))
    assert _table_rows(final, cols) == {
        (1, "name 1", _ntz(ts[0]), 100, 41, "payload 1"),
        (2, "name 2", _ntz(ts[3]), 101, 42, "payload"),
        (3, "name 3", _ntz(ts[2]), 102, 43, "payload 3"),
    }


def test_s3_full_value_sink_parallelism_4_keeps_key_order(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    """S3 (testKafkaSourceSinkWithKeyAndFullValue; json here): value.fields-include = ALL and
    'sink.parallelism' = '4' writing into one partition. Flink's INSERT writes 4 rows, the last one
    updating key (100, 1). Our sink reduces each write to the last change per key, so the update comes in
    a second write (one Flink INSERT = one write per version). Read back: +I x3, -U(1, ..., payload 1),
    +U(1, ..., payload).

    Different on purpose: in Flink the `timestamp` METADATA column is writable and becomes the record
    timestamp. Spark 4.0's Kafka writer cannot set record timestamps, so a writable `timestamp` column is
    rejected (it would be silently lost); declared VIRTUAL it is read only (docs/semantics.md)."""
    topic = new_topic()
    columns = (
        "  `user_id` BIGINT,\n  `name` STRING,\n  `timestamp` TIMESTAMP(3) METADATA{virtual},\n  `event_id` BIGINT,\n"
        "  `payload` STRING,\n  PRIMARY KEY (event_id, user_id) NOT ENFORCED"
    )
    options = {"value.fields-include": "ALL", "sink.parallelism": "4"}
    writable = _table(kafka, topic, columns.format(virtual=""), options)
    table = _table(kafka, topic, columns.format(virtual=" VIRTUAL"), options)
    t0 = (_now_ms() - 4 * DAY) // SECOND * SECOND
    ts = [_ntz(t0 + i * DAY) for i in range(4)]
    schema = "op STRING, seq INT, user_id BIGINT, name STRING, `timestamp` TIMESTAMP_NTZ, event_id BIGINT, payload STRING"
    first = [
        ("+I", 1, 1, "name 1", ts[0], 100, "payload 1"),
        ("+I", 2, 2, "name 2", ts[1], 101, "payload 2"),
        ("+I", 3, 3, "name 3", ts[2], 102, "payload 3"),
    ]
    with pytest.raises(SpecError, match="VIRTUAL") as info:
        write_changelog(_changelog_df(spark, schema, first), writable, _conn(kafka), order_by="seq")
    assert info.value.field == "columns.timestamp"
    assert _raw(kafka, topic) == []  # nothing was written
    write_changelog(_changelog_df(spark, schema, first), table, _conn(kafka), order_by="seq")
    second = [("+I", 4, 1, "name 1", ts[3], 100, "payload")]
    write_changelog(_changelog_df(spark, schema, second), table, _conn(kafka), order_by="seq")

    raw = _raw(kafka, topic)
    assert [
        (json.loads(r.key), r.value is None) for r in raw if r.key and json.loads(r.key)["event_id"] == 100
    ] == [
        ({"event_id": 100, "user_id": 1}, False),
        ({"event_id": 100, "user_id": 1}, False),
    ]

    df, _ = read_changelog(spark, table, _conn(kafka), mode="retract")
    physical = ["user_id", "name", "event_id", "payload"]
    assert _by_key(_changes(df, physical)) == {
        1: [
            ("+I", (1, "name 1", 100, "payload 1")),
            ("-U", (1, "name 1", 100, "payload 1")),
            ("+U", (1, "name 1", 100, "payload")),
        ],
        2: [("+I", (2, "name 2", 101, "payload 2"))],
        3: [("+I", (3, "name 3", 102, "payload 3"))],
    }
    # the VIRTUAL column reads the record timestamps, which are the time of the write
    stamps = [r["timestamp"] for r in df.collect()]
    assert all(s is not None and s > ts[3] for s in stamps)


# -- S4-S5: the buffered (reducing) sink ----------------------------------------------------------
_BUFFERED_DDL = "  `k_id` INT,\n  `ts` TIMESTAMP(3),\n  `payload` STRING,\n  PRIMARY KEY (k_id) NOT ENFORCED"
_BUFFERED_OPTS = {
    "key.fields-prefix": "k_",
    "sink.buffer-flush.max-rows": "2",
    "sink.buffer-flush.interval": "100000",
    "value.fields-include": "EXCEPT_KEY",
}
_BUFFERED_SCHEMA = "op STRING, seq INT, k_id INT, ts TIMESTAMP_NTZ, payload STRING"


def test_s4_buffered_sink_folds_updates_of_one_key(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    """S4 (testBufferedUpsertSink; json here): max-rows 2, interval 100 s, prefix k_, EXCEPT_KEY. Input
    +I(1, payload 1), +I(2, payload 2), +I(3, payload 3), +I(3, payload). Flink's buffer keeps only the
    last row of key 3; our write reduces the whole write to the last change per key (the documented
    equivalent of the buffer flush): 3 records, one per key, and the read-back has no -U/+U for key 3."""
    topic = new_topic()
    table = _table(kafka, topic, _BUFFERED_DDL, _BUFFERED_OPTS)
    ts = [dt.datetime(2020, 3, d, 13, 12, 11, 120000) for d in (8, 9, 10, 11)]
    rows = [
        ("+I", 1, 1, ts[0], "payload 1"),
        ("+I", 2, 2, ts[1], "payload 2"),
        ("+I", 3, 3, ts[2], "payload 3"),
        ("+I", 4, 3, ts[3], "payload"),
    ]
    result = write_changelog(
        _changelog_df(spark, _BUFFERED_SCHEMA, rows), table, _conn(kafka), order_by="seq"
    )
    assert (result.records_in, result.records_out, result.tombstones_out) == (4, 3, 0)

    raw = _raw(kafka, topic)
    assert sorted((r.key, r.value) for r in raw) == [
        (b'{"id":1}', b'{"ts":"2020-03-08 13:12:11.12","payload":"payload 1"}'),
        (b'{"id":2}', b'{"ts":"2020-03-09 13:12:11.12","payload":"payload 2"}'),
        (b'{"id":3}', b'{"ts":"2020-03-11 13:12:11.12","payload":"payload"}'),
    ]

    df, _ = read_changelog(spark, table, _conn(kafka), mode="retract")
    assert sorted(_changes(df, ["k_id", "ts", "payload"])) == [
        ("+I", (1, ts[0], "payload 1")),
        ("+I", (2, ts[1], "payload 2")),
        ("+I", (3, ts[3], "payload")),
    ]


def test_s5_buffered_sink_with_null_rowtime(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    """S5 (testBufferedUpsertSinkWithoutAssigningWatermark; Flink used csv with null-literal, json here):
    S4 with ts = NULL everywhere -> +I(1, null, payload 1), +I(2, null, payload 2), +I(3, null, payload).

    Flink-specific part not applicable: FLINK-25916 was an NPE on the buffered writer's null *context*
    timestamp (rowtime); our writer keeps no per-record context timestamp. The nearest property: NULL
    column values survive the reduction, are written as JSON null and read back as NULL."""
    topic = new_topic()
    table = _table(kafka, topic, _BUFFERED_DDL, _BUFFERED_OPTS)
    rows = [
        ("+I", 1, 1, None, "payload 1"),
        ("+I", 2, 2, None, "payload 2"),
        ("+I", 3, 3, None, "payload 3"),
        ("+I", 4, 3, None, "payload"),
    ]
    write_changelog(_changelog_df(spark, _BUFFERED_SCHEMA, rows), table, _conn(kafka), order_by="seq")

    raw = _raw(kafka, topic)
    assert sorted((r.key, r.value) for r in raw) == [
        (b'{"id":1}', b'{"ts":null,"payload":"payload 1"}'),
        (b'{"id":2}', b'{"ts":null,"payload":"payload 2"}'),
        (b'{"id":3}', b'{"ts":null,"payload":"payload"}'),
    ]
    df, _ = read_changelog(spark, table, _conn(kafka), mode="retract")
    assert sorted(_changes(df, ["k_id", "ts", "payload"])) == [
        ("+I", (1, None, "payload 1")),
        ("+I", (2, None, "payload 2")),
        ("+I", (3, None, "payload")),
    ]


# -- S6-S8: bounded reads -------------------------------------------------------------------------
_BOUNDED_DDL = (
    "  `user_id` BIGINT,\n  `event_id` BIGINT,\n  `payload` STRING,\n  `timestamp` TIMESTAMP(3) METADATA,\n"
    "  PRIMARY KEY (event_id, user_id) NOT ENFORCED"
)


def _bounded_record(user_id: int, event_id: int, payload: str, ts: int | None = None) -> tuple[Any, ...]:
    return (
        _j(event_id=event_id, user_id=user_id),
        _j(user_id=user_id, event_id=event_id, payload=payload),
        ts,
    )


def test_s6_bounded_by_specific_offsets(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    """S6 (testUpsertKafkaSourceSinkWithBoundedSpecificOffsets): p0@0 (1,100,payload 1), p0@1
    (1,100,payload 1-new), p0@2 (2,101,payload 2), p0@3 (3,102,payload 3); end offset partition 0 -> 2
    (exclusive): +I(1,100,payload 1), -U(1,100,payload 1), +U(1,100,payload 1-new) and nothing else.
    Both ways: ``until={0: 2}`` and the table's 'scan.bounded.specific-offsets'."""
    topic = new_topic()
    _produce(
        kafka,
        topic,
        [
            _bounded_record(1, 100, "payload 1"),
            _bounded_record(1, 100, "payload 1-new"),
            _bounded_record(2, 101, "payload 2"),
            _bounded_record(3, 102, "payload 3"),
        ],
    )
    table = _table(kafka, topic, _BOUNDED_DDL)
    cols = ["user_id", "event_id", "payload"]
    df, result = read_changelog(spark, table, _conn(kafka), until={0: 2}, mode="retract")
    assert _changes(df, cols) == [
        ("+I", (1, 100, "payload 1")),
        ("-U", (1, 100, "payload 1")),
        ("+U", (1, 100, "payload 1-new")),
    ]
    assert result.end_offsets == {topic: {"0": 2}}
    assert result.records_in == 2

    bounded = _table(
        kafka,
        topic,
        _BOUNDED_DDL,
        {"scan.bounded.mode": "specific-offsets", "scan.bounded.specific-offsets": "partition:0,offset:2"},
    )
    final, _ = materialize(spark, bounded, _conn(kafka))
    assert _table_rows(final, cols) == {(1, 100, "payload 1-new")}


def test_s7_bounded_by_timestamp(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    """S7 (...WithBoundedTimestamp): records at day 0 (1,100,payload 1), day 1 (2,101,payload 2), day 2
    12:09 (1,100,payload 1-new), day 3 (2,101,payload 2-new); bound day 2 14:00 (exclusive): +I(1,..),
    +I(2,..), -U(1, day 0, payload 1), +U(1, day 2, payload 1-new); key 2's day-3 update is not read.
    Days are counted from 4 days ago (not Flink's 2023 dates: retention). Both ways: ``until=
    {"timestamp_ms": ...}`` and the table's 'scan.bounded.timestamp-millis'."""
    topic = new_topic()
    t0 = _now_ms() - 4 * DAY
    ts = [t0, t0 + DAY, t0 + 2 * DAY + 12 * HOUR + 9 * MINUTE, t0 + 3 * DAY]
    bound = t0 + 2 * DAY + 14 * HOUR
    _produce(
        kafka,
        topic,
        [
            _bounded_record(1, 100, "payload 1", ts[0]),
            _bounded_record(2, 101, "payload 2", ts[1]),
            _bounded_record(1, 100, "payload 1-new", ts[2]),
            _bounded_record(2, 101, "payload 2-new", ts[3]),
        ],
    )
    table = _table(kafka, topic, _BOUNDED_DDL)
    cols = ["user_id", "event_id", "payload", "timestamp"]
    df, result = read_changelog(spark, table, _conn(kafka), until={"timestamp_ms": bound}, mode="retract")
    assert _changes(df, cols) == [
        ("+I", (1, 100, "payload 1", _ntz(ts[0]))),
        ("+I", (2, 101, "payload 2", _ntz(ts[1]))),
        ("-U", (1, 100, "payload 1", _ntz(ts[0]))),
        ("+U", (1, 100, "payload 1-new", _ntz(ts[2]))),
    ]
    assert result.end_offsets == {topic: {"0": 3}}

    bounded = _table(
        kafka,
        topic,
        _BOUNDED_DDL,
        {"scan.bounded.mode": "timestamp", "scan.bounded.timestamp-millis": str(bound)},
    )
    final, _ = materialize(spark, bounded, _conn(kafka))
    assert _table_rows(final, cols) == {
        (1, 100, "payload 1-new", _ntz(ts[2])),
        (2, 101, "payload 2", _ntz(ts[1])),
    }


def test_s8_zero_length_bounded_read(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    """S8 (...WithZeroLengthBoundedness): every record timestamp is after the bound -> empty result, and
    the read finishes (nothing read, end = start)."""
    topic = new_topic()
    t0 = _now_ms() - 5 * DAY
    _produce(
        kafka,
        topic,
        [
            _bounded_record(1, 100, "payload 1", t0 + 1 * DAY),
            _bounded_record(2, 101, "payload 2", t0 + 2 * DAY),
            _bounded_record(1, 100, "payload 1-new", t0 + 3 * DAY),
            _bounded_record(2, 101, "payload 2-new", t0 + 4 * DAY),
        ],
    )
    table = _table(kafka, topic, _BOUNDED_DDL)
    bound = {"timestamp_ms": t0 + 12 * HOUR}
    df, result = read_changelog(spark, table, _conn(kafka), until=bound, mode="retract")
    assert df.collect() == []
    assert result.records_in == 0
    assert result.end_offsets == result.start_offsets == {topic: {"0": 0}}
    final, mresult = materialize(spark, table, _conn(kafka), until=bound)
    assert final.collect() == []
    assert mresult.records_in == 0


def test_a_caught_up_read_runs_no_spark_job_and_keeps_the_fold_schema(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    """An incremental run with nothing new (the common orchestrated tick) costs no Spark job: the
    result is empty, with the columns and types a read with records gives."""
    topic = new_topic()
    t0 = _now_ms() - DAY
    _produce(
        kafka, topic, [_bounded_record(1, 100, "payload 1", t0), _bounded_record(2, 101, "payload 2", t0)]
    )
    table = _table(kafka, topic, _BOUNDED_DDL)
    for read in (read_changes, materialize):
        full, _ = read(spark, table, _conn(kafka))
        assert full.count() == 2
        group = f"caught-up-{read.__name__}"
        spark.sparkContext.setJobGroup(group, "a read with nothing to read")
        try:
            empty, result = read(spark, table, _conn(kafka), start="latest")
            assert spark.sparkContext.statusTracker().getJobIdsForGroup(group) == []
            assert empty.collect() == []
        finally:
            spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        assert empty.schema == full.schema
        assert result.records_in == result.records_out == 0
        assert result.start_offsets == result.end_offsets == {topic: {"0": 2}}


# -- S9: temporal join ----------------------------------------------------------------------------
def test_s9_temporal_join_as_of_snapshots(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    """S9 (testTemporalJoin; json here, 2 partitions): 11 user versions (modification_time = the record
    timestamp metadata); read back as a 16-row retract changelog (+I for each first version, -U/+U for
    each later one), then the pageviews joined FOR SYSTEM_TIME AS OF viewtime.

    Flink-specific part not applicable: there is no event-time temporal join operator, watermark or
    computed column here (the DDL parser rejects `upper_region AS UPPER(region)` and WATERMARK). The
    nearest real properties: (1) the changelog carries every version with its modification_time, so the
    version valid at viewtime is the last +I/+U with modification_time <= viewtime (checked for all 7
    pageviews); (2) the table as of a time is ``materialize(until={"timestamp_ms": viewtime + 1})``
    (every record with timestamp <= viewtime), checked for two pageviews, one before user 104 exists.
    UPPER(region) is computed in the test. Day 0 is 3 days ago (not 2020-08-15: retention)."""
    topic = new_topic(partitions=2)
    day0 = (_now_ms() - 3 * DAY) // SECOND * SECOND

    def at(day: int, h: int, m: int, s: int) -> int:
        return day0 + day * DAY + ((h * 60 + m) * 60 + s) * SECOND

    users = [
        (100, "Bob", "Beijing", at(0, 0, 0, 1)),
        (101, "Alice", "Shanghai", at(0, 0, 0, 2)),
        (102, "Greg", "Berlin", at(0, 0, 0, 3)),
        (103, "Richard", "Berlin", at(1, 0, 1, 5)),
        (101, "Alice", "Wuhan", at(1, 0, 2, 0)),
        (104, "Tomato", "Hongkong", at(1, 0, 5, 5)),
        (105, "Tim", "Shenzhen", at(1, 0, 6, 0)),
        (103, "Richard", "London", at(1, 1, 1, 5)),
        (101, "Alice", "Hangzhou", at(1, 1, 4, 5)),
        (104, "Tomato", "Shenzhen", at(1, 1, 5, 5)),
        (105, "Tim", "Hongkong", at(1, 1, 6, 0)),
    ]
    _produce(
        kafka,
        topic,
        [(_j(user_id=u), _j(user_id=u, user_name=n, region=r), ts) for u, n, r, ts in users],
    )
    table = _table(
        kafka,
        topic,
        "  `user_id` BIGINT,\n  `user_name` STRING,\n  `region` STRING,\n"
        "  modification_time TIMESTAMP(3) METADATA FROM 'timestamp',\n  PRIMARY KEY (`user_id`) NOT ENFORCED",
    )
    cols = ["user_id", "user_name", "region", "modification_time"]

    expected: dict[int, list[Change]] = {}
    last: dict[int, tuple[Any, ...]] = {}
    for u, n, r, ts in users:
        row = (u, n, r, _ntz(ts))
        if u in last:
            expected[u] += [("-U", last[u]), ("+U", row)]
        else:
            expected[u] = [("+I", row)]
        last[u] = row
    df, _ = read_changelog(spark, table, _conn(kafka), mode="retract")
    got = _by_key(_changes(df, cols))
    assert got == expected
    assert sum(len(v) for v in got.values()) == 16

    pageviews = [
        (10001, 100, at(0, 0, 0, 2), ("Bob", "BEIJING", _ntz(at(0, 0, 0, 1)))),
        (10002, 101, at(0, 0, 0, 3), ("Alice", "SHANGHAI", _ntz(at(0, 0, 0, 2)))),
        (10002, 102, at(0, 0, 0, 4), ("Greg", "BERLIN", _ntz(at(0, 0, 0, 3)))),
        (10002, 101, at(1, 0, 2, 1), ("Alice", "WUHAN", _ntz(at(1, 0, 2, 0)))),
        (10004, 104, at(1, 0, 4, 0), (None, None, None)),
        (10003, 101, at(1, 0, 4, 6), ("Alice", "WUHAN", _ntz(at(1, 0, 2, 0)))),
        (10004, 104, at(1, 0, 5, 6), ("Tomato", "HONGKONG", _ntz(at(1, 0, 5, 5)))),
    ]
    versions = [row for changes in got.values() for op, row in changes if op in ("+I", "+U")]
    for page, user, viewtime, want in pageviews:
        valid = [v for v in versions if v[0] == user and v[3] <= _ntz(viewtime)]
        latest = max(valid, key=lambda v: v[3]) if valid else None
        joined = (latest[1], latest[2].upper(), latest[3]) if latest else (None, None, None)
        assert joined == want, (page, user)

    for page, user, viewtime, want in (pageviews[4], pageviews[5]):
        snap, _ = materialize(spark, table, _conn(kafka), until={"timestamp_ms": viewtime + 1})
        found = {r.user_id: (r.user_name, r.region.upper(), r.modification_time) for r in snap.collect()}
        assert found.get(user, (None, None, None)) == want, (page, user)
        assert set(found) == {u for u, _, _, ts in users if ts <= viewtime}


# -- S10-S12: the reducing writer -----------------------------------------------------------------
_BOOKS_DDL = (
    "  `id` INT NOT NULL,\n  `title` STRING NOT NULL,\n  `author` STRING,\n  `price` DOUBLE,\n  `qty` INT,\n"
    "  `ts` TIMESTAMP_LTZ(3),\n  PRIMARY KEY (`id`) NOT ENFORCED"
)
_BOOKS_OPTS = {"sink.buffer-flush.max-rows": "4", "sink.buffer-flush.interval": "1h"}
_BOOKS_SCHEMA = "op STRING, seq INT, id INT, title STRING, author STRING, price DOUBLE, qty INT, ts TIMESTAMP"


def _utc(h: int) -> dt.datetime:
    return dt.datetime(2021, 3, 30, h, tzinfo=dt.timezone.utc)


# ReducingUpsertWriterTest.TEST_DATA (op, id, title, author, price, qty, ts)
_BOOKS = [
    ("+I", 1001, "Java public for dummies", "Tan Ah Teck", 11.11, 11, _utc(15)),
    ("+I", 1002, "More Java for dummies", "Tan Ah Teck", 22.22, 22, _utc(16)),
    ("+I", 1004, "A Cup of Java", "Kumar", 44.44, 44, _utc(17)),
    ("+U", 1004, "A Teaspoon of Java", "Kevin Jones", 55.55, 55, _utc(18)),
    ("+U", 1004, "A Teaspoon of Java 1.4", "Kevin Jones", 66.66, 66, _utc(19)),
    ("+U", 1004, "A Teaspoon of Java 1.5", "Kevin Jones", 77.77, 77, _utc(20)),
    ("-D", 1004, "A Teaspoon of Java 1.8", "Kevin Jones", None, 1010, _utc(21)),
    ("-D", 1005, "A Teaspoon of Java 1.8", "Kevin Jones", None, 1010, _utc(21)),
]


def _books_df(spark: SparkSession, indexes: Sequence[int]) -> DataFrame:
    rows = [(_BOOKS[i][0], seq, *_BOOKS[i][1:]) for seq, i in enumerate(indexes)]
    return _changelog_df(spark, _BOOKS_SCHEMA, rows)


def _book_value(i: int) -> dict[str, Any]:
    _, id_, title, author, price, qty, ts = _BOOKS[i]
    return {
        "id": id_,
        "title": title,
        "author": author,
        "price": price,
        "qty": qty,
        "ts": ts.strftime("%Y-%m-%d %H:%M:%SZ"),
    }


def _decoded(records: Iterable[Record]) -> list[tuple[int, dict[str, Any] | None]]:
    return [
        (json.loads(r.key or b"null")["id"], None if r.value is None else json.loads(r.value))
        for r in records
    ]


def test_s10_reducing_writer_writes_last_change_per_key(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    """S10 (ReducingUpsertWriterTest.testWriteData; max-rows 4): rows 0-3 then -D 1005 -> UA 1001,
    UA 1002, UA 1004 ("A Teaspoon of Java", 55.55), D 1005 (a tombstone, order across keys unspecified);
    then +U 1004 (1.4), +U 1004 (1.5), -D 1004 -> a single tombstone for 1004.

    Flink-specific part not applicable: Flink flushes when the buffer holds max-rows distinct keys;
    here each ``write_changelog`` call is one flush of the whole write (documented), so the two flushes
    are two writes. Read back: 1004 is deleted with its last written row, 1005 (never written) emits
    nothing."""
    topic = new_topic()
    table = _table(kafka, topic, _BOOKS_DDL, _BOOKS_OPTS)
    r1 = write_changelog(_books_df(spark, [0, 1, 2, 3, 7]), table, _conn(kafka), order_by="seq")
    assert (r1.records_in, r1.records_out, r1.tombstones_out) == (5, 4, 1)
    first = _raw(kafka, topic)
    assert sorted(_decoded(first), key=lambda t: t[0]) == [
        (1001, _book_value(0)),
        (1002, _book_value(1)),
        (1004, _book_value(3)),
        (1005, None),
    ]

    r2 = write_changelog(_books_df(spark, [4, 5, 6]), table, _conn(kafka), order_by="seq")
    assert (r2.records_in, r2.records_out, r2.tombstones_out) == (3, 1, 1)
    raw = _raw(kafka, topic)
    assert _decoded(raw[len(first) :]) == [(1004, None)]

    df, _ = read_changelog(spark, table, _conn(kafka), mode="retract")
    got = _by_key(_changes(df, ["id", "title", "price"]))
    assert got == {
        1001: [("+I", (1001, "Java public for dummies", 11.11))],
        1002: [("+I", (1002, "More Java for dummies", 22.22))],
        1004: [("+I", (1004, "A Teaspoon of Java", 55.55)), ("-D", (1004, "A Teaspoon of Java", 55.55))],
    }
    final, _ = materialize(spark, table, _conn(kafka))
    assert _table_rows(final, ["id"]) == {(1001,), (1002,)}


def test_s11_write_returns_only_after_every_reduced_key_is_written(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    """S11 (testFlushDataWhenCheckpointing): the first 4 rows, then a flush -> UA 1001, UA 1002,
    UA 1004 (55.55) and the wrapped writer flushed.

    Flink-specific part not applicable: there are no checkpoints; a write is a batch job. The nearest
    property: when ``write_changelog`` returns, every reduced key is in the topic (read back at once with
    read_committed, no waiting), and the read-back timestamps of the Kafka records are set."""
    topic = new_topic()
    table = _table(kafka, topic, _BOOKS_DDL, _BOOKS_OPTS)
    result = write_changelog(_books_df(spark, [0, 1, 2, 3]), table, _conn(kafka), order_by="seq")
    raw = _raw(kafka, topic)  # immediately
    assert sorted(_decoded(raw), key=lambda t: t[0]) == [
        (1001, _book_value(0)),
        (1002, _book_value(1)),
        (1004, _book_value(3)),
    ]
    assert (result.records_out, result.tombstones_out) == (3, 0)
    assert all(r.timestamp > 0 for r in raw)


def test_s12_null_timestamp_row_is_written(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    """S12 (testWriteDataWithNullTimestamp): +I 1001 with a null timestamp -> UA 1001 with ts null, no NPE.

    Flink-specific part not applicable: the writer context timestamp does not exist here. The nearest
    property: a NULL TIMESTAMP_LTZ column is written as JSON null, the Kafka record gets the producer's
    time, and the row reads back with ts NULL."""
    topic = new_topic()
    table = _table(kafka, topic, _BOOKS_DDL, _BOOKS_OPTS)
    rows = [("+I", 0, 1001, "Java public for dummies", "Tan Ah Teck", 11.11, 11, None)]
    before = _now_ms()
    write_changelog(_changelog_df(spark, _BOOKS_SCHEMA, rows), table, _conn(kafka), order_by="seq")
    after = _now_ms()
    raw = _raw(kafka, topic)
    assert _decoded(raw) == [(1001, {**_book_value(0), "ts": None})]
    assert before - 5 * SECOND <= raw[0].timestamp <= after + 5 * SECOND
    final, _ = materialize(spark, table, _conn(kafka))
    assert _table_rows(final, ["id", "title", "price", "qty", "ts"]) == {
        (1001, "Java public for dummies", 11.11, 11, None)
    }


# -- S13-S16: ChangelogNormalize ------------------------------------------------------------------
_ABC_DDL = "  `a` STRING,\n  `b` INT,\n  `c` STRING,\n  PRIMARY KEY (`a`) NOT ENFORCED"


def _abc(kafka: LocalKafka, topic: str, events: Sequence[tuple[str, int, str] | tuple[str, None]]) -> None:
    """+I/+U(a, b, c) = a value; -D(a) = a tombstone (a Kafka delete carries only the key)."""
    _produce(
        kafka,
        topic,
        [(_j(a=e[0]), None if e[1] is None else _j(a=e[0], b=e[1], c=e[2])) for e in events],
    )


_S13_INPUT: list[tuple[str, int, str] | tuple[str, None]] = [
    ("one", 1, "a"),
    ("one", 2, "bb"),
    ("three", 3, "ccc"),
    ("three", 3, "ccc"),
    ("one", 4, "aaaa"),
    ("one", 4, "aaaa"),
    ("three", None),
]


def test_s13_changelog_normalize_retract_consumer(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    """S13 (ChangelogNormalizeSemanticTestPrograms.UPSERT_SOURCE_WITH_RETRACT_SINK): +I(one,1,a)
    +U(one,2,bb) +I(three,3,ccc) +U(three,3,ccc) +I(one,4,aaaa) +U(one,4,aaaa) -D(three) ->
    +I(one,1,a) -U(one,1,a) +U(one,2,bb) -U(one,2,bb) +U(one,4,aaaa) +I(three,3,ccc) -D(three,3,ccc):
    identical re-sends suppressed, the delete carries the stored row. Final {(one,4,aaaa)}."""
    topic = new_topic()
    _abc(kafka, topic, _S13_INPUT)
    table = _table(kafka, topic, _ABC_DDL)
    df, result = read_changelog(spark, table, _conn(kafka), mode="retract")
    assert _by_key(_changes(df, ["a", "b", "c"])) == {
        "one": [
            ("+I", ("one", 1, "a")),
            ("-U", ("one", 1, "a")),
            ("+U", ("one", 2, "bb")),
            ("-U", ("one", 2, "bb")),
            ("+U", ("one", 4, "aaaa")),
        ],
        "three": [("+I", ("three", 3, "ccc")), ("-D", ("three", 3, "ccc"))],
    }
    assert (result.records_in, result.tombstones_in) == (7, 1)
    final, _ = materialize(spark, table, _conn(kafka))
    assert _table_rows(final, ["a", "b", "c"]) == {("one", 4, "aaaa")}


def test_s14_key_filter_on_the_changelog(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    """S14 (UPSERT_SOURCE_WITH_KEY_FILTER, WHERE a <> 'three'): -> +I(one,1,a) -U(one,1,a) +U(one,2,bb)
    -U(one,2,bb) +U(one,4,aaaa) +I(two,1,d) -D(two,1,d). Final {(one,4,aaaa)}. The filter is a Spark
    filter on the retract changelog (a key filter commutes with ChangelogNormalize)."""
    topic = new_topic()
    _abc(
        kafka,
        topic,
        [
            ("one", 1, "a"),
            ("one", 2, "bb"),
            ("three", 3, "ccc"),
            ("three", 3, "ccc"),
            ("one", 4, "aaaa"),
            ("one", 4, "aaaa"),
            ("two", 1, "d"),
            ("two", 1, "d"),
            ("three", None),
            ("two", None),
        ],
    )
    table = _table(kafka, topic, _ABC_DDL)
    df, _ = read_changelog(spark, table, _conn(kafka), mode="retract")
    assert _by_key(_changes(df.where("a <> 'three'"), ["a", "b", "c"])) == {
        "one": [
            ("+I", ("one", 1, "a")),
            ("-U", ("one", 1, "a")),
            ("+U", ("one", 2, "bb")),
            ("-U", ("one", 2, "bb")),
            ("+U", ("one", 4, "aaaa")),
        ],
        "two": [("+I", ("two", 1, "d")), ("-D", ("two", 1, "d"))],
    }
    final, _ = materialize(spark, table, _conn(kafka))
    assert _table_rows(final.where("a <> 'three'"), ["a", "b", "c"]) == {("one", 4, "aaaa")}


def test_s15_value_filter_turns_leaving_update_into_retraction(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    """S15 (UPSERT_SOURCE_WITH_FILTER, WHERE b < 3): Flink asserts +I(one,1,a) -U(one,1,a) +U(one,2,bb)
    -D(one,2,bb): the update of `one` to b=4 leaves the range and surfaces as a retraction of the last
    matching row; `three` (b=3) never passes. Final: empty.

    A row-wise Spark filter on our retract changelog keeps that retraction's label -U (Flink pushes the
    filter into ChangelogNormalize and labels it -D); a retract consumer applies both the same way, so
    the test asserts the exact rows with their signs and the consumer's state, which must be empty."""
    topic = new_topic()
    _abc(
        kafka,
        topic,
        [
            ("one", 1, "a"),
            ("one", 2, "bb"),
            ("three", 3, "ccc"),
            ("three", 3, "ccc"),
            ("one", 4, "aaaa"),
            ("one", 4, "aaaa"),
            ("three", None),
        ],
    )
    table = _table(kafka, topic, _ABC_DDL)
    df, _ = read_changelog(spark, table, _conn(kafka), mode="retract")
    filtered = _changes(df.where("b < 3"), ["a", "b", "c"])
    flink = [
        ("+I", ("one", 1, "a")),
        ("-U", ("one", 1, "a")),
        ("+U", ("one", 2, "bb")),
        ("-D", ("one", 2, "bb")),
    ]

    def signed(changes: list[Change]) -> list[tuple[str, tuple[Any, ...]]]:
        return [("+" if op in ("+I", "+U") else "-", row) for op, row in changes]

    assert signed(filtered) == signed(flink)
    assert filtered[:3] == flink[:3]
    assert _retract_fold(filtered) == set()
    final, _ = materialize(spark, table, _conn(kafka))
    assert final.where("b < 3").collect() == []


def test_s16_changelog_normalize_upsert_consumer(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    """S16 (CHANGELOG_NORMALIZE, sink without UPDATE_BEFORE): the S13 input -> +I(one,1,a) +U(one,2,bb)
    +I(three,3,ccc) +U(one,4,aaaa) -D(three,3,ccc): no -U, identical re-sends suppressed."""
    topic = new_topic()
    _abc(kafka, topic, _S13_INPUT)
    table = _table(kafka, topic, _ABC_DDL)
    df, _ = read_changelog(spark, table, _conn(kafka), mode="upsert")
    changes = _changes(df, ["a", "b", "c"])
    assert changes == [
        ("+I", ("one", 1, "a")),
        ("+U", ("one", 2, "bb")),
        ("+I", ("three", 3, "ccc")),
        ("+U", ("one", 4, "aaaa")),
        ("-D", ("three", 3, "ccc")),
    ]


# -- S17-S21: source edge cases -------------------------------------------------------------------
_IDV_DDL = "  `id` INT,\n  `v` STRING,\n  PRIMARY KEY (`id`) NOT ENFORCED"


def test_s17_tombstone_for_never_seen_key(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    """S17 (processLastRowOnChangelog): p0@0 k=9 null; p0@1 k=1 v=(1,x) -> +I(1,x) only (both modes);
    final {(1,x)}. ``read_changes`` (the incremental MERGE input) does pass the key-only delete of 9
    on: documented, since a range may not hold the key's insert."""
    topic = new_topic()
    _produce(kafka, topic, [(_j(id=9), None), (_j(id=1), _j(id=1, v="x"))])
    table = _table(kafka, topic, _IDV_DDL)
    for mode in ("retract", "upsert"):
        df, result = read_changelog(spark, table, _conn(kafka), mode=mode)
        assert _changes(df, ["id", "v"]) == [("+I", (1, "x"))], mode
        assert result.tombstones_in == 1
    final, _ = materialize(spark, table, _conn(kafka))
    assert _table_rows(final, ["id", "v"]) == {(1, "x")}
    changes, _ = read_changes(spark, table, _conn(kafka))
    assert sorted((r.op, r.id, r.v) for r in changes.collect()) == [("+U", 1, "x"), ("-D", 9, None)]


def test_s18_insert_delete_reinsert(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    """S18: k=1 v=a; k=1 null; k=1 v=b -> +I(1,a), -D(1,a), +I(1,b) (both modes); final {(1,b)}.

    Flink-specific part not applicable: mini-batch bundles. The nearest property: the folded reads see
    the whole range as one bundle, so ``read_changes`` gives only the last state, +U(1,b), as Flink's
    mini-batch gives only +I(1,b) for the three records in one bundle."""
    topic = new_topic()
    _produce(kafka, topic, [(_j(id=1), _j(id=1, v="a")), (_j(id=1), None), (_j(id=1), _j(id=1, v="b"))])
    table = _table(kafka, topic, _IDV_DDL)
    for mode in ("retract", "upsert"):
        df, _ = read_changelog(spark, table, _conn(kafka), mode=mode)
        assert _changes(df, ["id", "v"]) == [("+I", (1, "a")), ("-D", (1, "a")), ("+I", (1, "b"))], mode
    final, _ = materialize(spark, table, _conn(kafka))
    assert _table_rows(final, ["id", "v"]) == {(1, "b")}
    changes, _ = read_changes(spark, table, _conn(kafka))
    assert [(r.op, r.id, r.v) for r in changes.collect()] == [("+U", 1, "b")]


def test_s19_null_key_dropped_and_counted(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    """S19: p0@0 k=null v={"id":1,"v":"x"} -> nothing emitted, no error, counted in
    ``null_keys_dropped``. Same for an unparsable key with 'key.json.ignore-parse-errors' = 'true'
    (counted in ``parse_errors_skipped``); without that option an unparsable key fails the read,
    naming topic, partition and offset."""
    topic = new_topic()
    _produce(
        kafka,
        topic,
        [(None, _j(id=1, v="x")), (b"not json", _j(id=2, v="y")), (_j(id=3), _j(id=3, v="z"))],
    )
    lenient = _table(kafka, topic, _IDV_DDL, {"key.json.ignore-parse-errors": "true"})
    df, result = read_changelog(spark, lenient, _conn(kafka), mode="retract")
    assert _changes(df, ["id", "v"]) == [("+I", (3, "z"))]
    assert (result.records_in, result.null_keys_dropped, result.parse_errors_skipped) == (3, 1, 1)
    final, mresult = materialize(spark, lenient, _conn(kafka))
    assert _table_rows(final, ["id", "v"]) == {(3, "z")}
    assert (mresult.null_keys_dropped, mresult.parse_errors_skipped, mresult.records_out) == (1, 1, 1)

    # without ignore-parse-errors the unparsable key (offset 1) fails the read; the null key before it
    # (offset 0) is not an error
    strict = _table(kafka, topic, _IDV_DDL)
    with pytest.raises(DataError) as err:
        read_changelog(spark, strict, _conn(kafka), mode="retract")
    assert topic in str(err.value) and "partition 0" in str(err.value) and "offset 1" in str(err.value)


def test_s20_empty_value_is_not_a_delete(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    """S20: p0@0 k=1 v=(1,a); p0@1 k=1 v=b"" (zero-length, not null). Not a delete: with json it is a
    parse error, so the read fails naming topic, partition and offset; with
    'value.json.ignore-parse-errors' = 'true' the record is dropped and the prior row for key 1 stays."""
    topic = new_topic()
    _produce(kafka, topic, [(_j(id=1), _j(id=1, v="a")), (_j(id=1), b"")])
    raw = _raw(kafka, topic)
    assert raw[1].value == b""

    table = _table(kafka, topic, _IDV_DDL)
    reads: list[Callable[[], object]] = [
        lambda: read_changelog(spark, table, _conn(kafka), mode="retract"),
        lambda: materialize(spark, table, _conn(kafka)),
    ]
    for read in reads:
        with pytest.raises(DataError) as err:
            read()
        msg = str(err.value)
        assert topic in msg and "partition 0" in msg and "offset 1" in msg, msg

    lenient = _table(kafka, topic, _IDV_DDL, {"value.json.ignore-parse-errors": "true"})
    final, result = materialize(spark, lenient, _conn(kafka))
    assert _table_rows(final, ["id", "v"]) == {(1, "a")}
    assert result.parse_errors_skipped == 1
    assert result.tombstones_in == 0
    df, _ = read_changelog(spark, lenient, _conn(kafka), mode="retract")
    assert _changes(df, ["id", "v"]) == [("+I", (1, "a"))]


def test_s21_same_key_in_two_partitions(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    """S21: p0@0 k=1 v=a (ts +10 s), p1@0 k=1 v=b (ts +5 s). Flink gives no guarantee; our rule: the
    newest by timestamp wins -> (1, a); the changelog orders the key's records by timestamp (b, then a);
    the key is counted in ``keys_in_several_partitions``; ``strict=True`` fails."""
    topic = new_topic(partitions=2)
    t0 = _now_ms() - HOUR
    _produce(
        kafka,
        topic,
        [(_j(id=1), _j(id=1, v="a"), t0 + 10 * SECOND, 0), (_j(id=1), _j(id=1, v="b"), t0 + 5 * SECOND, 1)],
    )
    assert [(r.partition, r.offset, r.value) for r in _raw(kafka, topic)] == [
        (0, 0, _j(id=1, v="a")),
        (1, 0, _j(id=1, v="b")),
    ]
    table = _table(kafka, topic, _IDV_DDL)
    final, result = materialize(spark, table, _conn(kafka))
    assert _table_rows(final, ["id", "v"]) == {(1, "a")}
    assert result.keys_in_several_partitions == 1

    df, _ = read_changelog(spark, table, _conn(kafka), mode="retract")
    assert _changes(df, ["id", "v"], order=("_timestamp", "_topic", "_partition", "_offset")) == [
        ("+I", (1, "b")),
        ("-U", (1, "b")),
        ("+U", (1, "a")),
    ]
    with pytest.raises(DataError):
        materialize(spark, table, _conn(kafka), strict=True)
    with pytest.raises(DataError):
        read_changelog(spark, table, _conn(kafka), mode="retract", strict=True)


# -- S22-S26: sink mapping, routing, TTL, validation ----------------------------------------------
_IDV_SCHEMA = "op STRING, seq INT, id INT, v STRING"


def test_s22_sink_maps_changes_to_records(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    """S22: +I(1,a), -U(1,a), +U(1,b), -D(1,b) into the sink, each its own write -> (k1, a), (k1, null),
    (k1, b), (k1, null), as Flink's serializer maps them; with value.fields-include = ALL the value holds
    `id` too. In one write every change is written in order, except an UPDATE_BEFORE directly followed
    by its UPDATE_AFTER, which Flink's planner never sends an upsert sink: the same four changes of key 3
    write (k3, a), (k3, b), (k3, null); +I(2,a), -U(2,a), +U(2,b) with the -U and +U at one order
    position write (k2, a), (k2, b)."""
    topic = new_topic()
    table = _table(kafka, topic, _IDV_DDL)
    four = [("+I", "a"), ("-U", "a"), ("+U", "b"), ("-D", "b")]
    for seq, (op, v) in enumerate(four):
        write_changelog(
            _changelog_df(spark, _IDV_SCHEMA, [(op, seq, 1, v)]), table, _conn(kafka), order_by="seq"
        )
    both = [("+I", 1, 2, "a"), ("-U", 2, 2, "a"), ("+U", 2, 2, "b")]
    result = write_changelog(_changelog_df(spark, _IDV_SCHEMA, both), table, _conn(kafka), order_by="seq")
    assert (result.records_out, result.tombstones_out, result.distinct_keys) == (2, 0, 1)
    in_one = [(op, seq, 3, v) for seq, (op, v) in enumerate(four)]
    result = write_changelog(_changelog_df(spark, _IDV_SCHEMA, in_one), table, _conn(kafka), order_by="seq")
    assert (result.records_in, result.records_out, result.tombstones_out) == (4, 3, 1)

    assert [(r.key, r.value) for r in _raw(kafka, topic)] == [
        (b'{"id":1}', b'{"id":1,"v":"a"}'),
        (b'{"id":1}', None),
        (b'{"id":1}', b'{"id":1,"v":"b"}'),
        (b'{"id":1}', None),
        (b'{"id":2}', b'{"id":2,"v":"a"}'),
        (b'{"id":2}', b'{"id":2,"v":"b"}'),
        (b'{"id":3}', b'{"id":3,"v":"a"}'),
        (b'{"id":3}', b'{"id":3,"v":"b"}'),
        (b'{"id":3}', None),
    ]
    df, _ = read_changelog(spark, table, _conn(kafka), mode="retract")
    assert _by_key(_changes(df, ["id", "v"])) == {
        1: [("+I", (1, "a")), ("-D", (1, "a")), ("+I", (1, "b")), ("-D", (1, "b"))],
        2: [("+I", (2, "a")), ("-U", (2, "a")), ("+U", (2, "b"))],
        3: [("+I", (3, "a")), ("-U", (3, "a")), ("+U", (3, "b")), ("-D", (3, "b"))],
    }


def test_s23_sink_writes_exactly_one_topic(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    """S23 (DynamicKafkaRecordSerializationSchemaTest): Flink routes rows by their writable `topic`
    metadata when 'topic' is a list or 'topic-pattern' is set, and ignores it (even null) for a single
    topic. Our sink writes exactly one topic: a topic list or a pattern is rejected with SpecError before
    anything is written; with a single topic a row's `topic` column ('other', NULL) is ignored."""
    topic = new_topic()
    df = _changelog_df(
        spark,
        "op STRING, seq INT, id INT, v STRING, topic STRING",
        [("+I", 0, 1, "a", "other"), ("+I", 1, 2, "b", None)],
    )
    ddl = "  `id` INT,\n  `v` STRING,\n  `topic` STRING METADATA,\n  PRIMARY KEY (`id`) NOT ENFORCED"
    listed = _table(kafka, f"{topic};other", ddl)
    with pytest.raises(SpecError) as err:
        write_changelog(df, listed, _conn(kafka), order_by="seq")
    assert err.value.field == "topic"
    pattern = UpsertKafkaTable.from_options(
        {
            "topic-pattern": "t-.*",
            "properties.bootstrap.servers": kafka.bootstrap_servers,
            "key.format": "json",
            "value.format": "json",
        },
        columns=[{"name": "id", "type": "INT"}, {"name": "v", "type": "STRING"}],
        primary_key=["id"],
    )
    with pytest.raises(SpecError) as err:
        write_changelog(df, pattern, _conn(kafka), order_by="seq")
    assert err.value.field == "topic"
    assert _raw(kafka, topic) == []

    single = _table(kafka, topic, ddl)
    write_changelog(df, single, _conn(kafka), order_by="seq")
    assert sorted((r.topic, r.key) for r in _raw(kafka, topic)) == [
        (topic, b'{"id":1}'),
        (topic, b'{"id":2}'),
    ]
    final, _ = materialize(spark, single, _conn(kafka))
    assert _table_rows(final, ["id", "v", "topic"]) == {(1, "a", topic), (2, "b", topic)}


def test_s24_identical_resend_always_suppressed(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    """S24: with 'table.exec.state.ttl' = 1h Flink re-emits an identical value sent after the TTL
    (+I(1,a), -U(1,a), +U(1,a)); with TTL off only +I(1,a).

    Flink-specific part not applicable: we keep no state TTL (every read folds the whole range). The
    nearest property: k=1 v=a sent twice, 2 hours apart (longer than that TTL) -> +I(1,a) only, in both
    modes."""
    topic = new_topic()
    t0 = _now_ms() - 3 * HOUR
    _produce(kafka, topic, [(_j(id=1), _j(id=1, v="a"), t0), (_j(id=1), _j(id=1, v="a"), t0 + 2 * HOUR)])
    table = _table(kafka, topic, _IDV_DDL)
    for mode in ("retract", "upsert"):
        df, result = read_changelog(spark, table, _conn(kafka), mode=mode)
        assert _changes(df, ["id", "v"]) == [("+I", (1, "a"))], mode
        assert result.records_in == 2


def test_s25_validation_cases(kafka: LocalKafka) -> None:
    """S25 (UpsertKafkaDynamicTableFactoryTest): no PRIMARY KEY (V5), a CDC value format (V4),
    max-rows = 0 with interval = 1s (V10), exactly-once without a prefix (V11: here exactly-once is
    rejected altogether, documented), specific-offsets bounded mode without offsets (V13),
    'scan.startup.mode' (V1), a key prefix with value.fields-include = ALL (V8)."""
    base = "  `id` INT,\n  `v` STRING,\n  PRIMARY KEY (`id`) NOT ENFORCED"
    cases: list[tuple[str, dict[str, str], str, str]] = [
        ("  `id` INT,\n  `v` STRING", {}, "primary_key", "require to define a PRIMARY KEY constraint"),
        (
            base,
            {"value.format": "debezium-json"},
            "value.format",
            "doesn't support 'debezium-json' as value format, because 'debezium-json' is not in insert-only mode",
        ),
        (
            base,
            {"sink.buffer-flush.max-rows": "0", "sink.buffer-flush.interval": "1s"},
            "sink.buffer-flush.max-rows",
            "must be set to be greater than zero together",
        ),
        (base, {"sink.delivery-guarantee": "exactly-once"}, "sink.delivery-guarantee", "exactly-once"),
        (
            base,
            {"scan.bounded.mode": "specific-offsets"},
            "scan.bounded.specific-offsets",
            "is required in 'specific-offsets' bounded mode but missing",
        ),
        (
            base,
            {"scan.startup.mode": "earliest-offset"},
            "scan.startup.mode",
            "Unsupported options found for 'upsert-kafka'",
        ),
        (
            "  `k_id` INT,\n  `v` STRING,\n  PRIMARY KEY (`k_id`) NOT ENFORCED",
            {"key.fields-prefix": "k_"},
            "key.fields-prefix",
            "A key prefix is not allowed when option 'value.fields-include' is set to 'ALL'",
        ),
    ]
    for columns, options, field, message in cases:
        with pytest.raises(SpecError) as err:
            _table(kafka, "t", columns, options)
        assert err.value.field == field, (options, str(err.value))
        assert message in err.value.message, (options, str(err.value))


def test_s26_buffered_delete_last_is_one_tombstone(
    kafka: LocalKafka, spark: SparkSession, new_topic: Callable[..., str]
) -> None:
    """S26 (testBufferedTableSink config: max-rows 100, interval 1 s, prefix): +I(k1,a), +U(k1,b),
    -D(k1) inside one flush -> exactly one tombstone for k1.

    Flink-specific part not applicable: exactly-once (Kafka transactions committed on checkpoints) is
    rejected here (Spark's Kafka writer has no transactions; documented). The nearest property: the
    single tombstone is visible to a read_committed reader as soon as the write returns, and the key
    reads back as absent."""
    topic = new_topic()
    ddl = "  `k_id` STRING,\n  `v` STRING,\n  PRIMARY KEY (`k_id`) NOT ENFORCED"
    opts = {
        "key.fields-prefix": "k_",
        "value.fields-include": "EXCEPT_KEY",
        "sink.buffer-flush.max-rows": "100",
        "sink.buffer-flush.interval": "1s",
    }
    with pytest.raises(SpecError) as err:
        _table(
            kafka,
            topic,
            ddl,
            {**opts, "sink.delivery-guarantee": "exactly-once", "sink.transactional-id-prefix": "uko"},
        )
    assert err.value.field == "sink.delivery-guarantee"

    table = _table(kafka, topic, ddl, opts)
    rows = [("+I", 0, "k1", "a"), ("+U", 1, "k1", "b"), ("-D", 2, "k1", "b")]
    result = write_changelog(
        _changelog_df(spark, "op STRING, seq INT, k_id STRING, v STRING", rows),
        table,
        _conn(kafka),
        order_by="seq",
    )
    assert (result.records_in, result.records_out, result.tombstones_out) == (3, 1, 1)
    assert [(r.key, r.value) for r in _raw(kafka, topic)] == [(b'{"id":"k1"}', None)]
    final, _ = materialize(spark, table, _conn(kafka))
    assert final.collect() == []
