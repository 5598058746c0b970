"""CDC changelog topics (debezium-json, canal-json, maxwell-json) on the real broker and Spark:
golden messages decoded into the changelog Flink's decoders emit; a hypothesis-generated Debezium
stream folded by the engine equal to a plain-Python fold of the same records read back with
confluent-kafka; and FLIP-149's first example, the Debezium `dbz_users` topic turned into the
`users` upsert topic by a topic-to-topic job."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from tests.demo_support import USERS_VALUE, users_oracle
from tests.integration.oracle import read_all

from upsert_kafka_ops.engine import DataError, materialize_cdc, read_cdc
from upsert_kafka_ops.jobs import Pipeline, run_job
from upsert_kafka_ops.local import LocalKafka
from upsert_kafka_ops.spec.table import KafkaTable

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "cdc"


def _produce(
    servers: str, topic: str, messages: list[tuple[bytes | None, bytes | None]], partition: int | None = None
) -> None:
    producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True})
    for key, value in messages:
        kw = {"partition": partition} if partition is not None else {}
        producer.produce(topic, key=key, value=value, **kw)
    assert producer.flush(30) == 0


def _table(
    servers: str, topic: str, fmt: str, columns: list[list[str]], options: dict[str, str]
) -> KafkaTable:
    opts = {"topic": topic, "properties.bootstrap.servers": servers, "value.format": fmt,
            **{f"value.{fmt}.{k}": v for k, v in options.items()}}  # fmt: skip
    return KafkaTable.from_options(opts, [{"name": n, "type": t} for n, t in columns])


def _plain(v: Any) -> Any:
    return str(v) if isinstance(v, Decimal) else v


@pytest.mark.parametrize("golden", sorted(p.name for p in GOLDEN.glob("*.json")))
def test_golden_messages_decode_into_flinks_changelog(
    golden: str, kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession
) -> None:
    spec = json.loads((GOLDEN / golden).read_text())
    topic = new_topic()
    raw = [None if c["message"] is None else
           (c["message"] if isinstance(c["message"], str) else json.dumps(c["message"])).encode()
           for c in spec["cases"]]  # fmt: skip
    _produce(kafka.bootstrap_servers, topic, [(None, v) for v in raw])
    names = [n for n, _ in spec["columns"]]
    want = [
        (op, tuple(row[n] for n in names))
        for c in spec["cases"]
        if c["changes"] != "bad"
        for op, row in c["changes"]
    ]
    bad = [i for i, c in enumerate(spec["cases"]) if c["changes"] == "bad"]

    lenient = _table(
        kafka.bootstrap_servers,
        topic,
        spec["format"],
        spec["columns"],
        {**spec["options"], "ignore-parse-errors": "true"},
    )
    read = read_cdc(spark, lenient)
    rows = read.df.orderBy("_offset", "_seq").collect()
    got = [(r["op"], tuple(_plain(r[n]) for n in names)) for r in rows]
    read.df.unpersist()
    assert got == want
    assert read.result.parse_errors_skipped == len(bad)
    assert read.result.records_in == len(raw) and read.result.tombstones_in == raw.count(None)
    if bad:  # without ignore-parse-errors the first bad record stops the read, named by its position
        strict = _table(kafka.bootstrap_servers, topic, spec["format"], spec["columns"], spec["options"])
        with pytest.raises(DataError, match=rf"topic '{topic}', partition 0, offset {bad[0]}\b"):
            read_cdc(spark, strict)


# -- a random Debezium stream vs a plain-Python fold ----------------------------------------------
ROW = st.fixed_dictionaries(
    {"name": st.sampled_from(["ann", "bob", "cy", "dee"]), "score": st.integers(0, 99)}
)
STEP = st.tuples(st.integers(0, 11), st.one_of(st.none(), ROW))  # (key, None = delete)


def _debezium_stream(
    steps: list[tuple[int, dict[str, Any] | None]],
) -> list[tuple[int, dict[str, Any] | None]]:
    """Consistent Debezium messages for the steps: c/u/d with the true before image; a delete of an
    absent key emits nothing; a delete is followed by Debezium's tombstone (value None)."""
    state: dict[int, dict[str, Any]] = {}
    out: list[tuple[int, dict[str, Any] | None]] = []
    for key, row in steps:
        before = state.get(key)
        if row is None:
            if before is None:
                continue
            out.append((key, {"before": {"id": key, **before}, "after": None, "op": "d"}))
            out.append((key, None))
            del state[key]
        else:
            op = "c" if before is None else "u"
            out.append((key, {"before": None if before is None else {"id": key, **before},
                              "after": {"id": key, **row}, "op": op}))  # fmt: skip
            state[key] = row
    return out


def _oracle(servers: str, topic: str, by_key: bool) -> Counter[tuple[Any, ...]]:
    """Apply the topic's Debezium records in partition order (each key lives in one partition)."""
    rows: Counter[tuple[Any, ...]] = Counter()
    last: dict[int, tuple[Any, ...] | None] = {}
    for rec in sorted(read_all(servers, [topic]), key=lambda r: (r.partition, r.offset)):
        if rec.value is None:
            continue
        msg = json.loads(rec.value)
        before = msg["before"] and (msg["before"]["id"], msg["before"]["name"], msg["before"]["score"])
        after = msg["after"] and (msg["after"]["id"], msg["after"]["name"], msg["after"]["score"])
        if before:
            rows[before] -= 1
        if after:
            rows[after] += 1
        last[json.loads(rec.key)["id"]] = after
    if by_key:
        return Counter(r for r in last.values() if r is not None)
    return +rows


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(steps=st.lists(STEP, min_size=1, max_size=60))
def test_random_debezium_stream_folds_like_the_oracle(
    steps: list[tuple[int, dict[str, Any] | None]],
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    spark: SparkSession,
) -> None:
    servers = kafka.bootstrap_servers
    topic = new_topic(partitions=3)
    stream = _debezium_stream(steps)
    _produce(servers, topic, [(json.dumps({"id": k}).encode(), None if m is None else json.dumps(m).encode())
                              for k, m in stream])  # fmt: skip
    table = _table(
        kafka.bootstrap_servers,
        topic,
        "debezium-json",
        [["id", "BIGINT"], ["name", "STRING"], ["score", "INT"]],
        {},
    )
    for key in (None, ["id"]):
        read = materialize_cdc(spark, table, key=key)
        got = Counter(tuple(r) for r in read.df.select("id", "name", "score").collect())
        read.df.unpersist()
        assert got == _oracle(servers, topic, by_key=key is not None), key
        assert read.result.records_in == len(stream)


def test_a_compacted_topic_needs_the_key(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession
) -> None:
    """A topic that lost a row's insert (compaction keeps the last record per Kafka key): the multiset
    fold cannot remove what it never saw, the fold by key gives the table."""
    topic = new_topic()
    update = {
        "before": {"id": 1, "name": "ann", "score": 1},
        "after": {"id": 1, "name": "ann", "score": 2},
        "op": "u",
    }
    _produce(kafka.bootstrap_servers, topic, [(b'{"id": 1}', json.dumps(update).encode())])
    table = _table(
        kafka.bootstrap_servers,
        topic,
        "debezium-json",
        [["id", "BIGINT"], ["name", "STRING"], ["score", "INT"]],
        {},
    )
    by_key = materialize_cdc(spark, table, key=["id"])
    assert [tuple(r) for r in by_key.df.collect()] == [(1, "ann", 2)]
    multiset = materialize_cdc(spark, table)
    assert [tuple(r) for r in multiset.df.collect()] == [(1, "ann", 2)]  # -1 of the unseen row is dropped


# -- FLIP-149's first example ----------------------------------------------------------------------
def test_flip149_dbz_users_to_upsert_users(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession
) -> None:
    """FLIP-149: `INSERT INTO users SELECT * FROM dbz_users`. The FLIP's users DDL also lists a
    `user_level` column that `SELECT *` from dbz_users cannot fill (and its shown result does not
    have); the sink here has the three columns the FLIP's result shows."""
    servers = kafka.bootstrap_servers
    dbz, users = new_topic(), new_topic(partitions=2, config={"cleanup.policy": "compact"})
    people = [
        (100, "Bob", "Beijing"),
        (101, "Alice", "Shanghai"),
        (102, "Greg", "Berlin"),
        (103, "Richard", "Berlin"),
    ]

    def image(u: tuple[int, str, str]) -> dict[str, Any]:
        return {"user_id": u[0], "user_name": u[1], "region": u[2]}

    messages = [{"before": None, "after": image(p), "op": "c"} for p in people]
    messages.append({"before": image(people[1]), "after": image((101, "Alice", "Hangzhou")), "op": "u"})
    messages.append({"before": image(people[3]), "after": None, "op": "d"})
    # unkeyed, as FLIP-149's dbz_users is read: the changes in one partition, in order; then the
    # tombstone Debezium writes after a delete
    _produce(servers, dbz, [(None, json.dumps(m).encode()) for m in messages] + [(None, None)])
    dbz_ddl = f"""CREATE TABLE dbz_users (user_id BIGINT, user_name STRING, region STRING)
        WITH ('connector' = 'kafka', 'topic' = '{dbz}', 'format' = 'debezium-json')"""
    users_ddl = f"""CREATE TABLE users (user_id BIGINT, user_name STRING, region STRING,
        PRIMARY KEY (user_id) NOT ENFORCED)
        WITH ('connector' = 'upsert-kafka', 'topic' = '{users}', 'key.format' = 'csv', 'value.format' = 'avro')"""
    pipe = Pipeline.model_validate({
        "connections": {"main": {"bootstrap_servers": servers}},
        "jobs": [{"name": "dbz-to-users", "kind": "topic-to-topic",
                  "sources": {"dbz_users": {"kind": "kafka", "connection": "main", "table": {"ddl": dbz_ddl}}},
                  "query": "SELECT * FROM dbz_users",
                  "sink": {"connection": "main", "table": {"ddl": users_ddl}}}],
    })  # fmt: skip

    # the changelog the FLIP shows for SELECT * FROM dbz_users (changelog result mode)
    read = read_cdc(spark, pipe.jobs[0].sources["dbz_users"].table, pipe.connections["main"])  # type: ignore[union-attr]
    changelog = [
        (r["op"], r["user_id"], r["user_name"], r["region"])
        for r in read.df.orderBy("_offset", "_seq").collect()
    ]
    read.df.unpersist()
    assert changelog == [
        ("+I", 100, "Bob", "Beijing"), ("+I", 101, "Alice", "Shanghai"), ("+I", 102, "Greg", "Berlin"),
        ("+I", 103, "Richard", "Berlin"), ("-U", 101, "Alice", "Shanghai"), ("+U", 101, "Alice", "Hangzhou"),
        ("-D", 103, "Richard", "Berlin"),
    ]  # fmt: skip

    result = run_job(pipe, "dbz-to-users", spark=spark)
    assert result.execution == "snapshot" and "CDC changelog" in result.reason
    # the FLIP's table-mode result of SELECT * FROM users, from a plain-Python fold of the users topic
    assert users_oracle(servers, USERS_VALUE, topic=users) == {
        100: ("Bob", "Beijing"), 101: ("Alice", "Hangzhou"), 102: ("Greg", "Berlin")}  # fmt: skip
    # a second run with nothing new writes nothing
    again = run_job(pipe, "dbz-to-users", spark=spark)
    assert again.records_written == 0 and again.tombstones_written == 0

    # the changes themselves as input of write_changelog: the same table in another upsert topic
    from upsert_kafka_ops.engine import write_changelog
    from upsert_kafka_ops.spec.table import UpsertKafkaTable

    copy = new_topic(partitions=2, config={"cleanup.policy": "compact"})
    sink = UpsertKafkaTable.from_flink_ddl(users_ddl.replace(f"'{users}'", f"'{copy}'"))
    changes = read_cdc(spark, pipe.jobs[0].sources["dbz_users"].table, pipe.connections["main"])  # type: ignore[union-attr]
    written = write_changelog(changes.df, sink, pipe.connections["main"])
    changes.df.unpersist()
    assert written.tombstones_out == 1  # Richard's delete
    assert users_oracle(servers, USERS_VALUE, topic=copy) == users_oracle(servers, USERS_VALUE, topic=users)


def test_materialize_job_from_a_debezium_topic_full_then_incremental(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path
) -> None:
    """A materialize job with a CDC source (and its key) into Delta: the first run folds the whole
    topic, the next reads only the new changes (an update and a delete) and merges them; each time
    the table equals the oracle's fold by key."""
    import random

    servers = kafka.bootstrap_servers
    topic = new_topic(partitions=3)
    rnd = random.Random(3)
    steps = [(rnd.randrange(15), None if rnd.random() < 0.2 else {"name": rnd.choice("abc"), "score": rnd.randrange(9)})
             for _ in range(80)]  # fmt: skip
    stream = _debezium_stream(steps)

    def produce(items: list[tuple[int, dict[str, Any] | None]]) -> None:
        _produce(servers, topic, [(json.dumps({"id": k}).encode(), None if m is None else json.dumps(m).encode())
                                  for k, m in items])  # fmt: skip

    produce(stream)
    ddl = f"""CREATE TABLE dbz (id BIGINT, name STRING, score INT)
        WITH ('connector' = 'kafka', 'topic' = '{topic}', 'format' = 'debezium-json')"""
    pipe = Pipeline.model_validate({
        "connections": {"main": {"bootstrap_servers": servers}},
        "jobs": [{"name": "dbz-to-delta", "kind": "materialize",
                  "source": {"kind": "kafka", "connection": "main", "table": {"ddl": ddl}, "key": ["id"]},
                  "target": {"kind": "delta", "path": str(tmp_path / "t")}}],
    })  # fmt: skip

    def table() -> Counter[tuple[Any, ...]]:
        rows = spark.read.format("delta").load(str(tmp_path / "t")).select("id", "name", "score").collect()
        return Counter(tuple(r) for r in rows)

    first = run_job(pipe, "dbz-to-delta", spark=spark)
    assert first.mode == "full" and first.records_read == len(stream)
    assert table() == _oracle(servers, topic, by_key=True)
    live = sorted(k for k, *_ in _oracle(servers, topic, by_key=True))
    state = {r[0]: {"name": r[1], "score": r[2]} for r in _oracle(servers, topic, by_key=True)}
    more = [
        (live[0], {"before": {"id": live[0], **state[live[0]]}, "after": {"id": live[0], "name": "zed", "score": 7}, "op": "u"}),
        (live[1], {"before": {"id": live[1], **state[live[1]]}, "after": None, "op": "d"}),
        (live[1], None),
    ]  # fmt: skip
    produce(more)
    second = run_job(pipe, "dbz-to-delta", spark=spark)
    assert (second.mode, second.records_read) == ("incremental", 3)
    assert (second.rows_upserted, second.rows_deleted) == (1, 1)
    assert table() == _oracle(servers, topic, by_key=True)
    assert (live[0], "zed", 7) in table() and all(r[0] != live[1] for r in table())
