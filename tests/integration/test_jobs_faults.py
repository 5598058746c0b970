"""Runs killed at named points, then rerun: the target equals the oracle, nothing skipped or doubled.
And two runs of one job never interleave: the second waits, or fails clearly.

The killed run is a real CLI process (``upsert-kafka-ops run``) that SIGKILLs itself at
``$UKO_FAULT_POINT``; the rerun happens in this process.
"""

from __future__ import annotations

import json
import logging
import random
import re
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from pyspark.sql import SparkSession
from tests.integration.jobs_support import (
    cli_run,
    oracle_table,
    pipeline,
    produce,
    random_changes,
    rows_as_table,
    source,
)
from tests.integration.oracle import fold, read_all
from tests.integration.test_jobs_postgres import pg_rows, pg_target
from tests.storage.test_s3_targets import end_offsets

from upsert_kafka_ops.jobs import Pipeline, run_job
from upsert_kafka_ops.jobs.targets import read_stored_offsets, read_target
from upsert_kafka_ops.jobs.targets.delta import read_delta_log
from upsert_kafka_ops.jobs.targets.postgres import read_postgres_state
from upsert_kafka_ops.local import LocalKafka, LocalPostgres


def _until_paused(run: subprocess.Popen[str], flag: Path, timeout: float = 300.0) -> None:
    """Wait until ``run`` (started with ``UKO_FAULT_POINT=pause:<point>:<flag>``) holds at its point."""
    deadline = time.monotonic() + timeout
    while not Path(str(flag) + ".reached").exists():
        assert run.poll() is None, run.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the run never reached its pause point"
        time.sleep(0.2)


def _setup(
    kind: str, kafka: LocalKafka, topic: str, tmp_path: Path, postgres: LocalPostgres
) -> tuple[Pipeline, Callable[[], dict[int, tuple[str, str, str]]], Callable[[], Any]]:
    servers = kafka.bootstrap_servers
    catalogs: dict[str, Any] = {}
    if kind == "iceberg":  # a Hadoop catalog in a local folder (the S3 suite runs a JDBC one on S3)
        name = f"files_{uuid.uuid4().hex[:8]}"  # one Spark session serves the suite
        catalogs = {"files": {"type": "hadoop", "warehouse": str(tmp_path / "lake"), "catalog_name": name}}
        target: dict[str, Any] = {"kind": "iceberg", "catalog": "files", "table": "crm.users"}

        def rows() -> dict[int, tuple[str, str, str]]:
            from pyspark.sql import SparkSession as S

            spark = S.getActiveSession()
            assert spark is not None
            got = read_target(spark, p, p.job(f"users-{kind}").target)  # type: ignore[union-attr,arg-type]
            got = got.select("id", "name", "region", "score").collect()
            assert len(got) == len({r[0] for r in got}), "duplicate keys in the Iceberg table"
            return rows_as_table(got)

        def state() -> Any:
            return read_stored_offsets(p.job(f"users-{kind}"), p)
    elif kind == "delta":
        path = tmp_path / "users"
        target: dict[str, Any] = {"kind": "delta", "path": str(path)}

        def rows() -> dict[int, tuple[str, str, str]]:
            from pyspark.sql import SparkSession as S

            spark = S.getActiveSession()
            assert spark is not None
            got = spark.read.format("delta").load(str(path)).select("id", "name", "region", "score").collect()
            assert len(got) == len({r[0] for r in got}), "duplicate keys in the Delta table"
            return rows_as_table(got)

        def state() -> Any:
            return read_delta_log(path).state
    else:
        table = f"users_{uuid.uuid4().hex[:8]}"
        target = pg_target(postgres, table)

        def rows() -> dict[int, tuple[str, str, str]]:
            return pg_rows(postgres, table)

        def state() -> Any:
            with psycopg.connect(postgres.conninfo) as c:
                return read_postgres_state(c, "upsert_kafka_ops_offsets", table)

    job = {"name": f"users-{kind}", "kind": "materialize", "source": source(topic, servers), "target": target}
    p = Pipeline.model_validate(
        {"connections": {"main": {"bootstrap_servers": servers}}, "catalogs": catalogs, "jobs": [job]}
    )
    return p, rows, state


@pytest.mark.parametrize(
    ("kind", "point", "mode"),
    [
        # Delta killed after the read: tests/integration/test_continuous.py (a continuous job's second
        # batch). after-commit is one point for every target (jobs/to_warehouse.py: after the target's
        # own commit has released its lock, before the group's offsets): one target kills there
        pytest.param("iceberg", "after-commit", "incremental", marks=pytest.mark.lines),
        pytest.param("postgres", "in-transaction", "incremental", marks=pytest.mark.lines),
        ("postgres", "during-swap", "full"),
    ],
)
def test_a_run_killed_at_a_fault_point_is_repaired_by_the_rerun(
    kind: str,
    point: str,
    mode: str,
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    spark: SparkSession,
    postgres: LocalPostgres,
    jars_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("UKO_TEST_PG_PASSWORD", postgres.password)
    topic = new_topic(partitions=2)
    servers = kafka.bootstrap_servers
    rnd = random.Random(point)
    p, rows, state = _setup(kind, kafka, topic, tmp_path, postgres)
    produce(servers, topic, random_changes(rnd, 150, 40))
    run_job(p, spark=spark)
    before = state()
    second = produce(servers, topic, random_changes(rnd, 60, 60))

    file = tmp_path / "pipeline.yaml"
    file.write_text(yaml.safe_dump(p.to_json_dict()))
    proc = cli_run(file, jars_dir, {"UKO_FAULT_POINT": point}, "--mode", mode)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == -9, err[-3000:]

    after_kill = state()
    if point == "after-commit":  # the data and offsets were committed together before the kill
        assert after_kill.run == before.run + 1
    else:  # nothing of the killed run is visible
        assert (after_kill.run, after_kill.offsets) == (before.run, before.offsets)

    rerun = run_job(p, spark=spark, mode=mode)  # type: ignore[arg-type]
    assert rows() == oracle_table(servers, topic)
    if point == "after-commit":
        assert rerun.records_read == 0
    elif mode == "incremental":
        assert rerun.records_read == second  # exactly the records the killed run did not commit
    final = state()
    assert sum(final.offsets.values()) == sum(int(o) for o in rerun.end_offsets[topic].values())


def test_two_runs_of_one_job_never_interleave(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    spark: SparkSession,
    postgres: LocalPostgres,
    jars_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("UKO_TEST_PG_PASSWORD", postgres.password)
    topic = new_topic(partitions=2)
    servers = kafka.bootstrap_servers
    p, rows, state = _setup("postgres", kafka, topic, tmp_path, postgres)
    produce(servers, topic, random_changes(random.Random(3), 100, 30))
    file = tmp_path / "pipeline.yaml"
    file.write_text(yaml.safe_dump(p.to_json_dict()))
    flag = tmp_path / "release"

    # A holds the target (paused after its read); B with a short lock timeout fails clearly
    a = cli_run(file, jars_dir, {"UKO_FAULT_POINT": f"pause:after-read:{flag}"})
    _until_paused(a, flag)
    b = cli_run(file, jars_dir, {}, "--lock-timeout", "1")
    out_b, err_b = b.communicate(timeout=600)
    assert b.returncode == 1, err_b[-3000:]
    assert "is being written by another run" in err_b
    assert json.loads(out_b)["results"][0]["status"] == "failed"

    # C waits for the lock while A is paused (in this process: the advisory lock is the PostgreSQL
    # server's, per connection; B and A are the processes); A is released once C says it waits (not
    # after a fixed sleep: a loaded machine is slower); both succeed, one after the other
    caplog.set_level(logging.INFO, logger="upsert_kafka_ops.jobs")
    waited: list[Any] = []
    c = threading.Thread(target=lambda: waited.append(run_job(p, spark=spark, lock_timeout_s=300)))
    c.start()
    deadline = time.monotonic() + 300
    while "waiting for PostgreSQL advisory lock" not in caplog.text:
        assert c.is_alive(), caplog.text[-3000:]
        assert time.monotonic() < deadline, "run C never said that it waits for the lock"
        time.sleep(0.2)
    flag.touch()
    out_a, err_a = a.communicate(timeout=600)
    c.join(600)
    assert a.returncode == 0, err_a[-3000:]
    ra, (rc,) = json.loads(out_a)["results"][0], waited
    assert (ra["run"], rc.run, rc.status) == (1, 2, "succeeded")
    assert rc.records_read == 0
    assert rows() == oracle_table(servers, topic)
    assert state().run == 2
    # C's log says that it waited, on what, and for how long (a waiting task is not silent)
    assert "is being written by another run: waiting for PostgreSQL advisory lock" in caplog.text
    assert re.search(r": took PostgreSQL advisory lock \d+ after waiting \d+\.\d s", caplog.text), caplog.text


def test_a_streaming_run_killed_inside_foreach_batch_is_replayed_without_changing_the_result(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, jars_dir: Path, tmp_path: Path
) -> None:
    from tests.integration.test_jobs_flows import QUERY, _clicks, _per_page, _topic_table

    servers = kafka.bootstrap_servers
    src, sink = new_topic(partitions=2), new_topic(partitions=2, config={"cleanup.policy": "compact"})
    p = _per_page(servers, src, sink, tmp_path / "ckpt", QUERY)
    events = [(page, i) for i, page in enumerate("abcabcaad")]
    _clicks(servers, src, events)
    file = tmp_path / "pipeline.yaml"
    file.write_text(yaml.safe_dump(p.to_json_dict()))
    proc = cli_run(file, jars_dir, {"UKO_FAULT_POINT": "in-foreach-batch"})
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == -9, err[-3000:]
    written_by_killed_run = _topic_table(servers, sink)  # the batch's records went out, the commit did not

    rerun = run_job(p, spark=spark)  # Spark replays the uncommitted batch: the same range, the same rows
    assert rerun.execution == "streaming"
    # Spark 4.1.0-4.1.1 lose the replayed batch's progress (SPARK-55271): its records go uncounted, its
    # end offsets come from the checkpoint
    counted = 0 if spark.version in ("4.1.0", "4.1.1") else len(events)
    assert rerun.records_read == counted
    ends = {int(p): o for p, o in rerun.end_offsets[src].items()}
    assert ends == {p: o for (_, p), o in end_offsets(servers, src, 2).items()}  # the topic's end: lag 0
    expected = {"a": (4, 0 + 3 + 6 + 7), "b": (2, 1 + 4), "c": (2, 2 + 5), "d": (1, 8)}
    assert written_by_killed_run == expected
    assert _topic_table(servers, sink) == expected


def test_a_backfill_into_a_delta_table_an_incremental_run_is_writing_waits_for_it(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    spark: SparkSession,
    postgres: LocalPostgres,
    jars_dir: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two jobs of one target (an incremental materialize in a process of its own and a bounded
    backfill in this one, as two schedulers might start them): the backfill fails clearly with a short
    lock timeout, or waits and runs after; the table then equals the backfill's bound, each run's
    offsets stored in its own commit."""
    from upsert_kafka_ops.jobs.core import ConcurrentRunError

    topic = new_topic(partitions=1)
    servers = kafka.bootstrap_servers
    one, rows, state = _setup("delta", kafka, topic, tmp_path, postgres)
    job = one.to_json_dict()["jobs"][0]
    produce(servers, topic, random_changes(random.Random(8), 60, 20))
    back = {"name": "rebuild", "kind": "backfill", "source": job["source"], "target": job["target"],
            "until": {"offsets": {topic: {"0": 40}}}, "rewind": True}  # fmt: skip
    both = pipeline(servers, [job, back])
    file = tmp_path / "pipeline.yaml"
    file.write_text(yaml.safe_dump(both.to_json_dict()))
    flag = tmp_path / "release"
    a = cli_run(file, jars_dir, {"UKO_FAULT_POINT": f"pause:after-read:{flag}"}, "--job", job["name"])
    _until_paused(a, flag)
    with pytest.raises(ConcurrentRunError, match="is being written by another run"):
        run_job(both, "rebuild", spark=spark, lock_timeout_s=1)
    caplog.set_level(logging.INFO, logger="upsert_kafka_ops.jobs")
    waited: list[Any] = []
    waiting = threading.Thread(
        target=lambda: waited.append(run_job(both, "rebuild", spark=spark, lock_timeout_s=300))
    )
    waiting.start()
    deadline = time.monotonic() + 300
    while "is being written by another run: waiting for" not in caplog.text:
        assert waiting.is_alive() and time.monotonic() < deadline, caplog.text[-3000:]
        time.sleep(0.2)
    flag.touch()
    out_a, err_a = a.communicate(timeout=600)
    waiting.join(600)
    assert a.returncode == 0, err_a[-3000:]
    ra, (rw,) = json.loads(out_a)["results"][0], waited
    assert (ra["run"], rw.run, rw.mode, rw.status) == (1, 2, "full", "succeeded")  # one after the other
    assert state().offsets == {(topic, 0): 40}
    first_40 = [r for r in read_all(servers, [topic]) if r.offset < 40]
    expected = fold(first_40, lambda k: json.loads(k)["id"], json.loads)
    assert rows() == {k: (v["name"], v["region"], f"{float(v['score']):.2f}") for k, v in expected.items()}
