"""Topic -> PostgreSQL over JDBC: staged rows, one transaction with the offsets, full swaps."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from pyspark.sql import SparkSession
from tests.integration.jobs_support import (
    oracle_table,
    pipeline,
    produce,
    random_changes,
    rows_as_table,
    source,
)

from upsert_kafka_ops.jobs import run_job
from upsert_kafka_ops.jobs.core import OffsetsError
from upsert_kafka_ops.jobs.targets.postgres import read_postgres_state
from upsert_kafka_ops.local import LocalKafka, LocalPostgres


def pg_target(pg: LocalPostgres, table: str) -> dict[str, Any]:
    return {"kind": "postgres", "host": pg.host, "port": pg.port, "database": pg.database, "user": pg.user,
            "password": {"env": "UKO_TEST_PG_PASSWORD"}, "table": table}  # fmt: skip


def pg_rows(pg: LocalPostgres, table: str) -> dict[int, tuple[str, str, str]]:
    with psycopg.connect(pg.conninfo) as c:
        return rows_as_table(c.execute(f"SELECT id, name, region, score FROM {table}").fetchall())


@pytest.fixture(autouse=True)
def _password(postgres: LocalPostgres, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UKO_TEST_PG_PASSWORD", postgres.password)


def test_incremental_runs_upsert_and_delete_in_one_transaction_with_the_offsets(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, postgres: LocalPostgres
) -> None:
    topic = new_topic(partitions=4)
    servers = kafka.bootstrap_servers
    table = f"users_{uuid.uuid4().hex[:8]}"
    rnd = random.Random(11)
    p = pipeline(servers, [{"name": "users-pg", "kind": "materialize", "source": source(topic, servers),
                            "target": pg_target(postgres, table)}])  # fmt: skip

    n1 = produce(servers, topic, random_changes(rnd, 250, 50))
    r1 = run_job(p, spark=spark)
    assert (r1.mode, r1.records_read) == ("full", n1)
    assert pg_rows(postgres, table) == oracle_table(servers, topic)

    gone = sorted(pg_rows(postgres, table))[0]
    n2 = produce(servers, topic, [*random_changes(rnd, 80, 70), (gone, None), (123456, None)])
    r2 = run_job(p, spark=spark)
    assert (r2.mode, r2.run, r2.records_read) == ("incremental", 2, n2)
    rows = pg_rows(postgres, table)
    assert rows == oracle_table(servers, topic) and gone not in rows

    with psycopg.connect(postgres.conninfo) as c:
        state = read_postgres_state(c, "upsert_kafka_ops_offsets", table)
        pk = c.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
            "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s::regclass AND i.indisprimary",
            (table,),
        ).fetchall()
        stages = c.execute("SELECT count(*) FROM pg_tables WHERE tablename LIKE '_uko_stage_%%'").fetchone()
    assert state is not None and state.run == 2 and state.offsets_json() == r2.end_offsets
    assert [r[0] for r in pk] == ["id"]
    assert stages == (0,)

    r3 = run_job(p, spark=spark)  # nothing new: offsets still recorded, run advances
    assert (r3.records_read, r3.rows_upserted, r3.rows_deleted, r3.run) == (0, 0, 0, 3)


def test_full_rebuild_swaps_the_table_and_new_columns_are_added(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, postgres: LocalPostgres
) -> None:
    topic = new_topic(partitions=1)
    servers = kafka.bootstrap_servers
    table = f"users_{uuid.uuid4().hex[:8]}"
    src = source(topic, servers)
    job = {"name": "users-pg", "kind": "materialize", "source": src, "target": pg_target(postgres, table)}
    produce(servers, topic, [(1, {"name": "a", "region": "Berlin", "score": "1.25"})])
    run_job(pipeline(servers, [job]), spark=spark)

    src["table"]["columns"] = [*src["table"]["columns"], {"name": "tags", "type": "ARRAY<STRING>"}]
    produce(
        servers, topic, [(2, {"name": "b", "region": "Paris", "score": "2", "tags": ["x", "y"]}), (1, None)]
    )
    r = run_job(pipeline(servers, [job]), spark=spark, mode="full")
    assert (r.mode, r.columns_added) == ("full", ["tags"])
    with psycopg.connect(postgres.conninfo) as c:
        rows = c.execute(f"SELECT id, tags, pg_typeof(tags)::text FROM {table}").fetchall()
    assert rows == [(2, ["x", "y"], "jsonb")]


def test_a_stored_offset_beyond_the_end_means_the_topic_was_recreated(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, postgres: LocalPostgres
) -> None:
    topic = new_topic(partitions=1)
    servers = kafka.bootstrap_servers
    table = f"users_{uuid.uuid4().hex[:8]}"
    p = pipeline(servers, [{"name": "users-pg", "kind": "materialize", "source": source(topic, servers),
                            "target": pg_target(postgres, table)}])  # fmt: skip
    produce(servers, topic, [(i, {"name": "a", "region": "Berlin", "score": "1"}) for i in range(5)])
    run_job(p, spark=spark)
    _delete_topic(servers, topic)
    kafka.create_topic(topic, partitions=1)
    produce(servers, topic, [(9, {"name": "z", "region": "Paris", "score": "1"})])
    with pytest.raises(OffsetsError, match=rf"topic {topic} was deleted and created again \(topic id "):
        run_job(p, spark=spark)
    assert sorted(pg_rows(postgres, table)) == [0, 1, 2, 3, 4]  # nothing mixed in


def _delete_topic(servers: str, topic: str) -> None:
    import time

    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": servers})
    for f in admin.delete_topics([topic], operation_timeout=30).values():
        f.result(timeout=30)
    deadline = time.monotonic() + 30
    while topic in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.2)
