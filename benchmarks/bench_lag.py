"""One lag evaluation of a consumer group over TOPICS x PARTITIONS partitions on loopback: median latency.

Every partition has records and a commit halfway, so every evaluation reads the group, its offsets,
both watermarks, the topic configs and one record per partition (time lag), then applies Burrow's
rules. "warm" reuses one KafkaAdmin (as ``lag --serve`` does); "cold" builds the clients each time.
Run: ``.venv/bin/python benchmarks/bench_lag.py`` (``BENCH_LAG_RUNS`` evaluations, default 30;
``BENCH_LAG_SIZES``, topics x partitions, default ``1x64,100x100``: issue 20 asks 10,000 partitions
evaluated warm in at most 1 s).
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

SIZES = [
    tuple(int(n) for n in s.split("x")) for s in os.environ.get("BENCH_LAG_SIZES", "1x64,100x100").split(",")
]
RUNS = int(os.environ.get("BENCH_LAG_RUNS", "30"))
TARGET_PARTITIONS, TARGET_S = 10_000, 1.0
OUT = Path(os.environ.get("BENCH_OUT_LAG", "build/bench/lag.json"))


def _evaluate(
    conn: KafkaAdmin | dict[str, str], names: list[str], partitions: int, window: LagWindow
) -> tuple[float, LagWindow]:
    started = time.perf_counter()
    report = group_lag(conn, "bench", isolation="read_committed", topics=names, history=window.points())
    _, window = check(window, report)
    assert (
        len(report.partitions) == len(names) * partitions and report.total_lag == len(names) * partitions * 50
    )
    return time.perf_counter() - started, window


def measure(topics: int, partitions: int) -> dict[str, object]:
    names = [f"lag-bench-{t}" for t in range(topics)]
    heap = "512m" if topics * partitions <= 1000 else "2g"
    with tempfile.TemporaryDirectory() as tmp, LocalKafka(Path(tmp), heap=heap) as kafka:
        for name in names:
            kafka.create_topic(name, partitions=partitions)
        producer = Producer(
            kafka.client_config(**{"linger.ms": 5, "queue.buffering.max.messages": 2_000_000})
        )
        for name in names:
            for p in range(partitions):
                for i in range(100):
                    producer.produce(name, key=f"k{i}".encode(), value=b"x" * 100, partition=p)
                producer.poll(0)
        producer.flush(120)
        consumer = Consumer(kafka.client_config(**{"group.id": "bench", "enable.auto.commit": False}))
        consumer.commit(
            offsets=[TopicPartition(n, p, 50) for n in names for p in range(partitions)], asynchronous=False
        )
        consumer.close()
        results: dict[str, object] = {"topics": topics, "partitions": partitions, "runs": RUNS}
        for name in ("warm", "cold"):
            admin = KafkaAdmin(kafka.client_config(), timeout=10)
            window, times = LagWindow(), []
            for _ in range(RUNS + 2):
                conn = admin if name == "warm" else kafka.client_config()
                elapsed, window = _evaluate(conn, names, partitions, window)
                times.append(elapsed)
            admin.close()
            times = times[2:]  # the first calls connect and fetch metadata
            median = statistics.median(times)
            results[name] = {
                "median_ms": median * 1000,
                "p90_ms": sorted(times)[int(len(times) * 0.9) - 1] * 1000,
            }
            print(f"lag evaluation, {topics} x {partitions} partitions, {name}: median {median * 1000:.1f} ms, "
                  f"p90 {results[name]['p90_ms']:.1f} ms over {RUNS} runs")  # type: ignore[index]  # fmt: skip
            if name == "warm" and topics * partitions >= TARGET_PARTITIONS:
                met = median <= TARGET_S
                results["target"] = {"seconds": TARGET_S, "met": met}
                print(f"  target: at most {TARGET_S:g} s warm over {TARGET_PARTITIONS:,} partitions: "
                      f"{'met' if met else 'NOT met'}")  # fmt: skip
        return results


def main() -> None:
    jars.fetch(log=False)
    sizes = [measure(t, p) for t, p in SIZES]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"sizes": sizes}, indent=2))


if __name__ == "__main__":
    main()
