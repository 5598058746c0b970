"""The provider as Airflow sees it: registration, DAG imports, templates, secrets masking, errors of a
failing job, and the pyspark the airflow extra leaves installed."""

from __future__ import annotations

import json
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from upsert_kafka_ops.airflow.hooks import SparkRuntimeHook, UpsertKafkaHook
from upsert_kafka_ops.airflow.operators import (
    UpsertKafkaBackfillOperator,
    UpsertKafkaJobOperator,
    UpsertKafkaMaterializeOperator,
)
from upsert_kafka_ops.runtime.execute import LocalRuntime
from upsert_kafka_ops.runtime.submit import SparkSubmitRuntime

from .conftest import ROOT

DEMO = ROOT / "pipelines" / "demo.yaml"


def test_provider_is_discovered_under_its_distribution_name() -> None:
    from airflow.providers_manager import ProvidersManager

    pm = ProvidersManager()
    pm.initialize_providers_hooks()
    assert "upsert-kafka-ops" in pm.providers
    info = pm.providers["upsert-kafka-ops"]
    assert info.version == distribution("upsert-kafka-ops").version
    hook = pm.hooks["upsert_kafka_spark"]
    assert hook is not None and hook.hook_class_name == "upsert_kafka_ops.airflow.hooks.SparkRuntimeHook"
    types = {ct["connection-type"] for ct in info.data["connection-types"]}
    assert types == {"upsert_kafka_spark"}  # the Kafka provider's `kafka` type is reused, not redone
    # ... and the [airflow] extra installs that provider, so the UI's Add Connection form offers it
    # the webserver finds the operators' "Spark History" link class through the provider
    assert "upsert_kafka_ops.airflow.operators.SparkHistoryLink" in pm.extra_links_class_names
    kafka = pm.hooks["kafka"]
    assert kafka is not None and kafka.package_name == "apache-airflow-providers-apache-kafka"


def test_every_example_dag_imports_cleanly() -> None:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=ROOT / "dags")
    assert bag.import_errors == {}
    assert set(bag.dag_ids) == {
        "users_to_delta",
        "users_to_delta_on_backlog",
        "pageviews_per_region",
        "upsert_kafka_backfill",
        "upsert_kafka_demo",
    }
    for dag_id in (
        "users_to_delta",
        "users_to_delta_on_backlog",
        "pageviews_per_region",
        "upsert_kafka_demo",
    ):
        assert bag.dags[dag_id].max_active_runs == 1, dag_id
    # Assets: the demo DAG's publish task writes the users topic the 5-minute DAG is scheduled on
    factory = bag.dags["upsert_kafka_demo"]
    published = {a.uri for a in factory.get_task("publish-users").outlets}
    (users_topic,) = [u for u in published if u.startswith("kafka://")]
    assert users_topic.endswith("/users")
    scheduled = {a.uri for _, a in bag.dags["pageviews_per_region"].timetable.asset_condition.iter_assets()}
    assert users_topic in scheduled and any(u.endswith("/pageviews") for u in scheduled)
    (table,) = (a.uri for a in factory.get_task("users-to-delta").outlets)
    assert table.startswith("file:///") and table.endswith("/warehouse/users")
    gated = bag.dags["users_to_delta"]
    assert gated.get_task("users_to_delta").upstream_task_ids == {"new_users"}
    # the same job started by its topic: an asset watched by a BacklogTrigger
    (watched,) = bag.dags["users_to_delta_on_backlog"].timetable.asset_condition.objects
    (watcher,) = watched.watchers
    kind, kwargs = watcher.trigger.serialize()
    assert (
        kind == "upsert_kafka_ops.airflow.triggers.BacklogTrigger"
        and kwargs["ref"]["job_name"] == "users-to-delta"
    )
    factory = bag.dags["upsert_kafka_demo"]  # one task per job, ordered by topics and tables
    assert {t.task_id: t.upstream_task_ids for t in factory.tasks} == {
        "publish-users": set(),
        "users-to-delta": {"publish-users"},
        "users-history": {"publish-users"},
        "users-live": {"publish-users"},  # the continuous job's lag sensor
        "pageviews-per-region": {"publish-users"},
        "pageviews-per-page": set(),
    }


def test_a_pipeline_dag_takes_its_schedule_from_the_jobs_and_refuses_two(tmp_path: Path) -> None:
    from upsert_kafka_ops.airflow.factory import pipeline_dag
    from upsert_kafka_ops.errors import SpecError

    text = DEMO.read_text()
    assert '    schedule: "@hourly"' in text  # users-to-delta's, the only job with one
    assert pipeline_dag(DEMO).timetable.expression == "0 * * * *"  # the preset, as the file's one schedule
    assert pipeline_dag(DEMO, schedule="*/5 * * * *").timetable.expression == "*/5 * * * *"
    plain = tmp_path / "plain.yaml"
    plain.write_text("\n".join(line for line in text.splitlines() if "schedule:" not in line))
    assert not pipeline_dag(plain).timetable.can_be_scheduled  # no job has one: runs when triggered
    two = tmp_path / "two.yaml"
    two.write_text(
        text.replace("  - name: publish-users\n", "  - name: publish-users\n    schedule: '@daily'\n")
    )
    with pytest.raises(SpecError, match="different schedules") as info:
        pipeline_dag(two)
    assert "publish-users: '0 0 * * *'" in str(info.value) and "schedule=" in (info.value.fix or "")


def test_backfill_fields_render_from_params() -> None:
    op = UpsertKafkaBackfillOperator(
        task_id="b", pipeline_file=str(DEMO), job_name="{{ params.job }}", until="{{ params.end }}",
        rewind="{{ params.rewind }}", kafka_config_ids={"local": "{{ params.conn }}"},
    )  # fmt: skip
    params = {"job": "users-to-delta", "end": "2026-11-22T10:00:00Z", "rewind": True, "conn": "kafka_default"}
    op.render_template_fields(context={"params": params})  # type: ignore[arg-type]
    assert (op.job_name, op.until, op.rewind, op.kafka_config_ids) == (
        "users-to-delta", "2026-11-22T10:00:00Z", "True", {"local": "kafka_default"},
    )  # fmt: skip
    from upsert_kafka_ops.jobs import Pipeline

    job = op.prepare(Pipeline.load(DEMO), "users-to-delta").job("users-to-delta")
    assert job.kind == "backfill" and job.until == {"timestamp_ms": 1_795_341_600_000} and job.rewind is True  # type: ignore[union-attr]


def test_hook_builds_the_connection_and_masks_every_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk._shared.secrets_masker import redact

    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="jaas-pass-42";'
    extra = {"bootstrap.servers": "b1:9092,b2:9092", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
             "sasl.username": "u", "sasl.password": "extra-pass-42", "sasl.jaas.config": jaas}  # fmt: skip
    monkeypatch.setenv("AIRFLOW_CONN_SECURED", json.dumps({"conn_type": "kafka", "extra": extra}))
    conn = UpsertKafkaHook("secured").get_kafka_connection()
    assert (conn.bootstrap_servers, conn.security_protocol, conn.sasl_mechanism, conn.username) == (
        "b1:9092,b2:9092", "SASL_SSL", "SCRAM-SHA-512", "u",
    )  # fmt: skip
    assert conn.password is not None and conn.password.resolve() == "extra-pass-42"
    assert conn.sasl_jaas_config is not None and conn.sasl_jaas_config.resolve() == jaas
    assert "extra-pass-42" not in repr(conn) and "extra-pass-42" not in str(conn.model_dump())
    line = f"sasl.password=extra-pass-42 jaas={jaas} key=-----BEGIN KEY-----abc pw=jaas-pass-42"
    masked = str(redact(line))
    for secret in ("extra-pass-42", "jaas-pass-42"):
        assert secret not in masked, masked
    # an inline key is refused (the core wants a file), and it was masked before the error was raised
    pem = {**extra, "ssl.key.pem": "-----BEGIN KEY-----abc"}
    monkeypatch.setenv("AIRFLOW_CONN_PEM", json.dumps({"conn_type": "kafka", "extra": pem}))
    from upsert_kafka_ops.errors import SpecError

    with pytest.raises(SpecError, match="ssl_key_location"):
        UpsertKafkaHook("pem").get_kafka_connection()
    assert "-----BEGIN KEY-----abc" not in str(redact("key -----BEGIN KEY-----abc"))


def test_a_connection_without_servers_fails_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from upsert_kafka_ops.errors import SpecError

    monkeypatch.setenv("AIRFLOW_CONN_EMPTY", json.dumps({"conn_type": "kafka", "extra": {"group.id": "g"}}))
    with pytest.raises(SpecError) as exc:
        UpsertKafkaHook("empty").get_kafka_connection()
    assert "Airflow connection 'empty'" in exc.value.field and "bootstrap.servers" in exc.value.field


def test_the_spark_providers_connection_types_select_connect_and_spark_submit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Connections a SparkSubmitOperator or Spark Connect user already has work as they are: a
    ``spark_connect`` connection (password = token, login = user id) and a ``spark`` connection."""
    from upsert_kafka_ops.runtime import ConnectRuntime

    monkeypatch.setenv("AIRFLOW_CONN_SC", json.dumps({"conn_type": "spark_connect", "host": "sc://spark-connect",
                                                      "login": "etl", "password": "tok-secret",
                                                      "extra": {"use_ssl": True,
                                                                "ca_cert": "file:/etc/uko/ca.crt"}}))  # fmt: skip
    remote = SparkRuntimeHook("sc").get_runtime()
    assert isinstance(remote, ConnectRuntime)
    assert remote.remote == "sc://spark-connect:15002/;user_id=etl;use_ssl=true"
    assert "tok-secret" not in repr(remote) and "tok-secret" not in remote.model_dump_json(exclude={"token"})
    assert remote.resolved_token() == "tok-secret" and "tok-secret" not in remote.remote
    assert remote.ca_cert is not None and remote.ca_cert.file == "/etc/uko/ca.crt"
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_PROVIDER", json.dumps({"conn_type": "spark", "host": "spark://m",
                                                                  "port": 7077,
                                                                  "extra": {"deploy-mode": "client",
                                                                            "queue": "q"}}))  # fmt: skip
    submit = SparkRuntimeHook("spark_provider").get_runtime()
    assert isinstance(submit, SparkSubmitRuntime)
    assert (submit.master, submit.deploy_mode) == ("spark://m:7077", "client")
    op = UpsertKafkaJobOperator(task_id="t", pipeline_file=str(DEMO), spark_master="sc://warm:15002")
    assert op.runtime() == ConnectRuntime(remote="sc://warm:15002")


def test_runtime_connection_selects_local_or_spark_submit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_LOCAL", json.dumps({"conn_type": "upsert_kafka_spark", "host": "local[2]"})
    )
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER", json.dumps(
        {"conn_type": "upsert_kafka_spark", "host": "spark://m", "port": 7077,
         "extra": {"conf": {"spark.executor.memory": "2g"}, "timeout_s": 600}}))  # fmt: skip
    local = SparkRuntimeHook("spark_local").get_runtime()
    assert isinstance(local, LocalRuntime) and local.master == "local[2]"
    cluster = SparkRuntimeHook("spark_cluster").get_runtime()
    assert isinstance(cluster, SparkSubmitRuntime)
    assert (cluster.master, cluster.conf, cluster.timeout_s) == (
        "spark://m:7077",
        {"spark.executor.memory": "2g"},
        600,
    )
    op = UpsertKafkaJobOperator(task_id="t", pipeline_file=str(DEMO), spark_config_id="spark_cluster",
                                spark_conf={"spark.executor.cores": "2"})  # fmt: skip
    merged = op.runtime()
    assert merged.conf == {"spark.executor.memory": "2g", "spark.executor.cores": "2"}
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_BAD", json.dumps({"conn_type": "upsert_kafka_spark", "host": "yarn",
                                                            "extra": {"deploy_mode": "cluster"}}))  # fmt: skip
    from upsert_kafka_ops.errors import SpecError

    with pytest.raises(SpecError) as exc:
        SparkRuntimeHook("spark_bad").get_runtime()
    assert exc.value.field == "Airflow connection 'spark_bad': extra.result_uri"


def test_a_bad_spec_fails_the_task_with_the_field_and_no_retry(kafka_default: dict[str, str]) -> None:
    job = {"name": "bad", "kind": "materialize", "source": {"connection": "main", "table": {"ddl": "CREATE TABLE x"}},
           "target": {"kind": "delta", "path": "/tmp/x"}}  # fmt: skip
    with pytest.raises(AirflowFailException) as exc:
        UpsertKafkaJobOperator(task_id="t", job=job).execute(context={})  # type: ignore[arg-type]
    assert (
        "SpecError: job.source.table.ddl: a CREATE TABLE without a WITH clause is not supported (line 1"
        in str(exc.value)
    )
    assert exc.value.__cause__ is None and exc.value.__suppress_context__  # the core's message, no chain
    with pytest.raises(AirflowFailException, match="is a materialize job; UpsertKafkaTopicToTopicOperator"):
        from upsert_kafka_ops.airflow.operators import UpsertKafkaTopicToTopicOperator

        UpsertKafkaTopicToTopicOperator(
            task_id="t", pipeline_file=str(DEMO), job_name="users-to-delta", kafka_config_id="kafka_default"
        ).execute(context={})  # type: ignore[arg-type]


def test_a_broker_that_is_down_fails_the_task_naming_the_servers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from upsert_kafka_ops.local.process import free_port

    down = f"127.0.0.1:{free_port()}"
    monkeypatch.setenv(
        "AIRFLOW_CONN_DOWN", json.dumps({"conn_type": "kafka", "extra": {"bootstrap.servers": down}})
    )
    monkeypatch.setenv("UKO_DEMO_DIR", str(tmp_path))
    op = UpsertKafkaMaterializeOperator(task_id="t", pipeline_file=str(DEMO), job_name="users-to-delta",
                                        kafka_config_id="down", lock_timeout=5)  # fmt: skip
    from upsert_kafka_ops.airflow.sensors import NewDataSensor

    sensor = NewDataSensor(
        task_id="s", pipeline_file=str(DEMO), job_name="users-to-delta", kafka_config_id="down"
    )
    with pytest.raises(AirflowException) as exc:
        sensor.poke(context={})  # type: ignore[arg-type]
    assert down in str(exc.value) and "Traceback" not in str(exc.value)
    assert not isinstance(exc.value, AirflowFailException)  # a broker can come back: retries apply
    del op


def test_the_airflow_extra_keeps_the_full_pyspark_with_its_jars() -> None:
    import pyspark

    with pytest.raises(PackageNotFoundError):
        distribution("pyspark-client")  # apache-airflow-providers-apache-spark would bring it
    jars = Path(pyspark.__file__).parent / "jars"
    assert any(p.name.startswith("spark-core_2.13-") for p in jars.iterdir())
    assert distribution("pyspark").version == pyspark.__version__


def test_openlineage_datasets_name_the_topic_and_the_table(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_LINEAGE",
        json.dumps({"conn_type": "kafka", "extra": {"bootstrap.servers": "b1:9092,b2:9092"}}),
    )
    monkeypatch.setenv("UKO_DEMO_DIR", str(tmp_path))
    op = UpsertKafkaMaterializeOperator(task_id="t", pipeline_file=str(DEMO), job_name="users-to-delta",
                                        kafka_config_ids={"local": "lineage"})  # fmt: skip
    inputs, outputs = op.lineage_datasets()
    assert [(d.namespace, d.name) for d in inputs] == [("kafka://b1:9092", "users")]
    assert [d.name for d in outputs] == [str(tmp_path / "warehouse" / "users")]
    back = UpsertKafkaBackfillOperator(task_id="b", pipeline_file=str(DEMO), job_name="users-to-delta",
                                       kafka_config_ids={"local": "lineage"})  # fmt: skip
    assert back.lineage_datasets() == (inputs, outputs)  # a backfill reads and writes the same datasets
    # the Assets it declares at parse time carry the same names, as URIs
    assert [a.uri for a in op.inlets] == ["kafka://b1:9092/users"] == [d.uri for d in inputs]
    assert [a.uri for a in op.outlets] == [f"file://{tmp_path}/warehouse/users"] == [d.uri for d in outputs]
    assert (back.inlets, back.outlets) == (op.inlets, op.outlets)


def test_a_maintain_job_gets_a_dag_of_its_own_on_its_schedule(tmp_path: Path) -> None:
    from upsert_kafka_ops.airflow.factory import pipeline_dags

    folder = tmp_path / "pipelines"
    folder.mkdir()
    tidy = "  - name: tidy-users\n    kind: maintain\n    job: users-to-delta\n    schedule: '0 3 * * *'\n"
    (folder / "demo.yaml").write_text(DEMO.read_text().rstrip("\n") + "\n" + tidy)
    dags = pipeline_dags(folder, kafka_config_id="kafka_default")
    assert set(dags) == {"upsert_kafka_demo", "upsert_kafka_demo__tidy_users"}
    pipeline, tidying = dags["upsert_kafka_demo"], dags["upsert_kafka_demo__tidy_users"]
    assert "tidy-users" not in pipeline.task_ids  # its own schedule, not the pipeline's
    assert pipeline.timetable.expression == "0 * * * *"
    assert tidying.timetable.expression == "0 3 * * *" and tidying.max_active_runs == 1
    (task,) = tidying.tasks
    assert isinstance(task, UpsertKafkaJobOperator) and task.job_name == "tidy-users"


def test_a_continuous_job_is_a_lag_sensor_in_the_pipeline_dag_never_a_run(tmp_path: Path) -> None:
    from upsert_kafka_ops.airflow.factory import pipeline_dag
    from upsert_kafka_ops.airflow.sensors import ConsumerLagSensor

    live = tmp_path / "live.yaml"
    text = DEMO.read_text()
    assert '    schedule: "@hourly"' in text  # users-to-delta's: a continuous job has none
    live.write_text(text.replace('    schedule: "@hourly"', "    trigger: {continuous: true}"))
    dag = pipeline_dag(live, kafka_config_id="kafka_default", continuous_time_lag_s=30)
    task = dag.get_task("users-to-delta")
    assert isinstance(task, ConsumerLagSensor) and not isinstance(task, UpsertKafkaJobOperator)
    assert task.job_name == "users-to-delta" and task.condition["max_time_lag_s"] == 30
    assert task.timeout == 600 and task.poke_interval == 30
    assert task.upstream_task_ids == {"publish-users"}  # still in order: it waits for what it reads
    assert isinstance(dag.get_task("users-live"), ConsumerLagSensor)  # the demo file's own continuous job
    others = [t for t in dag.tasks if t.task_id not in ("users-to-delta", "users-live")]
    assert others and all(isinstance(t, UpsertKafkaJobOperator) for t in others)
    assert not dag.timetable.can_be_scheduled  # the file's one schedule was the continuous job's
    # a continuous publish reads a Delta table: no consumer group, no lag to wait on, so no task
    both = tmp_path / "both.yaml"
    publish = "    sink: {table: users}\n"
    assert text.count(publish) == 1
    both.write_text(live.read_text().replace(publish, publish + "    trigger: {continuous: true}\n"))
    dag = pipeline_dag(both, kafka_config_id="kafka_default")
    assert "publish-users" not in dag.task_ids and not dag.get_task("users-to-delta").upstream_task_ids
