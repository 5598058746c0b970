"""Every asset of the demo pipeline (pipelines/demo.yaml, the file dagster_defs/ loads) materialized
in one run against the real broker, Spark and Delta: the publish asset (a Delta change feed -> the
users upsert topic), the materialize asset (users -> Delta) and the topic-to-topic assets (PV/UV per
region, PV per page), each output compared with a plain-Python fold of its topic; a second run after
a change in the source table publishes only that change and moves it downstream. The warehouse
table's ``matches_topic`` check passes after each run, and names the key deleted behind the job's
back."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.demo_support import (
    DEMO_TOPICS,
    PAGEVIEWS,
    USERS_1,
    USERS_VALUE,
    expected_per_region,
    json_topic_oracle,
    produce_pageviews,
    users_oracle,
)

import dagster as dg
from upsert_kafka_ops.dagster import (
    VERIFY_CHECK,
    UpsertKafkaResource,
    continuous_commits_sensor,
    op_name,
    upsert_kafka_assets,
    upsert_kafka_verify_checks,
)
from upsert_kafka_ops.jobs import Pipeline
from upsert_kafka_ops.jobs.continuous import ContinuousJobs, topic_ends
from upsert_kafka_ops.local import LocalKafka

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def kafka(jars_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    """A broker of this module's own: the demo pipeline's topics have fixed names
    (``pipelines/demo.yaml``), and the Airflow suite's example DAGs create them on the broker the
    suites share in ``make test``."""
    with LocalKafka(tmp_path_factory.mktemp("demo-kafka"), jars_dir=jars_dir, heap="512m") as broker:
        yield broker


def test_demo_pipeline_assets_publish_materialize_and_topic_to_topic(
    kafka: LocalKafka,
    kafka_resource: UpsertKafkaResource,
    spark: Any,
    instance: dg.DagsterInstance,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    servers = kafka.bootstrap_servers
    monkeypatch.setenv("UKO_DEMO_DIR", str(tmp_path))
    monkeypatch.setenv("UKO_BOOTSTRAP_SERVERS", servers)
    for topic, config in DEMO_TOPICS:
        kafka.create_topic(topic, partitions=2, config=config)
    source = tmp_path / "source" / "users"
    users = spark.createDataFrame(USERS_1, "user_id BIGINT, user_name STRING, region STRING")
    users.write.format("delta").option("delta.enableChangeDataFeed", "true").save(str(source))
    produce_pageviews(servers, PAGEVIEWS, 0)

    assets = upsert_kafka_assets(
        pipeline_file=ROOT / "pipelines" / "demo.yaml", kafka_resources={"local": "kafka"}
    )
    checks = upsert_kafka_verify_checks(
        pipeline_file=ROOT / "pipelines" / "demo.yaml", kafka_resources={"local": "kafka"}
    )
    assert [c.check_key.name for c in checks] == [VERIFY_CHECK] * 3  # the three warehouse tables
    # users_live is the continuous job's table: Dagster never runs that job (below it runs beside)
    live_key = dg.AssetKey(["warehouse", "warehouse", "users_live"])
    run_checks = [c for c in checks if c.check_key.asset_key != live_key]
    resources = {"kafka": kafka_resource}
    r1 = dg.materialize([*assets, *run_checks], resources=resources, instance=instance)
    assert r1.success
    verified = {e.asset_key.to_user_string(): e for e in r1.get_asset_check_evaluations()
                if e.check_name == VERIFY_CHECK}  # fmt: skip
    assert set(verified) == {"warehouse/warehouse/users", "warehouse/warehouse/users_history"}
    assert all(e.passed and e.metadata["table_rows"].value == 4 for e in verified.values())

    def warehouse() -> dict[int, tuple[str, str]]:
        rows = spark.read.format("delta").load(str(tmp_path / "warehouse" / "users")).collect()
        return {r.user_id: (r.user_name, r.region) for r in rows}

    topic_users = users_oracle(servers, USERS_VALUE)
    assert topic_users == {u: (n, r) for u, n, r in USERS_1}
    assert warehouse() == topic_users
    assert json_topic_oracle(servers, "pageviews_per_region") == expected_per_region(topic_users, PAGEVIEWS)
    pages = Counter(p for _, p in PAGEVIEWS)
    assert json_topic_oracle(servers, "pageviews_per_page") == {
        p: {"page_id": p, "pv": n} for p, n in pages.items()
    }

    def meta(result: dg.ExecuteInProcessResult, job: str) -> dict[str, Any]:
        (mat,) = result.asset_materializations_for_node(op_name(job))
        return {k: getattr(v, "value", v) for k, v in mat.metadata.items()}

    assert meta(r1, "publish-users")["upsert_kafka/records_written"] == 4
    assert meta(r1, "publish-users")["upsert_kafka/tombstones_written"] == 0
    assert meta(r1, "users-to-delta")["dagster/row_count"] == 4
    per_region = meta(r1, "pageviews-per-region")
    assert per_region["upsert_kafka/records_written"] == len(expected_per_region(topic_users, PAGEVIEWS))
    assert per_region["upsert_kafka/lag_after_run"] == 0

    # one user moves and one is deleted in the source: the next run publishes exactly these two
    # changes (one value, one tombstone: records_written counts values) and the warehouse and the
    # per-region counts follow
    spark.sql(f"UPDATE delta.`{source}` SET region = 'Hangzhou' WHERE user_id = 101")
    spark.sql(f"DELETE FROM delta.`{source}` WHERE user_id = 103")
    r2 = dg.materialize(assets, resources=resources, instance=instance)
    assert r2.success
    published = meta(r2, "publish-users")
    assert (published["upsert_kafka/records_written"], published["upsert_kafka/tombstones_written"]) == (1, 1)
    topic_users = users_oracle(servers, USERS_VALUE)
    assert topic_users == {100: ("Bob", "Beijing"), 101: ("Alice", "Hangzhou"), 102: ("Greg", "Berlin")}
    assert warehouse() == topic_users
    assert json_topic_oracle(servers, "pageviews_per_region") == expected_per_region(topic_users, PAGEVIEWS)
    assert meta(r2, "users-history")["dagster/row_count"] == 5  # Alice's old row and Richard's stay

    # the continuous job runs outside Dagster, as its Deployment would (a thread here, on a session of
    # its own): the commits sensor reports its commit as a materialization of its table
    pipeline = Pipeline.load(ROOT / "pipelines" / "demo.yaml")
    live = ContinuousJobs(pipeline, ["users-live"], spark.newSession())
    with live.in_background():
        live.wait_committed("users-live", topic_ends(pipeline, pipeline.job("users-live"), spark), 120)
    commits = continuous_commits_sensor(job="users-live", pipeline=pipeline)
    (reported,) = commits.evaluate_tick(dg.build_sensor_context(instance=instance)).asset_events
    assert isinstance(reported, dg.AssetMaterialization) and reported.asset_key == live_key
    assert reported.metadata["upsert_kafka/mode"].value == "full"  # type: ignore[union-attr]

    # a row deleted behind the job's back: the check alone (no run) names its key
    spark.sql(f"DELETE FROM delta.`{tmp_path / 'warehouse' / 'users'}` WHERE user_id = 100")
    r3 = dg.materialize([*assets, *checks], resources=resources, instance=instance,
                        selection=dg.AssetSelection.checks(*checks))  # fmt: skip
    assert r3.success and not r3.get_asset_materialization_events()
    evaluated = {e.asset_key.to_user_string(): e for e in r3.get_asset_check_evaluations()}
    assert evaluated["warehouse/warehouse/users_history"].passed  # the history table was not touched
    followed = evaluated["warehouse/warehouse/users_live"]  # the continuous job's table is its topic's fold
    assert followed.passed and followed.metadata["table_rows"].value == 3
    caught = evaluated["warehouse/warehouse/users"]
    assert not caught.passed and caught.severity == dg.AssetCheckSeverity.ERROR
    assert caught.metadata["missing_keys"].value == 1
    assert caught.metadata["keys"].value == {"missing": [{"user_id": 100}]}
