"""The README's Python quick start, run as written against the suite's broker and Spark."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from tests.integration.oracle import decode_json, fold, read_all

from upsert_kafka_ops.local import LocalKafka

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

README = Path(__file__).resolve().parents[2] / "README.md"


def quick_start() -> str:
    section = README.read_text(encoding="utf-8").split("## Quick start in Python\n", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_quick_start_is_five_lines_an_import_and_four_statements() -> None:
    code = quick_start()
    statements = [ln for ln in code.splitlines() if ln and not ln.startswith((" ", "from "))]
    assert code.startswith("from upsert_kafka_ops import ")
    assert len(statements) == 4, statements


def test_the_readme_quick_start_runs(
    kafka: LocalKafka,
    spark: SparkSession,
    new_topic: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic = new_topic(partitions=2, config={"cleanup.policy": "compact"})
    code = quick_start()
    # the documented broker and topic become the suite's own
    assert code.count('"127.0.0.1:9092"') == 1 and code.count("'topic' = 'users'") == 1
    code = code.replace("127.0.0.1:9092", kafka.bootstrap_servers).replace("'users'", f"'{topic}'")

    exec(compile(code, str(README), "exec"), {})  # the session fixture is the one build_spark_session returns

    shown = capsys.readouterr().out.splitlines()
    assert shown[1].split("|")[1:3] == [" id", " name"]
    assert sorted(shown[3:5]) == ["|  1|Alice|", "|  2|  Bob|"]
    records = read_all(kafka.bootstrap_servers, [topic])
    assert len(records) == 2
    assert fold(records, lambda k: json.loads(k)["id"], decode_json) == {
        1: {"id": 1, "name": "Alice"},
        2: {"id": 2, "name": "Bob"},
    }
