"""A real Prometheus (Debian's) scrapes the lag exporter and a real Pushgateway while jobs run on
their schedules, and evaluates the chart's own alert rules (charts/upsert-kafka-ops/files/alerts.yaml):
no alert fires while the jobs are healthy; the right one fires within two schedule intervals when a
job stops, when a partition has records and no commit, and when the exporter loses the broker. The
dashboard's every query answers from the same Prometheus."""

from __future__ import annotations

import json
import math
import random
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from tests.devservices import LocalPrometheus, LocalPushgateway
from tests.integration.jobs_support import pipeline, produce, random_changes, source
from tests.monitoring.dashboard_png import render

from upsert_kafka_ops.jobs import Pipeline, run_job
from upsert_kafka_ops.jobs.lag_monitor import PipelineLagMonitor
from upsert_kafka_ops.kafka.evaluation import EvaluationConfig
from upsert_kafka_ops.local import LocalKafka, free_port
from upsert_kafka_ops.metrics.exporter import WatchOptions, serve

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "charts" / "upsert-kafka-ops" / "files" / "alerts.yaml"
DASHBOARD = ROOT / "charts" / "upsert-kafka-ops" / "files" / "grafana-dashboard.json"
INTERVAL = 60.0  # the jobs' schedule: every minute, cron's finest
GRACE = 55.0  # how late a run may be: a warm run takes 3-20 s here, more beside three other suites


def _job(servers: str, name: str, topic: str, path: Path) -> dict[str, Any]:
    return {"name": name, "kind": "materialize", "schedule": "* * * * *", "source": source(topic, servers),
            "target": {"kind": "delta", "path": str(path)}}  # fmt: skip


def _next_tick(now: float) -> float:
    return (math.floor(now / INTERVAL) + 1) * INTERVAL


class _Background:
    """Threads that stop together and keep the first error for the test to raise."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.threads: list[threading.Thread] = []

    def every(self, wait: Callable[[], float], work: Callable[[], None]) -> None:
        def loop() -> None:
            while not self.stop.is_set():
                try:
                    work()
                except BaseException as exc:  # surfaced by check()
                    self.errors.append(exc)
                    return
                self.stop.wait(max(0.0, wait()))

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        self.threads.append(thread)

    def check(self) -> None:
        if self.errors:
            raise self.errors[0]

    def join(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=120)


def _firing(prom: LocalPrometheus) -> dict[tuple[str, str], dict[str, Any]]:
    """Firing alerts by (alert name, pipeline_job); none when Prometheus, loaded by the suites beside
    it, does not answer within a minute (the next poll asks again: a firing alert stays firing)."""
    try:
        alerts = prom.alerts()
    except TimeoutError:
        return {}
    return {
        (a["labels"]["alertname"], a["labels"].get("pipeline_job", "")): a
        for a in alerts
        if a["state"] == "firing"
    }


def _wait_for(what: str, found: Callable[[], bool], deadline: float, background: _Background) -> float:
    while time.time() < deadline:
        background.check()
        if found():
            return time.time()
        time.sleep(2)
    raise AssertionError(f"{what}: not by {time.strftime('%H:%M:%S', time.gmtime(deadline))} UTC")


def test_prometheus_pages_on_a_stopped_job_unread_records_and_a_lost_broker_never_on_healthy_jobs(
    kafka: LocalKafka, spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    servers = kafka.bootstrap_servers
    topics = {name: f"m-{name}" for name in ("users", "orders", "fresh")}
    for topic in topics.values():
        kafka.create_topic(topic, partitions=2)
    file = tmp_path / "ops.yaml"
    jobs = [_job(servers, name, topic, tmp_path / name) for name, topic in topics.items()]
    file.write_text(pipeline(servers, jobs).to_yaml())
    ops = Pipeline.load(file)
    assert ops.name == "ops"  # the file's name: the pipeline label

    gateway = LocalPushgateway(tmp_path / "pushgateway").start()
    monkeypatch.setenv("UKO_PUSHGATEWAY_URL", gateway.url)  # every run's metrics go there
    options = WatchOptions(min_interval_s=1.0, timeout_s=3.0, window_file=tmp_path / "windows.json",
                           evaluation=EvaluationConfig(schedule_grace_s=GRACE))  # fmt: skip
    monitor = PipelineLagMonitor(ops, options=options)
    port = free_port()
    server = serve(monitor, "127.0.0.1", port)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    prom = LocalPrometheus([f"127.0.0.1:{port}", gateway.url.removeprefix("http://")], rule_files=[ALERTS],
                           scrape_interval_s=2, evaluation_interval_s=2, honor_labels=True,
                           dir=tmp_path / "prometheus")  # fmt: skip
    background = _Background()
    running = {"users": True, "orders": True}
    unread = threading.Event()  # records into the topic of `fresh`, a job that never runs
    seed = iter(range(10**6))
    began = time.time()
    try:

        def feed() -> None:
            for name in ("users", "orders", *(("fresh",) if unread.is_set() else ())):
                produce(servers, topics[name], random_changes(random.Random(next(seed)), 3, 20))

        # each job's first run, cold (a full build on a new driver's first Spark jobs), before the watch:
        # a job deployed on a schedule has been running for a while when it is watched
        feed()
        for name in ("users", "orders"):
            run_job(ops, name, spark=spark)
        prom.start()
        assert all(g["rules"] and all(r["health"] != "err" for r in g["rules"]) for g in prom.rules())
        background.every(lambda: 3.0, feed)
        for name in ("users", "orders"):  # each job on its own schedule: now, then 2 s after each tick

            def run(name: str = name) -> None:
                if running[name]:
                    run_job(ops, name, spark=spark)

            background.every(lambda: _next_tick(time.time()) + 2 - time.time(), run)

        # -- healthy: two and a half schedule intervals, every alert silent ---------------------------
        healthy_until = time.time() + 2.5 * INTERVAL
        seen: dict[tuple[str, str], dict[str, Any]] = {}
        while time.time() < healthy_until:
            background.check()
            seen.update(_firing(prom))
            time.sleep(3)
        assert seen == {}, f"alerts fired while every job ran on schedule: {sorted(seen)}"
        success = prom.query('upsert_kafka_ops_run_success{pipeline="ops"}')
        assert {(s["metric"]["pipeline_job"], s["value"][1]) for s in success} == {
            ("users", "1"),
            ("orders", "1"),
        }
        assert prom.query('upsert_kafka_ops_lag_up{pipeline="ops"} == 1') and not prom.query(
            "upsert_kafka_ops_lag_up == 0"
        )
        # the dashboard's every query answers (variables set to all), most with data already
        board = json.loads(DASHBOARD.read_text())
        exprs = [
            t["expr"].replace("$pipeline", ".*").replace("$job", ".*")
            for p in board["panels"]
            for t in p["targets"]
        ]
        answered = [bool(prom.query(e)) for e in exprs]
        assert sum(answered) >= len(exprs) - 2, list(zip(exprs, answered, strict=True))

        # -- orders stops, fresh gets records it never reads, a run fails -----------------------------
        stopped = time.time()
        running["orders"] = False
        unread.set()
        other = pipeline(servers, [_job(servers, "broken", "no-such-topic", tmp_path / "broken")])
        other = other.model_copy(update={"name": "other"})
        with pytest.raises(Exception, match="no-such-topic"):
            run_job(other, "broken", spark=spark)
        missed = _next_tick(stopped - 2)  # the first tick orders does not run at (runs start 2 s after)
        # the tick that should have read fresh's records: the first after the exporter saw them (the
        # feed writes within 3 s, the exporter looks every second)
        unread_due = _next_tick(stopped + 6)
        deadlines = {("UpsertKafkaJobOverdue", "orders"): missed + 2 * INTERVAL,
                     ("UpsertKafkaRecordsNeverRead", "fresh"): unread_due + 2 * INTERVAL,
                     ("UpsertKafkaRunFailed", "broken"): time.time() + INTERVAL}  # fmt: skip
        fired_at: dict[tuple[str, str], float] = {}
        while set(fired_at) != set(deadlines) and time.time() < max(deadlines.values()):
            background.check()
            now = time.time()
            fired_at.update({k: now for k in _firing(prom) if k in deadlines and k not in fired_at})
            time.sleep(1)
        late = sorted(k for k, by in deadlines.items() if fired_at.get(k, float("inf")) > by)
        assert not late, f"not firing within two schedule intervals: {late} ({fired_at}, {deadlines})"
        # not early either: orders pages once its missed run is past the grace (and the rule's for: 30s)
        assert fired_at[("UpsertKafkaJobOverdue", "orders")] >= missed + GRACE + 30
        firing = _firing(prom)
        assert not [k for k in firing if k[1] == "users"], f"the healthy job paged: {sorted(firing)}"
        assert ("UpsertKafkaRecordsNeverRead", "orders") not in firing  # orders committed before: overdue
        assert ("UpsertKafkaJobOverdue", "fresh") not in firing  # fresh never committed: never read
        assert firing[("UpsertKafkaJobOverdue", "orders")]["labels"]["topic"] == topics["orders"]

        # -- the exporter loses the broker: lag_up 0, the scrape itself still answers -------------------
        background.join()
        background.check()
        lost = time.time()
        kafka.stop()
        _wait_for(
            "UpsertKafkaLagUnreadable for every job",
            lambda: (
                {j for a, j in _firing(prom) if a == "UpsertKafkaLagUnreadable"}
                == {"users", "orders", "fresh"}
            ),
            lost + 2 * INTERVAL,
            background,
        )
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
            assert response.status == 200
            assert (
                'upsert_kafka_ops_lag_up{pipeline="ops",pipeline_job="users"} 0' in response.read().decode()
            )
        assert prom.targets_up() == {f"127.0.0.1:{port}": "up", gateway.url.removeprefix("http://"): "up"}
        print({a: round(t - missed, 1) for (a, _), t in fired_at.items()}, "s after the first missed tick")
        # the dashboard, drawn from this Prometheus's answers over the whole scenario (docs/lag.md shows it)
        drawn = render(board, prom, began, time.time(), ROOT / "build" / "monitoring" / "dashboard.png")
        assert drawn >= len(board["panels"]) - 1
    finally:
        background.join()
        server.shutdown()
        server.server_close()
        monitor.close()
        prom.stop()
        gateway.stop()
