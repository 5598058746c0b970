"""The chart rendered with helm over a matrix of values files: ``helm lint --strict`` passes, every
object validates against the Kubernetes 1.33 schemas (kubernetes-validate, strict) or the vendored
ServiceMonitor schema, the exact set of (kind, name) per values file, no secret value in any
ConfigMap or in NOTES, and invalid values fail with a message that names the value and the fix."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from .conftest import CHART, KUBE_VERSION, ROOT, VALUES, HelmError, helm, kinds_and_names, render

SERVICE_MONITOR_SCHEMA = json.loads(
    (Path(__file__).parent / "schemas" / "servicemonitor-monitoring.coreos.com-v1.json").read_text()
)
PASSWORD = "s3cr3t-PASSWORD-in-values"
S3_SECRET = "s3-SECRET-KEY-in-values"
CATALOG_PASSWORD = "iceberg-PASSWORD-in-values"
F = "r1-upsert-kafka-ops"
BASE = {
    ("ServiceAccount", f"{F}-spark"), ("Secret", f"{F}-kafka"), ("Secret", f"{F}-object-storage"),
    ("ConfigMap", f"{F}-env"),
    ("ConfigMap", f"{F}-pipelines"), ("ConfigMap", f"{F}-spark"), ("Role", f"{F}-spark"),
    ("RoleBinding", f"{F}-spark"), ("Service", f"{F}-driver"),
}  # fmt: skip
EXPORTER = {("Deployment", f"{F}-lag-exporter"), ("Service", f"{F}-lag-exporter")}
EXPECTED: dict[str, set[tuple[str, str]]] = {
    "minimal.yaml": BASE,
    "sasl-inline.yaml": BASE
    | EXPORTER
    | {
        ("ServiceMonitor", f"{F}-lag-exporter"),
        ("PrometheusRule", f"{F}-alerts"),
        ("ConfigMap", f"{F}-dashboard"),
    },
    "existing-secret.yaml": {
        ("ConfigMap", "uko-env"),
        ("ConfigMap", "uko-pipelines"),
        ("ConfigMap", "uko-spark"),
    },
    "exporter-only.yaml": BASE | EXPORTER,
    "spark-connect.yaml": BASE | {("Deployment", f"{F}-spark-connect"), ("Service", f"{F}-spark-connect")},
}


def _validate(obj: dict[str, Any]) -> None:
    if obj["kind"] == "ServiceMonitor":
        jsonschema.validate(obj, SERVICE_MONITOR_SCHEMA)
    elif obj["kind"] == "PrometheusRule":  # its spec is a Prometheus rule file: promtool checks it
        assert obj["apiVersion"] == "monitoring.coreos.com/v1" and set(obj["spec"]) == {"groups"}
        promtool_check_rules(obj["spec"])
    else:
        kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)


@pytest.mark.parametrize("values", sorted(EXPECTED))
def test_each_values_file_lints_renders_validates_and_makes_exactly_its_objects(values: str) -> None:
    helm("lint", "--strict", str(CHART), "-f", str(VALUES / values), "--kube-version", KUBE_VERSION)
    objects = render(VALUES / values)
    assert kinds_and_names(objects) == EXPECTED[values]
    assert len(objects) == len(EXPECTED[values])  # no object twice
    for obj in objects:
        _validate(obj)
        assert obj["metadata"]["namespace"] == "uko"
        assert obj["metadata"]["labels"]["app.kubernetes.io/instance"] == "r1"


def test_the_password_is_in_the_secret_alone_never_in_another_object_or_the_notes() -> None:
    objects = render(VALUES / "sasl-inline.yaml")
    assert {o["kind"] for o in objects} >= {"ConfigMap", "Deployment", "Service", "PrometheusRule", "Role"}
    leaks = [
        f"{o['kind']}/{o['metadata']['name']}"
        for o in objects
        if o["kind"] != "Secret" and any(s in json.dumps(o) for s in (PASSWORD, S3_SECRET, CATALOG_PASSWORD))
    ]
    assert leaks == []
    secrets = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Secret"}
    store = {k: base64.b64decode(v).decode() for k, v in secrets[f"{F}-object-storage"]["data"].items()}
    assert store == {"access-key-id": "AKIA-in-values", "secret-access-key": S3_SECRET,
                     "iceberg-catalog-password": CATALOG_PASSWORD}  # fmt: skip
    data = {k: base64.b64decode(v).decode() for k, v in secrets[f"{F}-kafka"]["data"].items()}
    assert data["password"] == PASSWORD and data["username"] == "etl"
    conn = json.loads(data["airflow-connection"])  # what AIRFLOW_CONN_KAFKA_DEFAULT gets
    assert conn == {
        "conn_type": "kafka",
        "login": "etl",
        "password": PASSWORD,
        "extra": {
            "bootstrap.servers": "b1:9093,b2:9093",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
        },
    }
    # the exporter gets the password from the Secret, never as a value
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    assert PASSWORD not in json.dumps(deployment)
    # the exporter reads tables on S3: the keys a pipeline's storage section names, by reference
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"] if "valueFrom" in e}
    assert refs["UKO_S3_SECRET_ACCESS_KEY"] == {"name": f"{F}-object-storage", "key": "secret-access-key",
                                                "optional": True}  # fmt: skip
    assert refs["UKO_ICEBERG_CATALOG_PASSWORD"] == {"name": f"{F}-object-storage",
                                                    "key": "iceberg-catalog-password", "optional": True}  # fmt: skip
    notes = render_notes(VALUES / "sasl-inline.yaml")
    assert "Wire it into the official Airflow chart" in notes
    assert PASSWORD not in notes and "r1-upsert-kafka-ops-kafka" in notes


def render_notes(values: Path, tmp: Path | None = None) -> str:
    """NOTES.txt as helm renders it (helm template skips it and install needs a cluster: render a
    copy of the chart where NOTES.txt is also an ordinary template)."""
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        copy = Path(d) / "chart"
        shutil.copytree(CHART, copy)
        shutil.copy(copy / "templates" / "NOTES.txt", copy / "templates" / "notes-rendered.txt")
        return helm("template", "r1", str(copy), "--namespace", "uko", "-f", str(values),
                    "--show-only", "templates/notes-rendered.txt")  # fmt: skip


def test_spark_defaults_pass_credentials_by_secret_reference() -> None:
    objects = render(VALUES / "sasl-inline.yaml")
    (spark,) = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-spark")]
    conf = dict(line.split(" ", 1) for line in spark["data"]["spark-defaults.conf"].splitlines() if line)
    assert conf["spark.kubernetes.driver.secretKeyRef.UKO_KAFKA_PASSWORD"] == f"{F}-kafka:password"
    assert conf["spark.kubernetes.executor.secretKeyRef.UKO_KAFKA_PASSWORD"] == f"{F}-kafka:password"
    assert conf["spark.kubernetes.driver.secretKeyRef.UKO_S3_SECRET_ACCESS_KEY"] == (
        f"{F}-object-storage:secret-access-key")  # fmt: skip
    assert conf["spark.kubernetes.driver.secretKeyRef.UKO_ICEBERG_CATALOG_PASSWORD"] == (
        f"{F}-object-storage:iceberg-catalog-password")  # fmt: skip
    assert conf["spark.kubernetes.authenticate.driver.serviceAccountName"] == f"{F}-spark"
    assert conf["spark.driver.host"] == f"{F}-driver.uko.svc" and conf["spark.driver.port"] == "7078"
    assert conf["spark.executor.memory"] == "2g"
    existing = render(VALUES / "existing-secret.yaml")
    (spark2,) = [o for o in existing if o["metadata"]["name"] == "uko-spark"]
    text = spark2["data"]["spark-defaults.conf"]
    assert "secretKeyRef.UKO_KAFKA_PASSWORD kafka-credentials:pass" in text
    assert "serviceAccountName spark" in text and "spark.driver.host" not in text


def test_role_binds_the_driver_and_the_orchestrator_accounts() -> None:
    objects = render(VALUES / "sasl-inline.yaml")
    (role,) = [o for o in objects if o["kind"] == "Role"]
    assert set(role["rules"][0]["resources"]) == {"pods", "services", "configmaps", "persistentvolumeclaims"}
    (binding,) = [o for o in objects if o["kind"] == "RoleBinding"]
    assert [(s["name"], s["namespace"]) for s in binding["subjects"]] == [
        (f"{F}-spark", "uko"), ("airflow-worker", "uko"), ("dagster", "dagster")]  # fmt: skip


def test_one_exporter_serves_every_pipeline_file_on_one_port() -> None:
    objects = render(VALUES / "exporter-only.yaml")
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (c,) = deployment["spec"]["template"]["spec"]["containers"]
    assert c["args"][:2] == ["lag", "--serve"] and c["ports"] == [{"name": "metrics", "containerPort": 9400}]
    from upsert_kafka_ops.cli import build_parser

    args = build_parser().parse_args(c["args"])  # the image's entrypoint is upsert-kafka-ops: its parser
    assert [str(f) for f in args.pipeline] == [
        f"/etc/upsert-kafka-ops/pipelines/{f}" for f in ("a.yaml", "b.yaml", "c.yaml")
    ]
    assert (args.serve, args.port, args.host, args.schedule_grace) == (True, 9400, "0.0.0.0", 300.0)
    # the Burrow windows (a file per pipeline in one folder) on the pod's volume: a restart keeps them
    mounts = {m["mountPath"] for m in c["volumeMounts"]}
    assert args.window.parent.as_posix() in mounts and args.window.name == "lag-windows"
    # alive and ready while the process answers: a broker outage is the lag_up series, not a lost target
    assert c["readinessProbe"]["httpGet"]["path"] == c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    (service,) = [
        o for o in objects if o["kind"] == "Service" and o["metadata"]["name"].endswith("lag-exporter")
    ]
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 9400, "targetPort": "metrics"}]
    assert "/etc/upsert-kafka-ops/pipelines" in mounts
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in c["env"]}
    assert env["UKO_KAFKA_PASSWORD"]["name"] == f"{F}-kafka"


def promtool_check_rules(groups: dict[str, Any]) -> str:
    """``promtool check rules`` over ``groups`` (Prometheus's own parser: PromQL, durations, templates)."""
    import os
    import subprocess
    import tempfile

    promtool = Path(os.environ.get("UKO_PROMETHEUS_BIN") or ROOT / ".tools" / "bin") / "promtool"
    if not promtool.exists():
        pytest.fail(f"promtool not found at {promtool}: run `make prometheus` or set UKO_PROMETHEUS_BIN.")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as rules:
        yaml.safe_dump(groups, rules)
        rules.flush()
        done = subprocess.run([str(promtool), "check", "rules", rules.name], capture_output=True, text=True,
                              timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_alerts_and_dashboard_ship_as_prometheus_rule_and_sidecar_configmap() -> None:
    objects = render(VALUES / "sasl-inline.yaml")
    (rule,) = [o for o in objects if o["kind"] == "PrometheusRule"]
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    shipped = yaml.safe_load((CHART / "files" / "alerts.yaml").read_text())
    assert rule["spec"] == shipped  # the file, unchanged
    names = {r["alert"] for g in shipped["groups"] for r in g["rules"]}
    assert {"UpsertKafkaJobOverdue", "UpsertKafkaRecordsNeverRead", "UpsertKafkaRunFailed",
            "UpsertKafkaLagUnreadable", "UpsertKafkaLagExporterDown"} <= names  # fmt: skip
    assert all(
        r["labels"]["severity"] in ("warning", "critical") for g in shipped["groups"] for r in g["rules"]
    )
    (board,) = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == f"{F}-dashboard"]
    assert board["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(board["data"]["upsert-kafka-ops.json"])
    assert dashboard == json.loads((CHART / "files" / "grafana-dashboard.json").read_text())
    # every panel query is PromQL Prometheus parses (as recording rules, with the variables set to all)
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(exprs) >= 8 and all('pipeline=~"$pipeline"' in e for e in exprs)
    records = [{"record": f"dashboard:panel_{i}", "expr": e.replace("$pipeline", ".*").replace("$job", ".*")}
               for i, e in enumerate(exprs)]  # fmt: skip
    assert f"SUCCESS: {len(records)} rules found" in promtool_check_rules(
        {"groups": [{"name": "dashboard", "rules": records}]}
    )
    titles = {p["title"] for p in dashboard["panels"]}
    assert {"Lag per job (records)", "Lag per partition", "Time lag per job", "Run outcome (1 = last run succeeded)",
            "Run duration", "Records per run"} <= titles  # fmt: skip


def test_the_spark_connect_server_listens_where_its_service_points() -> None:
    objects = render(VALUES / "spark-connect.yaml")
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    from upsert_kafka_ops.cli import build_parser

    args = build_parser().parse_args(container["args"])  # the image's entrypoint is upsert-kafka-ops
    assert (args.host, args.port, args.master) == ("0.0.0.0", 15002, "local[4]")
    assert args.conf == ["spark.sql.shuffle.partitions=8"]
    assert args.group == ["s3", "iceberg"]  # the image's S3A and Iceberg jars, for those targets' runs
    assert container["ports"] == [{"name": "grpc", "containerPort": 15002}]
    (service,) = [
        o for o in objects if o["kind"] == "Service" and o["metadata"]["name"] == f"{F}-spark-connect"
    ]
    assert service["spec"]["ports"] == [{"name": "grpc", "port": 15002, "targetPort": "grpc"}]
    assert service["spec"]["selector"] == deployment["spec"]["template"]["metadata"]["labels"]


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (("kafka.existingSecret=mine", "kafka.password=x"),
         "kafka.existingSecret and kafka.username/kafka.password are both set"),
        (("kafka.bootstrapServers=",), "kafka.bootstrapServers is required"),
        (("sparkConnect.conf.spark\\.ssl\\.keyPassword=x",), "sparkConnect.conf.spark.ssl.keyPassword looks like a secret"),
        (("kafka.securityProtocol=SASL_SSL", "kafka.username=u", "kafka.password=p"),
         "kafka.saslMechanism is required with kafka.securityProtocol=SASL_SSL"),
        (("kafka.securityProtocol=SASL_SSL", "kafka.saslMechanism=PLAIN"),
         "kafka.securityProtocol=SASL_SSL needs credentials"),
        (("spark.conf.spark\\.ssl\\.keyPassword=x",), "spark.conf.spark.ssl.keyPassword looks like a secret"),
        (("spark.driverService.port=70000",), "/spark/driverService/port"),
        (("kafka.bootstrapServer=typo:9092",), "bootstrapServer"),
        (("lagExporter.serviceMonitor.enabled=true",), "lagExporter.serviceMonitor.enabled needs lagExporter.enabled"),
        (("rbac.orchestratorServiceAccounts[0].namespace=x",), "rbac.orchestratorServiceAccounts[0].name is empty"),
        (("objectStorage.accessKeyId=AK",), "objectStorage.accessKeyId and objectStorage.secretAccessKey go together"),
        (("objectStorage.existingSecret=s3", "objectStorage.secretAccessKey=x", "objectStorage.accessKeyId=y"),
         "objectStorage.existingSecret and objectStorage.accessKeyId/secretAccessKey are both set"),
    ],
)  # fmt: skip
def test_invalid_values_fail_naming_the_value(sets: tuple[str, ...], message: str) -> None:
    with pytest.raises(HelmError) as err:
        render(VALUES / "minimal.yaml", sets=sets)
    assert message in str(err.value)


def test_without_pipelines_the_release_fails_with_the_fix() -> None:
    with pytest.raises(HelmError, match=r"pipelines is empty: give at least one pipeline file"):
        render(sets=("kafka.bootstrapServers=k:9092",))
    with pytest.raises(HelmError, match=r"pipelines.bad name: a pipeline file name"):
        render(VALUES / "minimal.yaml", sets=("pipelines.bad name=x",))


def test_values_files_in_the_matrix_are_valid_yaml_for_the_models() -> None:
    from upsert_kafka_ops.deploy.helm_values import HelmValues

    for f in sorted(VALUES.glob("*.yaml")):
        HelmValues.model_validate(yaml.safe_load(f.read_text()))
