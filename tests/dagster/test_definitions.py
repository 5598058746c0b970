"""``dagster_defs/definitions.py`` loads and validates (as the CLI does) and holds the demo
pipeline's assets, checks and sensors with the keys the translator gives."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg

ROOT = Path(__file__).resolve().parents[2]
DEFS = ROOT / "dagster_defs" / "definitions.py"


def test_definitions_validate_with_the_cli(tmp_path: Path) -> None:
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "UKO_BOOTSTRAP_SERVERS": "127.0.0.1:9"}
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "dagster"), "definitions", "validate", "-f", str(DEFS)],
        capture_output=True, text=True, env=env, cwd=tmp_path, check=False, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "All code locations passed validation" in proc.stdout + proc.stderr


def test_definitions_hold_the_demo_assets_checks_and_sensors() -> None:
    spec = importlib.util.spec_from_file_location("uko_dagster_definitions", DEFS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    defs: dg.Definitions = module.defs
    dg.Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert keys == {
        "kafka/users", "kafka/pageviews", "kafka/pageviews_per_region", "kafka/pageviews_per_page",
        "warehouse/source/users", "warehouse/warehouse/users", "warehouse/warehouse/users_history",
        "warehouse/warehouse/users_live",
    }  # fmt: skip
    materializable = {
        k.to_user_string() for k in graph.get_all_asset_keys() if graph.get(k).is_materializable
    }
    assert materializable == {"kafka/users", "warehouse/warehouse/users", "warehouse/warehouse/users_history",
                              "kafka/pageviews_per_region", "kafka/pageviews_per_page"}  # fmt: skip
    parents = {
        k.to_user_string(): {p.to_user_string() for p in graph.get(k).parent_keys}
        for k in graph.get_all_asset_keys()
    }
    assert (
        parents["warehouse/warehouse/users"]
        == parents["warehouse/warehouse/users_history"]
        == parents["warehouse/warehouse/users_live"]
        == {"kafka/users"}
    )
    assert parents["kafka/users"] == {
        "warehouse/source/users"
    }  # publish-users writes what users-to-delta reads
    assert parents["kafka/pageviews_per_region"] == {"kafka/pageviews", "kafka/users"}
    uris = {k.to_user_string(): str(graph.get(k).metadata["dagster/uri"]) for k in graph.get_all_asset_keys()}
    table = uris["warehouse/warehouse/users"]
    assert table.startswith("file:///") and table.endswith("/warehouse/users")
    assert uris["kafka/users"].startswith("kafka://") and uris["kafka/users"].endswith("/users")
    # one group per pipeline file, the external sources in it too: the graph reads as the flow
    assert {graph.get(k).group_name for k in graph.get_all_asset_keys()} == {"demo"}
    users = graph.get(dg.AssetKey(["warehouse", "warehouse", "users"]))
    schema = users.metadata["dagster/column_schema"]
    assert [(c.name, c.type) for c in schema.columns] == [
        ("user_id", "BIGINT NOT NULL"), ("user_name", "STRING"), ("region", "STRING")
    ]  # fmt: skip
    # the job's spec is the code version: a changed spec marks its assets stale
    assert users.code_version is not None and len(users.code_version) == 16
    versions = {
        graph.get(k).code_version for k in graph.get_all_asset_keys() if graph.get(k).is_materializable
    }
    assert len(versions) == 5  # five jobs, five specs
    history = graph.get(dg.AssetKey(["warehouse", "warehouse", "users_history"]))
    names = [c.name for c in history.metadata["dagster/column_schema"].columns]
    assert names[:6] == ["user_id", "user_name", "region", "valid_from", "valid_to", "is_current"]
    checks = {(k.asset_key.to_user_string(), k.name) for k in graph.asset_check_keys}
    assert ("warehouse/warehouse/users", "keys_in_single_partition") in checks
    assert ("warehouse/warehouse/users", "row_count_matches_live_keys") in checks
    assert ("warehouse/warehouse/users", "matches_topic") in checks
    # a history table holds every version: its current ones are verified, its rows are not counted
    assert ("warehouse/warehouse/users_history", "matches_topic") in checks
    assert ("warehouse/warehouse/users_history", "row_count_matches_live_keys") not in checks
    assert ("kafka/pageviews_per_page", "lag_within_threshold") in checks
    # the continuous job's table: no run of Dagster's writes it (users-live runs as a Deployment);
    # its commits are reported, and it is verified like the others
    assert ("warehouse/warehouse/users_live", "matches_topic") in checks
    sensors = {s.name for s in defs.sensors or []}
    readers = ("users_to_delta", "users_history", "pageviews_per_region", "pageviews_per_page")
    assert sensors == {
        *(f"upsert_kafka_{kind}_{job}" for kind in ("new_data", "lag_status") for job in readers),
        "upsert_kafka_lag_status_users_live",
        "upsert_kafka_commits_users_live",
    }
    # the file schedules users-to-delta hourly: a Dagster schedule and a freshness policy on its table
    assert {s.name: s.cron_schedule for s in defs.schedules or []} == {
        "upsert_kafka_schedule_users_to_delta": "0 * * * *"
    }
    assert users.freshness_policy is not None and users.freshness_policy.deadline_cron == "0 * * * *"


def _load_module() -> object:
    spec = importlib.util.spec_from_file_location("uko_dagster_definitions_2", DEFS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pipeline_files_that_share_topics_and_job_names(tmp_path: Path) -> None:
    import pytest

    from upsert_kafka_ops.errors import SpecError
    from upsert_kafka_ops.jobs import Pipeline

    demo = Pipeline.load(ROOT / "pipelines" / "demo.yaml")
    build = _load_module().build_definitions  # type: ignore[attr-defined]
    # one file publishes the users topic, another reads it: one asset, not an external one too
    (tmp_path / "a.yaml").write_text(demo.model_copy(update={"jobs": [demo.job("publish-users")]}).to_yaml())
    (tmp_path / "b.yaml").write_text(demo.model_copy(update={"jobs": [demo.job("users-to-delta")]}).to_yaml())
    defs: dg.Definitions = build(tmp_path)
    graph = defs.resolve_asset_graph()
    users = graph.get(dg.AssetKey(["kafka", "users"]))
    assert users.is_materializable
    assert graph.get(dg.AssetKey(["warehouse", "warehouse", "users"])).parent_keys == {users.key}
    # the same job name in two files would be the same op name: refused, naming both files
    (tmp_path / "c.yaml").write_text(demo.model_copy(update={"jobs": [demo.job("users-to-delta")]}).to_yaml())
    with pytest.raises(SpecError, match=r"c\.yaml: jobs\.users-to-delta.*also a job of b\.yaml"):
        build(tmp_path)
