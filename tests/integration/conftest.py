"""The integration suite: the shared real components (``tests/services.py``: one broker, one
SparkSession, PostgreSQL, MinIO and a registry per process), and the order its files are dealt to the
two workers of ``make test``.

Nothing here skips: when Java, Maven or the jars are missing, the fixtures raise and the tests fail.
"""

from __future__ import annotations

import pytest

#: the longest files first: make test gives whole files to two workers (--dist loadfile), and a long
#: file handed out last would run alone at the end
LONG_FIRST = ("test_engine_oracle.py", "test_demo.py", "test_jobs_faults.py", "test_spark_submit.py",
              "test_avro_confluent.py")  # fmt: skip


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONG_FIRST)}
    items.sort(
        key=lambda item: rank.get(item.path.name, len(LONG_FIRST))
    )  # stable: the rest keep their order
