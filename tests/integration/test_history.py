"""History tables (``history: scd2``) against a plain-Python history oracle on randomized topics:
incremental runs, a full rebuild and a run killed at a fault point give the history one walk over
the whole topic gives; ``as_of`` gives the latest-state table of the records before a point."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from confluent_kafka import Producer
from pyspark.sql import DataFrame, SparkSession
from tests.integration.jobs_support import COLUMNS, oracle_table, pipeline, source
from tests.integration.oracle import Record, Version, fold, history, read_all
from tests.integration.test_jobs_postgres import pg_target

from upsert_kafka_ops.engine.history import as_of
from upsert_kafka_ops.jobs import run_job
from upsert_kafka_ops.local import LocalKafka, LocalPostgres
from upsert_kafka_ops.pipeline import MaterializeJob

BOOKKEEPING = ["_uko_partition", "_uko_offset", "_uko_end_partition", "_uko_end_offset"]
#: the first record's timestamp: an hour ago (older ones fall to the topic's 7-day retention at once)
T0 = int(time.time() * 1000) - 3_600_000


def changes(rnd: random.Random, n: int, keys: int, last: dict[int, dict[str, Any]], *,
             version: dict[int, int] | None = None, late: float = 0.0) -> list[tuple[int, dict[str, Any] | None]]:  # fmt: skip
    """Random records over ``keys`` keys: tombstones, identical re-updates, a change of the name
    only, new rows; with ``version``, each row carries a per-key sequence, and a share ``late`` of
    the rows come with a smaller one than the key's largest so far."""
    out: list[tuple[int, dict[str, Any] | None]] = []
    for _ in range(n):
        k = rnd.randrange(keys)
        roll = rnd.random()
        if roll < 0.15:
            out.append((k, None))
            last.pop(k, None)
            continue
        if roll < 0.35 and k in last:
            row = dict(last[k])  # an identical re-update
        elif roll < 0.5 and k in last:
            row = {**last[k], "name": f"user-{rnd.randrange(1000)}"}
        else:
            row = {"name": f"user-{rnd.randrange(1000)}", "region": rnd.choice(["Berlin", "Paris", "Beijing"]),
                   "score": f"{rnd.randrange(100000) / 100:.2f}"}  # fmt: skip
        if version is not None:
            top = version.get(k, 0)
            if top and rnd.random() < late:
                row["version"] = rnd.randrange(max(top - 5, 0), top)  # late: slots in before
            else:
                row["version"] = version[k] = top + rnd.randrange(1, 4)
        last[k] = row
        out.append((k, row))
    return out


def produce_timed(
    servers: str, topic: str, changes: list[tuple[int, dict[str, Any] | None]], clock: list[int]
) -> int:
    """Each record with its own timestamp, 10 ms after the previous one."""
    producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True, "linger.ms": 5})
    for key, row in changes:
        clock[0] += 10
        value = None if row is None else json.dumps({"id": key, **row}).encode()
        producer.produce(topic, key=json.dumps({"id": key}).encode(), value=value, timestamp=clock[0])
    assert producer.flush(30) == 0
    return len(changes)


def _row(row: dict[str, Any]) -> tuple[str, str, str]:
    return row["name"], row["region"], f"{float(row['score']):.2f}"


def versions_oracle(
    servers: str, topic: str, tracked: list[str], sequence: bool = False
) -> set[tuple[Any, ...]]:
    versions = history(read_all(servers, [topic]), lambda k: json.loads(k)["id"], json.loads,
                       lambda row: tuple(row.get(c) for c in tracked),
                       (lambda row: row.get("version")) if sequence else None)  # fmt: skip
    return {_version(v) for v in versions}


def _version(v: Version) -> tuple[Any, ...]:
    closed = v.closed or (None, None)
    return (v.key, *_row(v.row), v.valid_from, v.valid_to, v.is_current, *v.opened, *closed)


def history_table(df: DataFrame, raw_times: bool = False) -> set[tuple[Any, ...]]:
    """The rows of a history table; times as epoch milliseconds (``raw_times``: as they are)."""
    times = ["valid_from", "valid_to"] if raw_times else ["unix_millis(valid_from)", "unix_millis(valid_to)"]
    rows = df.selectExpr("id", "name", "region", "score", *times, "is_current", *BOOKKEEPING).collect()
    got = [(int(r[0]), r[1], r[2], f"{float(r[3]):.2f}", *r[4:]) for r in rows]
    assert len(got) == len(set(got)), "a version twice"
    return set(got)


def _pg_history(spark: SparkSession, pg: LocalPostgres, table: str, epoch_ms: bool) -> DataFrame:
    """A PostgreSQL history table's rows (``epoch_ms``: its times as epoch milliseconds)."""
    cols = ["id", "name", "region", "score", "valid_from", "valid_to", "is_current", *BOOKKEEPING]
    times = "(extract(epoch FROM {0}) * 1000)::bigint AS {0}" if epoch_ms else "{0}"
    with psycopg.connect(pg.conninfo) as c:
        rows = c.execute(f"SELECT id, name, region, score::text, {times.format('valid_from')}, "
                         f"{times.format('valid_to')}, is_current, {', '.join(BOOKKEEPING)} FROM {table}").fetchall()  # fmt: skip
    return spark.createDataFrame([tuple(r) for r in rows], cols)


def _history_job(
    name: str, topic: str, servers: str, target: dict[str, Any], **history: Any
) -> dict[str, Any]:
    return {"name": name, "kind": "materialize", "source": source(topic, servers), "target": target,
            "history": history or "scd2"}  # fmt: skip


def test_incremental_runs_a_rebuild_and_as_of_match_the_history_oracle_on_delta(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path
) -> None:
    topic = new_topic(partitions=3)
    servers = kafka.bootstrap_servers
    rnd, last, clock = random.Random(27), {}, [T0]
    paths = {n: tmp_path / n for n in ("every", "region", "rebuilt")}
    p = pipeline(servers, [
        _history_job("every", topic, servers, {"kind": "delta", "path": str(paths["every"])}),
        _history_job("region", topic, servers, {"kind": "delta", "path": str(paths["region"])},
                     track_columns=["region"], valid_from="since", valid_to="until", is_current="live"),
        {**_history_job("rebuilt", topic, servers, {"kind": "delta", "path": str(paths["rebuilt"])}),
         "mode": "full"},
    ])  # fmt: skip
    every = p.job("every")
    assert isinstance(every, MaterializeJob) and every.history is not None
    value_cols = [c["name"] for c in COLUMNS[1:]]

    def delta(name: str) -> DataFrame:
        df = spark.read.format("delta").load(str(paths[name]))
        return df.withColumnsRenamed({"since": "valid_from", "until": "valid_to", "live": "is_current"})

    ends = []
    for batch, n in enumerate((250, 120, 90)):
        produce_timed(servers, topic, changes(rnd, n, 40, last), clock)
        r = run_job(p, "every", spark=spark)
        assert (r.mode, r.run) == ("full" if batch == 0 else "incremental", batch + 1), r.reason
        assert history_table(delta("every")) == versions_oracle(servers, topic, value_cols)
        run_job(p, "region", spark=spark)
        assert history_table(delta("region")) == versions_oracle(servers, topic, ["region"])
        ends.append((r.end_offsets, clock[0]))

    # a rebuild from the earliest offset gives the same rows, bookkeeping included
    run_job(p, "rebuilt", spark=spark)
    assert history_table(delta("rebuilt")) == history_table(delta("every"))
    # the current versions are the latest-state table
    current = delta("every").where("is_current").select("id", "name", "region", "score").collect()
    assert {int(r[0]): (r[1], r[2], f"{float(r[3]):.2f}") for r in current} == oracle_table(servers, topic)

    # as_of a run's stored offsets, and a time: the fold of the records before that point
    records = read_all(servers, [topic])
    table = every.source.table
    for offsets, stamp in ends[:2]:
        before = [r for r in records if r.offset < int(offsets[topic][str(r.partition)])]
        assert _state(as_of(delta("every"), table, every.history, offsets=offsets)) == _fold(before)
        mid = stamp - 400
        at = [r for r in records if r.timestamp <= mid]
        assert _state(as_of(delta("every"), table, every.history, at=mid)) == _fold(at)


def _fold(records: list[Record]) -> dict[int, tuple[str, str, str]]:
    return {k: _row(v) for k, v in fold(records, lambda k: json.loads(k)["id"], json.loads).items()}


def _state(df: DataFrame) -> dict[int, tuple[str, str, str]]:
    rows = df.select("id", "name", "region", "score").collect()
    assert len(rows) == len({r[0] for r in rows}), "a key twice in a point of the history"
    return {int(r[0]): (r[1], r[2], f"{float(r[3]):.2f}") for r in rows}


def test_sequence_by_slots_late_records_in_and_a_late_record_rebuilds_on_postgres(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, postgres: LocalPostgres,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("UKO_TEST_PG_PASSWORD", postgres.password)
    topic = new_topic(partitions=2)
    servers = kafka.bootstrap_servers
    rnd, last, clock, version = random.Random(5), {}, [T0], {}
    table_name = f"users_history_{uuid.uuid4().hex[:8]}"
    job = _history_job(
        "users-history", topic, servers, pg_target(postgres, table_name), sequence_by="version"
    )
    job["source"]["table"]["columns"] = [*COLUMNS, {"name": "version", "type": "BIGINT"}]
    p = pipeline(servers, [job])
    spec = p.job("users-history")
    assert isinstance(spec, MaterializeJob) and spec.history is not None
    value_cols = ["name", "region", "score", "version"]

    # in order, then late records (a rebuild), then in order again (incremental)
    for batch, late in enumerate((0.0, 0.3, 0.0)):
        produce_timed(servers, topic, changes(rnd, 150, 30, last, version=version, late=late), clock)
        r = run_job(p, spark=spark)
        if batch == 1:
            assert r.mode == "full" and "come before their stored history" in r.reason, r.reason
        elif batch == 2:
            assert r.mode == "incremental", r.reason
        assert history_table(
            _pg_history(spark, postgres, table_name, False), raw_times=True
        ) == versions_oracle(servers, topic, value_cols, sequence=True)

    # as_of a sequence value: the last record at or before it in sequence order, per key
    records = read_all(servers, [topic])
    with psycopg.connect(postgres.conninfo) as c:
        stored = c.execute(f"SELECT * FROM {table_name}").fetchall()
        names = [d.name for d in c.execute(f"SELECT * FROM {table_name} LIMIT 0").description]
    frame = spark.createDataFrame([tuple(_plain(v) for v in row) for row in stored], names)
    for point in (3, 8, 15):
        assert _state(as_of(frame, spec.source.table, spec.history, at=point)) == _by_sequence(records, point)


def _plain(value: Any) -> Any:
    return float(value) if isinstance(value, Decimal) else value


def _by_sequence(records: list[Record], point: int) -> dict[int, tuple[str, str, str]]:
    """Per key: the records in sequence order (a tombstone at the largest sequence before it in the
    topic), the last one at or before ``point``; a live row if it is a value."""
    per_key: dict[int, list[tuple[int, int, dict[str, Any] | None]]] = {}
    largest: dict[int, int] = {}
    for i, r in enumerate(sorted(records, key=lambda r: (r.partition, r.offset))):
        assert r.key is not None
        k = json.loads(r.key)["id"]
        row = None if r.value is None else json.loads(r.value)
        if row is None:
            if k in largest:
                per_key.setdefault(k, []).append((largest[k], i, None))
            continue
        largest[k] = max(largest.get(k, row["version"]), row["version"])
        per_key.setdefault(k, []).append((row["version"], i, row))
    out = {}
    for k, steps in per_key.items():
        upto = sorted(s for s in steps if s[0] <= point)
        if upto and upto[-1][2] is not None:
            out[k] = _row(upto[-1][2])
    return out


# on PostgreSQL, inside the transaction that closes the changed versions and inserts the new ones; a
# run killed after its read (before any target's write, history or not) is in test_continuous.py
@pytest.mark.parametrize(("kind", "point"), [("postgres", "in-transaction")])
def test_a_history_run_killed_at_a_fault_point_is_repaired_by_the_rerun(
    kind: str, point: str, kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession,
    postgres: LocalPostgres, jars_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("UKO_TEST_PG_PASSWORD", postgres.password)
    topic = new_topic(partitions=2)
    servers = kafka.bootstrap_servers
    rnd, last, clock = random.Random(point), {}, [T0]
    table_name = f"users_history_{uuid.uuid4().hex[:8]}"
    target = (
        {"kind": "delta", "path": str(tmp_path / "h")} if kind == "delta" else pg_target(postgres, table_name)
    )
    p = pipeline(servers, [_history_job("h", topic, servers, target)])
    produce_timed(servers, topic, changes(rnd, 150, 30, last), clock)
    run_job(p, spark=spark)
    second = produce_timed(servers, topic, changes(rnd, 80, 30, last), clock)

    file = tmp_path / "pipeline.yaml"
    file.write_text(yaml.safe_dump(p.to_json_dict()))
    env = {**os.environ, "UPSERT_KAFKA_OPS_JARS_DIR": str(jars_dir), "UKO_FAULT_POINT": point}
    killed = subprocess.run([sys.executable, "-m", "upsert_kafka_ops.cli", "run", str(file), "--json"],
                            env=env, capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert killed.returncode == -9, killed.stderr[-3000:]

    rerun = run_job(p, spark=spark)
    assert (rerun.mode, rerun.records_read) == ("incremental", second)
    if kind == "delta":
        got = spark.read.format("delta").load(str(tmp_path / "h"))
        assert history_table(got) == versions_oracle(servers, topic, [c["name"] for c in COLUMNS[1:]])
    else:
        got = _pg_history(spark, postgres, table_name, True)
        assert history_table(got, raw_times=True) == versions_oracle(
            servers, topic, [c["name"] for c in COLUMNS[1:]]
        )
