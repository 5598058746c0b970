"""Where the suite's time goes: a pytest plugin that records, per test file and per fixture that starts
a service, the wall seconds and the CPU seconds of this pytest process and of every process it started
(JVMs, brokers, PostgreSQL, CLI runs, schedulers), and per kind of process its lifetime CPU.

Active when ``UKO_TEST_COSTS`` names a folder (``make test`` sets it to ``build/test-logs/costs``);
each pytest process (each xdist worker too) writes one JSON file there when it ends, and
``scripts/test_costs.py`` adds them up into the cost table.

Which processes are this pytest process's: every process whose environment carries
``UKO_COST_OWNER=<this pid>`` (set here, inherited by whatever the tests start, including servers that
detach into a session of their own, like PostgreSQL under ``pg_ctl``), and every descendant of one of
those (a child started with an environment of its own). A background thread looks at ``/proc`` once a
second; a test's CPU is the owned processes' CPU at its end less at its start, read at both moments.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ENV_OWNER = "UKO_COST_OWNER"
TICK = os.sysconf("SC_CLK_TCK")
#: fixtures timed on their own: those that start a service or a process
SERVICE_FIXTURES = ("kafka", "broker", "secured", "wide", "postgres", "spark", "s3", "schema_registry",
                    "registry", "kdc", "kerberos", "yarn", "spark_cluster", "connect_server", "airflow_db",
                    "kept_demo")  # fmt: skip
#: a process's kind, from its command line: the first pattern that matches names it
KINDS = (
    (r"kafka\.Kafka\b", "kafka broker"),
    (r"SparkConnectServer|spark-connect", "spark connect server"),
    (r"deploy\.master\.Master|deploy\.worker\.Worker", "spark standalone"),
    (r"CoarseGrainedExecutorBackend|YarnCoarseGrained", "spark executor"),
    (r"deploy\.history\.HistoryServer", "spark history server"),
    (r"ResourceManager|NodeManager|ApplicationMaster", "yarn"),
    (r"apicurio|quarkus", "schema registry"),
    (r"plexus-classworlds|maven", "maven"),
    (r"\.venv-flink|pyflink|flink", "flink"),
    (r"deploy\.SparkSubmit", "spark driver"),
    (r"upsert_kafka_ops\.cli|bin/upsert-kafka-ops", "cli run"),
    (r"\bairflow\b", "airflow"),
    (r"\bdagster|\bdg\b", "dagster"),
    (r"\bpostgres\b|pg_ctl|initdb", "postgresql"),
    (r"\bminio\b", "minio"),
    (r"krb5kdc|kadmin|kdb5_util", "kdc"),
    (r"prometheus|pushgateway|promtool", "prometheus"),
    (r"^\S*python\S* .*(pytest|xdist|execnet)", "pytest"),
)


#: kinds that may still change: the process may exec another program (``env``, a shell, a Python that
#: runs ``os.exec*``), or its command line was not readable yet
_UNSETTLED = ("", "?", "env", "bash", "sh", "python", "python3", "python3.11", "java")


def _suite(file: str) -> str:
    """The suite of a test file: tests/<suite>/..."""
    parts = Path(file).parts
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else parts[-1]


def _kind(cmdline: str) -> str:
    for pattern, name in KINDS:
        if re.search(pattern, cmdline):
            return name
    return cmdline.split(" ", 1)[0].rsplit("/", 1)[-1] or "?"


@dataclass
class _Proc:
    kind: str
    java: bool
    cpu: float = 0.0


@dataclass
class Ledger:
    """The owned processes seen so far (by pid and start time), each with its last CPU reading."""

    owner: str
    procs: dict[tuple[int, int], _Proc] = field(default_factory=dict)
    #: live processes not ours, whose parent is not ours either: not read again while their pid stays
    #: in /proc (each pytest process of make test looks at every process of the machine once a second)
    foreign: set[int] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: this process's command line: a child that still has it is a fork not yet exec'd (its kind
    #: comes later), not a process matching "tests/airflow" or "pytest"
    own_cmdline: str = field(default_factory=lambda: _cmdline(os.getpid()))

    def sample(self) -> float:
        """Read /proc now; the CPU seconds of every owned process seen so far (a process that ended
        keeps its last reading)."""
        with self.lock:
            owned_pids = {pid for pid, _ in self.procs}
            live = {int(e.name) for e in os.scandir("/proc") if e.name.isdigit()}
            self.foreign &= live
            for pid in sorted(live - self.foreign):  # parents first, mostly (pids grow until they wrap)
                stat = _stat(pid)
                if stat is None:
                    continue
                ppid, start, cpu = stat
                key = (pid, start)
                proc = self.procs.get(key)
                if proc is None:
                    if pid != os.getpid() and ppid not in owned_pids and _env_owner(pid) != self.owner:
                        if ppid == 0 or ppid in self.foreign:  # else its parent may be found ours later
                            self.foreign.add(pid)
                        continue
                    proc = self.procs[key] = _Proc("", False)
                    owned_pids.add(pid)
                if proc.kind in _UNSETTLED:  # a launcher (env, a shell) may exec the real program later
                    cmd = _cmdline(pid)
                    if pid == os.getpid():
                        proc.kind = "pytest"
                    else:
                        proc.kind = "" if cmd == self.own_cmdline else _kind(cmd)
                    proc.java = cmd.split(" ", 1)[0].endswith("java")
                proc.cpu = cpu
            return sum(p.cpu for p in self.procs.values())

    def jvms(self) -> int:
        """How many owned JVMs were seen so far."""
        with self.lock:
            return sum(p.java for p in self.procs.values())

    def kinds(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        with self.lock:
            for proc in self.procs.values():
                row = out.setdefault(proc.kind, {"processes": 0, "jvms": 0, "cpu_s": 0.0})
                row["processes"] += 1
                row["jvms"] += proc.java
                row["cpu_s"] += proc.cpu
        return out


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a live process (None once it ended)."""
    stat = _stat(pid)
    return None if stat is None else stat[2]


def _stat(pid: int) -> tuple[int, int, float] | None:
    """(parent pid, start time in ticks, user + system CPU seconds) of a live process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), int(fields[19]), (int(fields[11]) + int(fields[12])) / TICK


def _env_owner(pid: int) -> str | None:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    marker = f"{ENV_OWNER}=".encode()
    for item in env.split(b"\0"):
        if item.startswith(marker):
            return item[len(marker) :].decode()
    return None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class CostPlugin:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.ledger = Ledger(owner=str(os.getpid()))
        os.environ[ENV_OWNER] = self.ledger.owner
        self.began = time.monotonic()
        self.tests: list[dict[str, Any]] = []
        self.fixtures: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="test-costs", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(1.0):
            self.ledger.sample()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, Any, None]:
        wall, cpu, jvms = time.monotonic(), self.ledger.sample(), self.ledger.jvms()
        yield
        self.tests.append({"nodeid": item.nodeid, "file": item.nodeid.split("::", 1)[0],
                           "wall_s": time.monotonic() - wall, "cpu_s": self.ledger.sample() - cpu,
                           "jvms": self.ledger.jvms() - jvms})  # fmt: skip

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[Any]) -> Generator[None, Any, None]:
        if fixturedef.argname not in SERVICE_FIXTURES:
            yield
            return
        wall, cpu = time.monotonic(), self.ledger.sample()
        yield
        self.fixtures.append({"fixture": fixturedef.argname, "wall_s": time.monotonic() - wall,
                              "cpu_s": self.ledger.sample() - cpu})  # fmt: skip

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self._stop.set()
        total = self.ledger.sample()
        if not self.tests and not self.fixtures:
            return  # an xdist controller, or a collection-only run
        files = [t["file"] for t in self.tests] or [str(session.config.args[0])]
        # e.g. "airflow+faults": one process that ran two suites
        suite = "+".join(dict.fromkeys(_suite(f) for f in files))
        self.folder.mkdir(parents=True, exist_ok=True)
        data = {"suite": suite, "pid": os.getpid(), "worker": os.environ.get("PYTEST_XDIST_WORKER", ""),
                "wall_s": time.monotonic() - self.began, "cpu_s": total, "tests": self.tests,
                "fixtures": self.fixtures, "kinds": self.ledger.kinds()}  # fmt: skip
        (self.folder / f"{suite}-{os.getpid()}.json").write_text(json.dumps(data, indent=1))
