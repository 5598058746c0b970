"""The one runtime factory (upsert_kafka_ops.runtime.factory): a master string picks the kind, an
explicit kind wins, an unknown kind is refused naming the valid ones; and every surface (the Airflow
operator and hook, the Dagster resource, the CLI) gets the same runtime from it for the same input.
No JVM: building a runtime starts nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import TypeAdapter

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.runtime import (
    ConnectRuntime,
    LocalRuntime,
    Runtime,
    SparkSubmitRuntime,
    runtime_for,
    runtime_kind,
)
from upsert_kafka_ops.spec.connection import SecretRef


@pytest.mark.parametrize(
    ("master", "expected"),
    [
        (None, LocalRuntime(master="local[*]")),
        ("local", LocalRuntime(master="local")),
        ("local[*]", LocalRuntime(master="local[*]")),
        ("local[2]", LocalRuntime(master="local[2]")),
        ("local-cluster[2,1,1024]", LocalRuntime(master="local-cluster[2,1,1024]")),
        ("sc://spark-connect:15002", ConnectRuntime(remote="sc://spark-connect:15002")),
        ("sc://h:15002/;use_ssl=true;user_id=etl", ConnectRuntime(remote="sc://h:15002/;use_ssl=true;user_id=etl")),
        ("spark://m:7077", SparkSubmitRuntime(master="spark://m:7077")),
        ("spark://a:7077,b:7077", SparkSubmitRuntime(master="spark://a:7077,b:7077")),
        ("yarn", SparkSubmitRuntime(master="yarn")),
        ("k8s://https://kube:443", SparkSubmitRuntime(master="k8s://https://kube:443")),
    ],
)  # fmt: skip
def test_a_master_string_picks_the_kind(master: str | None, expected: Runtime) -> None:
    runtime = runtime_for(master)
    assert runtime == expected and type(runtime) is type(expected)
    assert runtime_kind(master) == expected.kind


@pytest.mark.parametrize(
    ("master", "kind", "expected"),
    [
        ("spark://m:7077", "local", LocalRuntime(master="spark://m:7077")),
        ("local[2]", "spark-submit", SparkSubmitRuntime(master="local[2]")),
        ("sc://h:15002", "connect", ConnectRuntime(remote="sc://h:15002")),
        (None, "local", LocalRuntime()),
    ],
)
def test_an_explicit_kind_wins_over_the_master(master: str | None, kind: str, expected: Runtime) -> None:
    assert runtime_for(master, kind=kind) == expected
    assert runtime_kind(master, kind) == kind


@pytest.mark.parametrize("kind", ["yarn", "Local", "", "submit"])
def test_an_unknown_kind_is_refused_naming_the_field_and_the_valid_kinds(kind: str) -> None:
    with pytest.raises(SpecError) as exc:
        runtime_for("local[*]", kind=kind)
    assert exc.value.field == "runtime"
    assert exc.value.message == f"{kind!r} is not a runtime."
    assert exc.value.fix == "use 'local', 'spark-submit' or 'connect'."


def test_conf_and_fields_reach_the_model_and_a_field_it_lacks_is_refused() -> None:
    submit = runtime_for(
        "yarn", conf={"spark.executor.memory": "2g"}, deploy_mode="cluster", result_uri="/r.json"
    )
    assert isinstance(submit, SparkSubmitRuntime)
    assert (submit.deploy_mode, submit.result_uri, submit.conf) == (
        "cluster",
        "/r.json",
        {"spark.executor.memory": "2g"},
    )
    with pytest.raises(SpecError) as exc:
        runtime_for("local[2]", deploy_mode="client")  # a local run has no deploy mode
    assert exc.value.field == "deploy_mode"
    with pytest.raises(SpecError) as missing:  # the model's own checks still apply
        runtime_for("yarn", deploy_mode="cluster")
    assert missing.value.field == "result_uri"
    with pytest.raises(SpecError) as remote:
        runtime_for("spark://m:7077", kind="connect")
    assert remote.value.field == "remote"


def test_applicable_settings_go_only_to_the_kinds_that_have_them() -> None:
    applicable: dict[str, Any] = {"deploy_mode": "client", "timeout_s": 60.0, "token": None}
    assert runtime_for("local[2]", applicable=applicable) == LocalRuntime(master="local[2]")
    assert runtime_for("sc://h:15002", applicable=applicable) == ConnectRuntime(remote="sc://h:15002")
    submit = runtime_for("spark://m:7077", applicable=applicable)
    assert submit == SparkSubmitRuntime(master="spark://m:7077", deploy_mode="client", timeout_s=60.0)


def test_the_union_is_discriminated_by_kind_and_round_trips() -> None:
    adapter: TypeAdapter[Runtime] = TypeAdapter(Runtime)
    for runtime in (LocalRuntime(master="local[2]"), ConnectRuntime(remote="sc://h:15002"),
                    SparkSubmitRuntime(master="yarn", deploy_mode="cluster", result_uri="/r.json")):  # fmt: skip
        data = json.loads(runtime.model_dump_json())
        assert data["kind"] == runtime.kind
        assert adapter.validate_python(data) == runtime
    assert SparkSubmitRuntime(master="yarn").kind == "spark-submit"


def test_what_depends_on_the_kind_is_asked_of_the_runtime() -> None:
    local, remote = runtime_for("local[2]"), runtime_for("sc://h:15002")
    client = runtime_for("spark://m:7077")
    cluster = runtime_for("yarn", deploy_mode="cluster", result_uri="/r.json")
    k8s = runtime_for("k8s://https://kube:443", deploy_mode="cluster", result_uri="/r.json")
    assert [r.launches_driver for r in (local, remote, client, cluster)] == [False, False, True, True]
    assert [r.can_defer for r in (local, remote, client, cluster, k8s)] == [False, False, False, True, False]
    assert local.with_driver_env({"A": "1"}) is local and remote.with_driver_env({"A": "1"}) is remote
    with_env = runtime_for("spark://m:7077", env={"A": "0", "B": "2"}).with_driver_env({"A": "1"})
    assert isinstance(with_env, SparkSubmitRuntime) and with_env.env == {"A": "1", "B": "2"}


def test_a_token_given_to_the_factory_stays_out_of_reprs_and_dumps() -> None:
    token = "tok-secret-value"
    runtime = runtime_for("sc://h:15002", token=SecretRef.from_value(token))
    assert isinstance(runtime, ConnectRuntime) and runtime.resolved_token() == token
    assert token not in repr(runtime) and token not in str(runtime)
    assert token not in runtime.model_dump_json(exclude={"token"}) and token not in runtime.remote


# -- every surface gets the same runtime for the same input ------------------------------------------
def _hook(monkeypatch: pytest.MonkeyPatch, conn: dict[str, Any]) -> Runtime:
    from upsert_kafka_ops.airflow.hooks import SparkRuntimeHook

    monkeypatch.setenv("AIRFLOW_CONN_UKO_FACTORY_TEST", json.dumps(conn))
    return SparkRuntimeHook("uko_factory_test").get_runtime()


def _operator(**kwargs: Any) -> Runtime:
    from upsert_kafka_ops.airflow.operators import UpsertKafkaJobOperator

    job = {
        "name": "j",
        "kind": "materialize",
        "source": {"connection": "c", "table": {"ddl": "CREATE TABLE x"}},
    }
    return UpsertKafkaJobOperator(task_id="t", job=job, **kwargs).runtime()


def _dagster(**kwargs: Any) -> Runtime:
    from upsert_kafka_ops.dagster.resources import SparkRuntimeResource

    return SparkRuntimeResource(**kwargs).runtime_spec()


def _cli(*options: str) -> Runtime:
    from upsert_kafka_ops.cli import build_parser
    from upsert_kafka_ops.cli.jobs import runtime_of

    return runtime_of(build_parser().parse_args(["run", "pipeline.yaml", *options]))


def test_the_surfaces_give_the_same_local_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    conf = {"spark.sql.shuffle.partitions": "4"}
    expected = runtime_for("local[2]", conf=conf)
    assert expected == LocalRuntime(master="local[2]", conf=conf)
    assert (
        _hook(monkeypatch, {"conn_type": "upsert_kafka_spark", "host": "local[2]", "extra": {"conf": conf}})
        == expected
    )
    assert _operator(spark_master="local[2]", spark_conf=conf) == expected
    assert _dagster(master="local[2]", conf=conf) == expected
    default = runtime_for()
    assert _operator() == _dagster() == _cli() == default == LocalRuntime()


def test_the_surfaces_give_the_same_spark_connect_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = runtime_for(
        "sc://warm:15002", token=SecretRef(env="UKO_TOKEN"), ca_cert=SecretRef(file="/ca.crt")
    )
    assert isinstance(expected, ConnectRuntime)
    assert (
        _cli("--remote", "sc://warm:15002", "--token", "env:UKO_TOKEN", "--ca-cert", "file:/ca.crt")
        == expected
    )
    bare = runtime_for("sc://warm:15002")
    assert _operator(spark_master="sc://warm:15002") == bare
    assert _dagster(runtime="connect", master="sc://warm:15002") == bare
    assert _hook(monkeypatch, {"conn_type": "spark_connect", "host": "warm"}) == bare
    assert _hook(monkeypatch, {"conn_type": "upsert_kafka_spark", "host": "sc://warm", "port": 15002}) == bare
    assert (
        _hook(
            monkeypatch, {"conn_type": "upsert_kafka_spark", "host": "warm", "extra": {"runtime": "connect"}}
        )
        == bare
    )
    with_token = _dagster(runtime="connect", master="sc://warm:15002", token="tok-secret-value")
    assert isinstance(with_token, ConnectRuntime) and with_token.resolved_token() == "tok-secret-value"


def test_the_surfaces_give_the_same_spark_submit_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    conf = {"spark.executor.memory": "2g"}
    expected = runtime_for("spark://m:7077", conf=conf, timeout_s=600.0)
    assert expected == SparkSubmitRuntime(master="spark://m:7077", conf=conf, timeout_s=600.0)
    hook = _hook(monkeypatch, {"conn_type": "upsert_kafka_spark", "host": "spark://m", "port": 7077,
                               "extra": {"conf": conf, "timeout_s": 600}})  # fmt: skip
    assert hook == expected
    assert _hook(monkeypatch, {"conn_type": "spark", "host": "spark://m", "port": 7077,
                               "extra": {"conf": conf, "timeout_s": 600, "queue": "q"}}) == expected  # fmt: skip
    assert _operator(spark_master="spark://m:7077", spark_conf=conf, spark_submit_timeout=600) == expected
    assert _dagster(runtime="spark-submit", master="spark://m:7077", conf=conf, timeout_s=600) == expected


def test_the_surfaces_refuse_an_unknown_kind_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SpecError) as hook:
        _hook(monkeypatch, {"conn_type": "upsert_kafka_spark", "host": "yarn", "extra": {"runtime": "yarn"}})
    assert hook.value.field == "Airflow connection 'uko_factory_test': extra.runtime"
    assert (hook.value.message, hook.value.fix) == (
        "'yarn' is not a runtime.",
        "use 'local', 'spark-submit' or 'connect'.",
    )
    with pytest.raises(ValueError, match="spark-submit"):  # Dagster's field is the kinds' Literal
        _dagster(runtime="yarn")


def test_the_clis_remote_options_keep_their_names_in_errors() -> None:
    with pytest.raises(SpecError) as exc:
        _cli("--remote", "spark://m:7077")
    assert exc.value.field == "--remote"
    with pytest.raises(SpecError) as token:
        _cli("--token", "env:X")
    assert token.value.field == "--token"


def test_jobs_run_job_is_the_in_process_runner_itself_with_its_signature() -> None:
    import inspect

    import upsert_kafka_ops
    import upsert_kafka_ops.jobs as jobs
    from upsert_kafka_ops.jobs import run

    assert jobs.run_job is run.run_job and jobs.run_spec is run.run_spec
    assert upsert_kafka_ops.run_job is run.run_job
    assert list(inspect.signature(jobs.run_job).parameters) == [
        "pipeline",
        "job",
        "mode",
        "spark",
        "lock_timeout_s",
    ]
    with pytest.raises(AttributeError, match="no attribute 'run_jobs'"):
        jobs.run_jobs  # noqa: B018
