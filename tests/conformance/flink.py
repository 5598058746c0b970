"""Real Flink as an oracle: run cases through ``flink_runner.py`` in PyFlink's own virtualenv and
fold what Flink emitted into the table it stands for."""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).with_name("flink_runner.py")
ENV_PYTHON = "UKO_FLINK_PYTHON"


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


def run(
    cases: Sequence[Case],
    jars: Sequence[Path],
    log: Path,
    timeout: float = 600.0,
    env: Mapping[str, str] | None = None,
) -> dict[str, Outcome]:
    """Run every case in one PyFlink process (one JVM start for them all); Flink's logs go to ``log``;
    ``env`` adds to the process's environment (e.g. JVM options through ``JAVA_TOOL_OPTIONS``)."""
    job = {"jars": [str(j) for j in jars], "parallelism": 2,
           "cases": [{"name": c.name, "table": c.table, "ddl": c.ddl, "more": list(c.more), "insert": c.insert}
                     for c in cases]}  # fmt: skip
    with open(log, "wb") as err:
        proc = subprocess.run(
            [str(flink_python()), str(RUNNER)], input=json.dumps(job).encode(), stdout=subprocess.PIPE,
            stderr=err, timeout=timeout, check=False, env={**os.environ, **(env or {})},
        )  # fmt: skip
    outcomes = {}
    for line in proc.stdout.decode().splitlines():
        if line.startswith("{"):
            data = json.loads(line)
            outcomes[data["name"]] = Outcome(
                columns=data.get("columns", []),
                changes=[(k, cells) for k, cells in data.get("changes", [])],
                error=data.get("error"),
                written=bool(data.get("written")),
            )
    missing = [c.name for c in cases if c.name not in outcomes]
    if proc.returncode != 0 or missing:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        raise AssertionError(f"PyFlink exited {proc.returncode} without results for {missing}:\n{tail}")
    return outcomes
