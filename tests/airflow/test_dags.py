"""The example DAGs run with ``dag.test()`` (SQLite metadata DB, ``kafka_default`` from the
environment with a SASL password) against the real broker, Spark and Delta; every target is
compared with a plain-Python fold of its topic. The tests build on each other in file order, as a
deployment would: the pipeline DAG first, then the hourly, 5-minute and backfill DAGs."""

from __future__ import annotations

import os
import time
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
from tests.integration.oracle import read_all

from upsert_kafka_ops.jobs import Pipeline
from upsert_kafka_ops.jobs.continuous import ContinuousJobs, topic_ends
from upsert_kafka_ops.local import LocalKafka

from .conftest import PASSWORD, ROOT
from .support import rendered_fields, stored_text, task_states, xcoms


@pytest.fixture(scope="module")
def demo(kafka: LocalKafka, kafka_default: dict[str, str], airflow_db: Path, spark: Any,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:  # fmt: skip
    folder = tmp_path_factory.mktemp("demo")
    os.environ["UKO_DEMO_DIR"] = str(folder)
    for topic, config in DEMO_TOPICS:
        kafka.create_topic(topic, partitions=2, config=config)
    source = folder / "source" / "users"
    users = spark.createDataFrame(USERS_1, "user_id BIGINT, user_name STRING, region STRING")
    users.write.format("delta").option("delta.enableChangeDataFeed", "true").save(str(source))
    _pageviews(kafka, PAGEVIEWS, 0)
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=ROOT / "dags")
    assert bag.import_errors == {}
    yield {"dir": folder, "source": source, "dags": bag.dags, "pageviews": list(PAGEVIEWS)}
    os.environ.pop("UKO_DEMO_DIR", None)


def _pageviews(kafka: LocalKafka, events: list[tuple[int, int]], minute: int) -> None:
    produce_pageviews(kafka.bootstrap_servers, events, minute)


def _run(demo: dict[str, Any], dag_id: str, capfd: pytest.CaptureFixture[str], **kw: Any) -> tuple[Any, str]:
    dagrun = demo["dags"][dag_id].test(**kw)
    out, err = capfd.readouterr()
    logs = "".join(p.read_text(errors="replace") for p in (Path(os.environ["AIRFLOW_HOME"]) / "logs").rglob("*")
                   if p.is_file())  # fmt: skip
    text = out + err + logs
    # the SASL password of kafka_default never reaches a log line, an XCom or a rendered template
    assert PASSWORD not in text
    stored = stored_text(dag_id, dagrun.run_id)
    assert "pipeline_file" in stored and PASSWORD not in stored  # the tasks rendered their fields
    return dagrun, text


def _warehouse_users(spark: Any, demo: dict[str, Any], table: str = "users") -> dict[int, tuple[str, str]]:
    rows = spark.read.format("delta").load(str(demo["dir"] / "warehouse" / table)).collect()
    return {r.user_id: (r.user_name, r.region) for r in rows}


def test_pipeline_dag_runs_every_job_in_order(
    demo: dict[str, Any], kafka: LocalKafka, spark: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    # the continuous job runs beside Airflow, as its Deployment would (in a thread here, on a session
    # of its own); the DAG's task for it is a lag sensor that waits until it has caught up
    pipeline = Pipeline.load(ROOT / "pipelines" / "demo.yaml",
                             env={**os.environ, "UKO_BOOTSTRAP_SERVERS": kafka.bootstrap_servers})  # fmt: skip
    live = ContinuousJobs(pipeline, ["users-live"], spark.newSession())
    with live.in_background():
        dagrun, _ = _run(demo, "upsert_kafka_demo", capfd)
        live.wait_committed("users-live", topic_ends(pipeline, pipeline.job("users-live"), spark), 120)
    assert task_states(dagrun) == dict.fromkeys(
        ("publish-users", "users-to-delta", "users-history", "users-live", "pageviews-per-region",
         "pageviews-per-page"),
        "success",
    )  # fmt: skip
    users = users_oracle(kafka.bootstrap_servers, USERS_VALUE)
    assert users == {u: (n, r) for u, n, r in USERS_1}
    assert _warehouse_users(spark, demo) == users
    assert _warehouse_users(spark, demo, "users_live") == users
    assert live.results[0].batches >= 1 and live.results[0].failures == 0
    assert json_topic_oracle(kafka.bootstrap_servers, "pageviews_per_region") == expected_per_region(
        users, PAGEVIEWS
    )
    pages = Counter(p for _, p in PAGEVIEWS)
    assert json_topic_oracle(kafka.bootstrap_servers, "pageviews_per_page") == {
        p: {"page_id": p, "pv": n} for p, n in pages.items()
    }
    results = xcoms("upsert_kafka_demo", dagrun.run_id)
    assert results["users-to-delta"]["rows_upserted"] == 4 and results["users-to-delta"]["mode"] == "full"
    assert (results["users-history"]["rows_upserted"], results["users-history"]["mode"]) == (4, "full")
    assert results["users-live"]["passed"] is True  # the sensor's verdict
    assert spark.range(3).count() == 3  # the shared test session is alive after the DAG run


def test_users_to_delta_dag_moves_only_the_new_change(
    demo: dict[str, Any], kafka: LocalKafka, spark: Any, capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("UKO_SPARK_HISTORY_URL", "http://history.example:18080")
    demo["before_move_ms"] = int(time.time() * 1000)
    time.sleep(0.05)
    spark.sql(f"UPDATE delta.`{demo['source']}` SET region = 'Hangzhou' WHERE user_id = 101")
    from upsert_kafka_ops.airflow.operators import UpsertKafkaPublishOperator

    published = UpsertKafkaPublishOperator(task_id="p", pipeline_file=str(ROOT / "pipelines" / "demo.yaml"),
                                           job_name="publish-users", kafka_config_ids={"local": "kafka_default"}
                                           ).execute(context={})  # type: ignore[arg-type]  # fmt: skip
    assert published["records_written"] == 1
    dagrun, _ = _run(demo, "users_to_delta", capfd)
    assert task_states(dagrun) == {"new_users": "success", "users_to_delta": "success"}
    results = xcoms("users_to_delta", dagrun.run_id)
    assert results["new_users"]["new_records"] == 1  # the sensor saw exactly the new change
    assert (results["users_to_delta"]["records_read"], results["users_to_delta"]["rows_upserted"]) == (1, 1)
    # the task view: the run's summary in Rendered Templates, and its Spark application's history link
    summary = rendered_fields("users_to_delta", dagrun.run_id, "users_to_delta")["run_summary"]
    assert "### materialize job `users-to-delta`" in summary and "| records read | 1 |" in summary
    assert "| rows upserted | 1 |" in summary and "`users` offsets (partition: start → end)" in summary
    app = results["users_to_delta"]["spark_app_id"]
    assert app == spark.sparkContext.applicationId  # the run's own session: the test's shared one
    link = xcoms("users_to_delta", dagrun.run_id, key="_link_SparkHistoryLink")["users_to_delta"]
    assert link == f"http://history.example:18080/history/{app}/"  # UKO_SPARK_HISTORY_URL of the test
    users = users_oracle(kafka.bootstrap_servers, USERS_VALUE)
    assert users[101] == ("Alice", "Hangzhou")
    assert _warehouse_users(spark, demo) == users


def test_pageviews_per_region_dag_follows_new_views(
    demo: dict[str, Any], kafka: LocalKafka, capfd: pytest.CaptureFixture[str]
) -> None:
    more = [(102, 10005), (101, 10006), (103, 10007)]
    _pageviews(kafka, more, 1)
    dagrun, _ = _run(demo, "pageviews_per_region", capfd)
    assert task_states(dagrun) == {"pageviews_per_region": "success"}
    users = users_oracle(kafka.bootstrap_servers, USERS_VALUE)
    assert json_topic_oracle(kafka.bootstrap_servers, "pageviews_per_region") == expected_per_region(
        users, PAGEVIEWS + more
    )


def test_backfill_dag_refuses_an_older_end_unless_rewind_then_rebuilds(
    demo: dict[str, Any], kafka: LocalKafka, spark: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    from datetime import datetime, timezone

    end = datetime.fromtimestamp(demo["before_move_ms"] / 1000, timezone.utc).isoformat()
    conf = {"job": "users-to-delta", "end": end, "rewind": False}
    dagrun, text = _run(demo, "upsert_kafka_backfill", capfd, run_conf=conf)
    assert task_states(dagrun) == {"backfill": "failed", "verify": "upstream_failed"}
    assert "OffsetsError" in text and "rewind" in text  # the core's message, naming the way out
    assert _warehouse_users(spark, demo)[101] == ("Alice", "Hangzhou")  # nothing was written

    dagrun, _ = _run(demo, "upsert_kafka_backfill", capfd, run_conf={**conf, "rewind": True})
    assert task_states(dagrun) == {"backfill": "success", "verify": "success"}
    # the oracle: the users topic folded up to the end time
    before = [r for r in read_all(kafka.bootstrap_servers, ["users"]) if r.timestamp < demo["before_move_ms"]]
    from tests.demo_support import avro_decode
    from tests.integration.oracle import fold

    state = fold(before, lambda k: int(k.decode()), lambda v: avro_decode(USERS_VALUE, v)[0])
    assert _warehouse_users(spark, demo) == {k: (v["user_name"], v["region"]) for k, v in state.items()}
    assert _warehouse_users(spark, demo)[101] == ("Alice", "Shanghai")
    results = xcoms("upsert_kafka_backfill", dagrun.run_id)
    result = results["backfill"]
    assert result["kind"] == "backfill" and result["mode"] == "full"
    # the rebuilt table verified against the topic folded up to the offsets it now holds
    verified = results["verify"]
    assert verified["ok"] and verified["topic_rows"] == verified["table_rows"] == len(state)
    assert verified["offsets"] == result["end_offsets"]
