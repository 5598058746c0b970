"""Topic -> Delta: full and incremental runs, exactly the new records, deletes, offsets with the data."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, TopicPartition
from pyspark.sql import SparkSession
from tests.integration.jobs_support import (
    oracle_table,
    pipeline,
    produce,
    random_changes,
    rows_as_table,
    source,
)

from upsert_kafka_ops.engine import delta_rs
from upsert_kafka_ops.engine.delta import ensure_delta_table
from upsert_kafka_ops.jobs import run_job
from upsert_kafka_ops.jobs.core import OffsetsError
from upsert_kafka_ops.jobs.targets.delta import read_delta_log
from upsert_kafka_ops.local import LocalKafka
from upsert_kafka_ops.spec.table import UpsertKafkaTable


def _delta(spark: SparkSession, path: Path) -> dict[int, tuple[str, str, str]]:
    rows = spark.read.format("delta").load(str(path)).select("id", "name", "region", "score").collect()
    return rows_as_table(rows)


def test_incremental_runs_read_only_new_records_and_apply_deletes(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path
) -> None:
    topic = new_topic(partitions=3)
    servers = kafka.bootstrap_servers
    rnd = random.Random(7)
    path = tmp_path / "users"
    p = pipeline(servers, [{"name": "users", "kind": "materialize", "source": source(topic, servers),
                            "target": {"kind": "delta", "path": str(path)}}])  # fmt: skip

    first = produce(servers, topic, random_changes(rnd, 300, 60))
    r1 = run_job(p, "users", spark=spark)
    assert (r1.mode, r1.run, r1.records_read) == ("full", 1, first)
    assert "no stored offsets" in r1.reason
    assert _delta(spark, path) == oracle_table(servers, topic)

    # run 2: inserts, updates, a delete of a key inserted in run 1, a delete of a never-seen key
    live = sorted(oracle_table(servers, topic))
    second = produce(servers, topic, [*random_changes(rnd, 120, 80), (live[0], None), (9999, None)])
    r2 = run_job(p, "users", spark=spark)
    assert (r2.mode, r2.run, r2.records_read) == ("incremental", 2, second)
    table = _delta(spark, path)
    assert table == oracle_table(servers, topic)
    assert live[0] not in table

    # run 3: nothing new; the state is still committed with the same end offsets
    r3 = run_job(p, "users", spark=spark)
    assert (r3.mode, r3.run, r3.records_read, r3.rows_upserted) == ("incremental", 3, 0, 0)
    log = read_delta_log(path)
    assert log.state is not None and log.state.run == 3
    assert log.state.offsets_json() == r2.end_offsets == r3.end_offsets
    assert sum(int(o) for parts in r3.end_offsets.values() for o in parts.values()) == first + second

    # the processed offsets were committed to the job's consumer group
    c = Consumer({"bootstrap.servers": servers, "group.id": "upsert-kafka-ops.users"})
    try:
        committed = c.committed([TopicPartition(topic, i) for i in range(3)], timeout=10)
    finally:
        c.close()
    assert {str(tp.partition): tp.offset for tp in committed} == r3.end_offsets[topic]


def test_small_changes_are_merged_by_delta_rs_and_spark_reads_its_commits(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An incremental run of at most SMALL_MERGE changes commits through delta-rs in this process
    (engine.delta_rs), a larger one through Spark's MERGE; either continues the other's table, and
    Spark reads delta-rs's commit as its own: the rows, the stored offsets and the run's txn (a
    replayed Spark write of that run is skipped)."""
    topic = new_topic(partitions=3)
    servers = kafka.bootstrap_servers
    rnd = random.Random(5)
    path = tmp_path / "users"
    p = pipeline(servers, [{"name": "users", "kind": "materialize", "source": source(topic, servers),
                            "target": {"kind": "delta", "path": str(path)}}])  # fmt: skip
    produce(servers, topic, random_changes(rnd, 200, 50))
    assert run_job(p, "users", spark=spark).mode == "full"
    writers = []
    for spark_merges in (False, True, False):
        live = sorted(oracle_table(servers, topic))
        produce(servers, topic, [*random_changes(rnd, 40, 70), (live[0], None), (live[1], None)])
        with monkeypatch.context() as m:
            if spark_merges:
                m.setattr(delta_rs, "SMALL_MERGE", 0)
            r = run_job(p, "users", spark=spark)
        writers.append(r.write.get("writer", "spark"))
        assert r.mode == "incremental" and r.rows_deleted == len(
            set(live) - set(oracle_table(servers, topic))
        )
        assert _delta(spark, path) == oracle_table(servers, topic)
        log = read_delta_log(path)
        assert log.state is not None and log.state.run == r.run
        assert log.state.offsets_json() == r.end_offsets and log.txn_versions["users"] == r.run
    assert writers == ["delta-rs", "spark", "delta-rs"]
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").first()
    assert history is not None and history["operation"] == "MERGE"
    assert json.loads(history["userMetadata"])["upsert_kafka_ops"]["run"] == 4
    before = _delta(spark, path)
    spark.conf.set("spark.databricks.delta.write.txnAppId", "users")
    spark.conf.set("spark.databricks.delta.write.txnVersion", "4")
    try:  # Spark sees delta-rs's txn: a write of the same run is skipped
        spark.createDataFrame([(1, "x")], "id BIGINT, name STRING").write.format("delta").mode("append").save(
            str(path)
        )
    finally:
        spark.conf.unset("spark.databricks.delta.write.txnAppId")
        spark.conf.unset("spark.databricks.delta.write.txnVersion")
    assert _delta(spark, path) == before


def test_a_small_merge_names_its_keys_and_still_matches_every_string_key(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """delta-rs's MERGE of a small change also names the change's key values (``t.id IN (...)``), so it
    skips the files whose statistics exclude them. A key with a quote, a backslash, a tab or a
    character outside the BMP still finds its row: updated, deleted or inserted, never twice."""
    ddl = (
        "CREATE TABLE t (id {}, v STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', "
        "'topic' = 't', 'properties.bootstrap.servers' = 'b:9092', 'key.format' = 'json', 'value.format' = 'json')"
    )
    table = UpsertKafkaTable.from_flink_ddl(ddl.format("STRING"))
    keys = ["a'b", "c\\d", "x\\'y", "tab\tz", "\u00e9\U0001f600", "''", "plain"]
    path = str(tmp_path / "t")
    ensure_delta_table(spark, path, table)
    spark.createDataFrame([(k, "old") for k in keys], "id STRING, v STRING").write.format("delta").mode(
        "append"
    ).save(path)
    changes = spark.createDataFrame(
        [("+U", k, "new") for k in keys[:5]] + [("-D", keys[5], None), ("+U", "fresh'", "new")],
        "op STRING, id STRING, v STRING",
    )
    assert delta_rs.key_filter(changes.toArrow(), table).startswith("t.`id` IN (")
    counts = delta_rs.merge_small(changes, path, table, app_id="t", version=1, metadata={}, rows=7)
    got = spark.read.format("delta").load(path).select("id", "v").collect()
    assert len(got) == len({r["id"] for r in got}), "a key was inserted beside its row"
    assert dict((r["id"], r["v"]) for r in got) == {k: "new" for k in keys[:5]} | {
        "plain": "old",
        "fresh'": "new",
    }
    assert counts == {"upserted": 6, "deleted": 1}
    # no filter where it could not be exact: more values than it names, or a key type it does not name
    monkeypatch.setattr(delta_rs, "KEY_FILTER_VALUES", 6)
    assert delta_rs.key_filter(changes.toArrow(), table) == ""
    decimal = UpsertKafkaTable.from_flink_ddl(ddl.format("DECIMAL(10, 2)"))
    amounts = pa.table({"id": pa.array([Decimal("1.50")], pa.decimal128(10, 2)), "v": ["x"]})
    assert delta_rs.key_filter(amounts, decimal) == ""


def test_the_schema_read_from_the_log_here_is_the_one_spark_reads(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A run reads its Delta table's schema with delta-rs (engine.delta_rs.table_schema) instead of a
    Spark query: the same StructType as Spark's for every type a table can have, after a column was
    added too; None (Spark reads it) where there is no table here."""
    from upsert_kafka_ops.engine.delta import delta_schema

    path = str(tmp_path / "typed")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT NOT NULL, a DECIMAL(12,2), b TIMESTAMP, c TIMESTAMP_NTZ, "
        "d DATE, e BINARY, f ARRAY<INT>, g MAP<STRING, DOUBLE>, h STRUCT<x: INT NOT NULL, y: STRING>, "
        "i TINYINT, j SMALLINT, k FLOAT, l BOOLEAN, `Nämé-2` STRING) USING delta"
    )
    spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (m INT)")
    here = delta_rs.table_schema(path)
    assert here is not None and here == delta_schema(spark, path)
    assert here.names[-1] == "m" and not here["id"].nullable
    assert delta_rs.table_schema(f"file:{path}") == here
    assert delta_rs.table_schema(str(tmp_path / "none")) is None
    assert delta_rs.table_schema("s3a://lake/users") is None


def test_a_warm_session_runs_an_incremental_run_again_without_compiling_its_code(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path
) -> None:
    """A run's generated classes stay compiled for the next run (engine.session.CODEGEN_CACHE_ENTRIES):
    with Spark's default cache of 100 classes each incremental run into Delta compiled about 125. And
    the JVM's compiled code has room, its collector suits batch runs, and the runs leave nothing
    cached."""
    topic = new_topic(partitions=2)
    servers = kafka.bootstrap_servers
    rnd = random.Random(11)
    p = pipeline(servers, [{"name": "users", "kind": "materialize", "source": source(topic, servers),
                            "target": {"kind": "delta", "path": str(tmp_path / "users")}}])  # fmt: skip
    jvm = spark.sparkContext._jvm  # as engine/session.py reaches the driver's JVM
    metrics = jvm.org.apache.spark.metrics.source.CodegenMetrics  # type: ignore[union-attr]
    compiled = []
    for n in (40, 10, 10):
        before = metrics.METRIC_COMPILATION_TIME().getCount()
        produce(servers, topic, random_changes(rnd, n, 20))
        run_job(p, "users", spark=spark)
        compiled.append(metrics.METRIC_COMPILATION_TIME().getCount() - before)
    assert compiled[2] <= 5, f"classes compiled per run (full, first incremental, second): {compiled}"
    # and the JIT's compiled code has room (tests/conftest.py): with C1's 48 MB a warm session's code
    # filled it (46 MB after 30 runs), and the JVM spent a fifth of each run throwing methods away and
    # compiling them again
    management = jvm.java.lang.management.ManagementFactory  # type: ignore[union-attr]
    pools = [b for b in management.getMemoryPoolMXBeans() if "Code" in b.getName()]
    used, room = sum(b.getUsage().getUsed() for b in pools), sum(b.getUsage().getMax() for b in pools)
    assert room >= 200 << 20 and used < 0.8 * room, f"compiled code {used >> 20} MB of {room >> 20} MB"
    # the session collects garbage with the throughput collector (engine.session.LOCAL_DRIVER_GC): G1's
    # marking cycles, started by each large allocation once the kept classes filled the old generation,
    # took a quarter of its CPU
    collectors = {b.getName() for b in management.getGarbageCollectorMXBeans()}
    assert collectors == {"PS Scavenge", "PS MarkSweep"}, collectors
    # and the runs released the reads they cached (engine.source.Read): a warm session that kept them
    # held every run's rows and plans until its heap filled
    assert spark._jsparkSession.sharedState().cacheManager().isEmpty()  # type: ignore[attr-defined]
    assert _delta(spark, tmp_path / "users") == oracle_table(servers, topic)


def test_full_mode_rebuilds_and_a_column_added_to_the_spec_is_added(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path
) -> None:
    topic = new_topic(partitions=2)
    servers = kafka.bootstrap_servers
    path = tmp_path / "users"
    src = source(topic, servers)
    job = {
        "name": "users",
        "kind": "materialize",
        "source": src,
        "target": {"kind": "delta", "path": str(path)},
    }
    produce(servers, topic, [(1, {"name": "a", "region": "Berlin", "score": "1.50"})])
    run_job(pipeline(servers, [job]), spark=spark)

    src["table"]["columns"] = [*src["table"]["columns"], {"name": "email", "type": "STRING"}]
    produce(servers, topic, [(2, {"name": "b", "region": "Paris", "score": "2", "email": "b@x"})])
    r = run_job(pipeline(servers, [job]), spark=spark, mode="full")
    assert (r.mode, r.columns_added) == ("full", ["email"])
    rows = {row["id"]: row["email"] for row in spark.read.format("delta").load(str(path)).collect()}
    assert rows == {1: None, 2: "b@x"}


def test_stored_offsets_below_the_log_start_fail_naming_the_partition(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path
) -> None:
    from confluent_kafka.admin import AdminClient

    topic = new_topic(partitions=1)
    servers = kafka.bootstrap_servers
    path = tmp_path / "users"
    p = pipeline(servers, [{"name": "users", "kind": "materialize", "source": source(topic, servers),
                            "target": {"kind": "delta", "path": str(path)}}])  # fmt: skip
    produce(servers, topic, [(1, {"name": "a", "region": "Berlin", "score": "1"})])
    run_job(p, spark=spark)
    produce(servers, topic, [(2, {"name": "b", "region": "Berlin", "score": "1"})] * 3)
    admin = AdminClient({"bootstrap.servers": servers})
    fut = admin.delete_records([TopicPartition(topic, 0, 3)])
    for f in fut.values():
        f.result(timeout=30)
    with pytest.raises(
        OffsetsError, match=rf"stored offset 1 of {topic}\[0\] is below its log start offset 3"
    ):
        run_job(p, spark=spark)
    state = read_delta_log(path).state
    assert state is not None and json.dumps(state.offsets_json()) == json.dumps({topic: {"0": 1}})


def test_a_pause_longer_than_delete_retention_rebuilds_instead_of_resurrecting_rows(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path
) -> None:
    import time

    topic = new_topic(partitions=1, config={"cleanup.policy": "compact", "delete.retention.ms": "1000"})
    servers = kafka.bootstrap_servers
    path = tmp_path / "users"
    p = pipeline(servers, [{"name": "users", "kind": "materialize", "source": source(topic, servers),
                            "target": {"kind": "delta", "path": str(path)}}])  # fmt: skip
    produce(servers, topic, [(1, {"name": "a", "region": "Berlin", "score": "1"})])
    run_job(p, spark=spark)
    time.sleep(2.5)  # longer than delete.retention.ms: the cleaner may drop a tombstone by now
    produce(servers, topic, [(1, None), (2, {"name": "b", "region": "Paris", "score": "2"})])
    r = run_job(p, spark=spark)
    assert r.mode == "full" and "delete.retention.ms" in r.reason
    assert _delta(spark, path) == oracle_table(servers, topic)
