"""``kind: maintain`` as a user writes it: ``job:`` names the writer and brings its target (catalog,
store and jars with it), each refusal names its field and fix, and the job reads no topic (no lag,
no sensor, no asset of its own)."""

from __future__ import annotations

from typing import Any

import pytest

from upsert_kafka_ops.engine.session import spark_conf
from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.jobs import Pipeline
from upsert_kafka_ops.jobs.datasets import job_datasets
from upsert_kafka_ops.jobs.lag import lag_jobs, pipeline_lag_names
from upsert_kafka_ops.pipeline import MaintainJob

SOURCE = {"connection": "main", "table": {"ddl": (
    "CREATE TABLE users (id BIGINT, name STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ("
    "'connector' = 'upsert-kafka', 'topic' = 'users', 'key.format' = 'json', 'value.format' = 'json')")}}  # fmt: skip
ICEBERG = {"kind": "iceberg", "catalog": "lake", "table": "crm.users"}
PG = {"kind": "postgres", "host": "db", "database": "dw", "user": "etl", "table": "users"}


def _pipeline(*jobs: dict[str, Any], target: dict[str, Any] = ICEBERG) -> Pipeline:
    writer = {"name": "users", "kind": "materialize", "source": SOURCE, "target": target}
    return Pipeline.model_validate({
        "connections": {"main": {"bootstrap_servers": "b:9092"}},
        "storage": {"s3": {"endpoint": "http://127.0.0.1:9000"}},
        "catalogs": {"lake": {"type": "hadoop", "warehouse": "s3a://lake/wh", "storage": "s3"}},
        "jobs": [writer, *jobs],
    })  # fmt: skip


def test_job_names_the_writer_and_brings_its_target_catalog_store_and_jars() -> None:
    pipe = _pipeline({"name": "tidy", "kind": "maintain", "job": "users", "schedule": "@daily"})
    tidy = pipe.job("tidy")
    assert isinstance(tidy, MaintainJob)
    assert tidy.target == pipe.job("users").target  # type: ignore[union-attr]
    assert (tidy.compact, tidy.expire, tidy.retain_hours) == (True, True, 168)
    alone = pipe.only("tidy")  # what spark-submit's driver gets: the job with its catalog and store
    assert (
        [j.name for j in alone.jobs] == ["tidy"]
        and set(alone.catalogs) == {"lake"}
        and set(alone.storage) == {"s3"}
    )
    assert pipe.jar_groups("tidy") == ("spark", "s3", "iceberg")
    assert Pipeline.from_yaml(pipe.to_yaml()).job("tidy") == tidy  # the written file reads back the same


def test_it_reads_no_topic_so_it_has_no_lag_and_reads_its_table() -> None:
    pipe = _pipeline({"name": "tidy", "kind": "maintain", "job": "users"})
    assert lag_jobs(pipe) == ["users"]
    with pytest.raises(SpecError, match="'tidy' is a maintain job: it reads no topic"):
        pipeline_lag_names(pipe, ["tidy"])
    inputs, outputs = job_datasets(pipe, "tidy")
    assert outputs == [] and inputs == job_datasets(pipe, "users")[1]


@pytest.mark.parametrize(
    ("job", "target", "field", "says"),
    [
        ({"job": "nope"}, ICEBERG, "jobs.1.job", "'nope' is not a materialize or backfill job"),
        ({"job": "tidy"}, ICEBERG, "jobs.1.job", "'tidy' is not a materialize or backfill job"),
        (
            {"job": "users", "target": {"kind": "delta", "path": "/t"}},
            ICEBERG,
            "jobs.1.target",
            "give one of",
        ),
        ({"job": "users"}, {"kind": "parquet", "path": "/p"}, "target", "rewritten whole by every run"),
        ({"job": "users", "compact": False, "expire": False}, ICEBERG, "compact", "would do nothing"),
        ({"job": "users", "retain_hours": -1}, ICEBERG, "retain_hours", "greater than or equal to 0"),
        ({"job": "users", "compact": False}, PG, "compact", "expire has nothing to do there"),
        ({"job": "users", "cluster": True}, ICEBERG, "cluster", "only a Delta table is clustered"),
        ({"job": "users", "cluster": True}, PG, "cluster", "drop cluster, or maintain a Delta table"),
        (
            {"job": "users", "cluster": True, "cluster_file_mb": 0},
            {"kind": "delta", "path": "/t"},
            "cluster_file_mb",
            "greater than 0",
        ),
    ],
)
def test_refusals_name_the_field_and_the_fix(
    job: dict[str, Any], target: dict[str, Any], field: str, says: str
) -> None:
    with pytest.raises(SpecError) as info:
        _pipeline({"name": "tidy", "kind": "maintain", **job}, target=target)
    assert says in str(info.value)
    assert field in str(info.value)


def test_cluster_alone_is_a_job_and_its_file_size_is_in_megabytes() -> None:
    pipe = _pipeline(
        {
            "name": "tidy",
            "kind": "maintain",
            "job": "users",
            "compact": False,
            "expire": False,
            "cluster": True,
        },
        target={"kind": "delta", "path": "/t"},
    )
    tidy = pipe.job("tidy")
    assert isinstance(tidy, MaintainJob) and (tidy.cluster, tidy.cluster_file_mb) == (True, 2)


def test_a_maintain_job_of_a_topic_to_topic_job_is_refused() -> None:
    sink = {"connection": "main", "table": {"ddl": SOURCE["table"]["ddl"].replace("'users'", "'out'")}}  # type: ignore[index]
    t2t = {"name": "copy", "kind": "topic-to-topic", "sources": {"u": SOURCE}, "query": "SELECT * FROM u",
           "sink": sink}  # fmt: skip
    with pytest.raises(
        SpecError, match="'copy' is a topic-to-topic job: it writes no warehouse table"
    ) as info:
        _pipeline(t2t, {"name": "tidy", "kind": "maintain", "job": "copy"})
    assert "jobs.2.job" in str(info.value) and "name a materialize or backfill job" in str(info.value)


def test_a_session_with_the_iceberg_jars_parses_icebergs_procedures() -> None:
    assert (
        spark_conf(jar_groups=("spark",))["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    )
    assert spark_conf(jar_groups=("spark", "iceberg"))["spark.sql.extensions"].split(",") == [
        "io.delta.sql.DeltaSparkSessionExtension",
        "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
    ]
