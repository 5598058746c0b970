"""The chart rendered with helm over a matrix of values files: ``helm lint --strict`` passes, every
object validates against the Kubernetes 1.33 schemas (kubernetes-validate, strict) or the vendored
ServiceMonitor schema, the exact set of (kind, name) per values file, no secret value in any
ConfigMap or in NOTES, and invalid values fail with a message that names the value and the fix."""

from __future__ import annotations

import base64
import json
import re
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
# each server comes with its NetworkPolicy (networkPolicy.enabled is on by default)
EXPORTER = {("Deployment", f"{F}-lag-exporter"), ("Service", f"{F}-lag-exporter"),
            ("NetworkPolicy", f"{F}-lag-exporter")}  # fmt: skip
CONNECT = {("Deployment", f"{F}-spark-connect"), ("Service", f"{F}-spark-connect"),
           ("ConfigMap", f"{F}-spark-connect-proxy"), ("NetworkPolicy", f"{F}-spark-connect")}  # fmt: skip
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
    # the token Secret the chart generates
    "spark-connect.yaml": BASE | CONNECT | {("Secret", f"{F}-spark-connect-token")},
    # the token from the user's Secret, the certificate from cert-manager
    "spark-connect-k8s.yaml": BASE | EXPORTER | CONNECT | {("Certificate", f"{F}-spark-connect")},
    # a Deployment per continuous job (none for the bounded ones), one Service, policy and monitor
    "continuous.yaml": BASE
    | {("Deployment", f"{F}-users-users-live"), ("Deployment", f"{F}-orders-orders-live-v2")}
    | {(k, f"{F}-continuous-jobs") for k in ("Service", "NetworkPolicy", "ServiceMonitor")},
}
TLS_DIR = "/etc/upsert-kafka-ops/spark-connect-tls"


def _validate(obj: dict[str, Any]) -> None:
    if obj["kind"] == "ServiceMonitor":
        jsonschema.validate(obj, SERVICE_MONITOR_SCHEMA)
    elif obj["kind"] == "PrometheusRule":  # its spec is a Prometheus rule file: promtool checks it
        assert obj["apiVersion"] == "monitoring.coreos.com/v1" and set(obj["spec"]) == {"groups"}
        promtool_check_rules(obj["spec"])
    elif obj["kind"] == "Certificate":  # cert-manager's: no vendored schema, checked by its structure
        _check_certificate(obj)
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


def render_notes(values: Path) -> str:
    """NOTES.txt as helm renders it (helm template skips it and install needs a cluster: render a
    copy of the chart where a template puts NOTES.txt, rendered with tpl, into a ConfigMap)."""
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        copy = Path(d) / "chart"
        shutil.copytree(CHART, copy)
        shutil.copy(copy / "templates" / "NOTES.txt", copy / "files" / "notes.txt")
        (copy / "templates" / "notes-rendered.yaml").write_text(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\n"
            'data: {notes: {{ tpl (.Files.Get "files/notes.txt") . | quote }}}\n'
        )
        text = helm("template", "r1", str(copy), "--namespace", "uko", "-f", str(values),
                    "--show-only", "templates/notes-rendered.yaml")  # fmt: skip
    notes: str = yaml.safe_load(text)["data"]["notes"]
    return notes


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


def test_the_orchestrators_pods_are_told_the_images_spark_release() -> None:
    def env(objects: list[dict]) -> dict[str, str]:
        (made,) = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-env")]
        return made["data"]

    assert env(render(VALUES / "minimal.yaml"))["UKO_SPARK_VERSION"] == "4.1.1"
    vendor = render(VALUES / "minimal.yaml", sets=("image.sparkVersion=3.5.6-amzn-1",))
    assert env(vendor)["UKO_SPARK_VERSION"] == "3.5.6-amzn-1"


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


def test_each_continuous_job_runs_as_a_deployment_that_lets_its_batch_commit_before_it_stops() -> None:
    from upsert_kafka_ops.cli import build_parser
    from upsert_kafka_ops.pipeline import Pipeline

    values = yaml.safe_load((VALUES / "continuous.yaml").read_text())
    objects = render(VALUES / "continuous.yaml")
    ran = set()
    for deployment in [o for o in objects if o["kind"] == "Deployment"]:
        pod = deployment["spec"]["template"]["spec"]
        (c,) = pod["containers"]
        args = build_parser().parse_args(c["args"])  # the image's entrypoint is upsert-kafka-ops
        file = args.pipeline.name
        (job,) = args.job
        # the package reads the mounted file the same way: the job is one of its continuous jobs
        assert Pipeline.from_yaml(values["pipelines"][file]).job(job).continuous, (file, job)
        ran.add((file, job))
        assert deployment["metadata"]["annotations"] == {
            "upsert-kafka-ops/pipeline": file,
            "upsert-kafka-ops/pipeline-job": job,
        }
        assert (args.metrics_host, args.metrics_port, args.once) == ("0.0.0.0", 9309, False)
        assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"] == {"type": "Recreate"}
        assert pod["terminationGracePeriodSeconds"] == 120  # SIGTERM lets the batch commit
        assert c["startupProbe"]["httpGet"]["path"] == c["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert c["startupProbe"]["failureThreshold"] * c["startupProbe"]["periodSeconds"] == 600
        assert c["readinessProbe"]["httpGet"]["path"] == "/ready"
        assert c["ports"] == [{"name": "metrics", "containerPort": 9309}]
        assert {m["mountPath"] for m in c["volumeMounts"]} == {"/etc/upsert-kafka-ops/pipelines", "/tmp"}
        assert {e["name"] for e in c["env"]} >= {"UKO_KAFKA_PASSWORD", "UKO_S3_SECRET_ACCESS_KEY"}
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert labels["app.kubernetes.io/component"] == "continuous-job"
    assert ran == {("users.yaml", "users-live"), ("orders.yaml", "Orders_Live.v2")}
    service = _one(objects, "Service", f"{F}-continuous-jobs")
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "continuous-job"
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 9309, "targetPort": "metrics"}]
    off = render(VALUES / "continuous.yaml", sets=("continuousJobs.enabled=false",))
    assert not [
        o for o in off if o["metadata"]["name"].startswith(f"{F}-continuous") or o["kind"] == "Deployment"
    ]


def test_the_demo_files_continuous_job_is_its_one_deployment(tmp_path: Path) -> None:
    """pipelines/demo.yaml as a user deploys it (``--set-file pipelines.demo\\.yaml=...``): the
    orchestrators run its five scheduled jobs, the chart runs ``users-live``."""
    demo = tmp_path / "demo-values.yaml"
    demo.write_text(
        yaml.safe_dump({"pipelines": {"demo.yaml": (ROOT / "pipelines" / "demo.yaml").read_text()}})
    )
    objects = render(VALUES / "minimal.yaml", demo)
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    assert deployment["metadata"]["annotations"] == {
        "upsert-kafka-ops/pipeline": "demo.yaml",
        "upsert-kafka-ops/pipeline-job": "users-live",
    }
    (c,) = deployment["spec"]["template"]["spec"]["containers"]
    assert c["args"][:4] == ["run", "/etc/upsert-kafka-ops/pipelines/demo.yaml", "--job", "users-live"]


def test_a_continuous_job_whose_batches_stop_pages_and_a_live_one_never_does(tmp_path: Path) -> None:
    """``promtool test rules`` over the shipped alerts: one job whose last look at its topic stays put,
    one whose looks keep up with the clock."""
    import os
    import shutil
    import subprocess

    promtool = Path(os.environ.get("UKO_PROMETHEUS_BIN") or ROOT / ".tools" / "bin") / "promtool"
    if not promtool.exists():
        pytest.fail(f"promtool not found at {promtool}: run `make prometheus` or set UKO_PROMETHEUS_BIN.")
    shutil.copy(CHART / "files" / "alerts.yaml", tmp_path / "alerts.yaml")
    series = 'upsert_kafka_ops_continuous_{}{{pipeline="p",pipeline_job="{}"}}'
    stuck = {"exp_labels": {"severity": "critical", "pipeline": "p", "pipeline_job": "stuck"},
             "exp_annotations": {
                 "summary": "The continuous job p/stuck stopped its batches",
                 "description": "Its last look at its topic is older than ten intervals; its pod's log names the "
                 "batch that hangs. A catch-up after a long stop is one large batch: compare with "
                 "upsert_kafka_ops_continuous_batch_duration_seconds."}}  # fmt: skip
    test = {
        "rule_files": ["alerts.yaml"],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": [
                {"series": series.format("last_check_timestamp_seconds", "stuck"), "values": "0x30"},
                {"series": series.format("interval_seconds", "stuck"), "values": "2x30"},
                {"series": series.format("last_check_timestamp_seconds", "live"), "values": "0+60x30"},
                {"series": series.format("interval_seconds", "live"), "values": "2x30"},
            ],
            "alert_rule_test": [
                # 360 s without a look at 6m: pending, then firing once it lasted 5 minutes
                {"eval_time": "10m", "alertname": "UpsertKafkaContinuousJobStalled", "exp_alerts": []},
                {"eval_time": "12m", "alertname": "UpsertKafkaContinuousJobStalled", "exp_alerts": [stuck]},
            ],
        }],
    }  # fmt: skip
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(test))
    done = subprocess.run([str(promtool), "test", "rules", "test.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout + done.stderr


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


def _one(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (obj,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return obj


def _connect_containers(objects: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Spark Connect pod's server and proxy containers."""
    pod = _one(objects, "Deployment", f"{F}-spark-connect")["spec"]["template"]["spec"]
    server, proxy = pod["containers"]
    assert (server["name"], proxy["name"]) == ("spark-connect", "tls-proxy")
    return server, proxy


def test_the_spark_connect_server_listens_where_its_service_points() -> None:
    objects = render(VALUES / "spark-connect.yaml")
    deployment = _one(objects, "Deployment", f"{F}-spark-connect")
    pod = deployment["spec"]["template"]["spec"]
    server, proxy = _connect_containers(objects)
    from upsert_kafka_ops.cli import build_parser

    args = build_parser().parse_args(server["args"])  # the image's entrypoint is upsert-kafka-ops
    # the server on the pod's loopback only, on the backend port; the token by reference
    assert (args.host, args.port, args.master) == ("127.0.0.1", 15003, "local[4]")
    assert args.token == "env:SPARK_CONNECT_AUTHENTICATE_TOKEN" and not args.insecure_no_token
    assert args.conf == ["spark.sql.shuffle.partitions=8"]
    assert args.group == ["s3", "iceberg"]  # the image's S3A and Iceberg jars, for those targets' runs
    assert "ports" not in server  # nothing of it is reachable from outside the pod
    assert pod["automountServiceAccountToken"] is False  # local[4]: no use for the namespace's API
    probe = server["readinessProbe"]["exec"]["command"]  # in the container, where loopback is its own
    assert probe[:2] == ["python", "-c"] and "('127.0.0.1', 15003)" in probe[2]
    # the proxy terminates TLS on the Service's port and forwards to the server
    assert proxy["ports"] == [{"name": "grpc", "containerPort": 15002}]
    assert proxy["readinessProbe"]["tcpSocket"] == {"port": "grpc"}
    service = _one(objects, "Service", f"{F}-spark-connect")
    assert service["spec"]["ports"] == [{"name": "grpc", "port": 15002, "targetPort": "grpc"}]
    assert service["spec"]["selector"] == deployment["spec"]["template"]["metadata"]["labels"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in proxy["volumeMounts"]}
    assert volumes[mounts[TLS_DIR]["name"]]["secret"] == {"secretName": "spark-connect-tls"}
    assert mounts[TLS_DIR]["readOnly"] is True
    assert "emptyDir" in volumes[mounts["/tmp/nginx"]["name"]]  # a non-root nginx writes only there
    assert proxy["securityContext"]["readOnlyRootFilesystem"] is True
    config_dir = next(m for p, m in mounts.items() if p.endswith("spark-connect-proxy"))
    assert volumes[config_dir["name"]]["configMap"]["name"] == f"{F}-spark-connect-proxy"
    conf_path = f"{config_dir['mountPath']}/nginx.conf"
    assert (
        'nginx -p /tmp/nginx -c "$conf"' in proxy["command"][2] and f"conf={conf_path}" in proxy["command"][2]
    )
    conf = _one(objects, "ConfigMap", f"{F}-spark-connect-proxy")["data"]["nginx.conf"]
    directives = {line.strip() for line in conf.splitlines() if not line.strip().startswith("#")}
    assert {
        "listen 15002 ssl http2;",
        "grpc_pass grpc://127.0.0.1:15003;",
        f"ssl_certificate {TLS_DIR}/tls.crt;",
        f"ssl_certificate_key {TLS_DIR}/tls.key;",
        "ssl_protocols TLSv1.2 TLSv1.3;",
        "client_max_body_size 0;",
        "pid /tmp/nginx/nginx.pid;",
        "error_log stderr notice;",
        "access_log off;",
    } <= directives
    temp_paths = [d for d in directives if "_temp_path " in d]
    assert len(temp_paths) == 5 and all(" /tmp/nginx/" in d for d in temp_paths)
    # a change of the file rolls the pod
    assert deployment["spec"]["template"]["metadata"]["annotations"]["checksum/proxy-config"]


def test_the_spark_connect_token_is_generated_once_kept_and_passed_by_reference() -> None:
    objects = render(VALUES / "spark-connect.yaml")
    secret = _one(objects, "Secret", f"{F}-spark-connect-token")
    assert secret["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}  # an uninstall keeps it
    assert set(secret["data"]) == {"token"}
    token = base64.b64decode(secret["data"]["token"]).decode()
    assert len(token) == 48 and token.isalnum()
    server, proxy = _connect_containers(objects)
    env = {e["name"]: e for e in server["env"]}
    assert env["SPARK_CONNECT_AUTHENTICATE_TOKEN"] == {
        "name": "SPARK_CONNECT_AUTHENTICATE_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": f"{F}-spark-connect-token", "key": "token"}},
    }
    # the value is in the Secret alone: no argument, no ConfigMap, no other object
    leaks = [f"{o['kind']}/{o['metadata']['name']}" for o in objects
             if o is not secret and (token in json.dumps(o) or secret["data"]["token"] in json.dumps(o))]  # fmt: skip
    assert leaks == []
    assert "env" not in proxy  # the proxy passes the client's header on, it needs no token
    # the user's Secret instead: no Secret rendered, the reference names theirs
    mine = render(VALUES / "spark-connect.yaml",
                  sets=("sparkConnect.auth.existingSecret=connect-token", "sparkConnect.auth.existingSecretKey=value"))  # fmt: skip
    assert ("Secret", f"{F}-spark-connect-token") not in kinds_and_names(mine)
    server, _ = _connect_containers(mine)
    (ref,) = [
        e["valueFrom"]["secretKeyRef"]
        for e in server["env"]
        if e["name"] == "SPARK_CONNECT_AUTHENTICATE_TOKEN"
    ]
    assert ref == {"name": "connect-token", "key": "value"}
    # NOTES say where the token is (the Secret and key), never what it is
    notes = render_notes(VALUES / "spark-connect.yaml")
    assert f"Secret {F}-spark-connect-token, key token" in notes
    assert f"get secret {F}-spark-connect-token -o jsonpath='{{.data.token}}' | base64 -d" in notes
    assert "UKO_SPARK_CONNECT_CA_CERT" in notes and "use_ssl=true" in notes


def _check_certificate(cert: dict[str, Any]) -> None:
    """A cert-manager Certificate (cert-manager.io/v1): the fields the chart sets, with their types."""
    assert cert["apiVersion"] == "cert-manager.io/v1"
    spec = cert["spec"]
    assert set(spec) == {"secretName", "duration", "dnsNames", "issuerRef"}
    assert isinstance(spec["secretName"], str) and spec["secretName"]
    assert re.fullmatch(r"(\d+(\.\d+)?(h|m|s|ms))+", spec["duration"])  # a Go duration
    assert spec["dnsNames"] and all(isinstance(n, str) and n for n in spec["dnsNames"])
    ref = spec["issuerRef"]
    assert (
        set(ref) == {"name", "kind", "group"} and ref["name"] and ref["kind"] in ("Issuer", "ClusterIssuer")
    )


def test_cert_manager_issues_the_proxy_certificate_for_the_service_names() -> None:
    objects = render(VALUES / "spark-connect-k8s.yaml")
    cert = _one(objects, "Certificate", f"{F}-spark-connect")
    _check_certificate(cert)
    assert cert["spec"]["secretName"] == f"{F}-spark-connect-tls"
    assert cert["spec"]["issuerRef"] == {
        "name": "internal-ca",
        "kind": "ClusterIssuer",
        "group": "cert-manager.io",
    }
    service = f"{F}-spark-connect"
    assert _one(objects, "Service", service)
    assert cert["spec"]["dnsNames"] == [
        service,
        f"{service}.uko",
        f"{service}.uko.svc",
        f"{service}.uko.svc.cluster.local",
    ]
    pod = _one(objects, "Deployment", service)["spec"]["template"]["spec"]
    (tls,) = [v for v in pod["volumes"] if "secret" in v]
    assert tls["secret"]["secretName"] == cert["spec"]["secretName"]
    # the proxy listens on sparkConnect.port and forwards to backendPort, where the server listens
    server, proxy = _connect_containers(objects)
    assert proxy["ports"] == [{"name": "grpc", "containerPort": 15443}]
    assert server["args"][server["args"].index("--port") + 1] == "16000"
    conf = _one(objects, "ConfigMap", f"{F}-spark-connect-proxy")["data"]["nginx.conf"]
    assert "listen 15443 ssl http2;" in conf and "grpc_pass grpc://127.0.0.1:16000;" in conf
    named = render(
        VALUES / "spark-connect-k8s.yaml", sets=("sparkConnect.tls.certManager.dnsNames={connect.example}",)
    )
    assert _one(named, "Certificate", service)["spec"]["dnsNames"] == ["connect.example"]


def _pod_labels(objects: list[dict[str, Any]], name: str) -> dict[str, str]:
    labels: dict[str, str] = _one(objects, "Deployment", name)["spec"]["template"]["metadata"]["labels"]
    return labels


def test_network_policies_admit_only_the_configured_peers_to_each_servers_port() -> None:
    values = yaml.safe_load((VALUES / "spark-connect-k8s.yaml").read_text())
    objects = render(VALUES / "spark-connect-k8s.yaml")
    connect = _one(objects, "NetworkPolicy", f"{F}-spark-connect")["spec"]
    assert connect["podSelector"] == {"matchLabels": _pod_labels(objects, f"{F}-spark-connect")}
    assert connect["policyTypes"] == ["Ingress"]  # egress untouched
    clients, executors = connect["ingress"]
    assert clients == {
        "from": values["networkPolicy"]["sparkConnect"]["from"],
        "ports": [{"protocol": "TCP", "port": 15443}],
    }
    # k8s:// master: the executors the server starts (the labels it gives them) reach the driver ports
    server, _ = _connect_containers(objects)
    from upsert_kafka_ops.cli import build_parser

    conf = dict(c.split("=", 1) for c in build_parser().parse_args(server["args"]).conf)
    prefix = "spark.kubernetes.executor.label."
    labels = {k.removeprefix(prefix): v for k, v in conf.items() if k.startswith(prefix)}
    assert executors["from"] == [{"podSelector": {"matchLabels": labels}}]  # the release's namespace only
    assert (
        labels["app.kubernetes.io/component"] == "spark-connect-executor"
        and labels["app.kubernetes.io/instance"] == "r1"
    )
    ports = {int(conf["spark.driver.port"]), int(conf["spark.driver.blockManager.port"])}
    assert ports == {7100, 7079}  # sparkConnect.conf's driver port, spark.driverService's block manager port
    assert {p["port"] for p in executors["ports"]} == ports
    assert conf["spark.driver.host"] == "$(UKO_POD_IP)" and conf["spark.driver.bindAddress"] == "0.0.0.0"
    assert {e["name"] for e in server["env"]} >= {"UKO_POD_IP", "UKO_POD_NAME"}
    exporter = _one(objects, "NetworkPolicy", f"{F}-lag-exporter")["spec"]
    assert exporter["podSelector"] == {"matchLabels": _pod_labels(objects, f"{F}-lag-exporter")}
    assert exporter["policyTypes"] == ["Ingress"]
    assert exporter["ingress"] == [{
        "from": [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}, "namespaceSelector": {}}],
        "ports": [{"protocol": "TCP", "port": 9308}],
    }]  # fmt: skip
    lag_pod = _one(objects, "Deployment", f"{F}-lag-exporter")["spec"]["template"]["spec"]
    (lag,) = lag_pod["containers"]
    assert lag["args"][lag["args"].index("--host") + 1] == "::"  # lagExporter.host
    assert lag_pod["automountServiceAccountToken"] is False  # it never calls Kubernetes' API
    # a k8s:// Connect server starts executors: it keeps its API token
    connect_pod = _one(objects, "Deployment", f"{F}-spark-connect")["spec"]["template"]["spec"]
    assert connect_pod["automountServiceAccountToken"] is True
    # the default peers: the orchestrators' pods (the overlays' label) from any namespace; a local master
    # has no executors to admit
    default = _one(render(VALUES / "spark-connect.yaml"), "NetworkPolicy", f"{F}-spark-connect")["spec"]
    assert default["ingress"] == [{
        "from": [{"podSelector": {"matchLabels": {"upsert-kafka-ops/spark-driver": "true"}}, "namespaceSelector": {}}],
        "ports": [{"protocol": "TCP", "port": 15002}],
    }]  # fmt: skip
    off = render(VALUES / "spark-connect-k8s.yaml", sets=("networkPolicy.enabled=false",))
    assert [o for o in off if o["kind"] == "NetworkPolicy"] == []
    assert kinds_and_names(off) == EXPECTED["spark-connect-k8s.yaml"] - {
        ("NetworkPolicy", f"{F}-spark-connect"), ("NetworkPolicy", f"{F}-lag-exporter")}  # fmt: skip


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
        (("sparkConnect.enabled=true",),
         "sparkConnect.enabled needs a TLS certificate for its proxy: set sparkConnect.tls.secretName to a Secret "
         "with tls.crt, tls.key and ca.crt, or sparkConnect.tls.certManager.enabled=true"),
        (("sparkConnect.enabled=true", "sparkConnect.tls.secretName=s", "sparkConnect.tls.certManager.enabled=true"),
         "sparkConnect.tls.secretName and sparkConnect.tls.certManager.enabled are both set"),
        (("sparkConnect.enabled=true", "sparkConnect.tls.certManager.enabled=true"),
         "sparkConnect.tls.certManager.issuerRef.name is required"),
        (("sparkConnect.enabled=true", "sparkConnect.tls.secretName=s", "sparkConnect.backendPort=15002"),
         "sparkConnect.port and sparkConnect.backendPort are both 15002"),
        (("sparkConnect.enabled=true", "sparkConnect.tls.secretName=s", "sparkConnect.conf.spark\\.connect\\.authenticate\\.token=x"),
         "sparkConnect.conf.spark.connect.authenticate.token looks like a secret"),
        (("sparkConnect.tls.certManager.issuerRef.kind=Cluster",), "/sparkConnect/tls/certManager/issuerRef/kind"),
        (("image.sparkVersion=3.4.1",), "/image/sparkVersion"),
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
