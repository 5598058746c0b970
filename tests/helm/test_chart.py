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

from .conftest import CHART, KUBE_VERSION, VALUES, HelmError, helm, kinds_and_names, render

SERVICE_MONITOR_SCHEMA = json.loads(
    (Path(__file__).parent / "schemas" / "servicemonitor-monitoring.coreos.com-v1.json").read_text()
)
PASSWORD = "s3cr3t-PASSWORD-in-values"
F = "r1-upsert-kafka-ops"
BASE = {
    ("ServiceAccount", f"{F}-spark"), ("Secret", f"{F}-kafka"), ("ConfigMap", f"{F}-env"),
    ("ConfigMap", f"{F}-pipelines"), ("ConfigMap", f"{F}-spark"), ("Role", f"{F}-spark"),
    ("RoleBinding", f"{F}-spark"), ("Service", f"{F}-driver"),
}  # fmt: skip
EXPORTER = {("Deployment", f"{F}-lag-exporter"), ("Service", f"{F}-lag-exporter")}
EXPECTED: dict[str, set[tuple[str, str]]] = {
    "minimal.yaml": BASE,
    "sasl-inline.yaml": BASE | EXPORTER | {("ServiceMonitor", f"{F}-lag-exporter")},
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


def test_no_secret_value_in_a_configmap_or_the_notes() -> None:
    objects = render(VALUES / "sasl-inline.yaml")
    for obj in objects:
        if obj["kind"] == "ConfigMap":
            assert PASSWORD not in json.dumps(obj), obj["metadata"]["name"]
    (secret,) = [o for o in objects if o["kind"] == "Secret"]
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
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


def test_the_exporter_serves_every_pipeline_file_on_consecutive_ports() -> None:
    objects = render(VALUES / "exporter-only.yaml")
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert [c["args"][3] for c in containers] == [
        f"/etc/upsert-kafka-ops/pipelines/{f}" for f in ("a.yaml", "b.yaml", "c.yaml")
    ]
    assert [c["ports"][0]["containerPort"] for c in containers] == [9400, 9401, 9402]
    assert all(c["args"][:2] == ["lag", "--serve"] for c in containers)
    from upsert_kafka_ops.cli import build_parser

    for c in containers:  # the image's entrypoint is upsert-kafka-ops: its own parser takes the args
        args = build_parser().parse_args(c["args"])
        assert args.serve and args.port == c["ports"][0]["containerPort"] and args.host == "0.0.0.0"
        # each file's Burrow windows in its own file on the pod's volume: a container restart keeps them
        mounts = {m["mountPath"] for m in c["volumeMounts"]}
        assert (
            args.window.parent.as_posix() in mounts
            and args.window.name == f"lag-window-{containers.index(c)}.json"
        )
        # alive and ready while the process answers: a broker outage is the lag_up series, not a lost target
        assert c["readinessProbe"]["httpGet"]["path"] == c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    (service,) = [
        o for o in objects if o["kind"] == "Service" and o["metadata"]["name"].endswith("lag-exporter")
    ]
    assert [p["port"] for p in service["spec"]["ports"]] == [9400, 9401, 9402]
    mounted = {m["mountPath"] for m in containers[0]["volumeMounts"]}
    assert "/etc/upsert-kafka-ops/pipelines" in mounted
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in containers[0]["env"]}
    assert env["UKO_KAFKA_PASSWORD"]["name"] == f"{F}-kafka"


def test_the_spark_connect_server_listens_where_its_service_points() -> None:
    objects = render(VALUES / "spark-connect.yaml")
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    from upsert_kafka_ops.cli import build_parser

    args = build_parser().parse_args(container["args"])  # the image's entrypoint is upsert-kafka-ops
    assert (args.host, args.port, args.master) == ("0.0.0.0", 15002, "local[4]")
    assert args.conf == ["spark.sql.shuffle.partitions=8"]
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
