"""Real Flink as an oracle: run cases through ``flink_runner.py`` in PyFlink's own virtualenv and
fold what Flink emitted into the table it stands for."""

from __future__ import annotations

import atexit
import json
import os
import queue
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.jvm import with_heap

ROOT = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).with_name("flink_runner.py")
ENV_PYTHON = "UKO_FLINK_PYTHON"
#: the PyFlink process's heap: its jobs read topics of at most a few thousand records
HEAP = "1g"
#: Flink keeps the classes it generates for each job (its metaspace passed 1 GB within the suite's first
#: half): a process resident past this many MB is replaced by a new one before its next job
RECYCLE_MB = 2048


@dataclass(frozen=True)
class Case:
    """One table for Flink to read (``ddl`` creates ``table``), or with ``insert`` a statement for
    Flink to run to its end after ``ddl`` and ``more`` (more tables) are created."""

    name: str
    table: str
    ddl: str
    more: tuple[str, ...] = ()
    insert: str | None = None


@dataclass
class Outcome:
    """What Flink gave for a case: its changelog (row kind, cells) or its error."""

    columns: list[str] = field(default_factory=list)
    changes: list[tuple[str, list[Any]]] = field(default_factory=list)
    error: str | None = None
    #: an insert case ran to its end
    written: bool = False

    def kinds(self) -> Counter[str]:
        return Counter(kind for kind, _ in self.changes)

    def table(self, key: Sequence[str]) -> dict[str, list[Any]]:
        """The changelog folded: the last row per primary key (an insert or update after image puts
        it, a delete or update before image removes it), keyed by the key cells' JSON."""
        where = [self.columns.index(k) for k in key]
        rows: dict[str, list[Any]] = {}
        for kind, cells in self.changes:
            k = json.dumps([cells[i] for i in where])
            if kind in ("+I", "+U"):
                rows[k] = cells
            elif kind in ("-U", "-D"):
                rows.pop(k, None)
            else:
                raise AssertionError(f"unknown row kind {kind!r}")
        return rows


def flink_python() -> Path:
    """PyFlink's interpreter: ``$UKO_FLINK_PYTHON``, else ``.venv-flink`` of this checkout."""
    python = Path(os.environ.get(ENV_PYTHON) or ROOT / ".venv-flink" / "bin" / "python")
    if not python.is_file():
        raise AssertionError(
            f"PyFlink's virtualenv is missing ({python}): run `make flink` (make test does), or set "
            f"{ENV_PYTHON} to a Python with apache-flink 2.2.1."
        )
    return python


class _Server:
    """One ``flink_runner.py --serve`` process: jobs in on stdin, a line per case back, Flink's logs in
    ``log``."""

    def __init__(self, jars: Sequence[Path], env: Mapping[str, str] | None, log: Path) -> None:
        self.log = log
        # it serves the whole suite, with a heap to match its small jobs (tests/jvm.py), and the jars on
        # its JVM's class path (PyFlink's launcher appends $HADOOP_CLASSPATH): given to each job as
        # pipeline.jars instead, every job loaded the Kafka connector's classes again in a class loader
        # of its own and ran them interpreted (a quarter of the process's CPU was class loading)
        classpath = {"HADOOP_CLASSPATH": os.pathsep.join(str(j) for j in jars)}
        with open(log, "wb") as err:
            self.proc = subprocess.Popen(
                [str(flink_python()), str(RUNNER), "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=err, env={**with_heap(HEAP), **classpath, **(env or {})}, text=True,
            )  # fmt: skip
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, name="flink-runner-stdout", daemon=True).start()

    def resident_mb(self) -> int:
        """The resident memory of the process and the JVM it started, in MB."""
        total, todo = 0, [self.proc.pid]
        while todo:
            pid = todo.pop()
            try:
                status = Path(f"/proc/{pid}/status").read_text()
                for task in Path(f"/proc/{pid}/task").iterdir():
                    todo += [int(c) for c in (task / "children").read_text().split()]
            except OSError:  # it ended meanwhile
                continue
            total += next(
                (int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0
            )
        return total // 1024

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)  # the process ended

    def run(self, cases: Sequence[Case], timeout: float, parallelism: int) -> list[dict[str, Any]]:
        job = {"jars": [], "parallelism": parallelism,
               "cases": [{"name": c.name, "table": c.table, "ddl": c.ddl, "more": list(c.more), "insert": c.insert}
                         for c in cases]}  # fmt: skip
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        deadline, out = time.monotonic() + timeout, []
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.close()
                raise AssertionError(f"Flink gave no answer within {timeout:.0f} s:\n{self.tail()}") from None
            if line is None:
                raise AssertionError(f"PyFlink exited {self.proc.wait()} mid-job:\n{self.tail()}")
            if line.startswith("{"):
                data = json.loads(line)
                if data.get("done"):
                    return out
                out.append(data)

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-40:])

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


#: the running servers, one per set of jars (this process's run keeps them)
_SERVERS: dict[tuple[str, ...], _Server] = {}


def close_all() -> None:
    """Stop every PyFlink process this process started (the conformance suite's last step)."""
    while _SERVERS:
        _SERVERS.popitem()[1].close()


atexit.register(close_all)


def run(
    cases: Sequence[Case],
    jars: Sequence[Path],
    log: Path,
    timeout: float = 600.0,
    env: Mapping[str, str] | None = None,
    parallelism: int = 2,
) -> dict[str, Outcome]:
    """Run every case in PyFlink: in the process this test run already started for the same jars (one
    JVM start for every job of the run), or a new one whose Flink logs go to ``log``. With ``env`` (adds
    to the process's environment, e.g. JVM options through ``JAVA_TOOL_OPTIONS``) a process of its own
    runs the cases and ends with the call: no second JVM stays beside the shared one. ``parallelism``
    is Flink's default for the job's operators."""
    if env:
        server = _Server(jars, env, log)
        try:
            return _outcomes(cases, server.run(cases, timeout, parallelism), server)
        finally:
            server.close()
    key = tuple(str(j) for j in jars)
    server = _SERVERS.get(key)
    if server is not None and server.resident_mb() > RECYCLE_MB:
        server.close()
        server = None
    if server is None or server.proc.poll() is not None:
        server = _SERVERS[key] = _Server(jars, None, log)
    elif log != server.log:
        log.write_text(
            f"Flink's logs for this job are in {server.log}, the log of the PyFlink process it ran in\n"
        )
    return _outcomes(cases, server.run(cases, timeout, parallelism), server)


def _outcomes(cases: Sequence[Case], results: list[dict[str, Any]], server: _Server) -> dict[str, Outcome]:
    outcomes = {}
    for data in results:
        outcomes[data["name"]] = Outcome(
            columns=data.get("columns", []),
            changes=[(k, cells) for k, cells in data.get("changes", [])],
            error=data.get("error"),
            written=bool(data.get("written")),
        )
    missing = [c.name for c in cases if c.name not in outcomes]
    if missing:
        raise AssertionError(f"PyFlink gave no results for {missing}:\n{server.tail()}")
    return outcomes
