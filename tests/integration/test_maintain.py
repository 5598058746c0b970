"""A maintain job on real Delta, Iceberg (a Hadoop catalog in a folder) and PostgreSQL tables: after
incremental runs it compacts the table and expires what old versions left, waits for a run that
holds the table's lock (it never works beside a write), keeps the rows equal to the oracle's, and
leaves the stored offsets where the next incremental run continues from."""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from tests.integration.jobs_support import (
    oracle_table,
    produce,
    random_changes,
    rows_as_table,
    source,
)
from tests.integration.test_jobs_postgres import pg_rows, pg_target

from upsert_kafka_ops.engine import delta_rs
from upsert_kafka_ops.jobs import Pipeline, run_job
from upsert_kafka_ops.jobs.core import ConcurrentRunError
from upsert_kafka_ops.jobs.targets import read_stored_offsets, read_target, target_for
from upsert_kafka_ops.local import LocalKafka, LocalPostgres


def _pipeline(kind: str, servers: str, topic: str, tmp_path: Path, postgres: LocalPostgres) -> Pipeline:
    catalogs: dict[str, Any] = {}
    if kind == "iceberg":  # one Spark session serves the suite: a catalog name of the test's own
        catalogs = {"files": {"type": "hadoop", "warehouse": str(tmp_path / "lake"),
                              "catalog_name": f"files_{uuid.uuid4().hex[:8]}"}}  # fmt: skip
        target: dict[str, Any] = {"kind": "iceberg", "catalog": "files", "table": "crm.users"}
    elif kind == "delta":
        target = {"kind": "delta", "path": str(tmp_path / "users")}
    else:
        target = pg_target(postgres, f"users_{uuid.uuid4().hex[:8]}")
    jobs = [
        {"name": "users", "kind": "materialize", "source": source(topic, servers), "target": target},
        {"name": "tidy", "kind": "maintain", "job": "users", "retain_hours": 0, "schedule": "0 3 * * *"},
    ]
    return Pipeline.model_validate(
        {"connections": {"main": {"bootstrap_servers": servers}}, "catalogs": catalogs, "jobs": jobs}
    )


def _rows(
    kind: str, spark: SparkSession, pipe: Pipeline, postgres: LocalPostgres
) -> dict[int, tuple[str, str, str]]:
    target = pipe.job("users").target  # type: ignore[union-attr]
    if kind == "postgres":
        return pg_rows(postgres, target.table)  # type: ignore[union-attr]
    got = read_target(spark, pipe, target).select("id", "name", "region", "score").collect()  # type: ignore[arg-type]
    assert len(got) == len({r[0] for r in got}), "duplicate keys"
    return rows_as_table(got)


def _changes(rnd: random.Random, run: int) -> list[tuple[int, dict[str, Any] | None]]:
    """New keys (a MERGE of inserts only adds a file and leaves the others alone); from the fourth run
    on, changes to the first run's keys too (rewritten files, position deletes, dead rows)."""
    new = [(100 * run + k, row) for k, row in random_changes(rnd, 20, 10) if row is not None]
    return new + (random_changes(rnd, 6, 10) if run >= 3 else [])


@pytest.mark.parametrize("kind", ["delta", "iceberg", "postgres"])
def test_maintenance_compacts_expires_waits_for_the_lock_and_the_next_run_continues(
    kind: str,
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    spark: SparkSession,
    postgres: LocalPostgres,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("UKO_TEST_PG_PASSWORD", postgres.password)
    # Spark's MERGE, as on object stores: it writes new files and leaves untouched ones (delta-rs, the
    # local writer of small changes, rewrites the whole of a small table into one file each run)
    monkeypatch.setattr(delta_rs, "SMALL_MERGE", 0)
    servers, topic = kafka.bootstrap_servers, new_topic(partitions=2)
    pipe = _pipeline(kind, servers, topic, tmp_path, postgres)
    rnd = random.Random(42)
    for run in range(4):  # a full run, then incremental runs: files, deletes and dead rows pile up
        produce(servers, topic, _changes(rnd, run))
        run_job(pipe, "users", spark=spark)
    before = read_stored_offsets(pipe.job("users"), pipe)
    assert before is not None

    # a run of the table holds its lock: the maintain job waits until it is released
    held, released = threading.Event(), []
    table = target_for(pipe.job("users").target, pipe)  # type: ignore[union-attr,arg-type]

    def hold() -> None:
        with table.hold(spark, 30):
            held.set()
            time.sleep(2)
            released.append(time.monotonic())

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(30)
    with pytest.raises(ConcurrentRunError, match="being written by another run"):
        run_job(pipe, "tidy", spark=spark, lock_timeout_s=0.5)
    result = run_job(pipe, "tidy", spark=spark, lock_timeout_s=60)
    ended = time.monotonic()
    holder.join()
    assert released and ended > released[0]

    done = result.write
    assert (result.kind, result.mode, result.reason) == ("maintain", "maintenance", "")
    if kind == "delta":
        assert done["files_compacted"] > 1 and done["files_written"] >= 1, done
        assert done["files_after"] < done["files_before"], done
        assert done["files_deleted"] >= done["files_compacted"], done  # retain 0: the replaced files go
    elif kind == "iceberg":
        assert done["files_compacted"] > 1 and done["delete_files_compacted"] >= 0, done
        assert done["snapshots_after"] < done["snapshots_before"], done
    else:
        with psycopg.connect(postgres.conninfo) as c:
            row = c.execute(
                "SELECT last_vacuum IS NOT NULL, last_analyze IS NOT NULL FROM pg_stat_user_tables "
                "WHERE relname = %s", (pipe.job("users").target.table,)  # type: ignore[union-attr]
            ).fetchone()  # fmt: skip
        assert row == (True, True), done
        assert done["dead_rows_after"] <= done["dead_rows_before"], done

    # the rows and the stored offsets are what they were; the next run continues from them
    assert _rows(kind, spark, pipe, postgres) == oracle_table(servers, topic)
    assert read_stored_offsets(pipe.job("users"), pipe) == before
    produce(servers, topic, _changes(rnd, 4))
    after = run_job(pipe, "users", spark=spark)
    assert (after.mode, after.reason) == ("incremental", "")
    assert after.start_offsets == before.offsets_json()
    assert _rows(kind, spark, pipe, postgres) == oracle_table(servers, topic)


def test_cluster_sorts_a_delta_table_by_its_key_so_a_small_run_rewrites_few_files(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path
) -> None:
    """``cluster`` rewrites a Delta table as files of about ``cluster_file_mb``, each holding one range
    of keys, and sets the table's ``delta.targetFileSize``; the rows and stored offsets stay. The next
    small run (delta-rs, its MERGE naming the changed keys) rewrites only the files holding them,
    where before every file held keys from the whole range."""
    from deltalake import DeltaTable

    servers, topic = kafka.bootstrap_servers, new_topic(partitions=2)
    path = tmp_path / "users"
    pipe = Pipeline.model_validate({
        "connections": {"main": {"bootstrap_servers": servers}},
        "jobs": [
            {"name": "users", "kind": "materialize", "source": source(topic, servers),
             "target": {"kind": "delta", "path": str(path)}},
            {"name": "tidy", "kind": "maintain", "job": "users", "expire": False, "cluster": True,
             "cluster_file_mb": 0.003},
        ],
    })  # fmt: skip
    rnd = random.Random(11)
    produce(servers, topic, random_changes(rnd, 6000, 4000))
    run_job(pipe, "users", spark=spark)
    before = read_stored_offsets(pipe.job("users"), pipe)

    def ranges() -> list[tuple[int, int]]:
        adds = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True))
        return sorted(zip(adds.column("min.id").to_pylist(), adds.column("max.id").to_pylist(), strict=True))

    spread = ranges()

    done = run_job(pipe, "tidy", spark=spark).write
    clustered = ranges()
    assert done["files_after"] == len(clustered) >= 6, done
    # each file holds one range of keys (Delta's ZORDER blurs the bounds a little), where each file
    # of the full run's held the whole range
    width = sum(hi - lo for lo, hi in clustered) / (clustered[-1][1] - clustered[0][0])
    assert width < 1.1 < sum(hi - lo for lo, hi in spread) / (spread[-1][1] - spread[0][0]), clustered
    size = DeltaTable(str(path)).metadata().configuration.get("delta.targetFileSize")
    assert size == str(int(0.003 * 1024 * 1024))
    assert _rows("delta", spark, pipe, None) == oracle_table(servers, topic)  # type: ignore[arg-type]
    assert read_stored_offsets(pipe.job("users"), pipe) == before

    live = sorted(oracle_table(servers, topic))
    produce(servers, topic, [(k, {"name": f"n{k}", "region": "Paris", "score": "1.50"}) for k in live[:3]])
    after = run_job(pipe, "users", spark=spark)
    assert (after.mode, after.write.get("writer")) == ("incremental", "delta-rs")
    metrics = DeltaTable(str(path)).history(1)[0]["operationMetrics"]
    assert 1 <= metrics["num_target_files_removed"] <= 3 < len(clustered), metrics
    assert _rows("delta", spark, pipe, None) == oracle_table(servers, topic)  # type: ignore[arg-type]
