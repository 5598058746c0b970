"""Real components for the fault suite: a broker of its own (the tests restart it), and the shared
jar cache and SparkSession (``tests/services.py``; in ``make test`` the suite runs after the Airflow
suite in its pytest process, on the same session). The runs under test are threads of this process,
which also produces, restarts the broker, reruns and checks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from upsert_kafka_ops.local import LocalKafka


@pytest.fixture(scope="module")
def kafka(jars_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    with LocalKafka(tmp_path_factory.mktemp("kafka"), jars_dir=jars_dir, heap="512m") as broker:
        yield broker
