"""Engine throughput next to its peer and its floors, measured in the same run on the same broker.

Baselines: Kafka's ``ConsumerPerformance`` and ``ProducerPerformance``; Spark's own raw read of the
topic (``key, value`` into the ``noop`` sink: the floor of any Spark design); a bare Spark start
(``spark.range(1).count()`` in a new process); and the peer, Flink 2.2.1's bounded upsert-kafka job on
the same topic (PyFlink in ``.venv-flink``, run by the conformance suite's
``tests/conformance/flink_runner.py``), its job time and its whole process.

Measured: ``materialize`` warm (a session that has run it before) and cold (a new process: session
start and one materialize, ``benchmarks/cold_run.py``); incremental runs as an orchestrator starts them
(a new ``upsert-kafka-ops run`` process each, Delta target): the full run, a run over 1% new records,
a run over a tiny delta, then the same three in the warm session, then tiny runs alternating between a
task's own driver and a Spark Connect server's warm one (``--remote``); ``write_changelog`` (once cold,
then ``BENCH_REPEAT`` times warm) and ``materialize`` of what it wrote, in json, avro and avro-confluent.
The timed repetitions alternate (engine, peer, baseline) so drift in the machine touches them all;
figures are medians. Results: ``build/bench/results.json`` and a chart, ``build/bench/results.png``.

Run: ``make bench`` (``BENCH_RECORDS``, ``BENCH_KEYS``, ``BENCH_PARTITIONS``, ``BENCH_REPEAT`` to resize).
"""

from __future__ import annotations

import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from upsert_kafka_ops import jars
from upsert_kafka_ops.engine import materialize, resolve_bounds, write_changelog
from upsert_kafka_ops.engine.source import read_raw
from upsert_kafka_ops.local import LocalKafka, LocalSchemaRegistry, LocalSparkConnect
from upsert_kafka_ops.runtime import build_spark_session
from upsert_kafka_ops.spec.connection import KafkaConnection
from upsert_kafka_ops.spec.table import UpsertKafkaTable

RECORDS = int(os.environ.get("BENCH_RECORDS", "1000000"))
KEYS = int(os.environ.get("BENCH_KEYS", "100000"))
PARTITIONS = int(os.environ.get("BENCH_PARTITIONS", "8"))
REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))
#: tiny tasks a Spark Connect server runs before its tasks are timed (JIT: a long-running server's state)
WARM_TASKS = int(os.environ.get("BENCH_CONNECT_WARM_TASKS", "5"))
OUT = Path(os.environ.get("BENCH_OUT", "build/bench/results.json"))
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FLINK_PYTHON = Path(os.environ.get("UKO_FLINK_PYTHON") or ROOT / ".venv-flink" / "bin" / "python")
FLINK_RUNNER = ROOT / "tests" / "conformance" / "flink_runner.py"  # real Flink, as the suite runs it
FORMATS = ("json", "avro", "avro-confluent")
COLUMNS = [
    {"name": "id", "type": "BIGINT"},
    {"name": "name", "type": "STRING"},
    {"name": "region", "type": "STRING"},
    {"name": "amount", "type": "DECIMAL(12, 2)"},
    {"name": "score", "type": "DOUBLE"},
    {"name": "active", "type": "BOOLEAN"},
    {"name": "updated", "type": "TIMESTAMP(3)"},
]
#: (result, its baseline, the ratio the issue asks for, "min" or "max"): the targets of issue 20
TARGETS = [
    ("materialize_warm", "flink_job", 2.0, "min"),
    ("materialize_warm", "spark_raw_read", 0.7, "min"),
    ("materialize_cold_process", "flink_process", 1.0, "min"),
    ("sink_json_warm", "producer_perf", 0.5, "min"),
    ("incremental_1pct", "incremental_full", 0.10, "max"),
    ("incremental_tiny", "bare_spark_start", 1.5, "max"),
    ("sink_avro_warm", "sink_json_warm", 0.8, "min"),
    ("sink_avro-confluent_warm", "sink_json_warm", 0.8, "min"),
    ("materialize_avro", "materialize_json", 0.8, "min"),
    ("materialize_avro-confluent", "materialize_json", 0.8, "min"),
    # issue 21: a tiny incremental task on a Spark Connect server, against the same task on its own driver
    ("incremental_tiny_connect", "incremental_tiny", 0.2, "max"),
]


def bench_table(
    topic: str, servers: str, fmt: str = "json", registry_url: str = "", bounded: bool = True
) -> UpsertKafkaTable:
    options = {
        "connector": "upsert-kafka",
        "topic": topic,
        "properties.bootstrap.servers": servers,
        "key.format": fmt,
        "value.format": fmt,
    }
    if fmt == "avro-confluent":
        options.update({f"{side}.avro-confluent.url": registry_url for side in ("key", "value")})
    if bounded:  # Flink's read ends where the engine's does: the end offsets when the read starts
        options["scan.bounded.mode"] = "latest-offset"
    return UpsertKafkaTable.from_options(options, columns=COLUMNS, primary_key=["id"], name=topic)


def record_value(i: int, rnd: random.Random) -> bytes:
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


def produce(servers: str, topic: str, records: int, seed: int) -> int:
    """``records`` JSON changes over KEYS keys (5% tombstones); returns their bytes."""
    from confluent_kafka import Producer

    rnd = random.Random(seed)
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
    for n in range(records):
        k = rnd.randrange(KEYS)
        value = None if rnd.random() < 0.05 else record_value(k, rnd)
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
    return total


def _process(cmd: list[str], stdin: str = "") -> tuple[float, dict[str, Any]]:
    """Run ``cmd`` as a new process; its wall time and the JSON object its stdout ends with."""
    began = time.monotonic()
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, check=False)
    secs = time.monotonic() - began
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:3]} exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    start = proc.stdout.find("{")
    return secs, (json.loads(proc.stdout[start:]) if start >= 0 else {})


def _java_tool(cls: str, args: list[str]) -> str:
    classpath = str(jars.group_dir("kafka") / "*")
    proc = subprocess.run(
        ["java", "-Xmx1g", "-cp", classpath, cls, *args], capture_output=True, text=True, check=True
    )
    return proc.stdout


def consumer_perf(servers: str, topic: str, n: int) -> float:
    out = _java_tool(
        "org.apache.kafka.tools.ConsumerPerformance",
        ["--bootstrap-server", servers, "--topic", topic, "--num-records", str(n), "--timeout", "60000"],
    )
    header, row = [ln for ln in out.splitlines() if ln.strip()][-2:]
    fields = dict(
        zip([h.strip() for h in header.split(",")], [v.strip() for v in row.split(",")], strict=False)
    )
    return n / float(fields["nMsg.sec"])


def producer_perf(servers: str, topic: str, n: int, size: int) -> float:
    out = _java_tool(
        "org.apache.kafka.tools.ProducerPerformance",
        ["--topic", topic, "--num-records", str(n), "--record-size", str(size), "--throughput", "-1",
         "--producer-props", f"bootstrap.servers={servers}", "acks=all", "enable.idempotence=true"],
    )  # fmt: skip
    last = [ln for ln in out.splitlines() if "records sent" in ln][-1]
    m = re.search(r"([\d.]+) records/sec", last)
    assert m, last
    return n / float(m.group(1))


def flink_job(table: UpsertKafkaTable) -> tuple[float, float]:
    """Flink's bounded job over ``table`` into a ``blackhole`` sink (the fold is Flink's
    ChangelogNormalize), run by the conformance suite's Flink runner in a new PyFlink process:
    (job seconds, process seconds)."""
    if not FLINK_PYTHON.is_file():
        raise SystemExit(
            f"PyFlink's virtualenv is missing ({FLINK_PYTHON}): run `make flink` (make bench does)."
        )
    sink = (
        f"CREATE TABLE `bench_blackhole` WITH ('connector' = 'blackhole') LIKE `{table.name}` (EXCLUDING ALL)"
    )
    case = {"name": "bench", "table": table.name, "ddl": table.to_flink_ddl(), "more": [sink],
            "insert": f"INSERT INTO `bench_blackhole` SELECT * FROM `{table.name}`"}  # fmt: skip
    job = {"jars": [str(j) for j in jars.jar_paths("flink")], "parallelism": 2, "cases": [case]}
    secs, out = _process([str(FLINK_PYTHON), str(FLINK_RUNNER)], json.dumps(job))
    if not out.get("written"):
        raise RuntimeError(f"Flink's bounded job failed: {out.get('error')}")
    return float(out["seconds"]), secs


class Figures:
    """Timings by name (seconds, several per name) and the records each name moves."""

    def __init__(self) -> None:
        self.seconds: dict[str, list[float]] = {}
        self.records: dict[str, int] = {}

    def add(self, name: str, secs: float, records: int) -> None:
        self.seconds.setdefault(name, []).append(secs)
        self.records[name] = records
        print(f"bench: {name}: {secs:.2f}s ({records / secs:,.0f} records/s)" if records else
              f"bench: {name}: {secs:.2f}s", flush=True)  # fmt: skip

    def median(self, name: str) -> float:
        return statistics.median(self.seconds[name])

    def rate(self, name: str) -> float:
        return self.records[name] / self.median(name)

    def as_json(self) -> dict[str, Any]:
        return {
            name: {"seconds_median": round(self.median(name), 3), "seconds": [round(s, 3) for s in runs],
                   "records": self.records[name],
                   "records_per_s": round(self.rate(name)) if self.records[name] else None}
            for name, runs in self.seconds.items()
        }  # fmt: skip


def _ratio(fig: Figures, name: str, base: str, sense: str) -> float:
    """Throughput ratio (``min`` targets) or time ratio (``max`` targets) of ``name`` to ``base``."""
    if sense == "max":
        return fig.median(name) / fig.median(base)
    return fig.rate(name) / fig.rate(base)


def _pipeline(path: Path, servers: str, table: UpsertKafkaTable, warehouse: Path) -> None:
    ddl = "\n".join("          " + line for line in table.to_flink_ddl().splitlines())
    path.write_text(
        "version: 1\n"
        f"connections:\n  bench:\n    bootstrap_servers: '{servers}'\n"
        "jobs:\n  - name: bench-to-delta\n    kind: materialize\n"
        f"    source:\n      connection: bench\n      table:\n        ddl: |\n{ddl}\n"
        f"    target: {{kind: delta, path: '{warehouse}'}}\n"
    )


def _run_job(pipeline: Path, mode: str, remote: str | None = None) -> tuple[float, int]:
    cli = str(Path(sys.executable).with_name("upsert-kafka-ops"))
    where = ["--remote", remote] if remote else []
    secs, out = _process([cli, "run", str(pipeline), "--mode", mode, "--json", *where])
    (result,) = out["results"]
    assert result["status"] == "succeeded", result
    return secs, int(result["records_read"])


def _run_in(spark: Any, pipeline: Path, mode: str) -> tuple[float, int]:
    from upsert_kafka_ops.jobs import Pipeline, run_job

    t0 = time.monotonic()
    result = run_job(Pipeline.load(pipeline), mode=mode, spark=spark)  # type: ignore[arg-type]
    return time.monotonic() - t0, int(result.records_read)


def main() -> int:
    jars.fetch(["kafka", "spark", "flink"], log=False)
    fig = Figures()
    results: dict[str, Any] = {"records": RECORDS, "keys": KEYS, "partitions": PARTITIONS,
                               "repeat": REPEAT, "cores": os.cpu_count()}  # fmt: skip
    with (
        tempfile.TemporaryDirectory(prefix="uko-bench-") as tmp_dir,
        LocalKafka(Path(tmp_dir) / "kafka", heap="2g") as kafka,
        LocalSchemaRegistry(Path(tmp_dir) / "registry") as schema_registry,
    ):
        tmp = Path(tmp_dir)
        servers = kafka.bootstrap_servers
        conn = KafkaConnection(bootstrap_servers=servers)
        kafka.create_topic("bench_src", partitions=PARTITIONS)
        kafka.create_topic("bench_pp", partitions=PARTITIONS)
        for fmt in FORMATS:
            kafka.create_topic(f"bench_sink_{fmt}", partitions=PARTITIONS)
        began = time.monotonic()
        size = produce(servers, "bench_src", RECORDS, seed=42)
        print(f"bench: produced {RECORDS} records ({size / 1e6:.1f} MB) in {time.monotonic() - began:.1f}s")
        table = bench_table("bench_src", servers)

        # new processes, alternating: the peer, the engine cold, the floors
        for _ in range(REPEAT):
            fig.add("consumer_perf", consumer_perf(servers, "bench_src", RECORDS), RECORDS)
            job_s, process_s = flink_job(table)
            fig.add("flink_job", job_s, RECORDS)
            fig.add("flink_process", process_s, RECORDS)
            secs, out = _process(
                [sys.executable, str(HERE / "cold_run.py"), "materialize"], table.to_flink_ddl()
            )
            assert out["records_in"] == RECORDS, out
            fig.add("materialize_cold_process", secs, RECORDS)
            fig.add("bare_spark_start", _process([sys.executable, str(HERE / "cold_run.py"), "bare"])[0], 0)

        # one session, warm: Spark's raw read and materialize, alternating
        spark = build_spark_session(app_name="upsert-kafka-ops-bench")
        bounds = resolve_bounds(table, conn.to_librdkafka())
        materialize(spark, table, conn)[0].unpersist()  # warm-up: JIT, Kafka consumers
        for _ in range(REPEAT):
            t0 = time.monotonic()
            read_raw(spark, table, conn, bounds).select("key", "value").write.format("noop").mode(
                "overwrite"
            ).save()
            fig.add("spark_raw_read", time.monotonic() - t0, RECORDS)
            t0 = time.monotonic()
            df, res = materialize(spark, table, conn)
            fig.add("materialize_warm", time.monotonic() - t0, res.records_in)
            results["live_keys"] = res.records_out
            df.unpersist()

        # sinks: N distinct keys from Parquet, in each format, once cold then REPEAT times warm into one
        # topic; then each topic ((1 + REPEAT) N records over N keys) materialized
        parquet = str(tmp / "changelog.parquet")
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
        bytes_out = 0
        for fmt in FORMATS:
            sink = bench_table(f"bench_sink_{fmt}", servers, fmt, schema_registry.url, bounded=False)
            for run in ("cold", *["warm"] * REPEAT):  # the first write warms its code up: then the median
                t0 = time.monotonic()
                res = write_changelog(spark.read.parquet(parquet), sink, conn, order_by="seq")
                fig.add(f"sink_{fmt}_{run}", time.monotonic() - t0, res.records_out)
                bytes_out = res.bytes_out if fmt == "json" else bytes_out
            t0 = time.monotonic()
            df, res = materialize(spark, sink, conn)
            fig.add(f"materialize_{fmt}", time.monotonic() - t0, res.records_in)
            df.unpersist()
        for _ in range(REPEAT):  # its figure moves by a third from run to run: a median, as the others
            fig.add(
                "producer_perf", producer_perf(servers, "bench_pp", RECORDS, bytes_out // RECORDS), RECORDS
            )

        # incremental runs, each a new `upsert-kafka-ops run` process into Delta (the CLI's own session)
        pipeline = tmp / "pipeline.yaml"
        _pipeline(pipeline, servers, bench_table("bench_src", servers, bounded=False), tmp / "warehouse")
        fig.add("incremental_full", *_run_job(pipeline, "full"))
        produce(servers, "bench_src", RECORDS // 100, seed=43)
        fig.add("incremental_1pct", *_run_job(pipeline, "incremental"))
        produce(servers, "bench_src", 10, seed=44)
        fig.add("incremental_tiny", *_run_job(pipeline, "incremental"))
        # the same runs in the warm session (what a warm runtime would give; not a target of its own)
        warm = tmp / "pipeline-warm.yaml"
        _pipeline(warm, servers, bench_table("bench_src", servers, bounded=False), tmp / "warehouse-warm")
        _run_in(spark, warm, "full")  # warms the session up for Delta writes
        fig.add("incremental_warm_full", *_run_in(spark, warm, "full"))
        produce(servers, "bench_src", RECORDS // 100, seed=45)
        fig.add("incremental_warm_1pct", *_run_in(spark, warm, "incremental"))
        produce(servers, "bench_src", 10, seed=46)
        fig.add("incremental_warm_tiny", *_run_in(spark, warm, "incremental"))
        spark.stop()

        # a tiny incremental task on its own driver and on a warm Spark Connect server, alternating: each a
        # new client process, as an orchestrator's task is
        with LocalSparkConnect(tmp / "connect") as server:
            os.environ["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = server.token or ""  # what the clients send
            remote = tmp / "pipeline-connect.yaml"
            _pipeline(
                remote, servers, bench_table("bench_src", servers, bounded=False), tmp / "warehouse-connect"
            )
            # a deployed server has run many tasks: its first ones compile the code every later one uses
            _run_job(remote, "full", server.url)
            for i in range(WARM_TASKS):
                produce(servers, "bench_src", 10, seed=90 + i)
                _run_job(remote, "incremental", server.url)
            for i in range(REPEAT):
                produce(servers, "bench_src", 10, seed=47 + i)
                fig.add("incremental_tiny", *_run_job(pipeline, "incremental"))
                fig.add("incremental_tiny_connect", *_run_job(remote, "incremental", server.url))

    results["figures"] = fig.as_json()
    results["targets"] = []
    print(f"\n{'result':<30} {'baseline':<26} {'ratio':>7} {'target':>9}  met")
    for name, base, target, sense in TARGETS:
        ratio = _ratio(fig, name, base, sense)
        met = ratio >= target if sense == "min" else ratio <= target
        want = f"{'>=' if sense == 'min' else '<='}{target:g}"
        results["targets"].append({"result": name, "baseline": base, "ratio": round(ratio, 3),
                                   "target": want, "met": met})  # fmt: skip
        print(f"{name:<30} {base:<26} {ratio:>7.2f} {want:>9}  {'yes' if met else 'NO'}")
    warm_1pct = _ratio(fig, "incremental_warm_1pct", "incremental_warm_full", "max")
    warm_tiny = _ratio(fig, "incremental_warm_tiny", "incremental_warm_full", "max")
    print(f"in the warm session (no target): 1% new records {warm_1pct:.2f}, 10 new records {warm_tiny:.2f} "
          "of the full run's time")  # fmt: skip
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2) + "\n")
    _chart(results, OUT.with_suffix(".png"))
    print(f"bench: results in {OUT} and {OUT.with_suffix('.png')}")
    return 0


def _chart(results: dict[str, Any], path: Path) -> None:
    """Two panels: records/s of every throughput figure, and each target's ratio against its line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates = {
        k: v["records_per_s"]
        for k, v in results["figures"].items()
        if v["records_per_s"] and not k.startswith("incremental")  # those are about time, not rate
    }
    targets = results["targets"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(15, 7), gridspec_kw={"width_ratios": [3, 2]})
    names = list(rates)
    left.barh(names, [rates[n] for n in names],
              color=["tab:orange" if n.startswith(("flink", "consumer", "producer", "spark_raw")) else "tab:blue"
                     for n in names])  # fmt: skip
    left.invert_yaxis()
    left.set_xlabel("records/s (median)")
    left.set_title(
        f"{results['records']:,} records, {results['keys']:,} keys, {results['partitions']} partitions"
    )
    labels = [f"{t['result']} / {t['baseline']} ({t['target']})" for t in targets]
    right.barh(labels, [t["ratio"] for t in targets],
               color=["tab:green" if t["met"] else "tab:red" for t in targets])  # fmt: skip
    for i, t in enumerate(targets):
        right.plot([float(t["target"][2:])] * 2, [i - 0.4, i + 0.4], color="black")
    right.invert_yaxis()
    right.set_xlabel("ratio (black: the target)")
    right.set_title("targets (green: met)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    sys.exit(main())
