"""Airflow tests: Airflow 3.3 with a SQLite metadata DB in a temporary folder, connections from
``AIRFLOW_CONN_*``, and the shared real broker and Spark (``tests/services.py``; never mocked,
never skipped).

Airflow reads its configuration when first imported, so the environment is set here, before any
test module imports it.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

_HOME = Path(tempfile.mkdtemp(prefix="uko-airflow-home-"))
atexit.register(shutil.rmtree, _HOME, ignore_errors=True)
ROOT = Path(__file__).resolve().parents[2]
os.environ.update(
    {
        "AIRFLOW_HOME": str(_HOME),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{_HOME / 'airflow.db'}",
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(_HOME / "logs"),
    }
)

from tests.shared_broker import SCRAM_USERS  # noqa: E402

from upsert_kafka_ops.local import LocalKafka  # noqa: E402

PASSWORD = SCRAM_USERS["alice"]


@pytest.fixture(scope="session")
def airflow_home() -> Path:
    return _HOME


@pytest.fixture(scope="session")
def airflow_db(airflow_home: Path) -> Path:
    """The SQLite metadata DB, migrated once (``dag.test()`` needs it; operators and triggers do not)."""
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "airflow"), "db", "migrate"],
        capture_output=True, text=True, env=dict(os.environ), check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return airflow_home / "airflow.db"


def sasl_extra(broker: LocalKafka) -> dict[str, str]:
    """A kafka connection's extra (librdkafka keys) for the broker's SCRAM listener."""
    return {
        "bootstrap.servers": broker.sasl_bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "alice",
        "sasl.password": PASSWORD,
    }


@pytest.fixture(scope="session")
def kafka_default(kafka: LocalKafka) -> Iterator[dict[str, str]]:
    """``kafka_default`` as an Airflow connection from the environment: SASL with a password."""
    extra = sasl_extra(kafka)
    os.environ["AIRFLOW_CONN_KAFKA_DEFAULT"] = json.dumps({"conn_type": "kafka", "extra": extra})
    yield extra
    os.environ.pop("AIRFLOW_CONN_KAFKA_DEFAULT", None)
