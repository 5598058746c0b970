"""Streaming mode (issue 43): how fresh a continuous job keeps its Delta table, and the rate it
sustains, beside what a user writes without this project.

For each rate (``BENCH_STREAM_RATES``, default 1,000 and 10,000 records/s) for
``BENCH_STREAM_SECONDS`` (default 600) over ``BENCH_STREAM_KEYS`` keys (default 100,000, each written
once before; then updates of random keys, 2% tombstones; JSON, 8 partitions), each on its own topic
and table, one after the other (this machine has two cores):

- **ours**: ``upsert-kafka-ops run PIPELINE`` of a materialize job with ``trigger: {continuous: true,
  interval: BENCH_STREAM_INTERVAL}`` (default 1s) into Delta, in its own process, as it is deployed;
- **baseline**: a hand-written Structured Streaming query with a processing-time trigger of the same
  interval and ``foreachBatch``: the latest record per key of the batch, one ``MERGE INTO`` its own
  Delta table (the query ``bench_scale.ForeachBatchMerge`` runs, on a trigger instead of AvailableNow).

**End-to-end latency** of a record: from its Kafka timestamp (the producer's clock when it was sent)
to the Delta commit that first holds it. Ours: each commit's time and end offsets from the table's
log (the offsets the job stores in it); the baseline: each batch's end offsets and end from the
query's progress. p50, p99 and the largest, over every record sent in the window.

**Sustained rate** (``BENCH_STREAM_MAX_RATES``, default 20,000, 50,000 and 100,000 records/s, each
for ``BENCH_STREAM_PROBE_SECONDS``, default 180): a rate is sustained when the job's lag does not grow
from commit to commit. Every second the bench samples the topic's end and what the job holds (its
table's stored offsets, or the offsets its consumer group committed); a sample where what the job
holds moved is a commit. From the first commit in the window's second half to its last (at least
three commits), the job committed records at least 95% as fast as the topic grew over the same
span, that is, its lag at the commits grew by at most 5% of the records offered; and the producer
sent at least 95% of the rate (a rate it could not send was not offered). Lag sampled between
commits cannot judge this: a job whose batches take 8 s holds a sawtooth lag, rising through each
batch and dropping at its commit, and a slope through a few of those teeth came out of either sign
for the same job and rate. The highest sustained rate is reported for each job; the drain (the
seconds until the job held every record sent, once the producer stopped) is reported beside it.

- **flink**: Flink 2.2.1's streaming job over the same kind of topic (``INSERT INTO`` an upsert-kafka
  sink topic ``SELECT * FROM`` the upsert-kafka source: its ChangelogNormalize is the fold), in
  PyFlink's own process (``.venv-flink``, parallelism 2, a checkpoint every interval, which commits
  its source offsets to its consumer group). A record's latency: from its Kafka timestamp to the
  timestamp of the sink record Flink wrote for it (matched by key and the value's unique name); its
  lag: the topic's end minus the offsets its checkpoints committed.

- **ours-topic** (the latency windows only; ``BENCH_STREAM_PROBE_KINDS`` can add it to the probes): our
  continuous topic-to-topic job into an upsert-kafka sink topic, timed as Flink's; it reads the topic
  as an append-only ``kafka`` table, since a continuous query over an upsert source is refused (it
  would need retractions).

Printed beside the issue's targets (p50 at most 3 s and p99 at most 10 s at 1,000 records/s; at least
50,000 records/s sustained into Delta with 100,000 keys). Results: ``build/bench/streaming.json``.

Run: ``.venv/bin/python benchmarks/bench_streaming.py`` (``make bench`` runs it).
"""

from __future__ import annotations

import ast
import itertools
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml
from bench_engine import COLUMNS, PARTITIONS, bench_table
from bench_scale import ForeachBatchMerge, produce_keys

from upsert_kafka_ops import jars
from upsert_kafka_ops.jobs.state import MARKER, from_payload
from upsert_kafka_ops.local import LocalKafka
from upsert_kafka_ops.runtime import build_spark_session

RATES = [int(r) for r in os.environ.get("BENCH_STREAM_RATES", "1000,10000").split(",") if r]
SECONDS = float(os.environ.get("BENCH_STREAM_SECONDS", "600"))
MAX_RATES = [int(r) for r in os.environ.get("BENCH_STREAM_MAX_RATES", "20000,50000,100000").split(",") if r]
PROBE_SECONDS = float(os.environ.get("BENCH_STREAM_PROBE_SECONDS", "180"))
KEYS = int(os.environ.get("BENCH_STREAM_KEYS", "100000"))
INTERVAL = os.environ.get("BENCH_STREAM_INTERVAL", "1s")
OUT = Path(os.environ.get("BENCH_STREAM_OUT", "build/bench/streaming.json"))
#: ours into Delta and into a sink topic, the hand-written query, Flink's streaming job, for the latency
#: windows (BENCH_STREAM_KINDS) and for the sustained-rate probes (BENCH_STREAM_PROBE_KINDS: the issue's
#: rate target is into Delta); each a subset, comma-separated
KINDS = [k for k in os.environ.get("BENCH_STREAM_KINDS", "ours,ours-topic,baseline,flink").split(",") if k]
PROBE_KINDS = [k for k in os.environ.get("BENCH_STREAM_PROBE_KINDS", "ours,baseline,flink").split(",") if k]
TARGETS = {"p50_s": 3.0, "p99_s": 10.0, "sustained": 50_000}


def _interval_s() -> float:
    from upsert_kafka_ops.spec.table import parse_duration_ms

    return parse_duration_ms(INTERVAL, "BENCH_STREAM_INTERVAL") / 1000


REGIONS = (b"Beijing", b"Berlin", b"Hangzhou", b"Shanghai", b"Paris")


class Values:
    """The values ``bench_engine.record_value`` writes (the same fields, types and JSON), formatted from
    4,096 precomputed tails: the producer runs beside the job on the same two cores, and
    ``json.dumps`` of each record cost it about 12 of its 15 CPU microseconds a record (0.75 of a core
    at 50,000 records/s, taken from the job it loads); formatted here, 1.3 microseconds. A record's
    name, ``user-<id>-<six random digits>``, is what the Flink job's latency is matched by."""

    def __init__(self, rnd: random.Random) -> None:
        self.rnd = rnd
        self.tails = [
            b'","region":"%s","amount":%r,"score":%r,"active":%s,"updated":"2026-11-22 10:00:00.123"}'
            % (rnd.choice(REGIONS), round(rnd.uniform(0, 10000), 2), rnd.random(),
               b"true" if rnd.random() < 0.5 else b"false")
            for _ in range(4096)
        ]  # fmt: skip

    def __call__(self, k: int) -> bytes:
        r = self.rnd.getrandbits(32)  # six digits of the name from its low bits, the tail from its top 12
        return b'{"id":%d,"name":"user-%08d-%06d%s' % (k, k, r % 1_000_000, self.tails[r >> 20])


class Paced:
    """A producer thread sending ``rate`` updates of random keys per second for ``seconds``."""

    def __init__(self, servers: str, topic: str, rate: int, seconds: float, seed: int) -> None:
        self.servers, self.topic, self.rate, self.seconds, self.seed = servers, topic, rate, seconds, seed
        self.sent = 0
        self.thread = threading.Thread(target=self._run, name="paced-producer", daemon=True)

    def start(self) -> Paced:
        self.thread.start()
        return self

    def _run(self) -> None:
        from confluent_kafka import Producer

        rnd = random.Random(self.seed)
        value_of = Values(rnd)
        producer = Producer({"bootstrap.servers": self.servers, "partitioner": "murmur2_random", "linger.ms": 5,
                             "queue.buffering.max.messages": 2_000_000})  # fmt: skip
        began = time.monotonic()
        tick = 0.01
        while (elapsed := time.monotonic() - began) < self.seconds:
            due = int(self.rate * min(elapsed + tick, self.seconds)) - self.sent
            for _ in range(max(0, due)):
                k = rnd.randrange(KEYS)
                value = None if rnd.random() < 0.02 else value_of(k)
                while True:
                    try:
                        producer.produce(self.topic, key=b'{"id":%d}' % k, value=value)
                        break
                    except BufferError:
                        producer.poll(0.01)
                self.sent += 1
            producer.poll(0)
            time.sleep(max(0.0, began + elapsed + tick - time.monotonic()))
        assert producer.flush(120) == 0


def _ends(servers: str, topic: str) -> dict[int, int]:
    from upsert_kafka_ops.kafka import offsets as ko

    config = {"bootstrap.servers": servers}
    return {p: o for (_, p), o in ko.end_offsets(config, ko.topic_partitions(config, topics=[topic])).items()}


def _read(servers: str, topic: str, since: dict[int, int]) -> list[tuple[int, int, int, bytes, bytes | None]]:
    """(partition, offset, timestamp ms, key, value) of every record from ``since`` to the end, in each
    partition's order."""
    from confluent_kafka import Consumer, TopicPartition

    ends = _ends(servers, topic)
    consumer = Consumer(
        {"bootstrap.servers": servers, "group.id": "bench-stream-reader", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, since.get(p, 0)) for p in ends])
    out, left = [], {p for p in ends if ends[p] > since.get(p, 0)}
    while left:
        for m in consumer.consume(10_000, timeout=5):
            p, o = int(m.partition() or 0), int(m.offset() or 0)
            out.append((p, o, m.timestamp()[1], m.key() or b"", m.value()))
            if o + 1 >= ends[p]:
                left.discard(p)
    consumer.close()
    return out


def _records(servers: str, topic: str, since: dict[int, int]) -> list[tuple[int, int, int]]:
    """(partition, offset, timestamp ms) of every record from ``since`` to the end."""
    return [(p, o, ts) for p, o, ts, _, _ in _read(servers, topic, since)]


def _keyed(servers: str, topic: str, since: dict[int, int]) -> list[tuple[bytes, bytes | None, int]]:
    """(key, value, timestamp ms) of every record from ``since`` to the end, in each partition's order."""
    return [(k, v, ts) for _, _, ts, k, v in _read(servers, topic, since)]


def _latencies(
    records: list[tuple[int, int, int]], commits: list[tuple[float, dict[int, int]]]
) -> list[float]:
    """Each record's latency (s): the first commit (time ms, end offset per partition) that holds it."""
    import bisect

    per: dict[int, tuple[list[int], list[float]]] = {}
    for t, ends in sorted(commits):  # a partition's ends only grow, commit after commit
        for p, end in ends.items():
            held, times = per.setdefault(p, ([], []))
            if not held or end > held[-1]:
                held.append(end)
                times.append(t)
    out = []
    for p, o, ts in records:
        held, times = per.get(p, ([], []))
        i = bisect.bisect_right(held, o)  # the first end past the offset
        assert i < len(held), f"no commit holds partition {p} offset {o}"
        out.append((times[i] - ts) / 1000)
    return out


def _summary(lat: list[float]) -> dict[str, float]:
    qs = statistics.quantiles(lat, n=100)
    return {
        "p50_s": round(qs[49], 3),
        "p99_s": round(qs[98], 3),
        "max_s": round(max(lat), 3),
        "records": len(lat),
    }


def _name(value: bytes | None) -> str | None:
    return None if value is None else str(json.loads(value)["name"])


def _matched(
    sent: list[tuple[bytes, bytes | None, int]], written: list[tuple[bytes, bytes | None, int]]
) -> list[float]:
    """Each sent change's latency (s) to the sink record written for it, per key in order: a sink
    record is matched by its key and the value's unique name (None: a tombstone); sent changes passed
    over are those the fold drops (a delete of an absent key); sink records of no sent change (the
    first load's) are left out."""
    import collections

    pending: dict[bytes, collections.deque[tuple[str | None, int]]] = {}
    for key, value, ts in sent:
        pending.setdefault(key, collections.deque()).append((_name(value), ts))
    out = []
    for key, value, ts in written:
        queue, name = pending.get(key), _name(value)
        if not queue or all(n != name for n, _ in queue):
            continue
        while queue:
            n, sent_ts = queue.popleft()
            if n == name:
                out.append((ts - sent_ts) / 1000)
                break
    return out


def _delta_commits(table: Path, topic: str) -> list[tuple[float, dict[int, int]]]:
    """Our commits: (commitInfo.timestamp, end offsets stored in its userMetadata)."""
    out = []
    for f in sorted((table / "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            info = json.loads(line).get("commitInfo") if line.strip() else None
            if info and info.get("userMetadata"):
                state = from_payload(json.loads(info["userMetadata"])[MARKER])
                ends = {p: o for (_, p), o in state.offsets.items()}
                out.append((float(info["timestamp"]), ends))
    return out


def _group_offsets(servers: str, topic: str, group: str) -> dict[int, int]:
    """The offsets ``group`` committed for ``topic`` (none yet: {}, as while the broker's group
    coordinator is still loading after its first group appeared)."""
    from upsert_kafka_ops.errors import KafkaConnectionError
    from upsert_kafka_ops.kafka import offsets as ko

    config = {"bootstrap.servers": servers}
    try:
        committed = ko.committed_offsets(config, group, sorted(ko.topic_partitions(config, topics=[topic])))
    except KafkaConnectionError as exc:
        if "load in progress" not in str(exc):
            raise
        return {}
    return {p: o for (_, p), o in committed.items() if o is not None}


def _start_cli(file: Path, log: Path) -> subprocess.Popen[str]:
    """``upsert-kafka-ops run FILE --json`` in its own process, its log in ``log``."""
    with log.open("w") as err:  # the child keeps its own descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "upsert_kafka_ops.cli", "run", str(file), "--json"],
            stdout=subprocess.PIPE, stderr=err, text=True,
        )  # fmt: skip


def _stop_cli(proc: subprocess.Popen[str]) -> dict[str, Any]:
    """SIGTERM, as a Deployment's stop: the job ends its batch and exits 0 with its result."""
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, f"the continuous job exited {proc.returncode}"
    result: dict[str, Any] = json.loads(out)["results"][0]
    return result


class Ours:
    """The continuous job in its own process (``upsert-kafka-ops run``)."""

    def __init__(self, tmp: Path, servers: str, topic: str) -> None:
        self.table = tmp / f"ours-{topic}"
        self.file = tmp / f"{topic}.yaml"
        ddl = bench_table(topic, servers, bounded=False).to_flink_ddl()
        self.file.write_text(yaml.safe_dump({
            "connections": {"bench": {"bootstrap_servers": servers}},
            "jobs": [{"name": "live", "kind": "materialize", "source": {"connection": "bench", "table": {"ddl": ddl}},
                      "target": {"kind": "delta", "path": str(self.table)},
                      "trigger": {"continuous": True, "interval": INTERVAL}}],
        }))  # fmt: skip
        self.log = tmp / f"{topic}.log"
        self.proc = _start_cli(self.file, self.log)
        self.topic = topic

    def held(self) -> dict[int, int]:
        from upsert_kafka_ops.jobs.targets.delta import read_delta_log

        if not (self.table / "_delta_log").exists():
            return {}
        state = read_delta_log(self.table).state
        return {p: o for (_, p), o in state.offsets.items()} if state is not None else {}

    def commits(self) -> list[tuple[float, dict[int, int]]]:
        return _delta_commits(self.table, self.topic)

    def latencies(self, servers: str, since: dict[int, int]) -> list[float]:
        return _latencies(_records(servers, self.topic, since), self.commits())

    def stop(self) -> dict[str, Any]:
        return _stop_cli(self.proc)


class OursTopic:
    """Our continuous topic-to-topic job into an upsert-kafka sink topic (``INSERT INTO ... SELECT *``),
    in its own process, in the latency windows (not the rate probes: the issue's rate is into Delta). A
    continuous query over an upsert source is refused (it would need retractions), so this one reads
    the topic as the append-only ``kafka`` table of the same columns, as a user streams events (a
    tombstone gives no row there, as in Flink): its latency is that of our sink-topic path, not
    of the fold Flink's job runs. Its offsets are those it committed to its consumer group after each
    batch; a record's latency runs to the sink record written for it (a tombstone writes none)."""

    def __init__(self, tmp: Path, kafka: LocalKafka, topic: str) -> None:
        self.servers, self.topic, self.sink = kafka.bootstrap_servers, topic, f"{topic}-sink"
        kafka.create_topic(self.sink, partitions=PARTITIONS, config={"cleanup.policy": "compact"})
        columns = ", ".join(f"`{c['name']}` {c['type']}" for c in COLUMNS)
        events = (f"CREATE TABLE `changes` ({columns}) WITH ("
                  f"'connector' = 'kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{self.servers}', "
                  "'scan.startup.mode' = 'earliest-offset', 'format' = 'json')")  # fmt: skip
        sink = bench_table(self.sink, self.servers, bounded=False)
        self.file = tmp / f"{topic}.yaml"
        self.file.write_text(yaml.safe_dump({
            "connections": {"bench": {"bootstrap_servers": self.servers}},
            "tables": {"changes": {"connection": "bench", "ddl": events},
                       "folded": {"connection": "bench", "ddl": sink.to_flink_ddl()}},
            "jobs": [{"name": "live", "kind": "topic-to-topic", "sql": "INSERT INTO folded SELECT * FROM changes",
                      "checkpoint": {"path": str(tmp / f"checkpoint-{topic}")},
                      "trigger": {"continuous": True, "interval": INTERVAL}}],
        }))  # fmt: skip
        self.log = tmp / f"{topic}.log"
        self.proc = _start_cli(self.file, self.log)

    def held(self) -> dict[int, int]:
        return _group_offsets(self.servers, self.topic, "upsert-kafka-ops.live")

    def latencies(self, servers: str, since: dict[int, int]) -> list[float]:
        return _matched(_keyed(servers, self.topic, since), _keyed(servers, self.sink, {}))

    def stop(self) -> dict[str, Any]:
        return _stop_cli(self.proc)


class Baseline:
    """The hand-written query on a processing-time trigger, in this process's session."""

    def __init__(self, spark: Any, tmp: Path, servers: str, topic: str) -> None:
        self.merge = ForeachBatchMerge(spark, servers, topic, tmp / f"base-{topic}", tmp / f"ckpt-{topic}")
        self.query = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", servers)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .load()
            .writeStream.foreachBatch(self.merge._merge)
            .option("checkpointLocation", self.merge.checkpoint)
            .trigger(processingTime=INTERVAL.replace("s", " seconds") if INTERVAL.endswith("s") else INTERVAL)
            .start()
        )
        self.topic = topic
        self.progress: dict[int, Any] = {}

    def _collect(self) -> None:
        for p in self.query.recentProgress:
            self.progress[p["batchId"]] = p

    def _ends(self, progress: Any) -> dict[int, int]:
        end = progress["sources"][0]["endOffset"]
        if isinstance(end, str):  # JSON, or on PySpark 4 the repr of the parsed dict
            end = json.loads(end) if '"' in end else ast.literal_eval(end)
        return {int(p): int(o) for p, o in end[self.topic].items()}

    def held(self) -> dict[int, int]:
        self._collect()
        if not self.progress:
            return {}
        return self._ends(self.progress[max(self.progress)])

    def commits(self) -> list[tuple[float, dict[int, int]]]:
        from datetime import datetime

        self._collect()
        out = []
        for p in self.progress.values():
            if p["numInputRows"] == 0:
                continue
            began = datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp() * 1000
            out.append((began + p["durationMs"]["triggerExecution"], self._ends(p)))
        return out

    def latencies(self, servers: str, since: dict[int, int]) -> list[float]:
        return _latencies(_records(servers, self.topic, since), self.commits())

    def stop(self) -> dict[str, Any]:
        self._collect()
        self.query.stop()
        return {"batches": len(self.progress)}


#: the streaming job in PyFlink's process: the job (JSON) on stdin's first line, runs until a second
#: line (or the end of stdin), then cancels it
FLINK_STREAM = """
import json, sys
from pyflink.table import EnvironmentSettings, TableEnvironment
job = json.loads(sys.stdin.readline())
env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
config = env.get_config()
config.set("pipeline.jars", ";".join("file://" + j for j in job["jars"]))
config.set("parallelism.default", "2")
config.set("execution.checkpointing.interval", job["interval"])
config.set("table.local-time-zone", "UTC")
for ddl in job["ddl"]:
    env.execute_sql(ddl)
result = env.execute_sql(job["insert"])
print(json.dumps({"started": True}), flush=True)
sys.stdin.readline()
result.get_job_client().cancel().result()
print(json.dumps({"stopped": True}), flush=True)
"""


class FlinkStream:
    """Flink's streaming upsert-kafka job from the topic into a sink topic, in PyFlink's process."""

    def __init__(self, tmp: Path, kafka: LocalKafka, topic: str) -> None:
        from bench_engine import FLINK_PYTHON

        servers = kafka.bootstrap_servers
        self.servers, self.topic, self.sink = servers, topic, f"{topic}-flink"
        self.group = f"bench-flink-{topic}"
        kafka.create_topic(self.sink, partitions=PARTITIONS, config={"cleanup.policy": "compact"})
        source = bench_table(topic, servers, bounded=False).to_flink_ddl().rstrip().rstrip(")")
        source += f", 'properties.group.id' = '{self.group}')"
        sink = (f"CREATE TABLE `flink_sink` WITH ('connector' = 'upsert-kafka', 'topic' = '{self.sink}', "
                f"'properties.bootstrap.servers' = '{servers}', 'key.format' = 'json', 'value.format' = 'json') "
                f"LIKE `{topic}` (EXCLUDING OPTIONS)")  # fmt: skip
        job = {"jars": [str(j) for j in jars.jar_paths("flink")], "interval": INTERVAL, "ddl": [source, sink],
               "insert": f"INSERT INTO `flink_sink` SELECT * FROM `{topic}`"}  # fmt: skip
        if not FLINK_PYTHON.is_file():
            raise SystemExit(
                f"PyFlink's virtualenv is missing ({FLINK_PYTHON}): run `make flink` (make bench does)."
            )
        self.log = tmp / f"flink-{topic}.log"  # a path, as the other jobs' (_caught_up reads its end)
        self.err = self.log.open("w")
        self.proc = subprocess.Popen([str(FLINK_PYTHON), "-c", FLINK_STREAM], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.err, text=True)  # fmt: skip
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert '"started"' in line, f"Flink's job did not start (see {self.log}): {line!r}"

    def held(self) -> dict[int, int]:
        """The offsets Flink's checkpoints committed (read by the sink's records by then)."""
        return _group_offsets(self.servers, self.topic, self.group)

    def latencies(self, servers: str, since: dict[int, int]) -> list[float]:
        return _matched(_keyed(servers, self.topic, since), _keyed(servers, self.sink, {}))

    def stop(self) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.close()
        stopped = self.proc.stdout.readline()
        self.proc.wait(timeout=300)
        self.err.close()
        return {"cancelled": '"stopped"' in stopped, "exit": self.proc.returncode}


def _caught_up(job: Any, servers: str, topic: str, timeout: float = 900) -> float:
    began = time.monotonic()
    want = _ends(servers, topic)
    while job.held() != want:
        assert time.monotonic() - began < timeout, f"not caught up with {want}: {job.held()}"
        proc = getattr(job, "proc", None)
        if proc is not None and proc.poll() is not None:
            tail = "\n".join(job.log.read_text().splitlines()[-20:])
            raise AssertionError(f"the job exited {proc.returncode}; the end of its log:\n{tail}")
        time.sleep(0.2)
    return time.monotonic() - began


def _totals(job: Any, servers: str, topic: str) -> tuple[int, int]:
    """The topic's end and what the job holds of it, each summed over the partitions."""
    held, ends = job.held(), _ends(servers, topic)
    return sum(ends.values()), sum(held.get(p, 0) for p in ends)


def committed_rate(samples: list[tuple[float, int, int]], seconds: float) -> dict[str, Any]:
    """From ``(t, end, held)`` samples: the records per second the job committed from the first commit
    (a sample where ``held`` moved) in the window's second half to its last, and the rate the topic grew
    over the same span. Their difference times the span is how much the lag at the commits grew."""
    half = [s for s in samples if s[0] >= seconds / 2]
    commits = [b for a, b in itertools.pairwise(half) if b[2] != a[2]]
    if len(commits) < 3:
        return {"commits": len(commits), "committed_rate": 0.0, "offered_rate": 0.0, "lag_growth": None}
    (t0, end0, held0), (t1, end1, held1) = commits[0], commits[-1]
    return {"commits": len(commits), "committed_rate": round((held1 - held0) / (t1 - t0)),
            "offered_rate": round((end1 - end0) / (t1 - t0)), "lag_growth": (end1 - held1) - (end0 - held0)}  # fmt: skip


def one(
    kind: str, rate: int, seconds: float, kafka: LocalKafka, tmp: Path, spark: Any, seed: int
) -> dict[str, Any]:
    """One window of ``rate`` records/s into ``kind`` (ours or the baseline), on a new topic."""
    servers = kafka.bootstrap_servers
    topic = f"stream-{kind}-{rate}-{seed}"
    kafka.create_topic(topic, partitions=PARTITIONS)
    produce_keys(servers, topic, range(KEYS), seed=seed)
    job: Ours | OursTopic | Baseline | FlinkStream
    if kind == "ours":
        job = Ours(tmp, servers, topic)
    elif kind == "ours-topic":
        job = OursTopic(tmp, kafka, topic)
    elif kind == "flink":
        job = FlinkStream(tmp, kafka, topic)
    else:
        job = Baseline(spark, tmp, servers, topic)
    first = _caught_up(job, servers, topic)
    since = _ends(servers, topic)
    paced = Paced(servers, topic, rate, seconds, seed + 1).start()
    samples: list[tuple[float, int, int]] = []
    began = time.monotonic()
    while paced.thread.is_alive():
        samples.append((time.monotonic() - began, *_totals(job, servers, topic)))
        time.sleep(1.0)
    paced.thread.join()
    drained = _caught_up(job, servers, topic)
    stopped = job.stop()
    lat = _summary(job.latencies(servers, since))
    kept = committed_rate(samples, seconds)
    # a rate the producer did not reach was not offered: on two cores beside the broker and the job, the
    # Python producer fell to 37,000 records/s of 50,000 asked, and that probe's lag then fell
    achieved = paced.sent / seconds
    sustained = kept["commits"] >= 3 and kept["committed_rate"] >= 0.95 * kept["offered_rate"]
    return {"kind": kind, "rate": rate, "seconds": seconds, "sent": paced.sent, "achieved_rate": round(achieved),
            "first_catch_up_s": round(first, 2), "drain_s": round(drained, 2), **kept,
            "sustained": sustained and achieved >= 0.95 * rate,
            "max_lag": max((end - held for _, end, held in samples), default=0), **lat, "stopped": stopped}  # fmt: skip


def main() -> int:
    jars.fetch(["kafka", "spark", "flink"], log=False)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="uko-bench-stream-") as t:
        tmp = Path(t)
        with LocalKafka(tmp / "kafka", heap="1g") as kafka:
            spark = build_spark_session(app_name="bench-streaming")
            spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "100000")
            try:
                seed = 1
                for rate in RATES:
                    for kind in KINDS:
                        seed += 10
                        r = one(kind, rate, SECONDS, kafka, tmp, spark, seed)
                        results.append(r)
                        print(f"{kind:10} {rate:>7,}/s for {SECONDS:.0f} s: p50 {r['p50_s']:.2f} s, p99 {r['p99_s']:.2f} s, "
                              f"max {r['max_s']:.2f} s; committed {r['committed_rate']:,}/s", flush=True)  # fmt: skip
                for rate in MAX_RATES:
                    for kind in PROBE_KINDS:
                        seed += 10
                        r = one(kind, rate, PROBE_SECONDS, kafka, tmp, spark, seed)
                        r["probe"] = True
                        results.append(r)
                        print(f"{kind:10} {rate:>7,}/s probe: sustained {r['sustained']} (sent {r['achieved_rate']:,}/s; "
                              f"committed {r['committed_rate']:,}/s while the topic grew {r['offered_rate']:,}/s over "
                              f"{r['commits']} commits; drained in {r['drain_s']} s); p50 {r['p50_s']:.2f} s", flush=True)  # fmt: skip
            finally:
                spark.stop()
    OUT.write_text(json.dumps(results, indent=2))
    print("\nagainst the targets:")
    for r in results:
        if r["kind"] == "ours" and r["rate"] == 1000 and not r.get("probe"):
            ok = r["p50_s"] <= TARGETS["p50_s"] and r["p99_s"] <= TARGETS["p99_s"]
            print(
                f"  1,000 records/s: p50 {r['p50_s']:.2f} s (<= 3), p99 {r['p99_s']:.2f} s (<= 10): {'met' if ok else 'NOT met'}"
            )
    for kind in PROBE_KINDS:
        best = max((r["rate"] for r in results if r["kind"] == kind and r["sustained"]), default=0)
        note = f" (target {TARGETS['sustained']:,})" if kind == "ours" else ""
        print(f"  highest sustained rate, {kind}: {best:,} records/s{note}")
    print(f"results: {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
