"""One lag evaluation of a consumer group over TOPICS x PARTITIONS partitions on loopback: median latency.

Every partition has records and a commit halfway, so every evaluation reads the group, its offsets,
both watermarks, the topic configs and one record per partition (time lag), then applies Burrow's
rules. "warm" reuses one KafkaAdmin (as ``lag --serve`` does); "cold" builds the clients each time.
Run: ``.venv/bin/python benchmarks/bench_lag.py`` (``BENCH_LAG_RUNS`` evaluations, default 30;
``BENCH_LAG_TOPICS`` and ``BENCH_LAG_PARTITIONS``, default 1 x 64; issue 20 asks 100 x 100 at most 1 s).
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from upsert_kafka_ops import jars
from upsert_kafka_ops.kafka import KafkaAdmin, LagWindow, check, group_lag
from upsert_kafka_ops.local import LocalKafka

TOPICS = int(os.environ.get("BENCH_LAG_TOPICS", "1"))
PARTITIONS = int(os.environ.get("BENCH_LAG_PARTITIONS", "64"))
NAMES = [f"lag-bench-{t}" for t in range(TOPICS)]
RUNS = int(os.environ.get("BENCH_LAG_RUNS", "30"))
OUT = Path(os.environ.get("BENCH_OUT_LAG", "build/bench/lag.json"))


def _evaluate(conn: KafkaAdmin | dict[str, str], window: LagWindow) -> tuple[float, LagWindow]:
    started = time.perf_counter()
    report = group_lag(conn, "bench", isolation="read_committed", topics=NAMES, history=window.points())
    _, window = check(window, report)
    assert len(report.partitions) == TOPICS * PARTITIONS and report.total_lag == TOPICS * PARTITIONS * 50
    return time.perf_counter() - started, window


def main() -> None:
    jars.fetch(log=False)
    heap = "512m" if TOPICS * PARTITIONS <= 1000 else "2g"
    with tempfile.TemporaryDirectory() as tmp, LocalKafka(Path(tmp), heap=heap) as kafka:
        for name in NAMES:
            kafka.create_topic(name, partitions=PARTITIONS)
        producer = Producer(
            kafka.client_config(**{"linger.ms": 5, "queue.buffering.max.messages": 2_000_000})
        )
        for name in NAMES:
            for p in range(PARTITIONS):
                for i in range(100):
                    producer.produce(name, key=f"k{i}".encode(), value=b"x" * 100, partition=p)
                producer.poll(0)
        producer.flush(120)
        consumer = Consumer(kafka.client_config(**{"group.id": "bench", "enable.auto.commit": False}))
        consumer.commit(
            offsets=[TopicPartition(n, p, 50) for n in NAMES for p in range(PARTITIONS)], asynchronous=False
        )
        consumer.close()
        results = {}
        for name in ("warm", "cold"):
            admin = KafkaAdmin(kafka.client_config(), timeout=10)
            window, times = LagWindow(), []
            for _ in range(RUNS + 2):
                conn = admin if name == "warm" else kafka.client_config()
                elapsed, window = _evaluate(conn, window)
                times.append(elapsed)
            admin.close()
            times = times[2:]  # the first calls connect and fetch metadata
            results[name] = {
                "median_ms": statistics.median(times) * 1000,
                "p90_ms": sorted(times)[int(len(times) * 0.9) - 1] * 1000,
            }
            print(f"lag evaluation, {TOPICS} x {PARTITIONS} partitions, {name}: median {results[name]['median_ms']:.1f} ms, "
                  f"p90 {results[name]['p90_ms']:.1f} ms over {RUNS} runs")  # fmt: skip
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(
            json.dumps({"topics": TOPICS, "partitions": PARTITIONS, "runs": RUNS, **results}, indent=2)
        )


if __name__ == "__main__":
    main()
