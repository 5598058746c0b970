"""The core imports without Airflow, Dagster, pyspark or a JVM (DESIGN.md §2)."""

from __future__ import annotations

import subprocess
import sys

BLOCKER = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"airflow", "dagster", "pyspark", "delta", "py4j"}:
            raise ImportError(f"blocked for this test: {name}")
        return None
sys.meta_path.insert(0, Block())
"""


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", BLOCKER + code], capture_output=True, text=True, check=False)


def test_core_modules_import_without_orchestrators_or_spark() -> None:
    proc = _run(
        "import upsert_kafka_ops, upsert_kafka_ops.jars, upsert_kafka_ops.cli, upsert_kafka_ops.errors,"
        " upsert_kafka_ops.kafka, upsert_kafka_ops.local, upsert_kafka_ops.runtime, upsert_kafka_ops.spec.table,"
        " upsert_kafka_ops.spec.ddl, upsert_kafka_ops.engine, upsert_kafka_ops.formats.codecs; print('ok')"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_the_blocker_really_blocks() -> None:
    proc = _run("import pyspark")
    assert proc.returncode != 0
    assert "blocked for this test: pyspark" in proc.stderr
