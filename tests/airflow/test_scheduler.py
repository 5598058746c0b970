"""The example DAG in real Airflow processes, as a newcomer runs it: ``upsert-kafka-ops demo --keep``
seeds the demo's broker and prints the exports; ``airflow standalone`` (API server, scheduler,
DAG processor, triggerer, LocalExecutor, SQLite) runs ``users_to_delta`` with those exports alone.
Its first run finds nothing new (the table was built in this process) and defers its new-data sensor
to the triggerer, which fires when a change is published; the materialize task's XCom holds the run
result.
Then the same job is started by its topic: ``users_to_delta_on_backlog`` is scheduled on an asset
whose watcher (a ``BacklogTrigger`` in the triggerer) fires when the next change is published."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from upsert_kafka_ops.jobs import Pipeline, run_job
from upsert_kafka_ops.local import free_port, free_ports
from upsert_kafka_ops.local.process import stop_group

from .conftest import ROOT

BIN = Path(sys.executable).parent


def _cli(*args: str, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "upsert-kafka-ops"), *args], capture_output=True, text=True, env=env,
                          timeout=timeout, check=False)  # fmt: skip


def _wait(what: str, found: Callable[[], Any], timeout: float, log: Path) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"{what} within {timeout:.0f} s\n{_story(log.parent)}")


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return bool(response.status == 200)
    except OSError:  # refused while it starts, or a timeout
        return False


def _story(home: Path) -> str:
    """What Airflow did with the DAG: its runs, its task tries, the tail of each try's log and of the
    standalone log, for a failure a reader can diagnose from the CI log alone."""
    lines = []
    db = home / "airflow.db"
    if db.exists():
        with contextlib.closing(sqlite3.connect(db, timeout=30)) as conn:
            for row in conn.execute("SELECT dag_id, run_id, state, start_date, end_date FROM dag_run "
                                    "WHERE dag_id LIKE 'users_to_delta%'"):  # fmt: skip
                lines.append(f"run {row}")
            for row in conn.execute("SELECT dag_id, run_id, task_id, try_number, state, start_date, end_date "
                                    "FROM task_instance WHERE dag_id LIKE 'users_to_delta%'"):  # fmt: skip
                lines.append(f"task {row}")
            for row in conn.execute("SELECT id, classpath, created_date FROM trigger"):
                lines.append(f"trigger {row}")
    for try_log in sorted((home / "logs").glob("dag_id=users_to_delta*/**/*.log")):
        lines.append(f"--- {try_log.relative_to(home)}\n" + try_log.read_text(errors="replace")[-3000:])
    standalone = (home / "standalone.log").read_text(errors="replace").splitlines()
    for component in ("scheduler", "dag-processor", "triggerer", "api-server"):
        lines.append(f"--- standalone.log, {component}'s last lines")
        lines += [line[:400] for line in standalone if line.startswith(component)][-8:]
    return "\n".join(lines)


@pytest.fixture
def kept_demo(jars_dir: Path, tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """``demo --keep``: the broker stays up on the stated port with the demo's data, and the printed
    exports are all Airflow's processes are given; a second one refuses to empty a live demo."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    base["UPSERT_KAFKA_OPS_JARS_DIR"] = str(jars_dir)
    folder, port = tmp_path / "demo", free_port()
    keep = _cli("demo", "--keep", "--dir", str(folder), "--port", str(port), env=base)
    assert keep.returncode == 0, keep.stderr[-3000:]
    exports = dict(shlex.split(line[len("export ") :])[0].split("=", 1)
                   for line in keep.stdout.splitlines() if line.startswith("export "))  # fmt: skip
    try:
        assert exports["UKO_BOOTSTRAP_SERVERS"] == f"127.0.0.1:{port}"
        connection = json.loads(exports["AIRFLOW_CONN_KAFKA_DEFAULT"])
        assert connection["extra"]["bootstrap.servers"] == f"127.0.0.1:{port}"
        again = _cli("demo", "--keep", "--dir", str(folder), "--port", str(port), env=base, timeout=120)
        assert again.returncode == 2 and "still running" in again.stderr  # never empties a live demo
        yield folder, {**base, **exports}
    finally:
        stop = _cli("local", "kafka", "stop", "--dir", str(folder / "kafka"), env=base, timeout=120)
    assert stop.stdout.strip() == "stopped", stop.stderr


def test_users_to_delta_runs_in_airflow_standalone_with_a_deferral(
    kept_demo: tuple[Path, dict[str, str]], spark: SparkSession, tmp_path: Path
) -> None:
    folder, env = kept_demo

    def publish() -> None:
        """The demo's publish job with the demo's exports, in this process: the scheduler's runs are the
        behaviour under test here, not the publishing (whose CLI run tests/integration/test_demo.py has)."""
        demo = Pipeline.load(ROOT / "pipelines" / "demo.yaml", env=env)
        assert run_job(demo, "publish-users", spark=spark).status == "succeeded"

    publish()
    # the warehouse table's first (full) run, in this process too (a full run through Airflow's tasks is
    # tests/airflow/test_dags.py's): the scheduler's first run then finds nothing new and defers
    demo = Pipeline.load(ROOT / "pipelines" / "demo.yaml", env=env)
    first = run_job(demo, "users-to-delta", spark=spark)
    assert (first.status, first.mode, first.records_read) == ("succeeded", "full", 4)

    home, (api, worker_logs, trigger_logs) = tmp_path / "airflow", free_ports(3)
    home.mkdir()
    env = {**env, "AIRFLOW_HOME": str(home), "PATH": f"{BIN}{os.pathsep}{env['PATH']}",
           "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"), "AIRFLOW__CORE__LOAD_EXAMPLES": "false",
           "AIRFLOW__API__PORT": str(api), "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{api}/execution/",
           "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(worker_logs),
           "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(trigger_logs),
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "true", "UKO_NEW_DATA_POLL_S": "2",
           "UKO_BACKLOG_MIN_RECORDS": "1", "UKO_BACKLOG_POLL_S": "2",
           # standalone's API server shares two cores with three other suites: its default 5 s
           # answer time (5 tries) failed a finished task's state update once
           "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "30",
           # the DAG files do not change while it runs: parsed once, not again every 30 s (a parse of
           # the five files is about 2 CPU s: 6 CPU s in each 150 s of the test, measured idle)
           "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "3600"}  # fmt: skip
    log = home / "standalone.log"
    with open(log, "wb") as out:
        airflow = subprocess.Popen([str(BIN / "airflow"), "standalone"], env=env, cwd=home, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    db = home / "airflow.db"

    def query(sql: str, *args: Any) -> list[tuple[Any, ...]]:
        with contextlib.closing(sqlite3.connect(db, timeout=30)) as conn:
            return conn.execute(sql, args).fetchall()

    def runs(dag_id: str = "users_to_delta") -> dict[str, str]:
        return dict(query("SELECT run_id, state FROM dag_run WHERE dag_id = ?", dag_id))

    def publish_change(user: int, region: str) -> None:
        spark.sql(f"UPDATE delta.`{folder}/source/users` SET region = '{region}' WHERE user_id = {user}")
        publish()

    def airflow_cli(*args: str) -> None:
        # `dags reserialize` parses every example DAG file in one process; beside the other suites each
        # file took about 30 s to parse (CI, 2026-11-27), so the six of them passed 120 s once
        done = subprocess.run([str(BIN / "airflow"), *args], env=env, capture_output=True, text=True,
                              timeout=360, check=False)  # fmt: skip
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]

    try:
        _wait("Airflow did not get ready", lambda: b"Airflow is ready" in log.read_bytes(), 180, log)
        # "Airflow is ready" can come before the API server listens, and its first request builds the
        # execution API's versioned app: a task's start request waited 33 s for both and was killed at
        # its 30 s answer time (CI, 2026-11-27). A task starts only once the API server has answered.
        _wait("the execution API did not answer", lambda: _answers(f"http://127.0.0.1:{api}/execution/health"),
              180, log)  # fmt: skip
        # "Airflow is ready" can come before the DAG processor has stored the DAG; unpausing a DAG
        # Airflow does not know yet prints "No paused DAGs were found" and exits 0 (CI, stop 36)
        _wait("the DAG processor did not store users_to_delta", lambda: query(
            "SELECT dag_id FROM dag WHERE dag_id = 'users_to_delta'"), 180, log)  # fmt: skip
        airflow_cli("dags", "unpause", "users_to_delta")  # the latest hourly run starts: nothing is new
        assert query("SELECT is_paused FROM dag WHERE dag_id = 'users_to_delta'") == [(0,)]
        second = _wait("the run's sensor did not defer", lambda: query(
            "SELECT run_id FROM task_instance WHERE dag_id = 'users_to_delta' AND task_id = 'new_users' "
            "AND state = 'deferred'"), 120, log)[0][0]  # fmt: skip
        publish_change(101, "Hangzhou")
        _wait(
            "the deferred run did not succeed", lambda: runs().get(second) in ("success", "failed"), 180, log
        )
        assert runs()[second] == "success", _story(home)

        # the same job started by its topic: the clock's DAG paused, the backlog's unpaused, and its
        # asset's watcher registered now (reserialize) rather than at the next parse
        airflow_cli("dags", "pause", "users_to_delta")
        airflow_cli("dags", "unpause", "users_to_delta_on_backlog")
        airflow_cli("dags", "reserialize")
        _wait("the backlog trigger did not start", lambda: query(
            "SELECT id FROM trigger WHERE classpath LIKE '%.BacklogTrigger'"), 120, log)  # fmt: skip
        time.sleep(6)  # it looked: nothing waits, nothing starts
        assert runs("users_to_delta_on_backlog") == {}, _story(home)
        publish_change(102, "Shenzhen")
        backlog = _wait("the backlog did not start a run", lambda: [
            r for r, s in runs("users_to_delta_on_backlog").items() if s in ("success", "failed")], 240, log)[0]  # fmt: skip
        assert runs("users_to_delta_on_backlog")[backlog] == "success", _story(home)
        events = query("SELECT extra FROM asset_event")
        payloads = [json.loads(e).get("payload") or {} for (e,) in events if e]
        assert any(p.get("backlog", {}).get("new_records") == 1 for p in payloads), events
    finally:
        stop_group(airflow, timeout=60)  # SIGTERM to its process group, SIGKILL what remains

    results = {run: json.loads(value) for run, value in query(
        "SELECT run_id, value FROM xcom WHERE dag_id = 'users_to_delta' AND task_id = 'users_to_delta' "
        "AND key = 'return_value'")}  # fmt: skip
    assert list(results) == [second]
    assert (results[second]["status"], results[second]["mode"], results[second]["records_read"]) == (
        "succeeded", "incremental", 1)  # fmt: skip
    (by_topic,) = [json.loads(v) for (v,) in query(
        "SELECT value FROM xcom WHERE dag_id = 'users_to_delta_on_backlog' AND task_id = 'users_to_delta' "
        "AND key = 'return_value'")]  # fmt: skip
    assert (by_topic["mode"], by_topic["records_read"]) == ("incremental", 1)
    rows = spark.read.format("delta").load(str(folder / "warehouse" / "users")).orderBy("user_id").collect()
    assert [(r.user_id, r.region) for r in rows] == [(100, "Beijing"), (101, "Hangzhou"), (102, "Shenzhen"),
                                                      (103, "Berlin")]  # fmt: skip
