"""Continuous topic-to-topic jobs against real Flink: two jobs given as Flink ``INSERT``s (a projection
through Flink's functions, and an aggregation over an append-only topic) run continuously in one
session while clicks arrive in rounds, then Flink runs the same statements over the same topic. Each
sink topic holds the bytes Flink's holds, key by key and in the same partition; each click was read by
exactly one micro-batch; a round with nothing new costs no batch."""

from __future__ import annotations

import json
import os
import random
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from confluent_kafka import Producer
from tests.conformance import flink
from tests.integration.oracle import read_all

from upsert_kafka_ops import Pipeline
from upsert_kafka_ops.jobs.continuous import ContinuousJobs
from upsert_kafka_ops.local import LocalKafka

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SEED = int(os.environ.get("UKO_CONFORMANCE_SEED") or random.SystemRandom().randrange(2**32))
CLICKS = """CREATE TABLE clicks (
  id BIGINT,
  page STRING,
  ms INT,
  at_text STRING
) WITH (
  'connector' = 'kafka',
  'topic' = '{topic}',
  'properties.bootstrap.servers' = '{bootstrap}',
  'scan.startup.mode' = 'earliest-offset',{bounded}
  'format' = 'json'
)"""
SINKS = {
    "shaped": """CREATE TABLE shaped (
  id BIGINT,
  page STRING,
  chars INT,
  at_time TIMESTAMP(3),
  slow STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = '{topic}',
  'properties.bootstrap.servers' = '{bootstrap}',
  'key.format' = 'json',
  'value.format' = 'json'
)""",
    "per_page": """CREATE TABLE per_page (
  page STRING,
  pv BIGINT,
  total_ms BIGINT,
  first_id BIGINT,
  PRIMARY KEY (page) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = '{topic}',
  'properties.bootstrap.servers' = '{bootstrap}',
  'key.format' = 'json',
  'value.format' = 'csv'
)""",
}
INSERTS = {
    "shaped": """INSERT INTO shaped
SELECT id, UPPER(page), CHAR_LENGTH(page), TO_TIMESTAMP(at_text), IF(ms > 50, 'slow', 'fast') FROM clicks""",
    "per_page": """INSERT INTO per_page
SELECT page, COUNT(*), SUM(CAST(ms AS BIGINT)), MIN(id) FROM clicks GROUP BY page""",
}
PAGES = ("home", "cart", "search", "help", "ürün")


def _by_key(bootstrap: str, topic: str) -> dict[bytes, tuple[int, bytes | None]]:
    """Each key's last record: its partition and value bytes."""
    out: dict[bytes, tuple[int, bytes | None]] = {}
    for r in sorted(read_all(bootstrap, [topic]), key=lambda r: (r.partition, r.offset)):
        assert r.key is not None
        out[r.key] = (r.partition, r.value)
    return out


def test_continuous_jobs_write_the_bytes_flink_writes_reading_each_click_once(
    kafka: LocalKafka, flink_jars: list[Path], spark: SparkSession, tmp_path: Path
) -> None:
    bootstrap = kafka.bootstrap_servers
    tag = uuid.uuid4().hex[:6]
    source = f"clicks-{tag}"
    kafka.create_topic(source, partitions=3)
    sinks = {(name, side): f"{name}-{side}-{tag}" for name in SINKS for side in ("ours", "flink")}
    for topic in sinks.values():
        kafka.create_topic(topic, partitions=3, config={"cleanup.policy": "compact"})

    pipeline = Pipeline.model_validate({
        "connections": {"main": {"bootstrap_servers": bootstrap}},
        "tables": {"clicks": {"connection": "main", "ddl": CLICKS.format(topic=source, bootstrap=bootstrap, bounded="")},
                   **{name: {"connection": "main", "ddl": ddl.format(topic=sinks[name, "ours"], bootstrap=bootstrap)}
                      for name, ddl in SINKS.items()}},
        "jobs": [{"name": name, "kind": "topic-to-topic", "sql": insert,
                  "checkpoint": {"path": str(tmp_path / "checkpoints" / name)},
                  "trigger": {"continuous": True, "interval": "300ms"}} for name, insert in INSERTS.items()],
    })  # fmt: skip
    jobs = ContinuousJobs(pipeline, list(INSERTS), spark)
    stop = threading.Event()
    thread = threading.Thread(target=jobs.run, args=(stop,), name="continuous")
    rnd = random.Random(SEED)
    clicks: list[dict[str, object]] = []

    def caught_up(timeout: float = 300) -> None:
        """Both jobs' batches have read every click sent (a batch's sink records are out before its
        result counts them)."""
        deadline = time.monotonic() + timeout
        while any(r.records_read < len(clicks) for r in jobs.results):
            assert thread.is_alive() and time.monotonic() < deadline, (SEED, jobs.results)
            time.sleep(0.2)

    producer = Producer({"bootstrap.servers": bootstrap})
    try:
        for round_ in range(3):
            for _ in range(rnd.randrange(15, 40)):
                second = len(clicks)
                click = {"id": len(clicks), "page": rnd.choice(PAGES), "ms": rnd.randrange(100),
                         "at_text": f"2026-11-30 0{round_}:{second // 60 % 60:02d}:{second % 60:02d}"}  # fmt: skip
                clicks.append(click)
                producer.produce(source, value=json.dumps(click).encode())
            assert producer.flush(30) == 0
            if round_ == 0:
                thread.start()
            caught_up()
        batches = [r.batches for r in jobs.results]
        time.sleep(1.5)  # five intervals with nothing new
        assert [r.batches for r in jobs.results] == batches, jobs.results
        assert all(r.idle_checks >= 3 for r in jobs.results), jobs.results
    finally:
        stop.set()
        thread.join(120)
    assert not thread.is_alive() and not jobs.failed, jobs.failed
    for r in jobs.results:  # each click read by exactly one micro-batch of each job
        assert (r.records_read, r.failures) == (len(clicks), 0), (SEED, r)
        assert 3 <= r.batches <= 9, r

    bounded = "\n  'scan.bounded.mode' = 'latest-offset',"
    clicks_ddl = CLICKS.format(topic=source, bootstrap=bootstrap, bounded=bounded)  # once: one table env
    cases = [flink.Case(name, name, ddl.format(topic=sinks[name, "flink"], bootstrap=bootstrap),
                        (clicks_ddl,) if i == 0 else (), INSERTS[name])
             for i, (name, ddl) in enumerate(SINKS.items())]  # fmt: skip
    outcomes = flink.run(cases, flink_jars, tmp_path / "flink.log")
    written = {}
    for name in SINKS:
        assert outcomes[name].error is None and outcomes[name].written, outcomes[name].error
        written[name] = _by_key(bootstrap, sinks[name, "flink"])
        assert _by_key(bootstrap, sinks[name, "ours"]) == written[name], (SEED, name)
    assert len(written["shaped"]) == len(clicks)
    views = {p: sum(1 for c in clicks if c["page"] == p) for p in PAGES}
    counted = {
        json.loads(k)["page"]: int(v.decode().split(",")[1]) for k, (_, v) in written["per_page"].items() if v
    }
    assert counted == {p: n for p, n in views.items() if n}  # both equal a plain count
