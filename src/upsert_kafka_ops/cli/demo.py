"""The main job on the embedded default: ``pipelines/demo.yaml`` (FLIP-149's examples) on a local
KRaft broker, local Spark and a local Delta warehouse.

Round 1: the users table (a Delta table with its change data feed: Bob, Alice, Greg, Richard) is
published to the upsert topic ``users``; the topic is folded into the warehouse table; pageviews
arrive and PV/UV per region (snapshot path) and PV per page (streaming path) are computed.
The same topic is also kept as a history table (every version of each user, SCD type 2).
Round 2: Alice moves to Hangzhou and Richard is deleted in the source table, more pageviews arrive,
and every job runs again: each one moves only what changed.
Round 3: the continuous job ``users-live`` runs in the background (as a Deployment would run it),
Bob moves to Shenzhen, the change is published, and the live table holds it a batch later.

Everything lands in one folder (``build/demo`` by default), kept after the run: the Delta tables and
the broker's data. A new run starts that folder afresh.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from upsert_kafka_ops.errors import LocalServiceError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: the demo's pipeline file, inside the package (a wheel install runs the demo too); a checkout links
#: it as pipelines/demo.yaml
PIPELINE = Path(__file__).resolve().parents[1] / "resources" / "demo.yaml"
DEFAULT_DIR = Path("build") / "demo"
#: a file that marks a folder as the demo's own, so a new run may empty it
_MARKER = ".upsert-kafka-ops-demo"
USERS_1 = [
    (100, "Bob", "Beijing"),
    (101, "Alice", "Shanghai"),
    (102, "Greg", "Berlin"),
    (103, "Richard", "Berlin"),
]
PAGEVIEWS_1 = [(100, 10001), (101, 10002), (102, 10002), (101, 10003), (100, 10004)]
#: the demo's topics and their configs
TOPICS: tuple[tuple[str, dict[str, str]], ...] = (
    ("users", {"cleanup.policy": "compact"}),
    ("pageviews", {}),
    ("pageviews_per_region", {"cleanup.policy": "compact"}),
    ("pageviews_per_page", {"cleanup.policy": "compact"}),
)
#: the port ``demo --keep`` starts its broker on unless told otherwise (the one the docs show)
KEEP_PORT = 9092
PAGEVIEWS_2 = [(102, 10005), (102, 10006)]
#: the demo's continuous job (round 3), and how long the demo waits for one of its commits
LIVE_JOB = "users-live"
LIVE_WAIT_S = 120.0


def _show(title: str, df: DataFrame, order: list[str]) -> None:
    print(f"\n{title}")
    rows = df.orderBy(*order).collect()
    print("  " + " | ".join(f"{n:>12}" for n in df.columns))
    for r in rows:
        print("  " + " | ".join(f"{r[n]!s:>12}" for n in df.columns))


def _produce_pageviews(config: dict[str, Any], events: list[tuple[int, int]], minute: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({**config, "logger": logging.getLogger(__name__)})
    for i, (user, page) in enumerate(events):
        view = {"user_id": user, "page_id": page, "viewtime": f"2026-11-22 10:{minute:02d}:{i:02d}"}
        producer.produce("pageviews", value=json.dumps(view).encode())
    if producer.flush(30) != 0:
        raise LocalServiceError("The demo pageviews were not all delivered within 30s.")


def _round(spark: SparkSession, pipeline: Any, title: str) -> list[dict[str, Any]]:
    from upsert_kafka_ops.cli.jobs import results_table
    from upsert_kafka_ops.jobs import run_job

    bounded = [job for job in pipeline.jobs if not job.continuous]  # users-live runs in round 3
    results = [run_job(pipeline, job.name, spark=spark).to_dict() for job in bounded]
    print(f"\n{title}")
    print(results_table(results), end="")
    return results


def prepare_dir(folder: Path) -> Path:
    """An empty demo folder: created, or emptied when an earlier demo made it; any other non-empty
    folder is refused, so that no data of the user's is removed."""
    folder = folder.resolve()
    if folder.exists() and any(folder.iterdir()):
        if not (folder / _MARKER).is_file():
            raise LocalServiceError(
                f"The demo folder {folder} holds files the demo did not write; "
                "give an empty or new folder with --dir, or remove it."
            )
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / _MARKER).write_text("made by upsert-kafka-ops demo; the next demo run empties this folder\n")
    return folder


def _live_round(spark: SparkSession, pipeline: Any, source: str) -> dict[str, Any]:
    """Round 3: ``users-live`` runs continuously in a thread, in a session of its own in the same Spark
    application; once it has caught up, Bob moves in the source table, ``publish-users`` sends the
    change, and the job's next batch commits it. Returns the job's result and how long the change took
    from the end of the publish to the live table."""
    from upsert_kafka_ops.cli.jobs import results_table
    from upsert_kafka_ops.jobs import run_job
    from upsert_kafka_ops.jobs.continuous import ContinuousJobs, topic_ends

    job = pipeline.job(LIVE_JOB)
    assert job.trigger is not None  # the demo's file gives it one
    print(
        f"\nround 3: {LIVE_JOB} runs continuously (a batch at most every {job.trigger.interval_s:g} s); "
        "Bob moves to Shenzhen"
    )
    jobs = ContinuousJobs(pipeline, [LIVE_JOB], spark.newSession())
    (live,) = jobs.results
    with jobs.in_background():  # stopped after its current batch at the end of the block
        jobs.wait_committed(LIVE_JOB, topic_ends(pipeline, job, spark), LIVE_WAIT_S)
        first = live.batches
        spark.sql(f"UPDATE delta.`{source}` SET region = 'Shenzhen' WHERE user_id = 100")
        run_job(pipeline, "publish-users", spark=spark)
        published = time.monotonic()
        jobs.wait_committed(LIVE_JOB, topic_ends(pipeline, job, spark), LIVE_WAIT_S)
        seen = time.monotonic() - published
    result = live.to_dict()
    print(results_table([result]), end="")
    print(
        f"  {LIVE_JOB}: caught up with the topic in {first} batch(es); Bob's move was in its table "
        f"{seen:.1f} s after the publish ended (its batch's end-to-end latency {result['last_latency_s']} s)"
    )
    return {**result, "seen_after_publish_s": round(seen, 3)}


def _summary(folder: Path, pipeline_file: Path, pipeline: Any, seconds: float) -> str:
    bounded = [j for j in pipeline.jobs if not j.continuous]
    jobs = ", ".join(f"{j.name} ({j.kind})" for j in bounded)
    return (
        f"\ndemo: done in {seconds:.0f}s. {len(bounded)} jobs ran twice: {jobs}; {LIVE_JOB} ran continuously.\n"
        f"  results: {folder}\n"
        f"    warehouse/users  the Delta table folded from the topic 'users'\n"
        f"    warehouse/users_history  every version of each user (history: scd2)\n"
        f"    warehouse/users_live  the same topic kept fresh by the continuous job {LIVE_JOB}\n"
        f"    source/users     the Delta table published to it (with its change data feed)\n"
        f"    kafka/           the broker's data (stopped); checkpoints/ the streaming job's state\n"
        f'  read them: spark.read.format("delta").load("{folder}/warehouse/users")\n'
        f"  the jobs: {pipeline_file}; run them yourself with `upsert-kafka-ops run` ({LIVE_JOB} runs\n"
        f"    until Ctrl-C; --once runs every job once), and compare the\n"
        f"    warehouse table with its topic with `upsert-kafka-ops verify ... --job users-to-delta`\n"
    )


def _sink_table(pipeline: Any, name: str) -> Any:
    from upsert_kafka_ops.jobs import TopicToTopicJob

    job = pipeline.job(name)
    assert isinstance(job, TopicToTopicJob)
    return job.sink.table


def run_demo(
    jars_dir: Path | None = None, pipeline_file: Path = PIPELINE, folder: Path = DEFAULT_DIR
) -> dict[str, Any]:
    """Run the demo in ``folder`` (see :func:`prepare_dir`); returns both rounds' results and the
    final tables."""
    from pyspark.sql import SparkSession

    from upsert_kafka_ops import jars
    from upsert_kafka_ops.engine import materialize
    from upsert_kafka_ops.jobs import Pipeline
    from upsert_kafka_ops.jobs.verify import verify_job
    from upsert_kafka_ops.local import LocalKafka
    from upsert_kafka_ops.runtime import build_spark_session

    began = time.monotonic()
    work = str(prepare_dir(folder))
    jars.fetch(jars_dir=jars_dir, log=True)
    with LocalKafka(Path(work) / "kafka", jars_dir=jars_dir) as kafka:
        servers = kafka.bootstrap_servers
        print(f"demo: local Kafka broker on {servers}, Delta tables under {work}")
        for topic, config in TOPICS:
            kafka.create_topic(topic, partitions=2, config=config)
        pipeline = Pipeline.load(
            pipeline_file, env={**os.environ, "UKO_BOOTSTRAP_SERVERS": servers, "UKO_DEMO_DIR": work}
        )
        source = f"{work}/source/users"

        ours = SparkSession.getActiveSession() is None  # never stop a session someone else created
        spark = build_spark_session(jars_dir=jars_dir, app_name="upsert-kafka-ops-demo")
        try:
            _seed(spark, kafka.client_config(), source)
            first = _round(spark, pipeline, "round 1: every job builds its target")

            spark.sql(f"UPDATE delta.`{source}` SET region = 'Hangzhou' WHERE user_id = 101")
            spark.sql(f"DELETE FROM delta.`{source}` WHERE user_id = 103")
            _produce_pageviews(kafka.client_config(), PAGEVIEWS_2, 1)
            second = _round(spark, pipeline, "round 2: Alice moved, Richard left, 2 more pageviews")

            warehouse = spark.read.format("delta").load(f"{work}/warehouse/users")
            _show("users, in the Delta warehouse table:", warehouse, ["user_id"])
            checked = verify_job(spark, pipeline, "users-to-delta")
            print(f"\nverify: {checked.summary()}")
            history = spark.read.format("delta").load(f"{work}/warehouse/users_history")
            versions = history.select(
                "user_id", "user_name", "region", "valid_from", "valid_to", "is_current"
            )
            _show("users_history, every version (history: scd2):", versions, ["user_id", "valid_from"])
            checked_history = verify_job(spark, pipeline, "users-history")
            print(f"\nverify users-history: {checked_history.summary()}")
            local = pipeline.connections["local"]
            regions = materialize(spark, _sink_table(pipeline, "pageviews-per-region"), local)
            _show("pageviews_per_region, materialized from the topic:", regions.df, ["user_region"])
            pages = materialize(spark, _sink_table(pipeline, "pageviews-per-page"), local)
            _show("pageviews_per_page, materialized from the topic:", pages.df, ["page_id"])

            live = _live_round(spark, pipeline, source)
            live_table = spark.read.format("delta").load(f"{work}/warehouse/users_live")
            _show("users_live, kept by the continuous job:", live_table, ["user_id"])
            checked_live = verify_job(spark, pipeline, LIVE_JOB)
            print(f"\nverify {LIVE_JOB}: {checked_live.summary()}")
            result = {
                "rounds": [first, second],
                "users": [r.asDict() for r in warehouse.orderBy("user_id").collect()],
                "per_region": [r.asDict() for r in regions.df.orderBy("user_region").collect()],
                "per_page": [r.asDict() for r in pages.df.orderBy("page_id").collect()],
                "verify": checked.to_dict(),
                "history": [r.asDict() for r in versions.orderBy("user_id", "valid_from").collect()],
                "verify_history": checked_history.to_dict(),
                "live": live,
                "users_live": [r.asDict() for r in live_table.orderBy("user_id").collect()],
                "verify_live": checked_live.to_dict(),
            }
        finally:
            if ours:  # before the broker stops: the session's Kafka clients go with it
                spark.stop()
    print(_summary(Path(work), pipeline_file, pipeline, time.monotonic() - began), end="")
    return result


def _seed(spark: SparkSession, kafka_config: dict[str, Any], source: str) -> None:
    """The demo's first data: the users source table (with its change data feed) and pageviews."""
    users = spark.createDataFrame(USERS_1, "user_id BIGINT, user_name STRING, region STRING")
    users.write.format("delta").option("delta.enableChangeDataFeed", "true").save(source)
    _produce_pageviews(kafka_config, PAGEVIEWS_1, 0)


def keep_demo(
    jars_dir: Path | None = None,
    pipeline_file: Path = PIPELINE,
    folder: Path = DEFAULT_DIR,
    port: int = KEEP_PORT,
) -> dict[str, str]:
    """Start the demo's broker on ``port`` and leave it running, with its topics and data seeded
    (the users source table, the first pageviews), for the DAGs in Airflow and the assets in Dagster;
    the jobs do not run. Returns the environment both need (printed as exports)."""
    from upsert_kafka_ops import jars
    from upsert_kafka_ops.local import free_port
    from upsert_kafka_ops.local import kafka as lk
    from upsert_kafka_ops.runtime import build_spark_session

    state = folder.resolve() / "kafka"
    if lk.detached_status(state)["running"]:
        raise LocalServiceError(
            f"The kept demo's broker is still running from {state}; stop it first with "
            f"`upsert-kafka-ops local kafka stop --dir {state}`."
        )
    free_port(port)  # a taken port is named with the fix before anything starts
    work = prepare_dir(folder)
    jars.fetch(jars_dir=jars_dir, log=True)
    broker = lk.start_detached(work / "kafka", jars_dir=jars_dir, port=port)
    try:
        for topic, config in TOPICS:
            broker.create_topic(topic, partitions=2, config=config)
        spark = build_spark_session(jars_dir=jars_dir, app_name="upsert-kafka-ops-demo")
        try:
            _seed(spark, broker.client_config(), f"{work}/source/users")
        finally:
            spark.stop()
    except BaseException:
        lk.stop_detached(work / "kafka")
        raise
    servers = broker.bootstrap_servers
    env = {
        "UKO_BOOTSTRAP_SERVERS": servers,
        "UKO_DEMO_DIR": str(work),
        "UKO_PIPELINES_DIR": str(pipeline_file.resolve().parent),
        "AIRFLOW_CONN_KAFKA_DEFAULT": json.dumps(
            {"conn_type": "kafka", "extra": {"bootstrap.servers": servers}}
        ),
    }
    print(
        f"\ndemo: broker on {servers} with the demo's topics and first data, left running; tables under {work}"
    )
    print("demo: in the shell that starts `airflow standalone` or `dagster dev`:\n")
    for key, value in env.items():
        print(f"export {key}={shlex.quote(value)}")
    print(f"\ndemo: stop the broker with `upsert-kafka-ops local kafka stop --dir {work / 'kafka'}`")
    return env


def register(sub: Any) -> None:
    """Add ``demo``."""
    pd = sub.add_parser("demo", help="run the main job on the embedded default")
    pd.add_argument("--jars-dir", type=Path, default=None, help="jar cache folder")
    pd.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="folder for the demo's tables and broker, kept afterwards (default: build/demo)",
    )
    pd.add_argument(
        "--keep",
        action="store_true",
        help="seed the demo's broker and tables and leave the broker running for Airflow and "
        "Dagster (the jobs do not run); prints the environment they need",
    )
    pd.add_argument(
        "--port", type=int, default=KEEP_PORT, help=f"--keep: the broker's port (default {KEEP_PORT})"
    )
    pd.set_defaults(handler=_command)


def _command(args: argparse.Namespace) -> int:
    if args.keep:
        keep_demo(jars_dir=args.jars_dir, folder=args.dir or DEFAULT_DIR, port=args.port)
    else:
        run_demo(jars_dir=args.jars_dir, folder=args.dir or DEFAULT_DIR)
    return 0
