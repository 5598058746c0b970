"""The core imports without Airflow, Dagster, pyspark or a JVM (docs/architecture.md, its layers)."""

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


TOP_LEVEL = (
    "UpsertKafkaTable, KafkaTable, KafkaConnection, SecretRef, Pipeline, run_job, materialize, read_changelog,"
    " write_append, write_changelog, write_snapshot, build_spark_session"
)


def test_importing_the_package_loads_nothing_heavy() -> None:
    proc = _run(
        "import sys, upsert_kafka_ops\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'pydantic', 'confluent_kafka', 'yaml', 'pyspark'})\n"
        "print(heavy)"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_the_top_level_names_import_without_spark_and_are_the_modules_own() -> None:
    proc = _run(
        f"from upsert_kafka_ops import {TOP_LEVEL}\n"
        "import upsert_kafka_ops, upsert_kafka_ops.engine.source as source, upsert_kafka_ops.jobs.run as run\n"
        "assert materialize is source.materialize and run_job is run.run_job\n"
        "assert set(upsert_kafka_ops.__all__) <= set(dir(upsert_kafka_ops))\n"
        f"assert sorted(upsert_kafka_ops.__all__) == sorted('{TOP_LEVEL}'.split(', '))\n"
        "print('ok')"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_an_unknown_top_level_name_is_an_attribute_error() -> None:
    proc = _run(
        "import upsert_kafka_ops\ntry:\n    upsert_kafka_ops.materialise\nexcept AttributeError as e:\n    print(e)"
    )
    assert proc.stdout.strip() == "module 'upsert_kafka_ops' has no attribute 'materialise'"
