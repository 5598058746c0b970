"""Delta, Parquet and Iceberg tables on a real S3 server (MinIO) from an Airflow DAG: each job's
operator, then a lag sensor that reads the offsets the table stores on S3, run twice with
``dag.test()``; each table equals the oracle's, the second Delta and Iceberg runs are incremental,
and the store's secret key is in no log, XCom or field."""

from __future__ import annotations

import os
import random
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.devservices import LocalS3
from tests.integration.jobs_support import oracle_table, produce, random_changes, rows_as_table, source

from upsert_kafka_ops.jobs import Pipeline
from upsert_kafka_ops.jobs.targets import read_target
from upsert_kafka_ops.local import LocalKafka

from .support import stored_text, task_states, xcoms

DAG_FILE = """
from datetime import datetime

from airflow.sdk import DAG

from upsert_kafka_ops.airflow.operators import UpsertKafkaJobOperator
from upsert_kafka_ops.airflow.sensors import ConsumerLagSensor

with DAG("uko_s3_users", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    for job in ("users", "users_parquet", "users_iceberg"):
        run = UpsertKafkaJobOperator(task_id=job, pipeline_file={file!r}, job_name=job)
        caught_up = ConsumerLagSensor(task_id=f"{{job}}_caught_up", pipeline_file={file!r}, job_name=job,
                                      max_offset_lag=0, deferrable=False, poke_interval=1, timeout=120)
        run >> caught_up
"""
JOBS = ("users", "users_parquet", "users_iceberg")


def test_a_dag_keeps_delta_parquet_and_iceberg_tables_on_s3_and_its_sensors_read_the_offsets_there(
    kafka: LocalKafka, s3: LocalS3, spark: Any, airflow_db: Path, tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    servers, topic = kafka.bootstrap_servers, f"t-{uuid.uuid4().hex[:12]}"
    kafka.create_topic(topic, partitions=2)
    rnd = random.Random(19)
    produce(servers, topic, random_changes(rnd, 200, 30))
    prefix = uuid.uuid4().hex[:8]
    targets = {
        "users": {"kind": "delta", "path": f"s3a://lake/{prefix}/users", "storage": "lake"},
        "users_parquet": {"kind": "parquet", "path": f"s3a://lake/{prefix}/users_parquet", "storage": "lake"},
        "users_iceberg": {"kind": "iceberg", "catalog": "lake", "table": "crm.users"},
    }
    file = tmp_path / "lake.yaml"
    file.write_text(yaml.safe_dump({
        "connections": {"main": {"bootstrap_servers": servers}},
        "storage": {"lake": s3.storage().model_dump(mode="json", exclude_none=True)},
        "catalogs": {"lake": {"type": "hadoop", "warehouse": f"s3a://lake/{prefix}/iceberg", "storage": "lake",
                              "catalog_name": f"airflow_{prefix}"}},
        "jobs": [{"name": job, "kind": "materialize", "source": source(topic, servers), "target": target}
                 for job, target in targets.items()],
    }))  # fmt: skip
    pipeline = Pipeline.load(file)
    # a DAG file, parsed and serialized as the DAG processor would (dag.test() runs serialized DAGs)
    (tmp_path / "dags").mkdir()
    (tmp_path / "dags" / "uko_s3.py").write_text(DAG_FILE.format(file=str(file)))
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db
    from airflow.utils.session import create_session

    bag = DagBag(dag_folder=tmp_path / "dags")
    assert bag.import_errors == {}
    with create_session() as session:
        DagBundlesManager().sync_bundles_to_db(session=session)
    sync_bag_to_db(bag, "dags-folder", None)  # as the DAG processor would, from outside the dags folder
    dag = bag.dags["uko_s3_users"]

    for round_ in (1, 2):
        if round_ == 2:
            produce(servers, topic, random_changes(rnd, 100, 40))
        dagrun = dag.test()
        assert task_states(dagrun) == {t: "success" for j in JOBS for t in (j, f"{j}_caught_up")}
        expected = oracle_table(servers, topic)
        for job in JOBS:
            result = xcoms("uko_s3_users", dagrun.run_id)[job]
            mode = "full" if round_ == 1 or job == "users_parquet" else "incremental"
            assert (result["mode"], result["run"]) == (mode, round_), job
            target = pipeline.job(job).target  # type: ignore[union-attr]
            got = read_target(spark, pipeline, target).select("id", "name", "region", "score").collect()  # type: ignore[arg-type]
            assert rows_as_table(got) == expected, job
        out, err = capfd.readouterr()
        logs = "".join(p.read_text(errors="replace") for p in (Path(os.environ["AIRFLOW_HOME"]) / "logs").rglob("*")
                       if p.is_file())  # fmt: skip
        stored = stored_text("uko_s3_users", dagrun.run_id)
        assert "pipeline_file" in stored
        assert s3.secret_key not in out + err + logs + stored
