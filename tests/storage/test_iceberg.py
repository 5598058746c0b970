"""Apache Iceberg targets on a real S3 server (MinIO), in a Hadoop catalog on S3 and a JDBC catalog
on a real PostgreSQL: incremental runs from the CLI equal the oracle's table, the offsets stored in
the snapshot summary are read back by pyiceberg (as the sensors and the lag exporter do), a column
added to the spec rebuilds the table, a backfill rebuilds it to a bound that a materialize job then
continues, a Spark Connect server runs them, and a catalog that refuses the login fails clearly."""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from tests.devservices import LocalS3
from tests.integration.jobs_support import (
    COLUMNS,
    oracle_table,
    produce,
    random_changes,
    rows_as_table,
    source,
)
from tests.storage.test_s3_targets import end_offsets, pipeline_file, run_cli

from upsert_kafka_ops.jobs import IcebergTarget, Pipeline, run_job
from upsert_kafka_ops.jobs.lag import pipeline_lag
from upsert_kafka_ops.jobs.state import StateError
from upsert_kafka_ops.jobs.targets import read_stored_offsets, read_target
from upsert_kafka_ops.jobs.verify import verify_job
from upsert_kafka_ops.local import LocalKafka, LocalPostgres, LocalSparkConnect

PASSWORD_ENV = "UKO_TEST_CATALOG_PASSWORD"


def iceberg_catalogs(postgres: LocalPostgres, prefix: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """``files``: a Hadoop catalog on S3; ``db``: a JDBC catalog in a new PostgreSQL database with
    its warehouse on S3. Engine-side names carry ``prefix`` (one Spark session serves the suite)."""
    database = f"catalog_{prefix}"
    postgres.create_database(database)
    monkeypatch.setenv(PASSWORD_ENV, postgres.password)
    return {
        "files": {"type": "hadoop", "warehouse": f"s3a://lake/{prefix}/hadoop", "storage": "lake",
                  "catalog_name": f"files_{prefix}"},
        "db": {"type": "jdbc", "uri": f"jdbc:postgresql://127.0.0.1:{postgres.port}/{database}",
               "user": postgres.user, "password": f"env:{PASSWORD_ENV}",
               "warehouse": f"s3a://lake/{prefix}/jdbc", "storage": "lake", "catalog_name": f"db_{prefix}"},
    }  # fmt: skip


def table_rows(spark: SparkSession, pipeline: Pipeline, job: str) -> dict[int, tuple[str, str, str]]:
    target = pipeline.job(job).target  # type: ignore[union-attr]
    assert isinstance(target, IcebergTarget)
    got = read_target(spark, pipeline, target).select("id", "name", "region", "score").collect()
    assert len(got) == len({r[0] for r in got}), f"duplicate keys in {target.uri}"
    return rows_as_table(got)


def test_iceberg_on_s3_runs_incrementally_from_the_cli_in_a_hadoop_and_a_jdbc_catalog(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    s3: LocalS3,
    postgres: LocalPostgres,
    spark: SparkSession,
    jars_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    servers, topic, prefix = kafka.bootstrap_servers, new_topic(partitions=2), f"i{uuid.uuid4().hex[:8]}"
    rnd = random.Random(191)
    produce(servers, topic, random_changes(rnd, 300, 40))
    jobs = [
        {"name": f"users-{cat}", "kind": "materialize", "source": source(topic, servers),
         "target": {"kind": "iceberg", "catalog": cat, "table": "crm.users"}}
        for cat in ("files", "db")
    ]  # fmt: skip
    catalogs = iceberg_catalogs(postgres, prefix, monkeypatch)
    file = pipeline_file(tmp_path, s3, servers, jobs, catalogs=catalogs)
    pipeline = Pipeline.load(file)

    for run in (1, 2):
        if run == 2:
            produce(servers, topic, random_changes(rnd, 200, 60))
        expected = oracle_table(servers, topic)
        if run == 1:  # in this process; then both catalogs' jobs in one CLI process, from what it stored
            results = {j["name"]: run_job(pipeline, j["name"], spark=spark).to_dict() for j in jobs}
        else:
            results = run_cli(file, None, jars_dir, s3.secret_key)
        for cat in ("files", "db"):
            result = results[f"users-{cat}"]
            assert (result["status"], result["mode"], result["run"]) == (
                "succeeded", "full" if run == 1 else "incremental", run)  # fmt: skip
            assert postgres.password not in str(result)
            assert table_rows(spark, pipeline, f"users-{cat}") == expected, f"{cat} after run {run}"
    # an incremental run's counts: every change it merged
    assert result["rows_upserted"] + result["rows_deleted"] > 0

    # the stored offsets, read by pyiceberg without Spark: what the sensors and the lag exporter see
    ends = end_offsets(servers, topic, 2)
    for cat in ("files", "db"):
        stored = read_stored_offsets(pipeline.job(f"users-{cat}"), pipeline)
        assert stored is not None and (stored.run, stored.offsets) == (2, ends)
    lags = {r.job: r for r in pipeline_lag(pipeline)}
    for cat in ("files", "db"):
        lag = lags[f"users-{cat}"]
        assert (lag.offsets_from, lag.report.total_lag) == ("target", 0), lag.to_dict()
    # the tables are where the catalogs put them, and each run released its lock
    listed = s3.client().list_objects_v2(Bucket="lake", Prefix=f"{prefix}/")
    keys = [o["Key"] for o in listed.get("Contents", [])]
    for where in ("hadoop/crm/users/metadata/", "jdbc/crm/users/metadata/", "hadoop/crm/users/data/"):
        assert any(k.startswith(f"{prefix}/{where}") for k in keys), where
    assert not [k for k in keys if k.endswith(".upsert-kafka-ops.lock")], keys

    # verify: each table equals its topic up to its stored offsets; a DELETE behind the job's back
    # (an Iceberg snapshot without the job's state) is named by its key
    from upsert_kafka_ops.engine.iceberg import iceberg_ref

    for cat in ("files", "db"):
        checked = verify_job(spark, pipeline, f"users-{cat}")
        assert checked.ok and checked.table_rows == len(expected), checked.summary()
    name, _ = pipeline.catalog_of(pipeline.job("users-db").target)  # type: ignore[union-attr,arg-type]
    gone = min(expected)
    spark.sql(f"DELETE FROM {iceberg_ref(name, 'crm.users')} WHERE id = {gone}")
    found = verify_job(spark, pipeline, "users-db")
    assert found.keys == {"missing": [{"id": gone}]} and found.differences["missing"] == 1, found.summary()


def test_an_added_column_rebuilds_an_iceberg_table_and_a_backfill_bounds_it(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    s3: LocalS3,
    postgres: LocalPostgres,
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    servers, topic, prefix = kafka.bootstrap_servers, new_topic(partitions=2), f"i{uuid.uuid4().hex[:8]}"
    rnd = random.Random(192)
    now = int(time.time() * 1000)
    produce(servers, topic, random_changes(rnd, 150, 30), timestamp_ms=now - 60_000)
    produce(servers, topic, random_changes(rnd, 150, 45), timestamp_ms=now - 30_000)
    catalogs = iceberg_catalogs(postgres, prefix, monkeypatch)
    target = {"kind": "iceberg", "catalog": "db", "table": "crm.users"}
    src = source(topic, servers)
    wider = {**src, "table": {**src["table"], "columns": [*COLUMNS, {"name": "tier", "type": "TINYINT"}]}}
    jobs = [
        {"name": "users-backfill", "kind": "backfill", "source": src, "target": target,
         "until": {"timestamp_ms": now - 45_000}, "rewind": True},
        {"name": "users", "kind": "materialize", "source": src, "target": target},
        {"name": "users-wider", "kind": "materialize", "source": wider, "target": target},
    ]  # fmt: skip
    pipeline = Pipeline.load(pipeline_file(tmp_path, s3, servers, jobs, catalogs=catalogs))

    # a backfill to a bound: the first batch's state, twice (the second run rebuilds the same)
    for run in (1, 2):
        result = run_job(pipeline, "users-backfill", spark=spark)
        assert (result.status, result.mode, result.run) == ("succeeded", "full", run)
        assert table_rows(spark, pipeline, "users") == oracle_table(servers, topic, before_ms=now - 45_000)
    # a materialize job continues from the backfill's offsets
    result = run_job(pipeline, "users", spark=spark)
    assert (result.status, result.mode, result.run) == ("succeeded", "incremental", 3)
    assert table_rows(spark, pipeline, "users") == oracle_table(servers, topic)

    # the spec gains a column: rows outside one run's range need it, so the table is rebuilt; a
    # TINYINT is an INT in Iceberg, and the next run continues incrementally all the same
    produce(servers, topic, random_changes(rnd, 50, 45))
    result = run_job(pipeline, "users-wider", spark=spark)
    assert (result.status, result.mode, result.columns_added) == ("succeeded", "full", ["tier"])
    assert "tier" in (result.reason or "")
    produce(servers, topic, random_changes(rnd, 50, 45))
    result = run_job(pipeline, "users-wider", spark=spark)
    assert (result.status, result.mode, result.run) == ("succeeded", "incremental", 5)
    assert table_rows(spark, pipeline, "users") == oracle_table(servers, topic)
    schema = read_target(spark, pipeline, pipeline.job("users").target).schema  # type: ignore[union-attr,arg-type]
    assert schema["tier"].dataType.simpleString() == "int"


def test_a_catalog_that_refuses_the_login_fails_clearly_and_in_bounded_time(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    s3: LocalS3,
    postgres: LocalPostgres,
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    servers, topic, prefix = kafka.bootstrap_servers, new_topic(), f"i{uuid.uuid4().hex[:8]}"
    produce(servers, topic, random_changes(random.Random(5), 20, 5))
    catalogs = iceberg_catalogs(postgres, prefix, monkeypatch)
    monkeypatch.setenv(PASSWORD_ENV, "not-the-password")
    job = {"name": "users", "kind": "materialize", "source": source(topic, servers),
           "target": {"kind": "iceberg", "catalog": "db", "table": "crm.users"}}  # fmt: skip
    pipeline = Pipeline.load(pipeline_file(tmp_path, s3, servers, [job], catalogs=catalogs))
    began = time.monotonic()
    with pytest.raises(StateError, match=r"catalog database: .*password authentication failed") as info:
        run_job(pipeline, "users", spark=spark, lock_timeout_s=5)
    assert time.monotonic() - began < 60
    assert "not-the-password" not in str(info.value) and postgres.password not in str(info.value)
    with pytest.raises(StateError, match="Check the catalog's uri, user and password"):
        read_stored_offsets(pipeline.job("users"), pipeline)


def test_iceberg_and_delta_on_s3_run_on_a_spark_connect_server_with_those_jar_groups(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    s3: LocalS3,
    postgres: LocalPostgres,
    spark: SparkSession,
    jars_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The client sends the store's and the catalog's settings (secrets resolved on its side) to its
    session on the server, which has the S3A and Iceberg jars (``--group s3 --group iceberg``)."""
    servers, topic, prefix = kafka.bootstrap_servers, new_topic(partitions=2), f"i{uuid.uuid4().hex[:8]}"
    rnd = random.Random(193)
    produce(servers, topic, random_changes(rnd, 200, 30))
    catalogs = iceberg_catalogs(postgres, prefix, monkeypatch)
    jobs = [
        {"name": "users-iceberg", "kind": "materialize", "source": source(topic, servers),
         "target": {"kind": "iceberg", "catalog": "db", "table": "crm.users"}},
        {"name": "users-delta", "kind": "materialize", "source": source(topic, servers),
         "target": {"kind": "delta", "path": f"s3a://lake/{prefix}/delta/users", "storage": "lake"}},
    ]  # fmt: skip
    file = pipeline_file(tmp_path, s3, servers, jobs, catalogs=catalogs)
    pipeline = Pipeline.load(file)
    conf = {"spark.driver.memory": "1g"}
    with LocalSparkConnect(
        tmp_path / "connect", master="local[2]", conf=conf, jar_groups=("s3", "iceberg")
    ) as server:
        for run in (1, 2):
            if run == 2:
                produce(servers, topic, random_changes(rnd, 60, 40))
            monkeypatch.setenv("UKO_TEST_CONNECT_TOKEN", server.token or "")
            results = run_cli(file, None, jars_dir, s3.secret_key, "--remote", server.url,
                              "--token", "env:UKO_TEST_CONNECT_TOKEN")  # fmt: skip
            for job in ("users-iceberg", "users-delta"):
                result = results[job]
                assert (result["status"], result["mode"], result["run"]) == (
                    "succeeded", "full" if run == 1 else "incremental", run), job  # fmt: skip
        log = server.log_file.read_text(errors="replace")
    assert table_rows(spark, pipeline, "users-iceberg") == oracle_table(servers, topic)
    delta = pipeline.job("users-delta").target  # type: ignore[union-attr]
    got = read_target(spark, pipeline, delta).select("id", "name", "region", "score").collect()  # type: ignore[arg-type]
    assert rows_as_table(got) == oracle_table(servers, topic)
    stored = read_stored_offsets(pipeline.job("users-iceberg"), pipeline)
    assert stored is not None and stored.offsets == end_offsets(servers, topic, 2)
    assert postgres.password not in log and s3.secret_key not in log  # the server logs no secret
    assert server.token and server.token not in log


def test_a_history_table_in_iceberg_matches_the_history_oracle_run_after_run_and_verifies(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    s3: LocalS3,
    postgres: LocalPostgres,
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.integration.test_history import T0, changes, history_table, produce_timed, versions_oracle

    servers, topic, prefix = kafka.bootstrap_servers, new_topic(partitions=2), f"h{uuid.uuid4().hex[:8]}"
    rnd, last, clock = random.Random(2027), {}, [T0]
    catalogs = iceberg_catalogs(postgres, prefix, monkeypatch)
    job = {"name": "users-history", "kind": "materialize", "source": source(topic, servers),
           "target": {"kind": "iceberg", "catalog": "db", "table": "crm.users_history"},
           "history": {"track_columns": ["region", "score"]}}  # fmt: skip
    pipeline = Pipeline.load(pipeline_file(tmp_path, s3, servers, [job], catalogs=catalogs))
    target = pipeline.job("users-history").target
    assert isinstance(target, IcebergTarget)
    for batch, n in enumerate((150, 80, 60)):
        produce_timed(servers, topic, changes(rnd, n, 30, last), clock)
        result = run_job(pipeline, "users-history", spark=spark)
        assert (result.mode, result.run) == ("full" if batch == 0 else "incremental", batch + 1), (
            result.reason
        )
        got = history_table(read_target(spark, pipeline, target))
        assert got == versions_oracle(servers, topic, ["region", "score"])
    checked = verify_job(spark, pipeline, "users-history")
    assert checked.ok and checked.table_rows == len(oracle_table(servers, topic)), checked.summary()
