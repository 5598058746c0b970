"""The pipeline's ``catalogs`` section and Iceberg targets: what is refused (with the field and the
fix), what a driver receives, and what Spark and pyiceberg are given."""

from __future__ import annotations

from typing import Any

import pytest
from tests.unit.test_storage_spec import LAKE, SOURCE

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.jobs import Pipeline
from upsert_kafka_ops.jobs.datasets import job_datasets

JDBC = {"type": "jdbc", "uri": "jdbc:postgresql://db:5432/iceberg?sslmode=require", "user": "ice",
        "password": "env:ICE_PW", "warehouse": "s3a://lake/iceberg", "storage": "lake"}  # fmt: skip


def _pipeline(catalogs: dict[str, Any], target: dict[str, Any] | None = None) -> Pipeline:
    return Pipeline.model_validate({
        "connections": {"main": {"bootstrap_servers": "127.0.0.1:9092"}},
        "storage": {"lake": LAKE, "other": LAKE},
        "catalogs": catalogs,
        "jobs": [{"name": "u", "kind": "materialize", "source": SOURCE,
                  "target": target or {"kind": "iceberg", "catalog": "lake", "table": "crm.users"}},
                 {"name": "v", "kind": "materialize", "source": SOURCE,
                  "target": {"kind": "delta", "path": "/tmp/v"}}],
    })  # fmt: skip


@pytest.mark.parametrize(
    ("catalog", "target", "field", "fix"),
    [
        ({**JDBC, "uri": None}, None, "uri", "jdbc:postgresql://host:5432/database"),
        ({**JDBC, "uri": "jdbc:mysql://db/iceberg"}, None, "uri", "PostgreSQL"),
        ({**JDBC, "user": None}, None, "user", "add user"),
        ({"type": "hadoop", "warehouse": "/wh", "user": "ice"}, None, "user", "type: jdbc"),
        ({"type": "hadoop", "warehouse": "s3://lake/wh"}, None, "warehouse", "s3a://"),
        ({"type": "hadoop", "warehouse": "/wh", "storage": "lake"}, None, "storage", "remove"),
        ({**JDBC, "storage": "lakee"}, None, "catalogs.lake.storage", "defined: lake, other"),
        (
            JDBC,
            {"kind": "iceberg", "catalog": "lakee", "table": "crm.users"},
            "jobs.0.target.catalog",
            "lake",
        ),
        (JDBC, {"kind": "iceberg", "catalog": "lake", "table": "users"}, "table", "namespace.table"),
        (JDBC, {"kind": "iceberg", "catalog": "lake", "table": "crm.user-s"}, "table", "db.orders"),
    ],
)
def test_a_catalog_or_iceberg_target_that_cannot_work_is_refused_with_the_field_and_the_fix(
    catalog: dict[str, Any], target: dict[str, Any] | None, field: str, fix: str
) -> None:
    with pytest.raises(SpecError) as info:
        _pipeline({"lake": {k: v for k, v in catalog.items() if v is not None}}, target)
    assert field in info.value.field and fix in str(info.value)


def test_an_iceberg_job_brings_its_jars_catalog_and_store_and_nothing_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pipeline = _pipeline({"lake": JDBC, "unused": {"type": "hadoop", "warehouse": "/wh"}})
    assert pipeline.jar_groups("u") == ("spark", "s3", "iceberg")
    assert pipeline.jar_groups("v") == ("spark",)
    driver = pipeline.only("u")  # what a spark-submit driver receives
    assert (set(driver.catalogs), set(driver.storage)) == ({"lake"}, {"lake"})
    target = driver.job("u").target  # type: ignore[union-attr]
    assert driver.location_of(target) == "s3a://lake/iceberg/crm/users"
    assert driver.storage_of(target) == pipeline.storage["lake"]
    # the password stays a reference in the file a driver gets, and leaves no trace in reprs
    monkeypatch.setenv("ICE_PW", "s3cr3t-pw")
    assert "s3cr3t-pw" not in driver.to_yaml() + repr(driver) + str(driver.catalogs)
    name, catalog = driver.catalog_of(target)  # type: ignore[arg-type]
    conf = catalog.spark_conf(name)
    assert conf["spark.sql.catalog.lake"] == "org.apache.iceberg.spark.SparkCatalog"
    assert (conf["spark.sql.catalog.lake.type"], conf["spark.sql.catalog.lake.jdbc.password"]) == (
        "jdbc",
        "s3cr3t-pw",
    )
    url = catalog.sqlalchemy_url()
    assert (url.drivername, url.host, url.port, url.database, dict(url.query)) == (
        "postgresql+psycopg", "db", 5432, "iceberg", {"sslmode": "require"})  # fmt: skip
    assert "s3cr3t-pw" not in repr(url)
    # OpenLineage (Airflow's assets, Dagster's keys) names an Iceberg table by its location
    _, outputs = job_datasets(pipeline, "u")
    assert [d.uri for d in outputs] == ["s3://lake/iceberg/crm/users"]


def test_a_local_hadoop_catalog_and_its_own_catalog_name() -> None:
    pipeline = _pipeline({"lake": {"type": "hadoop", "warehouse": "/data/wh", "catalog_name": "prod"}})
    name, catalog = pipeline.catalog_of(pipeline.job("u").target)  # type: ignore[arg-type]
    assert name == "prod" and "spark.sql.catalog.prod.warehouse" in catalog.spark_conf(name)
    # a warm session sees the commits other processes made: no cached tables
    assert catalog.spark_conf(name)["spark.sql.catalog.prod.cache-enabled"] == "false"
    assert pipeline.location_of(pipeline.job("u").target) == "file:///data/wh/crm/users"  # type: ignore[union-attr]
    assert pipeline.jar_groups("u") == ("spark", "iceberg")
