"""`make demo` runs the main job: pipelines/demo.yaml on its own broker and Spark, in a subprocess.
`demo --keep` (a seeded broker left running for Airflow and Dagster) is run by the Airflow suite's
`airflow standalone` test (``tests/airflow/test_scheduler.py``), whose processes get its exports alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def _table(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.split("|")] for line in text.strip().splitlines()[1:]]


def _runs(section: str) -> dict[str, dict[str, str]]:
    lines = [line for line in section.strip().splitlines() if line and not line.startswith("  ")]
    head = lines[0].split()
    rows = [line.split() for line in lines[1:]]
    assert all(len(cells) == len(head) for cells in rows), section
    return {cells[0]: dict(zip(head, cells, strict=True)) for cells in rows}


def test_demo_runs_the_pipeline_twice_and_moves_only_what_changed(jars_dir: Path, tmp_path: Path) -> None:
    env = {**os.environ, "UPSERT_KAFKA_OPS_JARS_DIR": str(jars_dir)}
    env.pop("UPSERT_KAFKA_OPS_SPARK_LOG_LEVEL", None)
    folder = tmp_path / "demo"
    (folder / "warehouse" / "stale").mkdir(parents=True)  # an earlier demo's leftovers
    (folder / ".upsert-kafka-ops-demo").write_text("")
    proc = subprocess.run([sys.executable, "-m", "upsert_kafka_ops.cli", "demo", "--dir", str(folder)],
                          capture_output=True, text=True, env=env, timeout=900, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    # quiet: what is printed is the demo's own; no Spark or Kafka client warnings, no JVM notices
    noise = [
        ln for ln in proc.stderr.splitlines() if " WARN " in ln or "WARNING" in ln or "could not be" in ln
    ]
    assert noise == [], noise[:5]
    summary = out.split("demo: done in ")[1]
    assert f"results: {folder}" in summary and f'load("{folder}/warehouse/users")' in summary
    assert (folder / "warehouse" / "users" / "_delta_log").is_dir()
    assert not (folder / "warehouse" / "stale").exists()
    first = _runs(out.split("round 1: every job builds its target")[1].split("\n\n")[0])
    second = _runs(out.split("round 2: Alice moved, Richard left, 2 more pageviews")[1].split("\n\n")[0])

    assert {j: r["status"] for j, r in {**first, **second}.items()} == dict.fromkeys(first, "succeeded")
    # table -> topic: a snapshot first, then the change data feed (Alice's update, Richard's delete)
    assert (first["publish-users"]["written"], second["publish-users"]["mode"]) == ("4", "incremental")
    assert (second["publish-users"]["written"], second["publish-users"]["tombstones"]) == ("1", "1")
    # topic -> Delta: the second run reads only the two new records, upserts one key, deletes one
    assert (first["users-to-delta"]["mode"], first["users-to-delta"]["upserted"]) == ("full", "4")
    r = second["users-to-delta"]
    assert (r["mode"], r["read"], r["upserted"], r["deleted"]) == ("incremental", "2", "1", "1")
    # PV/UV per region: recomputed (COUNT DISTINCT, upsert source); only changed regions are written
    assert first["pageviews-per-region"]["execution"] == "snapshot"
    r = second["pageviews-per-region"]
    assert (r["written"], r["tombstones"]) == ("2", "1")  # Hangzhou new, Berlin changed, Shanghai gone
    # PV per page: streaming; the second run reads the 2 new pageviews and writes their 2 pages
    assert first["pageviews-per-page"]["execution"] == "streaming"
    r = second["pageviews-per-page"]
    assert (r["read"], r["written"]) == ("2", "2")

    users = out.split("users, in the Delta warehouse table:")[1].split("\n\n")[0]
    assert _table(users) == [
        ["100", "Bob", "Beijing"],
        ["101", "Alice", "Hangzhou"],
        ["102", "Greg", "Berlin"],
    ]
    # the warehouse table verified against the fold of its topic up to its stored offsets
    verified = out.split("verify: ")[1].split("\n")[0]
    assert verified.endswith(
        "3 row(s) in the table, 3 live key(s) in the topic up to the stored offsets: equal."
    )
    # the same topic as a history table: Alice's move ends her Shanghai row and opens a Hangzhou one,
    # Richard's delete ends his; the second run writes those three rows and nothing else
    history = _table(out.split("users_history, every version (history: scd2):")[1].split("\n\n")[0])
    assert [(r[0], r[1], r[2], r[4] == "None", r[5]) for r in history] == [
        ("100", "Bob", "Beijing", True, "True"),
        ("101", "Alice", "Shanghai", False, "False"),
        ("101", "Alice", "Hangzhou", True, "True"),
        ("102", "Greg", "Berlin", True, "True"),
        ("103", "Richard", "Berlin", False, "False"),
    ]
    assert history[1][4] == history[2][3]  # Shanghai ends when Hangzhou begins
    r = second["users-history"]
    assert (r["mode"], r["read"], r["upserted"], r["deleted"]) == ("incremental", "2", "3", "0")
    verified = out.split("verify users-history: ")[1].split("\n")[0]
    assert verified.endswith(
        "3 row(s) in the table, 3 live key(s) in the topic up to the stored offsets: equal."
    )
    regions = out.split("pageviews_per_region, materialized from the topic:")[1].split("\n\n")[0]
    assert _table(regions) == [["Beijing", "2", "1"], ["Berlin", "3", "1"], ["Hangzhou", "2", "1"]]
    pages = out.split("pageviews_per_page, materialized from the topic:")[1].split("\n\n")[0]
    assert _table(pages) == [["10001", "1"], ["10002", "2"], ["10003", "1"], ["10004", "1"], ["10005", "1"],
                             ["10006", "1"]]  # fmt: skip
    # round 3: the continuous job caught up with the topic, then Bob's move (published while it ran)
    # reached its table by a later batch; stopped, it finished that batch and its table is the fold.
    # Its table is new, so its first batch built it whole: the run says full
    third = out.split("round 3: users-live runs continuously")[1].split("\n", 1)[1]
    r = _runs(third.split("\n\n")[0])["users-live"]
    assert (r["status"], r["mode"], r["execution"], r["read"]) == (
        "succeeded",
        "full",
        "continuous",
        "7",
    )
    followed = third.split("  users-live: caught up with the topic in ")[1].split("\n")[0]
    assert " batch(es); Bob's move was in its table " in followed
    live = out.split("users_live, kept by the continuous job:")[1].split("\n\n")[0]
    assert _table(live) == [
        ["100", "Bob", "Shenzhen"],
        ["101", "Alice", "Hangzhou"],
        ["102", "Greg", "Berlin"],
    ]
    verified = out.split("verify users-live: ")[1].split("\n")[0]
    assert verified.endswith(
        "3 row(s) in the table, 3 live key(s) in the topic up to the stored offsets: equal."
    )
    assert "users-live ran continuously" in summary and "warehouse/users_live" in summary


def test_demo_refuses_a_folder_it_did_not_make(jars_dir: Path, tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    env = {**os.environ, "UPSERT_KAFKA_OPS_JARS_DIR": str(jars_dir)}
    proc = subprocess.run([sys.executable, "-m", "upsert_kafka_ops.cli", "demo", "--dir", str(mine)],
                          capture_output=True, text=True, env=env, timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 2
    assert f"The demo folder {mine} holds files the demo did not write" in proc.stderr
    assert (mine / "notes.txt").read_text() == "keep me"
