"""The values of the ``charts/upsert-kafka-ops`` Helm chart, as pydantic models.

``values.schema.json`` is generated from :class:`HelmValues` (``upsert-kafka-ops docs helm-schema``;
a test fails when the file is stale) and ``values.yaml`` holds exactly the models' defaults. Keys are
camelCase, as in Kubernetes; unknown keys are errors (``additionalProperties: false``). Rules that
span several values live in ``templates/validate.yaml`` as ``fail`` messages that name the value
and the fix.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from upsert_kafka_ops import spark_lines


class _Values(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, alias_generator=to_camel)


#: a release of a supported Spark line (spark_lines.LINES), vendor suffixes allowed: 4.1.1, 3.5.6-amzn-1
_SPARK_RELEASE = (
    "^(" + "|".join(re.escape(line) for line in spark_lines.LINES) + r")\.[0-9]+(-[0-9A-Za-z.-]+)?$"
)


class Image(_Values):
    repository: str = Field(
        default="upsert-kafka-ops",
        description="Image with this package, Spark and the jars (docker/Dockerfile); the lag exporter "
        "and the Spark executors run it.",
    )
    tag: str = Field(default="0.2.0", description="Image tag (the package version by default).")
    spark_version: str = Field(
        default="4.1.1",
        pattern=_SPARK_RELEASE,
        description="The Spark release the image was built with (docker/Dockerfile's CONSTRAINTS: "
        "constraints.txt is 4.1.1). The orchestrator's pods get it as UKO_SPARK_VERSION: the spark-submit "
        "runtime resolves jars for it and refuses a driver of another line; the Spark Connect server "
        "refuses to start when the image's pyspark is of another line.",
    )
    pull_policy: Literal["Always", "IfNotPresent", "Never"] = Field(
        default="IfNotPresent", description="Kubernetes imagePullPolicy."
    )
    pull_secrets: list[str] = Field(default_factory=list, description="Names of image pull Secrets.")


class ServiceAccount(_Values):
    create: bool = Field(default=True, description="Create the Spark driver ServiceAccount.")
    name: str = Field(default="", description="Its name (default: <release fullname>-spark).")
    annotations: dict[str, str] = Field(
        default_factory=dict, description="Annotations, e.g. a cloud IAM role for object storage."
    )


class Subject(_Values):
    name: str = Field(default="", description="ServiceAccount name, e.g. airflow-worker or dagster.")
    namespace: str = Field(default="", description="Its namespace (default: the release namespace).")


class Rbac(_Values):
    create: bool = Field(
        default=True,
        description="Create the Role (pods, services, configmaps, persistentvolumeclaims) and its RoleBinding.",
    )
    orchestrator_service_accounts: list[Subject] = Field(
        default_factory=list,
        description="The orchestrator's ServiceAccounts bound to the Role too: the pods that run a "
        "client-mode driver (Airflow workers, Dagster run pods) create executors with their own account.",
    )


class SecretKeys(_Values):
    username: str = Field(default="username", description="Key of the SASL username in the Secret.")
    password: str = Field(default="password", description="Key of the SASL password in the Secret.")
    airflow_connection: str = Field(
        default="airflow-connection",
        description="Key of the Airflow connection JSON (AIRFLOW_CONN_KAFKA_DEFAULT) in the Secret.",
    )


class Kafka(_Values):
    bootstrap_servers: str = Field(default="", description="host:port[,host:port] of the brokers (required).")
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        default="PLAINTEXT", description="librdkafka security.protocol."
    )
    sasl_mechanism: Literal["", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = Field(
        default="", description="SASL mechanism (with a SASL_* protocol)."
    )
    existing_secret: str = Field(
        default="",
        description="Use this Secret (keys in secretKeys) instead of creating one; then username and "
        "password stay empty.",
    )
    username: str = Field(default="", description="SASL username, for the Secret the chart creates.")
    password: str = Field(
        default="",
        description="SASL password, for the Secret the chart creates (prefer existingSecret, or "
        "--set-file / an encrypted values file; never a ConfigMap).",
    )
    secret_keys: SecretKeys = Field(default_factory=SecretKeys, description="Key names inside the Secret.")


class ObjectStorageSecretKeys(_Values):
    access_key_id: str = Field(default="access-key-id", description="Key of the access key id in the Secret.")
    secret_access_key: str = Field(
        default="secret-access-key", description="Key of the secret access key in the Secret."
    )
    iceberg_catalog_password: str = Field(
        default="iceberg-catalog-password", description="Key of the Iceberg catalog password in the Secret."
    )


class ObjectStorage(_Values):
    existing_secret: str = Field(
        default="",
        description="Use this Secret (keys in secretKeys) instead of creating one; then accessKeyId and "
        "secretAccessKey stay empty.",
    )
    access_key_id: str = Field(default="", description="S3 access key id, for the Secret the chart creates.")
    secret_access_key: str = Field(
        default="",
        description="S3 secret access key, for the Secret the chart creates (prefer existingSecret; never a "
        "ConfigMap). Leave both empty for the AWS credential chain (e.g. a pod role through "
        "serviceAccount.annotations).",
    )
    iceberg_catalog_password: str = Field(
        default="",
        description="An Iceberg JDBC catalog's database password, for the Secret the chart creates; the pods "
        "get it as UKO_ICEBERG_CATALOG_PASSWORD (a pipeline's catalogs section: password: "
        "env:UKO_ICEBERG_CATALOG_PASSWORD).",
    )
    secret_keys: ObjectStorageSecretKeys = Field(
        default_factory=ObjectStorageSecretKeys, description="Key names inside the Secret."
    )


class DriverService(_Values):
    enabled: bool = Field(
        default=True,
        description="A headless Service for client-mode drivers (the orchestrator's pods), so executors "
        "reach the driver.",
    )
    port: int = Field(default=7078, ge=1, le=65535, description="spark.driver.port.")
    block_manager_port: int = Field(
        default=7079, ge=1, le=65535, description="spark.driver.blockManager.port."
    )
    selector: dict[str, str] = Field(
        default_factory=lambda: {"upsert-kafka-ops/spark-driver": "true"},
        description="Labels of the pods that run drivers (add them to the Airflow worker / Dagster run pods).",
    )


class Spark(_Values):
    conf: dict[str, str] = Field(
        default_factory=dict,
        description="Extra spark-defaults.conf settings (no secrets: a key naming a password, secret or "
        "token is refused; pass those with spark.kubernetes.*.secretKeyRef).",
    )
    driver_service: DriverService = Field(
        default_factory=DriverService, description="The client-mode driver Service."
    )


class ServiceMonitor(_Values):
    enabled: bool = Field(
        default=False, description="Create a Prometheus Operator ServiceMonitor for these metrics endpoints."
    )
    interval: str = Field(default="30s", description="Scrape interval.")
    labels: dict[str, str] = Field(
        default_factory=dict, description="Extra labels, e.g. the release label your Prometheus selects."
    )


class PrometheusRule(_Values):
    enabled: bool = Field(
        default=False,
        description="Create a Prometheus Operator PrometheusRule with the alerts of files/alerts.yaml (job "
        "overdue, records never read, lag not decreasing, offset rewound, records lost, a continuous job "
        "stalled, run failed, lag unreadable, exporter down).",
    )
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="Extra labels, e.g. the release label your Prometheus selects rules by.",
    )


class GrafanaDashboard(_Values):
    enabled: bool = Field(
        default=False,
        description="Create a ConfigMap with the Grafana dashboard of files/grafana-dashboard.json, for "
        "Grafana's dashboard sidecar.",
    )
    labels: dict[str, str] = Field(
        default_factory=lambda: {"grafana_dashboard": "1"},
        description="Labels the sidecar selects ConfigMaps by (its `label` and `labelValue`).",
    )


class LagExporter(_Values):
    enabled: bool = Field(
        default=False,
        description="Run upsert-kafka-ops lag --serve over every job of every pipeline file, from one "
        "container on one port (each series labelled with its pipeline and pipeline_job).",
    )
    port: int = Field(default=9308, ge=1, le=65000, description="Port of the metrics endpoint.")
    host: str = Field(
        default="0.0.0.0",
        description="Address the metrics endpoint binds in its pod (--host; 0.0.0.0: the pod's address, "
        "which the Service and Prometheus reach; networkPolicy.lagExporter says who may).",
    )
    min_interval: float = Field(
        default=15.0,
        gt=0,
        description="Seconds between evaluations (--min-interval), whatever the scrape rate.",
    )
    schedule_grace: float = Field(
        default=300.0,
        ge=0,
        description="Seconds a job's scheduled run may be late before it is overdue (STOP) "
        "(--schedule-grace; a job's cadence is its schedule: in the pipeline file).",
    )
    resources: dict[str, Any] = Field(
        default_factory=dict, description="Container resources (requests/limits) of the exporter container."
    )
    service_monitor: ServiceMonitor = Field(default_factory=ServiceMonitor, description="The ServiceMonitor.")
    prometheus_rule: PrometheusRule = Field(default_factory=PrometheusRule, description="The alert rules.")
    grafana_dashboard: GrafanaDashboard = Field(
        default_factory=GrafanaDashboard, description="The Grafana dashboard."
    )


class ContinuousJobs(_Values):
    enabled: bool = Field(
        default=True,
        description="A Deployment for each job of the pipeline files whose trigger is continuous "
        "(trigger: {continuous: true}): `upsert-kafka-ops run FILE --job NAME`, one replica, restarted on "
        "failure, probed at its /healthz and /ready, and a Service for its metrics. Jobs without the trigger "
        "get nothing here: the orchestrators run them.",
    )
    metrics_port: int = Field(
        default=9309, ge=1, le=65000, description="Port of each job's /metrics, /status, /healthz and /ready."
    )
    termination_grace_period_seconds: int = Field(
        default=300,
        ge=30,
        description="How long Kubernetes waits after SIGTERM, which lets the current batch finish and commit: "
        "longer than the longest batch (a catch-up after a long stop is one large batch).",
    )
    startup_seconds: int = Field(
        default=600,
        ge=60,
        description="How long the job's Spark driver may take to start before its liveness probe counts "
        "(a startupProbe of this length).",
    )
    resources: dict[str, Any] = Field(
        default_factory=dict, description="Container resources (requests/limits) of each job's container."
    )
    service_monitor: ServiceMonitor = Field(
        default_factory=ServiceMonitor, description="A ServiceMonitor over every continuous job's metrics."
    )


JarGroupName = Literal["s3", "iceberg"]


class SparkConnectAuth(_Values):
    existing_secret: str = Field(
        default="",
        description="Use the token in this Secret (key existingSecretKey) instead of the one the chart "
        "generates: a Secret <fullname>-spark-connect-token with key token, 48 random characters made "
        "once and kept across upgrades and uninstalls (helm.sh/resource-policy: keep). The server requires "
        "it either way (there is no option to run without one).",
    )
    existing_secret_key: str = Field(default="token", description="Key of the token in existingSecret.")


class CertManagerIssuerRef(_Values):
    name: str = Field(
        default="", description="The Issuer or ClusterIssuer that signs the certificate (required)."
    )
    kind: Literal["Issuer", "ClusterIssuer"] = Field(default="Issuer", description="Its kind.")
    group: str = Field(default="cert-manager.io", description="Its API group.")


class SparkConnectCertManager(_Values):
    enabled: bool = Field(
        default=False,
        description="Render a cert-manager Certificate (cert-manager.io/v1) whose Secret "
        "<fullname>-spark-connect-tls the proxy serves (instead of tls.secretName); clients verify against "
        "its ca.crt, which CA and self-signed issuers write (with a public ACME issuer, clients use the "
        "system's CAs: leave UKO_SPARK_CONNECT_CA_CERT unset).",
    )
    issuer_ref: CertManagerIssuerRef = Field(
        default_factory=CertManagerIssuerRef, description="The certificate's issuerRef."
    )
    duration: str = Field(default="2160h", description="The certificate's lifetime (cert-manager renews it).")
    dns_names: list[str] = Field(
        default_factory=list,
        description="The certificate's names (empty: the Service's: <fullname>-spark-connect, and that with "
        ".<namespace>, .<namespace>.svc and .<namespace>.svc.cluster.local).",
    )


class SparkConnectTls(_Values):
    secret_name: str = Field(
        default="",
        description="A kubernetes.io/tls Secret the proxy serves: tls.crt and tls.key, and ca.crt for the "
        "clients (the overlays mount it at /etc/upsert-kafka-ops/spark-connect-tls). This or "
        "certManager.enabled is required with sparkConnect.enabled.",
    )
    cert_manager: SparkConnectCertManager = Field(
        default_factory=SparkConnectCertManager, description="A certificate from cert-manager instead."
    )


class ProxyImage(_Values):
    repository: str = Field(
        default="nginxinc/nginx-unprivileged",
        description="The TLS proxy's image: an nginx (1.22 or later) that runs as a non-root user.",
    )
    tag: str = Field(
        default="1.30-alpine", description="Its tag (the stable line; pin a digest if you mirror it)."
    )
    pull_policy: Literal["Always", "IfNotPresent", "Never"] = Field(
        default="IfNotPresent", description="Kubernetes imagePullPolicy."
    )


class SparkConnectProxy(_Values):
    image: ProxyImage = Field(default_factory=ProxyImage, description="The proxy's image.")
    resources: dict[str, Any] = Field(
        default_factory=dict, description="Container resources (requests/limits) of the proxy container."
    )


class SparkConnect(_Values):
    enabled: bool = Field(
        default=False,
        description="Run a Spark Connect server (upsert-kafka-ops spark-connect: the project's jars and "
        "Delta) and its Service: tasks with spark_master=sc://<fullname>-spark-connect:<port>/;use_ssl=true "
        "(Airflow) or SparkRuntimeResource(runtime='connect') (Dagster) run on its warm driver. It requires "
        "a token (auth) and is reached over TLS only (tls: required).",
    )
    port: int = Field(
        default=15002,
        ge=1,
        le=65000,
        description="The TLS port: where the proxy (nginx, in the server's pod) listens and the Service "
        "points.",
    )
    backend_port: int = Field(
        default=15003,
        ge=1,
        le=65000,
        description="The server's own gRPC port, on the pod's loopback (127.0.0.1) only: the proxy forwards "
        "to it.",
    )
    master: str = Field(
        default="local[*]",
        description="The server's Spark master (local[*]: the pod's cores run every query). With k8s://... "
        "the driver in the pod starts executors with the release's spark-defaults, on the driver ports of "
        "spark.driverService (unless conf sets spark.driver.port / spark.driver.blockManager.port), and "
        "labels them so networkPolicy admits them to those ports.",
    )
    conf: dict[str, str] = Field(
        default_factory=dict,
        description="Spark settings of the server (--conf); no secrets (a key naming a password, secret or "
        "token is refused).",
    )
    resources: dict[str, Any] = Field(
        default_factory=dict, description="Container resources (requests/limits) of the server."
    )
    jar_groups: list[JarGroupName] = Field(
        default_factory=lambda: list[JarGroupName](["s3", "iceberg"]),
        description="Jar groups more on the server's class path (--group; the image has them): s3 for tables "
        "on S3, iceberg for Iceberg targets.",
    )
    auth: SparkConnectAuth = Field(
        default_factory=SparkConnectAuth,
        description="The token clients send: the server gets it as SPARK_CONNECT_AUTHENTICATE_TOKEN from a "
        "Secret (never in its arguments or a ConfigMap); clients read the same variable.",
    )
    tls: SparkConnectTls = Field(default_factory=SparkConnectTls, description="The proxy's certificate.")
    proxy: SparkConnectProxy = Field(
        default_factory=SparkConnectProxy,
        description="The TLS proxy: an nginx container in the server's pod, terminating TLS on port and "
        "forwarding gRPC to 127.0.0.1:backendPort (its nginx.conf: ConfigMap <fullname>-spark-connect-proxy "
        "from files/spark-connect-proxy.conf).",
    )


class NetworkPolicySparkConnect(_Values):
    from_: list[dict[str, Any]] = Field(
        default_factory=lambda: [
            {
                "podSelector": {"matchLabels": {"upsert-kafka-ops/spark-driver": "true"}},
                "namespaceSelector": {},
            }
        ],
        alias="from",
        description="NetworkPolicyPeer objects (podSelector, namespaceSelector, ipBlock) admitted to the "
        "Spark Connect TLS port (sparkConnect.port); default: the pods with the label the overlays put on "
        "Airflow workers and Dagster run pods, in any namespace. With a k8s:// master, the release's "
        "executors (labelled by the chart) are admitted to the driver ports as well.",
    )


def _prometheus_pods() -> list[dict[str, Any]]:
    """Prometheus pods (app.kubernetes.io/name: prometheus, as the Prometheus Operator labels them) in
    any namespace: who may scrape the chart's metrics ports by default."""
    return [
        {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}, "namespaceSelector": {}}
    ]


class NetworkPolicyLagExporter(_Values):
    from_: list[dict[str, Any]] = Field(
        default_factory=_prometheus_pods,
        alias="from",
        description="NetworkPolicyPeer objects admitted to the lag exporter's metrics port; default: "
        "Prometheus pods (app.kubernetes.io/name: prometheus, as the Prometheus Operator labels them) in any "
        "namespace.",
    )


class NetworkPolicyContinuousJobs(_Values):
    from_: list[dict[str, Any]] = Field(
        default_factory=_prometheus_pods,
        alias="from",
        description="NetworkPolicyPeer objects admitted to the continuous jobs' metrics port; default: "
        "Prometheus pods in any namespace (the kubelet's probes are admitted by every network plugin).",
    )


class NetworkPolicy(_Values):
    enabled: bool = Field(
        default=True,
        description="A NetworkPolicy for each server the chart runs (Spark Connect, the lag exporter) that "
        "admits ingress to its port from the peers below only. Ingress only: egress is left as it is. "
        "Needs a network plugin that enforces NetworkPolicy.",
    )
    spark_connect: NetworkPolicySparkConnect = Field(
        default_factory=NetworkPolicySparkConnect, description="Who reaches the Spark Connect server."
    )
    lag_exporter: NetworkPolicyLagExporter = Field(
        default_factory=NetworkPolicyLagExporter, description="Who scrapes the lag exporter."
    )
    continuous_jobs: NetworkPolicyContinuousJobs = Field(
        default_factory=NetworkPolicyContinuousJobs, description="Who scrapes the continuous jobs."
    )


class HelmValues(_Values):
    """Values of the upsert-kafka-ops chart."""

    name_override: str = Field(default="", description="Replaces the chart name in object names.")
    fullname_override: str = Field(default="", description="Replaces <release>-<chart> in object names.")
    common_labels: dict[str, str] = Field(default_factory=dict, description="Labels added to every object.")
    image: Image = Field(default_factory=Image, description="The image of this package.")
    service_account: ServiceAccount = Field(
        default_factory=ServiceAccount, description="The Spark driver ServiceAccount."
    )
    rbac: Rbac = Field(default_factory=Rbac, description="The Spark Role and who is bound to it.")
    kafka: Kafka = Field(default_factory=Kafka, description="The Kafka connection and its Secret.")
    object_storage: ObjectStorage = Field(
        default_factory=ObjectStorage,
        description="S3 credentials for tables on object storage, as UKO_S3_ACCESS_KEY_ID and "
        "UKO_S3_SECRET_ACCESS_KEY (what a pipeline's storage section refers to) from a Secret.",
    )
    pipelines: dict[str, str] = Field(
        default_factory=dict,
        description="Pipeline files by file name (e.g. --set-file pipelines.demo\\.yaml=pipelines/demo.yaml), "
        "mounted at /etc/upsert-kafka-ops/pipelines (UKO_PIPELINES_DIR). Required.",
    )
    spark: Spark = Field(default_factory=Spark, description="spark-defaults.conf and the driver Service.")
    lag_exporter: LagExporter = Field(default_factory=LagExporter, description="The lag exporter.")
    spark_connect: SparkConnect = Field(
        default_factory=SparkConnect, description="A Spark Connect server: a warm driver for every run."
    )
    continuous_jobs: ContinuousJobs = Field(
        default_factory=ContinuousJobs,
        description="The pipeline files' continuous jobs, each as a Deployment (docs/streaming.md).",
    )
    network_policy: NetworkPolicy = Field(
        default_factory=NetworkPolicy, description="NetworkPolicies of the chart's servers (ingress only)."
    )


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        if "$ref" in node:
            target = defs[node["$ref"].rsplit("/", 1)[-1]]
            merged = {**_inline(target, defs), **{k: v for k, v in node.items() if k != "$ref"}}
            return merged
        return {k: _inline(v, defs) for k, v in node.items() if k not in ("title", "$defs")}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


def _with_defaults(node: dict[str, Any], defaults: Any) -> None:
    """Every property's ``default`` from the models' defaults (pydantic leaves out factory ones)."""
    for name, sub in node.get("properties", {}).items():
        value = defaults.get(name) if isinstance(defaults, dict) else None
        sub["default"] = value
        if sub.get("type") == "object":  # list items keep pydantic's own (plain) defaults
            _with_defaults(sub, value)


def values_schema() -> dict[str, Any]:
    """The chart's ``values.schema.json`` (draft 2020-12, references inlined, a default on every value)."""
    raw = HelmValues.model_json_schema(by_alias=True)
    schema = _inline(raw, raw.get("$defs", {}))
    _with_defaults(schema, default_values())
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "upsert-kafka-ops chart values",
        **schema,
    }


def values_schema_json() -> str:
    return json.dumps(values_schema(), indent=2, sort_keys=True) + "\n"


def default_values() -> dict[str, Any]:
    """The defaults ``values.yaml`` holds."""
    return HelmValues().model_dump(by_alias=True)
