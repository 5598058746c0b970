"""Engine throughput next to Kafka's own perf tools, measured in the same run on the same broker.

- materialize: a topic of N records (K keys, P partitions, ~150-byte JSON values, 5% tombstones),
  against ``ConsumerPerformance`` reading the same topic and record count;
- sink: ``write_changelog`` of N changelog rows read from a Parquet file (N distinct keys, so every
  row is written), against ``ProducerPerformance`` writing N records of the same size;
- avro-confluent: the same sink and a materialize of what it wrote, with avro-confluent keys and
  values (warm), next to the JSON figures of the same run.

Cold is the first run in a fresh JVM, warm the second. Results are printed and written as JSON.
Run: ``make bench`` (``BENCH_RECORDS``, ``BENCH_KEYS``, ``BENCH_PARTITIONS`` to resize).
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from upsert_kafka_ops import jars
from upsert_kafka_ops.engine import materialize, write_changelog
from upsert_kafka_ops.local import LocalKafka, LocalSchemaRegistry
from upsert_kafka_ops.runtime import build_spark_session
from upsert_kafka_ops.spec.connection import KafkaConnection
from upsert_kafka_ops.spec.table import UpsertKafkaTable

RECORDS = int(os.environ.get("BENCH_RECORDS", "2000000"))
KEYS = int(os.environ.get("BENCH_KEYS", "200000"))
PARTITIONS = int(os.environ.get("BENCH_PARTITIONS", "8"))
OUT = Path(os.environ.get("BENCH_OUT", "build/bench/results.json"))
COLUMNS = [
    {"name": "id", "type": "BIGINT"},
    {"name": "name", "type": "STRING"},
    {"name": "region", "type": "STRING"},
    {"name": "amount", "type": "DECIMAL(12, 2)"},
    {"name": "score", "type": "DOUBLE"},
    {"name": "active", "type": "BOOLEAN"},
    {"name": "updated", "type": "TIMESTAMP(3)"},
]


def _table(topic: str, servers: str, fmt: str = "json", registry_url: str = "") -> UpsertKafkaTable:
    registry = {}
    if fmt == "avro-confluent":
        registry = {f"{side}.avro-confluent.url": registry_url for side in ("key", "value")}
    return UpsertKafkaTable.from_options(
        {
            "connector": "upsert-kafka",
            "topic": topic,
            "properties.bootstrap.servers": servers,
            "key.format": fmt,
            "value.format": fmt,
            **registry,
        },
        columns=COLUMNS,
        primary_key=["id"],
    )


def _value(i: int, rnd: random.Random) -> bytes:
    row = {
        "id": i,
        "name": f"user-{i:08d}-{rnd.randrange(10**6):06d}",
        "region": rnd.choice(["Beijing", "Berlin", "Hangzhou", "Shanghai", "Paris"]),
        "amount": round(rnd.uniform(0, 10000), 2),
        "score": rnd.random(),
        "active": rnd.random() < 0.5,
        "updated": "2026-11-22 10:00:00.123",
    }
    return json.dumps(row, separators=(",", ":")).encode()


def _produce_source(servers: str, topic: str) -> tuple[int, int]:
    from confluent_kafka import Producer

    rnd = random.Random(42)
    producer = Producer(
        {
            "bootstrap.servers": servers,
            "partitioner": "murmur2_random",
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "compression.type": "none",
        }
    )
    total = 0
    for n in range(RECORDS):
        k = rnd.randrange(KEYS)
        value = None if rnd.random() < 0.05 else _value(k, rnd)
        key = b'{"id":%d}' % k
        total += len(key) + (len(value) if value else 0)
        while True:
            try:
                producer.produce(topic, key=key, value=value)
                break
            except BufferError:
                producer.poll(0.05)
        if n % 10000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0
    return RECORDS, total


def _java_tool(cls: str, args: list[str]) -> str:
    classpath = str(jars.group_dir("kafka") / "*")
    proc = subprocess.run(
        ["java", "-Xmx1g", "-cp", classpath, cls, *args], capture_output=True, text=True, check=True
    )
    return proc.stdout


def consumer_perf(servers: str, topic: str, n: int) -> dict[str, float]:
    out = _java_tool(
        "org.apache.kafka.tools.ConsumerPerformance",
        ["--bootstrap-server", servers, "--topic", topic, "--num-records", str(n), "--timeout", "60000"],
    )
    header, row = [ln for ln in out.splitlines() if ln.strip()][-2:]
    fields = dict(
        zip([h.strip() for h in header.split(",")], [v.strip() for v in row.split(",")], strict=False)
    )
    return {"records_per_s": float(fields["nMsg.sec"]), "mb_per_s": float(fields["MB.sec"])}


def producer_perf(servers: str, topic: str, n: int, size: int) -> dict[str, float]:
    out = _java_tool(
        "org.apache.kafka.tools.ProducerPerformance",
        [
            "--topic",
            topic,
            "--num-records",
            str(n),
            "--record-size",
            str(size),
            "--throughput",
            "-1",
            "--producer-props",
            f"bootstrap.servers={servers}",
            "acks=all",
            "enable.idempotence=true",
        ],
    )
    last = [ln for ln in out.splitlines() if "records sent" in ln][-1]
    m = re.search(r"([\d.]+) records/sec \(([\d.]+) MB/sec\)", last)
    assert m, last
    return {"records_per_s": float(m.group(1)), "mb_per_s": float(m.group(2))}


def main() -> int:
    jars.fetch(log=False)
    results: dict[str, Any] = {
        "records": RECORDS,
        "keys": KEYS,
        "partitions": PARTITIONS,
        "cores": os.cpu_count(),
    }
    with (
        tempfile.TemporaryDirectory(prefix="uko-bench-") as tmp,
        LocalKafka(Path(tmp) / "kafka", heap="2g") as kafka,
        LocalSchemaRegistry(Path(tmp) / "registry") as schema_registry,
    ):
        servers = kafka.bootstrap_servers
        conn = KafkaConnection(bootstrap_servers=servers)
        for topic in ("bench_src", "bench_sink", "bench_pp", "bench_ac"):
            kafka.create_topic(topic, partitions=PARTITIONS)
        began = time.monotonic()
        n, size = _produce_source(servers, "bench_src")
        print(f"bench: produced {n} records ({size / 1e6:.1f} MB) in {time.monotonic() - began:.1f}s")
        results["consumer_perf"] = consumer_perf(servers, "bench_src", n)
        print(f"bench: ConsumerPerformance {results['consumer_perf']}")

        spark = build_spark_session(app_name="upsert-kafka-ops-bench")
        table = _table("bench_src", servers)
        for run in ("cold", "warm"):
            t0 = time.monotonic()
            df, res = materialize(spark, table, conn)
            secs = time.monotonic() - t0
            rate = {
                "records_per_s": res.records_in / secs,
                "mb_per_s": res.bytes_in / secs / 2**20,
                "seconds": secs,
                "live_keys": res.records_out,
            }
            rate["ratio_vs_consumer_perf"] = rate["records_per_s"] / results["consumer_perf"]["records_per_s"]
            results[f"materialize_{run}"] = rate
            print(f"bench: materialize ({run}) {rate}")
            df.unpersist()

        parquet = str(Path(tmp) / "changelog.parquet")
        (
            spark.range(RECORDS)
            .selectExpr(
                "'+U' AS op",
                "id",
                "concat('user-', lpad(cast(id AS STRING), 8, '0'), '-', cast(id % 999983 AS STRING)) AS name",
                "element_at(array('Beijing','Berlin','Hangzhou','Shanghai','Paris'), cast(id % 5 AS INT) + 1) AS region",
                "cast(id % 1000000 / 100 AS DECIMAL(12, 2)) AS amount",
                "rand(7) AS score",
                "id % 2 = 0 AS active",
                "timestamp_ntz'2026-11-22 10:00:00.123' AS updated",
                "id AS seq",
            )
            .write.parquet(parquet)
        )
        sink = _table("bench_sink", servers)
        for run in ("cold", "warm"):
            t0 = time.monotonic()
            res = write_changelog(spark.read.parquet(parquet), sink, conn, order_by="seq")
            secs = time.monotonic() - t0
            rate = {
                "records_per_s": res.records_out / secs,
                "mb_per_s": res.bytes_out / secs / 2**20,
                "seconds": secs,
            }
            results[f"sink_{run}"] = rate
            print(f"bench: write_changelog ({run}) {rate}")
        json_sink = results["sink_warm"]["records_per_s"]
        ac = _table("bench_ac", servers, "avro-confluent", schema_registry.url)
        write_changelog(spark.read.parquet(parquet), ac, conn, order_by="seq")  # cold: JIT, registry
        t0 = time.monotonic()
        ac_res = write_changelog(spark.read.parquet(parquet), ac, conn, order_by="seq")
        secs = time.monotonic() - t0
        results["avro_confluent_sink_warm"] = {
            "records_per_s": ac_res.records_out / secs,
            "mb_per_s": ac_res.bytes_out / secs / 2**20,
            "seconds": secs,
            "ratio_vs_json_sink": ac_res.records_out / secs / json_sink,
        }
        print(f"bench: write_changelog avro-confluent (warm) {results['avro_confluent_sink_warm']}")
        t0 = time.monotonic()
        df, ac_read = materialize(spark, ac, conn)
        secs = time.monotonic() - t0
        results["avro_confluent_materialize"] = {
            "records_per_s": ac_read.records_in / secs,
            "mb_per_s": ac_read.bytes_in / secs / 2**20,
            "seconds": secs,
            "live_keys": ac_read.records_out,
            "ratio_vs_consumer_perf": ac_read.records_in / secs / results["consumer_perf"]["records_per_s"],
        }
        df.unpersist()
        print(f"bench: materialize avro-confluent {results['avro_confluent_materialize']}")
        avg = int(res.bytes_out / max(res.records_out, 1))
        results["producer_perf"] = producer_perf(servers, "bench_pp", RECORDS, avg)
        print(f"bench: ProducerPerformance ({avg}-byte records) {results['producer_perf']}")
        for run in ("cold", "warm"):
            results[f"sink_{run}"]["ratio_vs_producer_perf"] = (
                results[f"sink_{run}"]["records_per_s"] / results["producer_perf"]["records_per_s"]
            )
        spark.stop()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
