"""The overlays for the official Airflow and Dagster charts. Those charts come from their own
repositories, which this machine cannot reach, so the overlays are not rendered with them: every
key path they set is checked against a written list of keys those charts define (from their
values.yaml: apache/airflow chart/values.yaml, dagster-io/dagster helm/dagster values and the
dagster-user-deployments subchart), and every Secret, ConfigMap and key they reference is checked
against what this chart renders for a release named ``uko``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .conftest import CHART, KUBE_VERSION, VALUES, helm

EXAMPLES = CHART / "examples"
# key paths of the official charts that the overlays use ([] = a list item); below an OPAQUE key the
# value is a Kubernetes object or free-form list the chart passes through
AIRFLOW_KEYS = {
    "images", "images.airflow", "images.airflow.repository", "images.airflow.tag", "images.airflow.pullPolicy",
    "secret", "secret[].envName", "secret[].secretName", "secret[].secretKey", "extraEnvFrom",
    "dags", "dags.gitSync", "dags.gitSync.enabled", "config", "config.core", "config.core.dags_folder",
    *(f"{c}.{k}" for c in ("scheduler", "dagProcessor", "triggerer", "workers") for k in ("extraVolumes", "extraVolumeMounts")),
    "scheduler", "dagProcessor", "triggerer", "workers", "workers.labels",
    "workers.serviceAccount", "workers.serviceAccount.create", "workers.serviceAccount.name", "workers.env",
}  # fmt: skip
DAGSTER_KEYS = {
    "dagster-user-deployments", "dagster-user-deployments.enabled", "dagster-user-deployments.deployments",
    *(f"dagster-user-deployments.deployments[].{k}" for k in (
        "name", "image", "image.repository", "image.tag", "image.pullPolicy", "codeServerArgs", "port",
        "envConfigMaps", "envSecrets", "env", "volumes", "volumeMounts", "includeConfigInLaunchedRuns",
        "includeConfigInLaunchedRuns.enabled", "labels")),
    "runLauncher", "runLauncher.type", "runLauncher.config", "runLauncher.config.k8sRunLauncher",
    "runLauncher.config.k8sRunLauncher.labels",
}  # fmt: skip
OPAQUE = {"extraVolumes", "extraVolumeMounts", "labels", "env", "volumes", "volumeMounts", "codeServerArgs",
          "envConfigMaps", "envSecrets", "extraEnvFrom"}  # fmt: skip


def _paths(node: Any, prefix: str = "") -> set[str]:
    out: set[str] = set()
    if isinstance(node, dict):
        for k, v in node.items():
            path = f"{prefix}.{k}" if prefix else k
            out.add(path)
            if k not in OPAQUE:
                out |= _paths(v, path)
    elif isinstance(node, list):
        for item in node:
            out |= _paths(item, prefix + "[]")
    return out


def _load(name: str) -> dict[str, Any]:
    data = yaml.safe_load((EXAMPLES / name).read_text())
    assert isinstance(data, dict)
    return data


def test_overlay_keys_are_keys_of_the_official_charts() -> None:
    airflow = _paths(_load("airflow-values.yaml"))
    assert airflow <= AIRFLOW_KEYS, sorted(airflow - AIRFLOW_KEYS)
    dagster = _paths(_load("dagster-values.yaml"))
    assert dagster <= DAGSTER_KEYS, sorted(dagster - DAGSTER_KEYS)
    # the parts that matter are there
    assert {
        "images.airflow.repository",
        "secret[].envName",
        "extraEnvFrom",
        "workers.extraVolumes",
    } <= airflow
    assert {"dagster-user-deployments.deployments[].envConfigMaps",
            "dagster-user-deployments.deployments[].includeConfigInLaunchedRuns.enabled"} <= dagster  # fmt: skip


def _release_objects() -> dict[tuple[str, str], dict[str, Any]]:
    # the overlays name a release `uko`: render it under that name (with the Spark Connect server and a
    # certificate from cert-manager, whose Secrets the overlays refer to as well)
    text = helm(
        "template", "uko", str(CHART), "--kube-version", KUBE_VERSION, "-f", str(VALUES / "sasl-inline.yaml"),
        "--set", "sparkConnect.enabled=true", "--set", "sparkConnect.tls.certManager.enabled=true",
        "--set", "sparkConnect.tls.certManager.issuerRef.name=ca",
    )  # fmt: skip
    objects = [d for d in yaml.safe_load_all(text) if d]
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def test_overlays_reference_what_the_chart_creates() -> None:
    made = _release_objects()
    secrets = {name: o for (kind, name), o in made.items() if kind == "Secret"}
    airflow = _load("airflow-values.yaml")
    refs_af = {e["envName"]: e for e in airflow["secret"]}
    # the connection id UpsertKafkaHook uses, the S3 keys a pipeline's storage section names and the
    # Iceberg catalog password its catalogs section names
    assert set(refs_af) == {"AIRFLOW_CONN_KAFKA_DEFAULT", "UKO_S3_ACCESS_KEY_ID", "UKO_S3_SECRET_ACCESS_KEY",
                            "UKO_ICEBERG_CATALOG_PASSWORD"}  # fmt: skip
    for ref in refs_af.values():
        assert ref["secretName"] in secrets and ref["secretKey"] in secrets[ref["secretName"]]["data"]
    env_from = yaml.safe_load(airflow["extraEnvFrom"])
    assert ("ConfigMap", env_from[0]["configMapRef"]["name"]) in made
    for volume in airflow["scheduler"]["extraVolumes"]:
        assert ("ConfigMap", volume["configMap"]["name"]) in made
    mounts = {m["mountPath"] for m in airflow["scheduler"]["extraVolumeMounts"]}
    env = made[("ConfigMap", "uko-upsert-kafka-ops-env")]["data"]
    assert {env["UKO_PIPELINES_DIR"], env["SPARK_CONF_DIR"]} == mounts
    driver = made[("Service", "uko-upsert-kafka-ops-driver")]
    assert driver["spec"]["selector"].items() <= airflow["workers"]["labels"].items()
    workers = airflow["workers"]
    _spark_connect_client(made, workers["env"], workers["extraVolumes"], workers["extraVolumeMounts"], mounts)

    (deployment,) = _load("dagster-values.yaml")["dagster-user-deployments"]["deployments"]
    assert all(("ConfigMap", c["name"]) in made for c in deployment["envConfigMaps"])
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in deployment["env"] if "valueFrom" in e}
    # what dagster_defs reads, the S3 keys, the Iceberg catalog password and the Spark Connect token
    assert set(refs) == {
        "UKO_KAFKA_USERNAME",
        "UKO_KAFKA_PASSWORD",
        "UKO_S3_ACCESS_KEY_ID",
        "UKO_S3_SECRET_ACCESS_KEY",
        "UKO_ICEBERG_CATALOG_PASSWORD",
        "SPARK_CONNECT_AUTHENTICATE_TOKEN",
    }
    for ref in refs.values():
        assert ref["name"] in secrets and ref["key"] in secrets[ref["name"]]["data"]
    _spark_connect_client(made, deployment["env"], deployment["volumes"], deployment["volumeMounts"], mounts)
    assert driver["spec"]["selector"].items() <= deployment["labels"].items()
    assert Path(deployment["codeServerArgs"][1]).name == "definitions.py"


def _spark_connect_client(
    made: dict[tuple[str, str], dict[str, Any]],
    env: list[dict[str, Any]],
    volumes: list[dict[str, Any]],
    volume_mounts: list[dict[str, Any]],
    config_mounts: set[str],
) -> None:
    """The two variables the project's Spark Connect client reads: the token from the chart's token
    Secret, and the path of the TLS Secret's ca.crt, mounted there (both optional: the pods start
    without a Spark Connect server)."""
    by_name = {e["name"]: e for e in env}
    token = by_name["SPARK_CONNECT_AUTHENTICATE_TOKEN"]["valueFrom"]["secretKeyRef"]
    secret = made[("Secret", token["name"])]
    assert token["key"] in secret["data"] and token["optional"] is True
    assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    ca = Path(by_name["UKO_SPARK_CONNECT_CA_CERT"]["value"])
    (certificate,) = [o for (kind, _), o in made.items() if kind == "Certificate"]
    (tls,) = [v for v in volumes if "secret" in v]
    assert (
        tls["secret"]["secretName"] == certificate["spec"]["secretName"] and tls["secret"]["optional"] is True
    )
    assert tls["secret"]["items"] == [{"key": "ca.crt", "path": ca.name}]
    (mount,) = [m for m in volume_mounts if m["name"] == tls["name"]]
    assert mount["mountPath"] == str(ca.parent) and mount["readOnly"] is True
    assert {m["mountPath"] for m in volume_mounts if m is not mount} == config_mounts
    assert all(("ConfigMap", v["configMap"]["name"]) in made for v in volumes if "configMap" in v)
