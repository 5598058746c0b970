"""Prometheus exposition, JSON documents and OpenLineage names of lag and run results (no broker)."""

from __future__ import annotations

import json

import pytest

from upsert_kafka_ops.engine.results import RunResult
from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.jobs.datasets import kafka_dataset, postgres_dataset, table_dataset
from upsert_kafka_ops.kafka.admin import TopicInfo
from upsert_kafka_ops.kafka.evaluation import check
from upsert_kafka_ops.kafka.lag import LagReport, PartitionLag, estimate_time
from upsert_kafka_ops.metrics import (
    Exposition,
    lag_document,
    lag_exposition,
    run_document,
    run_result_exposition,
)
from upsert_kafka_ops.spec.connection import KafkaConnection


def _report() -> LagReport:
    return LagReport(
        group='g"1',
        isolation="read_committed",
        observed_at=1000.0,
        partitions=(
            PartitionLag("t", 0, 5, 0, 12, 7, time_lag_s=2.5, time_lag_method="record"),
            PartitionLag("t", 1, None, 3, 3, 0, time_lag_method="no-commit"),
            PartitionLag("u", 0, None, 2, 9, 7, time_lag_s=4.0, time_lag_method="record"),
        ),
        topics={"t": TopicInfo("t", "id", 2), "u": TopicInfo("u", "id-u", 1)},
    )


def test_lag_exposition_text() -> None:
    report = _report()
    status, _ = check(None, report)
    text = lag_exposition(report, status).render()
    assert "# TYPE upsert_kafka_ops_consumer_lag_records gauge" in text
    assert 'upsert_kafka_ops_consumer_lag_records{group="g\\"1",topic="t",partition="0"} 7' in text
    assert (
        'partition="1"} '
        not in text.split("# HELP upsert_kafka_ops_consumer_committed_offset")[1].split("# HELP")[0]
    )
    assert 'upsert_kafka_ops_consumer_lag_seconds{group="g\\"1",topic="t",partition="0"} 2.5' in text
    assert (
        'upsert_kafka_ops_partition_end_offset{topic="t",partition="1",isolation="read_committed"} 3' in text
    )
    # a partition never committed, with records to read: its lag counts, it has no committed offset
    assert 'upsert_kafka_ops_consumer_lag_records{group="g\\"1",topic="u",partition="0"} 7' in text
    assert 'upsert_kafka_ops_consumer_lag_seconds{group="g\\"1",topic="u",partition="0"} 4' in text
    committed = text.split("# HELP upsert_kafka_ops_consumer_committed_offset")[1].split("# HELP")[0]
    assert 'topic="u"' not in committed and 'topic="t",partition="0"} 5' in committed
    assert 'upsert_kafka_ops_consumer_group_lag_records{group="g\\"1"} 14' in text
    assert 'upsert_kafka_ops_consumer_group_status{group="g\\"1",status="WARN"} 1' in text
    assert 'upsert_kafka_ops_consumer_group_status{group="g\\"1",status="ERR"} 0' in text
    assert text.endswith("\n") and "\n\n" not in text


def test_exposition_rules() -> None:
    exp = Exposition()
    with pytest.raises(ValueError, match="_total"):
        exp.add("things", "counter", "h", 1)
    exp.add("things_total", "counter", "h", 1, {"l": "a\\b\nc"})
    with pytest.raises(ValueError, match="already a counter"):
        exp.add("things_total", "gauge", "h", 1)
    exp.add("ratio", "gauge", "h", float("nan"))
    assert exp.render() == (
        "# HELP upsert_kafka_ops_things_total h\n# TYPE upsert_kafka_ops_things_total counter\n"
        'upsert_kafka_ops_things_total{l="a\\\\b\\nc"} 1\n'
        "# HELP upsert_kafka_ops_ratio h\n# TYPE upsert_kafka_ops_ratio gauge\nupsert_kafka_ops_ratio NaN\n"
    )


def test_run_result_exposition_and_document() -> None:
    result = RunResult(
        operation="materialize", topics=["users"], records_in=10, bytes_in=900, records_out=4,
        bytes_out=300, duration_s=1.25, end_offsets={"users": {"0": 10, "1": 3}},
    )  # fmt: skip
    text = run_result_exposition(result, job="users-job").render()
    labels = '{pipeline_job="users-job",operation="materialize"}'
    assert f"upsert_kafka_ops_run_records_in_total{labels} 10" in text
    assert f"upsert_kafka_ops_run_bytes_out_total{labels} 300" in text
    assert f"upsert_kafka_ops_run_duration_seconds{labels} 1.25" in text
    assert (
        'upsert_kafka_ops_run_end_offset{pipeline_job="users-job",operation="materialize",topic="users",partition="1"} 3'
        in text
    )
    assert run_result_exposition(result.to_dict(), job="users-job").render() == text
    assert run_document(result)["result"]["records_in"] == 10
    doc = json.loads(json.dumps(lag_document(_report())))
    assert doc["report"]["total_lag"] == 14 and doc["status"] is None and doc["version"] == 1


def test_lineage_dataset_names() -> None:
    assert kafka_dataset("Broker-1:9092,broker-2:9092", "users").to_dict() == {
        "namespace": "kafka://broker-1:9092",
        "name": "users",
    }
    conn = KafkaConnection(bootstrap_servers="b:9093")
    assert kafka_dataset(conn, "t").namespace == "kafka://b:9093"
    assert table_dataset("/data/delta/users") == table_dataset("file:///data/delta/users")
    assert table_dataset("/data/delta/users").to_dict() == {"namespace": "file", "name": "/data/delta/users"}
    assert table_dataset("s3a://bucket/warehouse/users/").to_dict() == {
        "namespace": "s3://bucket",
        "name": "warehouse/users",
    }
    assert table_dataset("hdfs://nn:8020/w/users").name == "/w/users"
    assert table_dataset("postgresql://db.local:5433/shop.public.users").to_dict() == {
        "namespace": "postgres://db.local:5433",
        "name": "shop.public.users",
    }
    assert postgres_dataset("DB", 5432, "shop", "public", "users").namespace == "postgres://db:5432"
    uris = {
        "/data/delta/users": "file:///data/delta/users",
        "s3a://bucket/warehouse/users/": "s3://bucket/warehouse/users",
        "hdfs://nn:8020/w/users": "hdfs://nn:8020/w/users",
        "postgresql://db.local:5433/shop.public.users": "postgres://db.local:5433/shop.public.users",
    }
    assert {u: table_dataset(u).uri for u in uris} == uris
    assert kafka_dataset("Broker-1:9092", "users").uri == "kafka://broker-1:9092/users"
    with pytest.raises(SpecError):
        table_dataset("relative/path")
    with pytest.raises(SpecError):
        kafka_dataset("no-port", "t")


def test_time_estimate_from_points() -> None:
    points = [(100, 1000.0), (200, 2000.0)]
    # kafka-lag-exporter's worked example: offset 150 -> 1500 (interpolated, within 1000 s)
    est = estimate_time(points, 150)
    assert est is not None and (est.time, est.method, est.tolerance_s) == (1500.0, "interpolated", 1000.0)
    assert estimate_time(points, 250) is not None and estimate_time(points, 250).method == "caught-up"  # type: ignore[union-attr]
    early = estimate_time(points, 50)
    assert early is not None and (early.time, early.method, early.tolerance_s) == (
        500.0,
        "extrapolated",
        None,
    )
    assert estimate_time([(100, 1.0), (100, 2.0)], 50) is None  # flat table: no division by zero
    assert estimate_time([(100, 1.0)], 50) is None
