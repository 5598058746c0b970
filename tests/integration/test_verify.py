"""verify: a warehouse table compared with the fold of its topic up to the offsets stored with it.
Tables written by real runs on randomized topics verify equal; changed behind the job's back (a
deleted row, a changed value, a resurrected key, a duplicated key) each difference is named with its
key, through the library and the CLI; a full rebuild repairs them."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from pyspark.sql import SparkSession
from tests.integration.jobs_support import oracle_table, pipeline, produce, random_changes, source
from tests.integration.test_jobs_postgres import pg_target

from upsert_kafka_ops.jobs import run_job
from upsert_kafka_ops.jobs.verify import KINDS, NotVerifiableError, verify_job
from upsert_kafka_ops.local import LocalKafka, LocalPostgres


def _corruptible(
    servers: str, topic: str, rnd: random.Random, keys: int
) -> tuple[dict[int, tuple[str, str, str]], int]:
    """The oracle's table after two batches of random changes, and a key that is not live in it
    (deleted by the topic, or never written): the one a corruption brings back."""
    produce(servers, topic, random_changes(rnd, 300, keys))
    state = oracle_table(servers, topic)
    ghost = min(set(range(keys)) - set(state))
    return state, ghost


def test_a_delta_table_equals_its_topic_until_changed_behind_the_jobs_back(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path
) -> None:
    topic = new_topic(partitions=3)
    servers = kafka.bootstrap_servers
    rnd = random.Random(27)
    path = tmp_path / "users"
    p = pipeline(servers, [{"name": "users", "kind": "materialize", "source": source(topic, servers),
                            "target": {"kind": "delta", "path": str(path)}}])  # fmt: skip
    with pytest.raises(NotVerifiableError, match="has not written it yet"):
        verify_job(spark, p, "users")

    produce(servers, topic, random_changes(rnd, 300, 60))
    assert run_job(p, "users", spark=spark).mode == "full"
    state, ghost = _corruptible(servers, topic, rnd, 80)
    assert run_job(p, "users", spark=spark).mode == "incremental"
    produce(servers, topic, random_changes(rnd, 40, 80))  # after the last run: not the table's yet

    equal = verify_job(spark, p, "users")
    assert equal.ok and equal.table_rows == equal.topic_rows == len(state)
    assert equal.differences == dict.fromkeys(KINDS, 0) and equal.keys == {}
    assert equal.summary().endswith(": equal.")

    live = sorted(state)
    gone, changed, twice = live[0], live[1], live[2]
    ref = f"delta.`{path}`"
    spark.sql(f"DELETE FROM {ref} WHERE id = {gone}")
    spark.sql(f"UPDATE {ref} SET region = 'Atlantis' WHERE id = {changed}")
    spark.sql(f"INSERT INTO {ref} SELECT * FROM {ref} WHERE id = {twice}")
    spark.sql(f"INSERT INTO {ref} VALUES ({ghost}, 'ghost', 'Berlin', 1.00)")

    found = verify_job(spark, p, "users", show=5)
    assert not found.ok
    assert found.differences == {"missing": 1, "unexpected": 1, "changed": 1, "duplicated": 1}
    assert found.keys == {"missing": [{"id": gone}], "unexpected": [{"id": ghost}],
                          "changed": [{"id": changed}], "duplicated": [{"id": twice}]}  # fmt: skip
    assert found.changed_columns == [["region"]]
    assert (found.table_rows, found.topic_rows) == (len(state) + 1, len(state))
    summary = found.summary()
    assert f"1 key(s) the topic holds are missing from the table: {{id={gone}}}" in summary
    assert f"{{id={changed}}} (region)" in summary and "Atlantis" not in summary  # names, never values

    file = tmp_path / "pipeline.yaml"
    file.write_text(p.to_yaml())
    cli = subprocess.run([sys.executable, "-m", "upsert_kafka_ops.cli", "verify", str(file), "--job", "users",
                          "--json"], capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert cli.returncode == 1, cli.stderr[-3000:]
    doc = json.loads(cli.stdout)
    assert doc["ok"] is False and doc["differences"] == found.differences and doc["keys"] == found.keys

    assert run_job(p, "users", spark=spark, mode="full").mode == "full"  # a rebuild repairs the table
    repaired = verify_job(spark, p, "users")
    assert repaired.ok and repaired.topic_rows == len(oracle_table(servers, topic))


def test_a_postgres_table_is_verified_over_jdbc_and_a_corruption_is_named(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    spark: SparkSession,
    postgres: LocalPostgres,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("UKO_TEST_PG_PASSWORD", postgres.password)
    topic = new_topic(partitions=2)
    servers = kafka.bootstrap_servers
    rnd = random.Random(28)
    table = f"users_{uuid.uuid4().hex[:8]}"
    p = pipeline(servers, [{"name": "users-pg", "kind": "materialize", "source": source(topic, servers),
                            "target": pg_target(postgres, table)}])  # fmt: skip
    state, ghost = _corruptible(servers, topic, rnd, 50)
    run_job(p, spark=spark)
    assert verify_job(spark, p, "users-pg").ok

    live = sorted(state)
    with psycopg.connect(postgres.conninfo) as c:
        c.execute(f"DELETE FROM {table} WHERE id = %s", (live[0],))
        c.execute(f"UPDATE {table} SET score = score + 1, name = 'x' WHERE id = %s", (live[1],))
        c.execute(f"INSERT INTO {table} VALUES (%s, 'ghost', 'Paris', 2.50)", (ghost,))
    found = verify_job(spark, p, "users-pg")
    assert found.differences == {"missing": 1, "unexpected": 1, "changed": 1, "duplicated": 0}
    assert found.keys == {
        "missing": [{"id": live[0]}],
        "unexpected": [{"id": ghost}],
        "changed": [{"id": live[1]}],
    }
    assert found.changed_columns == [["name", "score"]]
    assert postgres.password not in json.dumps(found.to_dict()) + found.summary()


EDGES = (
    "CREATE TABLE edges (id BIGINT, code CHAR(5), tags MAP<STRING, INT>, names ARRAY<STRING>, at TIMESTAMP(6), "
    "t TIME, raw BYTES, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = '{topic}', "
    "'key.format' = 'json', 'value.format' = 'json')"
)


def test_values_at_their_edges_verify_equal_and_a_microsecond_or_a_map_entry_is_a_change(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    spark: SparkSession,
    postgres: LocalPostgres,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CHAR padding, a map whose keys PostgreSQL's jsonb reorders, arrays, microseconds, TIME and
    BYTES: equal after a run in PostgreSQL and Delta; a change of one microsecond (Delta) or of one
    map entry (PostgreSQL) is named with its column."""
    monkeypatch.setenv("UKO_TEST_PG_PASSWORD", postgres.password)
    topic = new_topic(partitions=1)
    servers = kafka.bootstrap_servers
    rows = [(i, {"code": "ab", "tags": {"zeta": i, "a": 1, "mid": 22}, "names": ["x", None, "y"],
                 "at": f"2026-11-27 10:00:00.{i:06d}", "t": "12:30:05", "raw": "AAEC/w=="}) for i in range(1, 6)]  # fmt: skip
    produce(servers, topic, [*rows, (5, None)])
    table = f"edges_{uuid.uuid4().hex[:8]}"
    src = {"connection": "main", "table": {"ddl": EDGES.format(topic=topic)}}
    p = pipeline(servers, [
        {"name": "edges-pg", "kind": "materialize", "source": src, "target": pg_target(postgres, table)},
        {"name": "edges-delta", "kind": "materialize", "source": src,
         "target": {"kind": "delta", "path": str(tmp_path / "edges")}},
    ])  # fmt: skip
    for job in ("edges-pg", "edges-delta"):
        run_job(p, job, spark=spark)
        equal = verify_job(spark, p, job)
        assert equal.ok and equal.table_rows == 4, equal.summary()

    spark.sql(f"UPDATE delta.`{tmp_path / 'edges'}` SET at = at + INTERVAL 1 MICROSECOND WHERE id = 1")
    later = verify_job(spark, p, "edges-delta")
    assert later.keys == {"changed": [{"id": 1}]} and later.changed_columns == [["at"]], later.summary()
    with psycopg.connect(postgres.conninfo) as c:
        c.execute(f"""UPDATE {table} SET tags = tags || '{{"a": 5}}' WHERE id = 2""")
    entry = verify_job(spark, p, "edges-pg")
    assert entry.keys == {"changed": [{"id": 2}]} and entry.changed_columns == [["tags"]], entry.summary()
