"""The YAML Component loads from a ``defs.yaml`` (with ``{{ env.* }}`` templating) into the same
assets, checks, sensors and a Kafka resource whose password stays an environment reference."""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster.components.testing import create_defs_folder_sandbox

import dagster as dg
from upsert_kafka_ops.dagster import UpsertKafkaPipelineComponent, UpsertKafkaResource

DEMO = Path(__file__).resolve().parents[2] / "pipelines" / "demo.yaml"


def test_component_from_yaml_builds_assets_checks_sensors_and_the_resource(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("UKO_TEST_SERVERS", "broker-9:9093")
    attributes = {
        "pipeline_file": str(DEMO), "jobs": ["users-to-delta"], "bootstrap_servers": "{{ env.UKO_TEST_SERVERS }}",
        "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "username": "etl",
        "password_env": "UKO_TEST_PASSWORD", "max_offset_lag": 5, "sensors": True,
    }  # fmt: skip
    with create_defs_folder_sandbox() as sandbox:
        path = sandbox.scaffold_component(
            UpsertKafkaPipelineComponent,
            defs_yaml_contents={"type": "upsert_kafka_ops.dagster.UpsertKafkaPipelineComponent", "attributes": attributes},
        )  # fmt: skip
        with sandbox.load_component_and_build_defs(defs_path=path) as (component, defs):
            assert isinstance(component, UpsertKafkaPipelineComponent)
            graph = defs.resolve_asset_graph()
            keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
            assert keys == {"kafka/users", "warehouse/warehouse/users"}
            checks = {(k.asset_key.to_user_string(), k.name) for k in graph.asset_check_keys}
            assert checks == {
                ("warehouse/warehouse/users", "keys_in_single_partition"),
                ("warehouse/warehouse/users", "row_count_matches_live_keys"),
                ("warehouse/warehouse/users", "lag_within_threshold"),
            }
            assert [s.name for s in defs.sensors or []] == ["upsert_kafka_new_data_users_to_delta"]
            assert [(s.name, s.cron_schedule) for s in defs.schedules or []] == [
                ("upsert_kafka_schedule_users_to_delta", "0 * * * *")  # the file's @hourly
            ]
            kafka = (defs.resources or {})["kafka"]
            assert isinstance(kafka, UpsertKafkaResource) and kafka.bootstrap_servers == "broker-9:9093"
            assert kafka.username == "etl" and kafka.password == dg.EnvVar("UKO_TEST_PASSWORD")


def test_dg_lists_the_component_from_its_registry_entry_point(tmp_path: Path) -> None:
    import json as _json
    import subprocess
    import sys

    dg = Path(sys.executable).parent / "dg"
    proc = subprocess.run([str(dg), "list", "components", "--json"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    keys = {c["key"] for c in _json.loads(proc.stdout)["items"]}
    assert "upsert_kafka_ops.dagster.UpsertKafkaPipelineComponent" in keys


def test_a_continuous_job_gets_its_commits_sensor_and_no_run_of_its_own(tmp_path: Path) -> None:
    live = tmp_path / "live.yaml"
    text = DEMO.read_text().replace('    schedule: "@hourly"', "    trigger: {continuous: true}")
    live.write_text(
        text.replace(
            "  - name: pageviews-per-region\n",
            "  - name: pageviews-per-region\n    trigger: {continuous: true}\n",
        )
    )
    attributes = {"pipeline_file": str(live), "jobs": ["users-to-delta", "pageviews-per-region"],
                  "bootstrap_servers": "broker-9:9093", "max_offset_lag": 5, "sensors": True}  # fmt: skip
    with create_defs_folder_sandbox() as sandbox:
        path = sandbox.scaffold_component(
            UpsertKafkaPipelineComponent,
            defs_yaml_contents={"type": "upsert_kafka_ops.dagster.UpsertKafkaPipelineComponent", "attributes": attributes},
        )  # fmt: skip
        with sandbox.load_component_and_build_defs(defs_path=path) as (_, defs):
            graph = defs.resolve_asset_graph()
            table = dg.AssetKey(["warehouse", "warehouse", "users"])
            topic = dg.AssetKey(["kafka", "pageviews_per_region"])
            assert not graph.get(table).is_materializable  # the jobs run outside Dagster
            assert not graph.get(topic).is_materializable
            checks = {(k.asset_key, k.name) for k in graph.asset_check_keys}
            assert checks == {(table, "lag_within_threshold"), (topic, "lag_within_threshold")}  # lag checked
            # the table's commits reported (a topic-to-topic job stores none: no sensor, no freshness
            # policy it could never meet); no new-data sensor (it would request runs nobody makes here)
            assert [s.name for s in defs.sensors or []] == ["upsert_kafka_commits_users_to_delta"]
            assert graph.get(table).freshness_policy is not None and graph.get(topic).freshness_policy is None
            assert list(defs.schedules or []) == []
