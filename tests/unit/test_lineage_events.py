"""OpenLineage run events: shape per the spec, dataset names from the core, transports from the
environment, and nothing that can fail a job."""

from __future__ import annotations

import datetime as dt
import http.server
import json
import logging
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from upsert_kafka_ops.jobs import Pipeline
from upsert_kafka_ops.jobs.datasets import Dataset, job_datasets
from upsert_kafka_ops.jobs.lineage import (
    PRODUCER,
    RUN_EVENT_SCHEMA,
    FileTransport,
    HttpTransport,
    RunLineage,
    Transports,
    driver_lineage,
    new_run_id,
    run_event,
    transport_from_env,
)

TABLE = {"name": "users", "options": {"connector": "upsert-kafka", "topic": "users", "key.format": "json",
         "value.format": "json"}, "columns": [{"name": "id", "type": "BIGINT"}, {"name": "name", "type": "STRING"}],
         "primary_key": ["id"]}  # fmt: skip


def _table(topic: str) -> dict[str, Any]:
    return {**TABLE, "options": {**TABLE["options"], "topic": topic}}


def _pipeline() -> Pipeline:
    return Pipeline.model_validate(
        {
            "connections": {
                "main": {"bootstrap_servers": "Broker-1:9092,broker-2:9092"},
                "other": {"bootstrap_servers": "SASL_SSL://edge:9094"},
            },
            "jobs": [
                {"name": "to-delta", "kind": "materialize",
                 "source": {"connection": "main", "table": _table("users")},
                 "target": {"kind": "delta", "path": "/lake/users"}},
                {"name": "to-pg", "kind": "materialize",
                 "source": {"connection": "main", "table": _table("users")},
                 "target": {"kind": "postgres", "host": "DB", "port": 5433, "database": "wh", "user": "etl",
                            "table": "crm.users"}},
                {"name": "join", "kind": "topic-to-topic",
                 "sources": {"a": {"connection": "main", "table": _table("users")},
                             "b": {"connection": "other", "table": _table("orders")}},
                 "query": "SELECT a.id, b.name FROM a JOIN b ON a.id = b.id",
                 "sink": {"connection": "other", "table": _table("joined")}},
                {"name": "pub", "kind": "publish", "source": {"kind": "delta-cdf", "path": "s3a://bucket/t"},
                 "sink": {"connection": "main", "table": _table("published")}},
                {"name": "back", "kind": "backfill", "source": {"connection": "main", "table": _table("users")},
                 "target": {"kind": "topic", "connection": "other", "table": _table("users-copy")}},
            ],
        }
    )  # fmt: skip


def test_datasets_of_each_kind_of_job_use_the_cores_names() -> None:
    p = _pipeline()
    users = Dataset("kafka://broker-1:9092", "users")
    assert job_datasets(p, "to-delta") == ([users], [Dataset("file", "/lake/users")])
    assert job_datasets(p, "to-pg") == ([users], [Dataset("postgres://db:5433", "wh.crm.users")])
    assert job_datasets(p, "join") == (
        [users, Dataset("kafka://edge:9094", "orders")],  # every source, each on its own cluster
        [Dataset("kafka://edge:9094", "joined")],
    )
    assert job_datasets(p, "pub") == (
        [Dataset("s3://bucket", "t")],
        [Dataset("kafka://broker-1:9092", "published")],
    )
    assert job_datasets(p, "back") == ([users], [Dataset("kafka://edge:9094", "users-copy")])


def test_run_event_follows_the_spec() -> None:
    run_id = new_run_id()
    when = dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=dt.timezone.utc)
    inp, out = Dataset("kafka://b:9092", "users"), Dataset("file", "/lake/users")
    event = run_event("COMPLETE", run_id=run_id, job_name="to-delta", namespace="ns", inputs=[inp], outputs=[out],
                      event_time=when, output_rows={out: 42})  # fmt: skip
    assert set(event) == {
        "eventType",
        "eventTime",
        "run",
        "job",
        "inputs",
        "outputs",
        "producer",
        "schemaURL",
    }
    assert event["eventType"] == "COMPLETE"
    assert event["eventTime"] == "2026-01-02T03:04:05.678Z"
    assert event["run"] == {"runId": run_id, "facets": {}}
    assert (event["job"]["namespace"], event["job"]["name"]) == ("ns", "to-delta")
    job_type = event["job"]["facets"]["jobType"]
    assert (job_type["processingType"], job_type["integration"], job_type["jobType"]) == (
        "BATCH",
        "UPSERT_KAFKA_OPS",
        "JOB",
    )
    assert job_type["_producer"] == PRODUCER and job_type["_schemaURL"].startswith(
        "https://openlineage.io/spec/facets/"
    )
    assert event["inputs"] == [{"namespace": "kafka://b:9092", "name": "users"}]
    (output,) = event["outputs"]
    assert (output["namespace"], output["name"]) == ("file", "/lake/users")
    assert output["outputFacets"]["outputStatistics"]["rowCount"] == 42
    assert event["producer"] == PRODUCER and event["schemaURL"] == RUN_EVENT_SCHEMA
    assert json.loads(json.dumps(event)) == event  # plain JSON


def test_fail_event_carries_the_error_and_run_ids_are_uuid7() -> None:
    run_id = new_run_id()
    parsed = uuid.UUID(run_id)
    assert parsed.version == 7 and parsed.variant == uuid.RFC_4122
    ms = parsed.int >> 80
    now_ms = dt.datetime.now(dt.timezone.utc).timestamp() * 1000
    assert abs(ms - now_ms) < 3_600_000  # the embedded time is this hour's, not a random number
    event = run_event("FAIL", run_id=run_id, job_name="j", error="OffsetsError: stored offset 9 is beyond 3")
    facet = event["run"]["facets"]["errorMessage"]
    assert (facet["message"], facet["programmingLanguage"]) == (
        "OffsetsError: stored offset 9 is beyond 3",
        "python",
    )
    assert event["job"]["namespace"] == "upsert-kafka-ops"
    assert (event["inputs"], event["outputs"]) == ([], [])
    with pytest.raises(ValueError, match="timezone"):
        run_event("START", run_id=run_id, job_name="j", event_time=dt.datetime(2026, 1, 1))
    with pytest.raises(ValueError):
        run_event("START", run_id="not-a-uuid", job_name="j")


def test_transport_from_the_environment() -> None:
    assert transport_from_env({}) is None
    http = transport_from_env({"OPENLINEAGE_URL": "http://marquez:5000/", "OPENLINEAGE_API_KEY": "k"})
    assert isinstance(http, HttpTransport)
    assert http.target == "http://marquez:5000/api/v1/lineage" and http.api_key == "k"
    assert "k" not in repr(http)
    custom = transport_from_env({"OPENLINEAGE_URL": "http://m", "OPENLINEAGE_ENDPOINT": "/events",
                                 "UKO_OPENLINEAGE_TIMEOUT": "2.5"})  # fmt: skip
    assert isinstance(custom, HttpTransport) and (custom.target, custom.timeout_s) == ("http://m/events", 2.5)
    file = transport_from_env({"UKO_OPENLINEAGE_FILE": "/tmp/ol.jsonl"})
    assert file == FileTransport(Path("/tmp/ol.jsonl"))
    both = transport_from_env({"OPENLINEAGE_URL": "http://m", "UKO_OPENLINEAGE_FILE": "/tmp/ol.jsonl"})
    assert isinstance(both, Transports) and len(both.items) == 2
    assert transport_from_env({"UKO_OPENLINEAGE_FILE": "/tmp/x", "OPENLINEAGE_DISABLED": "true"}) is None


def test_a_run_writes_start_then_complete_with_one_run_id(tmp_path: Path) -> None:
    path = tmp_path / "events" / "ol.jsonl"
    env = {"UKO_OPENLINEAGE_FILE": str(path), "OPENLINEAGE_NAMESPACE": "prod"}
    lineage = RunLineage.from_env(_pipeline(), "to-pg", env)
    assert lineage is not None
    lineage.start()
    lineage.complete({"rows_upserted": 5, "rows_deleted": 2})
    start, complete = (json.loads(line) for line in path.read_text().splitlines())
    assert [start["eventType"], complete["eventType"]] == ["START", "COMPLETE"]
    assert start["run"]["runId"] == complete["run"]["runId"]
    assert start["job"] == complete["job"] and start["job"]["namespace"] == "prod"
    assert complete["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 7
    assert "outputFacets" not in start["outputs"][0]
    assert RunLineage.from_env(_pipeline(), "to-pg", {}) is None  # nothing configured: no events


def test_an_unreachable_endpoint_only_logs_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    from upsert_kafka_ops.local.process import free_port

    port = free_port()  # nothing listens there
    lineage = RunLineage(HttpTransport(f"http://127.0.0.1:{port}", timeout_s=2), _pipeline(), "to-delta")
    with caplog.at_level(logging.WARNING, logger="upsert_kafka_ops.lineage"):
        lineage.fail("boom")
    assert any(
        "FAIL event not sent" in r.getMessage() and str(port) in r.getMessage() for r in caplog.records
    )


def test_http_transport_posts_the_event_as_json() -> None:
    received: list[tuple[str, str, dict[str, Any]]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, self.headers["Content-Type"], json.loads(body)))
            self.send_response(201)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        transport = transport_from_env({"OPENLINEAGE_URL": f"http://127.0.0.1:{server.server_address[1]}"})
        assert transport is not None
        RunLineage(transport, _pipeline(), "join").start()
    finally:
        server.shutdown()
        server.server_close()
    ((path, content_type, event),) = received
    assert (path, content_type) == ("/api/v1/lineage", "application/json")
    assert event["eventType"] == "START" and event["job"]["name"] == "join"
    assert [d["name"] for d in event["inputs"]] == ["users", "orders"]


def test_the_driver_emits_only_outside_airflow(tmp_path: Path) -> None:
    spec = {"pipeline": _pipeline().only("to-delta").to_json_dict(), "job": "to-delta"}
    env = {"UKO_OPENLINEAGE_FILE": str(tmp_path / "ol.jsonl")}
    lineage = driver_lineage(spec, env)
    assert lineage is not None and lineage.job == "to-delta"
    assert lineage.inputs == [Dataset("kafka://broker-1:9092", "users")]
    # spark-submit started from an Airflow task inherits AIRFLOW_CTX_*: the operator owns the lineage
    assert driver_lineage(spec, {**env, "AIRFLOW_CTX_DAG_ID": "dag"}) is None
    assert driver_lineage(spec, {}) is None
    assert driver_lineage({"pipeline": {"jobs": "not a pipeline"}}, env) is None  # never raises
