"""What an incremental run into an Iceberg table (a Hadoop catalog in a folder) reports: Iceberg's MERGE
returns no counts, so the run counts the keys it deletes itself, before the MERGE takes them out. A
tombstone for a key the table holds counts; one for a key it never held does not; a key deleted and
written again in the same run is an upsert."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from tests.integration.jobs_support import oracle_table, produce, rows_as_table, source

from upsert_kafka_ops.engine import source as engine_source
from upsert_kafka_ops.jobs import Pipeline, run_job
from upsert_kafka_ops.jobs.targets import read_target
from upsert_kafka_ops.local import LocalKafka


def _row(k: int, name: str) -> dict[str, Any]:
    return {"name": name, "region": ("Berlin", "Paris")[k % 2], "score": k / 4}


def test_an_iceberg_run_counts_the_keys_it_deletes(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Both ways of counting, one run each on the same table: a filter on the deleted values when the
    fold here holds the rows (a key of one integer or string column), then a join with the broadcast
    deleted keys when Spark folded them."""
    servers, topic = kafka.bootstrap_servers, new_topic(partitions=2)
    catalogs = {"files": {"type": "hadoop", "warehouse": str(tmp_path / "lake"),
                          "catalog_name": f"files_{uuid.uuid4().hex[:8]}"}}  # fmt: skip
    job = {"name": "users", "kind": "materialize", "source": source(topic, servers),
           "target": {"kind": "iceberg", "catalog": "files", "table": "crm.users"}}  # fmt: skip
    p = Pipeline.model_validate({"connections": {"main": {"bootstrap_servers": servers}}, "catalogs": catalogs,
                                 "jobs": [job]})  # fmt: skip

    def rows() -> dict[int, tuple[str, str, str]]:
        got = read_target(spark, p, p.job("users").target).select("id", "name", "region", "score").collect()  # type: ignore[union-attr,arg-type]
        return rows_as_table(got)

    produce(servers, topic, [(k, _row(k, "first")) for k in range(10)])
    assert run_job(p, spark=spark).rows_upserted == 10
    # folded here: a filter on the deleted values
    produce(servers, topic, [
        (3, None), (5, None),  # held: deleted
        (42, None),  # never held: not a deletion
        (1, _row(1, "second")), (11, _row(11, "new")),  # an update and an insert
        (7, None), (7, _row(7, "again")),  # deleted, then written again: its last change, an upsert
        (9, _row(9, "second")), (9, None),  # written, then deleted: a deletion
    ])  # fmt: skip
    result = run_job(p, spark=spark, mode="incremental")
    assert (result.rows_upserted, result.rows_deleted) == (3, 3)
    assert rows() == oracle_table(servers, topic)
    assert sorted(rows()) == [0, 1, 2, 4, 6, 7, 8, 11]
    # folded by Spark: a join with the broadcast deleted keys
    monkeypatch.setattr(engine_source, "SMALL_RANGE", 0)
    produce(servers, topic, [(0, None), (3, None), (8, _row(8, "second")), (2, None), (2, _row(2, "back"))])
    result = run_job(p, spark=spark, mode="incremental")
    assert (result.rows_upserted, result.rows_deleted) == (2, 1)  # 3 was deleted already
    assert rows() == oracle_table(servers, topic)
    assert sorted(rows()) == [1, 2, 4, 6, 7, 8, 11]
