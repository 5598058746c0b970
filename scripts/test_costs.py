#!/usr/bin/env python3
"""test_costs.py FOLDER [--top N]: the cost table of one run of the suites, from the files the pytest
plugin ``tests/costs.py`` wrote into FOLDER (one per pytest process).

Writes costs.md beside FOLDER (the whole table: per test file, per fixture that starts a service, per kind
of process, per suite) and prints the top N files by CPU seconds and the totals. Only the standard
library: it runs with any Python 3.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any


def _memory(machine: dict[str, Any]) -> str:
    """The lowest memory the machine had available while the suites ran (scripts/run-suites.sh)."""
    if "lowest_available_mb" not in machine:
        return ""
    return f", at least {machine['lowest_available_mb']} of {machine['memory_mb']} MB of memory available"


def _table(header: list[str], rows: list[list[object]]) -> list[str]:
    def cell(value: object) -> str:
        return f"{value:.0f}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    runs = [json.loads(p.read_text()) for p in sorted(args.folder.glob("*.json")) if p.name != "machine.json"]
    if not runs:
        print(f"no cost files in {args.folder}", file=sys.stderr)
        return 1
    files: dict[str, dict[str, float]] = defaultdict(
        lambda: {"tests": 0, "jvms": 0, "wall_s": 0.0, "cpu_s": 0.0}
    )
    for run in runs:
        for test in run["tests"]:
            row = files[test["file"]]
            row["tests"] += 1
            row["jvms"] += test.get("jvms", 0)
            row["wall_s"] += test["wall_s"]
            row["cpu_s"] += test["cpu_s"]
    fixtures: dict[str, dict[str, float]] = defaultdict(lambda: {"starts": 0, "wall_s": 0.0, "cpu_s": 0.0})
    for run in runs:
        for fix in run["fixtures"]:
            row = fixtures[f"{run['suite']}: {fix['fixture']}"]
            row["starts"] += 1
            row["wall_s"] += fix["wall_s"]
            row["cpu_s"] += fix["cpu_s"]
    kinds: dict[str, dict[str, float]] = defaultdict(lambda: {"processes": 0, "jvms": 0, "cpu_s": 0.0})
    for run in runs:
        for kind, data in run["kinds"].items():
            for k in ("processes", "jvms", "cpu_s"):
                kinds[kind][k] += data[k]
    suites: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"processes": 0, "tests": defaultdict(int), "wall_s": 0.0, "cpu_s": 0.0}
    )
    for run in runs:  # a process that ran two suites is one row, "airflow+faults", with each one's tests
        row = suites[run["suite"]]
        row["processes"] += not run.get("service")  # a service the suites share: its CPU, no pytest
        for test in run["tests"]:
            row["tests"][Path(test["file"]).parts[1]] += 1
        row["wall_s"] = max(row["wall_s"], run["wall_s"])
        row["cpu_s"] += run["cpu_s"]
    total_cpu = sum(r["cpu_s"] for r in runs)
    jvms = sum(int(k["jvms"]) for k in kinds.values())
    machine_path = args.folder / "machine.json"
    machine = json.loads(machine_path.read_text()) if machine_path.exists() else None

    by_cpu = sorted(files.items(), key=lambda kv: -kv[1]["cpu_s"])
    lines = ["# Where the test suite's time goes", "",
             f"{sum(not r.get('service') for r in runs)} pytest process(es); CPU of the suites' processes and everything they started: "
             f"**{total_cpu:.0f} s**; JVMs started: **{jvms}**." + (
                 f" The whole machine over the suites: {machine['cpu_s']:.0f} CPU s in {machine['wall_s']:.0f} s "
                 f"on {machine['cores']} cores{_memory(machine)}." if machine else ""), "",
             "## Suites (wall: the longest process)", ""]  # fmt: skip
    lines += _table(["suite", "pytest processes", "tests", "wall s", "CPU s"],
                    [[s, int(r["processes"]), " + ".join(str(n) for n in r["tests"].values()) or "0", r["wall_s"], r["cpu_s"]]
                     for s, r in sorted(suites.items())])  # fmt: skip
    lines += ["", "## Test files, by CPU seconds (setup, call and teardown of their tests)", ""]
    lines += [
        "JVMs: those a file's tests started (a session or service a fixture shares is counted in the "
        "test that started it).",
        "",
    ]
    lines += _table(["file", "tests", "JVMs", "wall s", "CPU s"],
                    [[f, int(r["tests"]), int(r["jvms"]), r["wall_s"], r["cpu_s"]] for f, r in by_cpu])  # fmt: skip
    lines += ["", "## Fixtures that start a service or a process (their setup)", ""]
    lines += _table(["suite: fixture", "starts", "wall s", "CPU s"],
                    [[f, int(r["starts"]), r["wall_s"], r["cpu_s"]]
                     for f, r in sorted(fixtures.items(), key=lambda kv: -kv[1]["cpu_s"])])  # fmt: skip
    lines += ["", "## Processes by kind (their whole lifetime's CPU)", ""]
    lines += _table(["kind", "processes", "JVMs", "CPU s"],
                    [[k, int(r["processes"]), int(r["jvms"]), r["cpu_s"]]
                     for k, r in sorted(kinds.items(), key=lambda kv: -kv[1]["cpu_s"])])  # fmt: skip
    out = args.folder.parent / "costs.md"
    out.write_text("\n".join(lines) + "\n")

    print(
        f"== test costs ({out}): {total_cpu:.0f} CPU s in the suites' processes, {jvms} JVMs started"
        + (
            f"; the machine: {machine['cpu_s']:.0f} CPU s over {machine['wall_s']:.0f} s{_memory(machine)}"
            if machine
            else ""
        )
    )
    print(f"{'CPU s':>7} {'wall s':>7} {'tests':>5} {'JVMs':>5}  top {args.top} test files by CPU")
    for name, row in by_cpu[: args.top]:
        print(
            f"{row['cpu_s']:7.0f} {row['wall_s']:7.0f} {int(row['tests']):5d} {int(row['jvms']):5d}  {name}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
