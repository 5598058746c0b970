"""`make demo` runs the main job: the CLI's demo on its own broker and Spark, in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_demo_prints_flip149_tables_and_writes_only_changed_regions(jars_dir: Path) -> None:
    env = {**os.environ, "UPSERT_KAFKA_OPS_JARS_DIR": str(jars_dir)}
    proc = subprocess.run(
        [sys.executable, "-m", "upsert_kafka_ops.cli", "demo"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    users = out.split("users, materialized from the topic:")[1].split("metrics:")[0]
    rows = [line.split("|") for line in users.strip().splitlines()[1:]]
    assert [[c.strip() for c in r] for r in rows] == [
        ["100", "Bob", "Beijing"],
        ["101", "Alice", "Hangzhou"],
        ["102", "Greg", "Berlin"],
    ]
    second = out.split("writes only the regions that changed")[1].splitlines()[1]
    assert "records_out=1," in second  # only Berlin changed
    regions = out.split("pageviews_per_region, materialized from the topic:")[1].strip().splitlines()[1:]
    assert [[c.strip() for c in r.split("|")] for r in regions] == [
        ["Beijing", "2", "1"],
        ["Berlin", "3", "1"],
        ["Hangzhou", "2", "1"],
    ]
