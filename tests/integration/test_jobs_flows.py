"""Topic-to-topic (streaming and snapshot paths), backfills, and the CLI's job commands."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from pyspark.sql import SparkSession
from tests.integration.jobs_support import (
    oracle_table,
    pipeline,
    produce,
    random_changes,
    rows_as_table,
    source,
)
from tests.integration.oracle import fold, read_all

from upsert_kafka_ops import spark_lines
from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.jobs import Pipeline, run_job
from upsert_kafka_ops.jobs.core import OffsetsError
from upsert_kafka_ops.jobs.streaming import CheckpointMismatch
from upsert_kafka_ops.local import LocalKafka

CLICKS = {"name": "clicks", "options": {"connector": "kafka", "topic": "{topic}", "format": "json"},
          "columns": [{"name": "page", "type": "STRING"}, {"name": "ms", "type": "BIGINT"}]}  # fmt: skip


def _per_page(servers: str, src_topic: str, sink_topic: str, checkpoint: Path, query: str) -> Pipeline:
    clicks = json.loads(json.dumps(CLICKS).replace("{topic}", src_topic))
    sink = {"name": "per_page", "options": {"connector": "upsert-kafka", "topic": sink_topic, "key.format": "json",
            "value.format": "json"}, "columns": [{"name": "page", "type": "STRING"}, {"name": "n", "type": "BIGINT"},
            {"name": "total_ms", "type": "BIGINT"}], "primary_key": ["page"]}  # fmt: skip
    job = {"name": "per-page", "kind": "topic-to-topic", "sources": {"clicks": {"kind": "kafka", "connection": "main",
           "table": clicks}}, "query": query, "checkpoint_location": str(checkpoint),
           "sink": {"connection": "main", "table": sink}}  # fmt: skip
    return pipeline(servers, [job])


def _clicks(servers: str, topic: str, events: list[tuple[str, int]]) -> None:
    p = Producer({"bootstrap.servers": servers})
    for page, ms in events:
        p.produce(topic, value=json.dumps({"page": page, "ms": ms}).encode())
    assert p.flush(30) == 0


def _topic_table(servers: str, topic: str) -> dict[str, tuple[int, int]]:
    state = fold(read_all(servers, [topic]), lambda k: json.loads(k)["page"], json.loads)
    return {k: (v["n"], v["total_ms"]) for k, v in state.items()}


QUERY = "SELECT page, COUNT(*) AS n, SUM(ms) AS total_ms FROM clicks GROUP BY page"


def test_an_aggregation_over_an_append_topic_streams_and_each_run_reads_only_new_records(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path
) -> None:
    servers = kafka.bootstrap_servers
    src, sink = new_topic(partitions=2), new_topic(partitions=2, config={"cleanup.policy": "compact"})
    p = _per_page(servers, src, sink, tmp_path / "ckpt", QUERY)
    rnd = random.Random(1)
    first = [(rnd.choice("abcde"), rnd.randrange(100)) for _ in range(40)]
    _clicks(servers, src, first)
    r1 = run_job(p, spark=spark)
    assert (r1.execution, r1.records_read) == ("streaming", 40)
    assert "update mode" in r1.reason

    second = [("a", 5), ("f", 7), ("f", 1)]
    _clicks(servers, src, second)
    r2 = run_job(p, spark=spark)
    assert (r2.execution, r2.records_read, r2.records_written) == ("streaming", 3, 2)  # pages a and f
    expected: dict[str, tuple[int, int]] = {}
    for page, ms in first + second:
        n, total = expected.get(page, (0, 0))
        expected[page] = (n + 1, total + ms)
    assert _topic_table(servers, sink) == expected
    # the processed offsets went to the job's consumer group, so Kafka's lag tools see the job
    c = Consumer({"bootstrap.servers": servers, "group.id": "upsert-kafka-ops.per-page"})
    try:
        committed = c.committed([TopicPartition(src, p) for p in range(2)], timeout=10)
    finally:
        c.close()
    assert sum(tp.offset for tp in committed) == 43

    # a changed query cannot continue from the old checkpoint: a clear error, then the reset command
    changed = _per_page(servers, src, sink, tmp_path / "ckpt", QUERY.replace("SUM(ms)", "MAX(ms)"))
    with pytest.raises(CheckpointMismatch, match="reset-checkpoint PIPELINE --job per-page"):
        run_job(changed, spark=spark)
    file = tmp_path / "p.yaml"
    file.write_text(yaml.safe_dump(changed.to_json_dict()))
    reset = subprocess.run([sys.executable, "-m", "upsert_kafka_ops.cli", "reset-checkpoint", str(file), "--job",
                            "per-page"], capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert (reset.returncode, reset.stdout.strip()) == (0, "deleted"), reset.stderr
    r3 = run_job(changed, spark=spark)
    assert (r3.execution, r3.records_read) == ("streaming", 43)


def test_a_stream_starts_where_scan_startup_mode_says_when_its_checkpoint_is_new(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path
) -> None:
    """The connector page's 'latest-offset' source: the first run of a new checkpoint reads none of the
    records already there (as a Flink job started without state), later runs read what came after.
    A job that recomputes its query each run refuses the start (it would overwrite the whole result
    with the part after it)."""
    servers = kafka.bootstrap_servers
    src, sink = new_topic(partitions=2), new_topic(partitions=2, config={"cleanup.policy": "compact"})
    data = _per_page(servers, src, sink, tmp_path / "ckpt", QUERY).to_json_dict()
    data["jobs"][0]["sources"]["clicks"]["table"]["scan_options"] = {"scan.startup.mode": "latest-offset"}
    p = Pipeline.model_validate(data)
    _clicks(servers, src, [("a", 1), ("b", 2), ("a", 3)])
    r1 = run_job(p, spark=spark)
    assert (r1.execution, r1.records_read) == ("streaming", 0)
    assert _topic_table(servers, sink) == {}
    _clicks(servers, src, [("a", 10), ("c", 20)])
    r2 = run_job(p, spark=spark)
    assert (r2.execution, r2.records_read) == ("streaming", 2)
    assert _topic_table(servers, sink) == {"a": (1, 10), "c": (1, 20)}

    data["jobs"][0]["execution"] = "snapshot"
    with pytest.raises(SpecError, match="recomputes its query each run") as info:
        run_job(Pipeline.model_validate(data), spark=spark)
    assert info.value.field == "sources.clicks.table.scan.startup.mode"


def test_an_append_only_query_streams_into_a_plain_kafka_sink(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path
) -> None:
    """INSERT INTO a 'connector' = 'kafka' table: each output row is appended once, keyed by
    key.fields; a tombstone in the source gives no row (as Flink's json decoder gives none); an updating
    query (an aggregation) is refused, as Flink's kafka sink refuses it."""
    servers = kafka.bootstrap_servers
    src, sink = new_topic(partitions=2), new_topic(partitions=3)
    data = _per_page(
        servers, src, sink, tmp_path / "ckpt", "SELECT page, ms * 2 AS ms2 FROM clicks WHERE ms >= 10"
    )
    data_dict = data.to_json_dict()
    data_dict["jobs"][0]["sink"] = {"kind": "kafka", "connection": "main", "table": {"ddl": (
        f"CREATE TABLE slow (page STRING, ms2 BIGINT) WITH ('connector' = 'kafka', 'topic' = '{sink}', "
        "'key.format' = 'json', 'key.fields' = 'page', 'value.format' = 'json')")}}  # fmt: skip
    p = Pipeline.model_validate(data_dict)
    _clicks(servers, src, [("a", 5), ("b", 12), ("a", 30)])
    r1 = run_job(p, spark=spark)
    assert (r1.execution, r1.records_read, r1.records_written) == ("streaming", 3, 2)
    _clicks(servers, src, [("c", 10), ("d", 1)])
    tombstone = Producer({"bootstrap.servers": servers})
    tombstone.produce(src, key=b"c", value=None)
    assert tombstone.flush(30) == 0
    r2 = run_job(p, spark=spark)
    assert (r2.records_read, r2.records_written) == (3, 1)
    got = sorted((r.key, r.value) for r in read_all(servers, [sink]))
    assert got == [
        (b'{"page":"a"}', b'{"page":"a","ms2":60}'),
        (b'{"page":"b"}', b'{"page":"b","ms2":24}'),
        (b'{"page":"c"}', b'{"page":"c","ms2":20}'),
    ]

    data_dict["jobs"][0]["query"] = QUERY.replace(", SUM(ms) AS total_ms", "")
    data_dict["jobs"][0]["checkpoint_location"] = str(tmp_path / "ckpt2")
    data_dict["jobs"][0]["sink"]["table"]["ddl"] = data_dict["jobs"][0]["sink"]["table"]["ddl"].replace(
        "ms2", "n"
    )
    with pytest.raises(SpecError, match=r"plain kafka table .* cannot stream") as info:
        run_job(Pipeline.model_validate(data_dict), spark=spark)
    assert info.value.field == "sink" and "upsert-kafka" in (info.value.fix or "")


META_QUERY = (
    "SELECT page, COUNT(*) AS n, MAX(`offset`) AS last_offset, MIN(topic) AS t, SUM(`partition`) AS psum "
    "FROM clicks GROUP BY page"
)


@pytest.mark.parametrize("execution", ["streaming", "snapshot"])
def test_metadata_columns_named_topic_partition_and_offset_reach_the_query(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path, execution: str
) -> None:
    servers = kafka.bootstrap_servers
    src, sink = new_topic(partitions=2), new_topic(partitions=1, config={"cleanup.policy": "compact"})
    meta = [{"name": n, "type": t, "metadata": n, "virtual": True}
            for n, t in (("topic", "STRING"), ("partition", "INT"), ("offset", "BIGINT"))]  # fmt: skip
    clicks = {**json.loads(json.dumps(CLICKS).replace("{topic}", src))}
    clicks["columns"] = [*clicks["columns"], *meta]
    columns = [
        ("page", "STRING"),
        ("n", "BIGINT"),
        ("last_offset", "BIGINT"),
        ("t", "STRING"),
        ("psum", "BIGINT"),
    ]
    sink_table = {"name": "per_page", "options": {"connector": "upsert-kafka", "topic": sink, "key.format": "json",
                  "value.format": "json"}, "columns": [{"name": n, "type": t} for n, t in columns],
                  "primary_key": ["page"]}  # fmt: skip
    job = {"name": "meta", "kind": "topic-to-topic", "execution": execution, "query": META_QUERY,
           "sources": {"clicks": {"kind": "kafka", "connection": "main", "table": clicks}},
           "checkpoint_location": str(tmp_path / "ckpt"), "sink": {"connection": "main", "table": sink_table}}  # fmt: skip
    _clicks(servers, src, [(random.Random(i).choice("abc"), i) for i in range(30)])
    result = run_job(pipeline(servers, [job]), spark=spark)
    assert (result.execution, result.records_read) == (execution, 30)
    want: dict[str, list[Any]] = {}
    for r in read_all(servers, [src]):
        page = json.loads(r.value or b"{}")["page"]
        n, last, _, psum = want.get(page, [0, -1, src, 0])
        want[page] = [n + 1, max(last, r.offset), src, psum + r.partition]
    got = fold(read_all(servers, [sink]), lambda k: json.loads(k)["page"], json.loads)
    assert {k: [v["n"], v["last_offset"], v["t"], v["psum"]] for k, v in got.items()} == want


def test_count_distinct_takes_the_snapshot_path_and_says_why(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path
) -> None:
    servers = kafka.bootstrap_servers
    src, sink = new_topic(partitions=1), new_topic(partitions=1)
    query = "SELECT page, COUNT(DISTINCT ms) AS n, MAX(ms) AS total_ms FROM clicks GROUP BY page"
    p = _per_page(servers, src, sink, tmp_path / "ckpt", query)
    _clicks(servers, src, [("a", 1), ("a", 1), ("a", 2), ("b", 3)])
    r1 = run_job(p, spark=spark)
    assert r1.execution == "snapshot" and "cannot run this query incrementally" in r1.reason
    assert "Distinct aggregations are not supported" in r1.reason
    assert _topic_table(servers, sink) == {"a": (2, 2), "b": (1, 3)}
    _clicks(servers, src, [("b", 4)])
    r2 = run_job(p, spark=spark)
    assert (r2.records_written, r2.tombstones_written) == (1, 0)  # only page b changed
    assert _topic_table(servers, sink) == {"a": (2, 2), "b": (2, 4)}


def test_backfills_to_a_fixed_end_rebuild_idempotently_and_refuse_to_rewind(
    kafka: LocalKafka, new_topic: Callable[..., str], spark: SparkSession, tmp_path: Path
) -> None:
    servers = kafka.bootstrap_servers
    topic = new_topic(partitions=1)
    rnd = random.Random(2)
    produce(servers, topic, random_changes(rnd, 50, 20))
    produce(servers, topic, random_changes(rnd, 30, 20))  # offsets 50..79 come after the backfill's end
    path = tmp_path / "users"
    src = source(topic, servers)

    def backfill(until: Any, rewind: bool = False) -> Any:
        job = {"name": "users-backfill", "kind": "backfill", "source": src, "until": until, "rewind": rewind,
               "target": {"kind": "delta", "path": str(path)}}  # fmt: skip
        return run_job(pipeline(servers, [job]), spark=spark)

    # the oracle: the fold of the first 50 records only
    records = [r for r in read_all(servers, [topic]) if r.offset < 50]
    state = fold(records, lambda k: json.loads(k)["id"], json.loads)
    want = {k: (v["name"], v["region"], f"{float(v['score']):.2f}") for k, v in state.items()}

    r1 = backfill({"offsets": {topic: {"0": 50}}})
    table = rows_as_table(
        spark.read.format("delta").load(str(path)).select("id", "name", "region", "score").collect()
    )
    assert (r1.records_read, table) == (50, want)
    r2 = backfill({"offsets": {topic: {"0": 50}}})  # the same backfill again: the same table
    table2 = rows_as_table(
        spark.read.format("delta").load(str(path)).select("id", "name", "region", "score").collect()
    )
    assert table2 == table and r2.run == r1.run + 1

    r3 = backfill("latest")
    assert r3.end_offsets == {topic: {"0": 80}}
    with pytest.raises(OffsetsError, match=r"older than what .* already holds"):
        backfill({"offsets": {topic: {"0": 50}}})
    backfill({"offsets": {topic: {"0": 50}}}, rewind=True)
    table3 = rows_as_table(
        spark.read.format("delta").load(str(path)).select("id", "name", "region", "score").collect()
    )
    assert table3 == want

    # into a topic: the sink topic holds the source's latest state afterwards
    sink = new_topic(partitions=3)
    sink_table = json.loads(json.dumps(src["table"]).replace(topic, sink))
    job = {"name": "copy", "kind": "backfill", "source": src, "target": {"kind": "topic", "connection": "main",
           "table": sink_table}}  # fmt: skip
    r = run_job(pipeline(servers, [job]), spark=spark)
    assert r.execution == "snapshot"
    assert oracle_table(servers, sink) == oracle_table(servers, topic)


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "upsert_kafka_ops.cli", *args], capture_output=True, text=True,
                          timeout=600, check=False, env={**os.environ, **(env or {})})  # fmt: skip


_LOGGED_SESSION = """
import json, logging, sys
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append((record.levelname, record.getMessage()))
logging.getLogger().addHandler(Keep())
logging.getLogger().setLevel(logging.DEBUG)
from upsert_kafka_ops.engine.session import build_spark_session
spark = build_spark_session("local[1]", level="info")
spark.range(3).count()
spark.stop()
print(json.dumps([r for r in records if r[1].split(" ", 1)[0] in ("INFO", "WARN", "ERROR", "WARNING:")]))
"""


def test_driver_jvm_lines_reach_python_logging_at_their_own_level(jars_dir: Path) -> None:
    """In a process with logging configured (an Airflow task, a Dagster run) the driver JVM's lines
    are log records at their log4j level, not raw stderr that the orchestrator shows as errors."""
    env = {**os.environ, "UPSERT_KAFKA_OPS_JARS_DIR": str(jars_dir)}
    done = subprocess.run([sys.executable, "-c", _LOGGED_SESSION], capture_output=True, text=True, timeout=300,
                          check=False, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    records = json.loads(done.stdout)
    running = f"INFO SparkContext: Running Spark version {spark_lines.installed_version()}"
    assert ["INFO", running] in records
    assert ["DEBUG", "WARNING: Using incubator modules: jdk.incubator.vector"] in records
    assert all(level == msg.split(" ", 1)[0] for level, msg in records if msg.startswith(("INFO ", "ERROR ")))
    assert " INFO SparkContext" not in done.stderr  # nothing raw on stderr


def test_cli_run_describe_topic_and_exit_codes(
    kafka: LocalKafka, new_topic: Callable[..., str], jars_dir: Path, tmp_path: Path
) -> None:
    servers = kafka.bootstrap_servers
    topic = new_topic(partitions=2)
    n = produce(servers, topic, random_changes(random.Random(4), 30, 10))
    p = pipeline(servers, [{"name": "users", "kind": "materialize", "source": source(topic, servers),
                            "target": {"kind": "parquet", "path": str(tmp_path / "out")}}])  # fmt: skip
    file = tmp_path / "p.yaml"
    file.write_text(p.to_yaml())
    env = {"UPSERT_KAFKA_OPS_JARS_DIR": str(jars_dir)}

    ok = _cli("run", str(file), "--json", env=env)
    assert ok.returncode == 0, ok.stderr[-3000:]
    result = json.loads(ok.stdout)["results"][0]
    assert (result["status"], result["mode"], result["records_read"]) == ("succeeded", "full", n)
    assert "job users (materialize): starting" in ok.stderr  # progress on stderr
    quiet = [ln for ln in ok.stderr.splitlines() if " WARN " in ln or " INFO " in ln or "WARNING" in ln]
    assert quiet == [], quiet[:5]  # Spark at ERROR, the JVM's incubator notice left out

    # -v's JVM lines and a failed job's exit code and result: the secret scan's run
    # (tests/integration/test_secret_scan.py); a job that is not there is refused before any run
    missing = _cli("run", str(file), "--job", "nope")
    assert missing.returncode == 2 and "no job named 'nope'" in missing.stderr

    described = _cli("describe-topic", topic, "--bootstrap-servers", servers, "--json")
    assert described.returncode == 0, described.stderr
    doc = json.loads(described.stdout)
    assert [p["end"] for p in doc["partitions"]] == [int(o) for o in result["end_offsets"][topic].values()]
    assert doc["config"]["cleanup_policy"] == ["delete"]
    assert "should be compacted" in doc["warnings"][0]
