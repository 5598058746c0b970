"""Each run's metrics in node_exporter's textfile-collector folder (real files, parsed with
prometheus_client's own parser); the Pushgateway half runs against a real gateway in
tests/integration/test_prometheus.py."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from upsert_kafka_ops.jobs.core import JobResult
from upsert_kafka_ops.metrics.run_export import export_run, textfile_names


def _samples(path: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(path.read_text())
        for s in family.samples
    }


def _result() -> JobResult:
    return JobResult(
        job="users-to-delta", kind="materialize", run=3, records_read=120, rows_upserted=80, rows_deleted=7,
        read={"operation": "materialize", "records_in": 120, "bytes_in": 9000, "tombstones_in": 7,
              "distinct_keys": 87, "parse_errors_skipped": 0},
        end_offsets={"users": {"0": 70, "1": 50}}, duration_s=12.5,
    )  # fmt: skip


def test_a_run_writes_its_figures_and_outcome_and_a_failure_keeps_the_last_success(tmp_path: Path) -> None:
    env = {"UKO_METRICS_TEXTFILE_DIR": str(tmp_path / "textfiles")}
    export_run("demo", "users-to-delta", _result(), finished_at=1000.0, env=env)
    success_name, outcome_name = textfile_names("demo", "users-to-delta")
    assert (success_name, outcome_name) == (
        "upsert_kafka_ops-demo-users-to-delta.prom",
        "upsert_kafka_ops-demo-users-to-delta.outcome.prom",
    )
    folder = tmp_path / "textfiles"
    assert sorted(p.name for p in folder.iterdir()) == sorted([success_name, outcome_name])  # no temp left
    job = (("pipeline", "demo"), ("pipeline_job", "users-to-delta"))
    ran = (*job[:1], ("operation", "materialize"), job[1])
    got = _samples(folder / success_name)
    assert got[("upsert_kafka_ops_run_records_in_total", tuple(sorted(ran)))] == 120
    assert got[("upsert_kafka_ops_run_bytes_in_total", tuple(sorted(ran)))] == 9000
    assert got[("upsert_kafka_ops_run_rows_deleted_total", tuple(sorted(ran)))] == 7
    assert got[("upsert_kafka_ops_run_duration_seconds", tuple(sorted(ran)))] == 12.5
    end = tuple(sorted((*ran, ("topic", "users"), ("partition", "1"))))
    assert got[("upsert_kafka_ops_run_end_offset", end)] == 50
    assert got[("upsert_kafka_ops_run_last_success_timestamp_seconds", job)] == 1000.0
    outcome = _samples(folder / outcome_name)
    assert outcome == {
        ("upsert_kafka_ops_run_success", job): 1.0,
        ("upsert_kafka_ops_run_last_finished_timestamp_seconds", job): 1000.0,
    }
    before = (folder / success_name).read_text()
    export_run("demo", "users-to-delta", None, finished_at=2000.0, env=env)  # the next run fails
    assert (folder / success_name).read_text() == before  # the last success's numbers stay
    assert _samples(folder / outcome_name) == {
        ("upsert_kafka_ops_run_success", job): 0.0,
        ("upsert_kafka_ops_run_last_finished_timestamp_seconds", job): 2000.0,
    }


def test_nothing_configured_writes_nothing_and_a_broken_transport_never_fails_the_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    export_run("demo", "j", _result(), env={})
    assert list(tmp_path.iterdir()) == []
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with caplog.at_level(logging.WARNING, logger="upsert_kafka_ops.metrics"):
        export_run("demo", "j", _result(), env={"UKO_METRICS_TEXTFILE_DIR": str(blocker / "sub"),
                                                "UKO_PUSHGATEWAY_URL": "http://user:pw-secret@127.0.0.1:9/",
                                                "UKO_PUSHGATEWAY_TIMEOUT": "2"})  # fmt: skip
    text = caplog.text
    assert "run metrics not written to" in text and "run metrics not pushed to http://127.0.0.1:9/" in text
    assert "pw-secret" not in text
