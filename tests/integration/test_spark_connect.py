"""Runs on a Spark Connect server (``upsert-kafka-ops spark-connect``: pyspark's own server, started
with the project's jars and Delta, and a token it generates) from new client processes, as an
orchestrator's tasks would: the targets equal the plain-Python fold of their topics, incremental runs
read only what is new. Every client sends the token from a secret reference; through the chart's own
TLS proxy config (a real nginx) only the right token gets in, and the token shows nowhere.

A process holds Spark Connect sessions or a local driver, not both (pyspark switches its functions
to the client's for the whole process), so every client here is a process of its own."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import socket
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from tests.integration.jobs_support import (
    oracle_table,
    pipeline,
    produce,
    random_changes,
    rows_as_table,
    source,
)

from upsert_kafka_ops.local import LocalKafka

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class ConnectServer:
    """The CLI's server: its URL, the file its generated token is in, its folder."""

    url: str
    token_file: Path
    dir: Path

    @property
    def token(self) -> str:
        return self.token_file.read_text().strip()

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def connect_server(jars_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    """``upsert-kafka-ops spark-connect`` as a user starts it: it generates the token into a file only
    its owner reads and prints where it is, never its value."""
    work = tmp_path_factory.mktemp("connect")
    # progress reports every 200 ms (2 s by default), so a read of a few seconds shows its stages
    args = [sys.executable, "-m", "upsert_kafka_ops.cli", "spark-connect", "--master", "local[2]", "--dir", str(work),
            "--conf", "spark.connect.progress.reportInterval=200ms"]  # fmt: skip
    with open(work / "cli.err", "wb") as err:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # printed once the server answers
        assert line, (work / "cli.err").read_text()[-3000:]
        printed = json.loads(line)
        token_file = Path(printed["token"]["file"])
        assert set(printed["token"]) == {"file"} and stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(Path(printed["log"]).stat().st_mode) == 0o600  # Spark may write the token there
        server = ConnectServer(printed["url"], token_file, work)
        assert server.url.startswith("sc://localhost:") and server.token not in line
        yield server
    finally:
        proc.terminate()
        proc.wait(60)


def _cli(server: ConnectServer, *args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "upsert_kafka_ops.cli", *args, "--json", "--remote", server.url,
                           "--token", f"file:{server.token_file}"],
                          capture_output=True, text=True, timeout=600, check=False, env=dict(os.environ))  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert server.token not in done.stdout + done.stderr
    result: dict[str, Any] = json.loads(done.stdout)["results"][0]
    return result


def test_materialize_and_a_topic_backfill_through_spark_connect(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    connect_server: ConnectServer,
    spark: SparkSession,
    tmp_path: Path,
) -> None:
    servers = kafka.bootstrap_servers
    topic, sink = new_topic(partitions=2), new_topic(partitions=3, config={"cleanup.policy": "compact"})
    rnd = random.Random(21)
    n = produce(servers, topic, random_changes(rnd, 300, 40))
    src = source(topic, servers)
    sink_table = json.loads(json.dumps(src["table"]).replace(topic, sink))
    target = tmp_path / "users"
    p = pipeline(servers, [
        {"name": "users", "kind": "materialize", "source": src, "target": {"kind": "delta", "path": str(target)}},
        {"name": "copy", "kind": "backfill", "source": src,
         "target": {"kind": "topic", "connection": "main", "table": sink_table}},
    ])  # fmt: skip
    file = tmp_path / "pipeline.yaml"
    file.write_text(p.to_yaml())
    first = _cli(connect_server, "run", str(file), "--job", "users")
    assert (first["status"], first["mode"], first["records_read"]) == ("succeeded", "full", n)
    table = lambda: rows_as_table(spark.read.format("delta").load(str(target)).collect())  # noqa: E731
    assert table() == oracle_table(servers, topic)

    more = produce(servers, topic, random_changes(rnd, 12, 40))
    second = _cli(connect_server, "run", str(file), "--job", "users")
    assert (second["mode"], second["run"], second["records_read"]) == ("incremental", 2, more)
    assert table() == oracle_table(servers, topic)
    idle = _cli(connect_server, "run", str(file), "--job", "users")
    assert (idle["mode"], idle["records_read"], idle["rows_upserted"]) == ("incremental", 0, 0)

    copied = _cli(connect_server, "backfill", str(file), "--job", "copy")
    assert (copied["status"], copied["execution"]) == ("succeeded", "snapshot")
    assert oracle_table(servers, sink) == oracle_table(servers, topic)


def test_a_long_read_on_spark_connect_logs_the_servers_stage_progress(
    kafka: LocalKafka, new_topic: Callable[..., str], connect_server: ConnectServer, tmp_path: Path
) -> None:
    from confluent_kafka import Producer

    topic = new_topic(partitions=2)
    producer = Producer(kafka.client_config(**{"linger.ms": 50, "queue.buffering.max.messages": 200_000}))
    for i in range(150_000):
        producer.produce(
            topic, key=b'{"id":%d}' % (i % 5000), value=b'{"id":%d,"name":"x%d"}' % (i % 5000, i)
        )
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    file = tmp_path / "pipeline.yaml"
    job = {"name": "big", "kind": "materialize", "source": source(topic, kafka.bootstrap_servers),
           "target": {"kind": "delta", "path": str(tmp_path / "big")}}  # fmt: skip
    file.write_text(pipeline(kafka.bootstrap_servers, [job]).to_yaml())
    done = subprocess.run(
        [sys.executable, "-m", "upsert_kafka_ops.cli", "run", str(file), "--remote", connect_server.url, "--json"],
        capture_output=True, text=True, timeout=600, check=False,  # the token from pyspark's variable
        env={**os.environ, "UKO_PROGRESS_INTERVAL_S": "0.3", "SPARK_CONNECT_AUTHENTICATE_TOKEN": connect_server.token},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["results"][0]["records_read"] == 150_000
    lines = re.findall(r"job big: ([\d,]+) of ([\d,]+) tasks done, ([\d.,]+) MB read \(a range of 150,000 records; "
                       r"Spark Connect\), \d+s", done.stderr)  # fmt: skip
    assert lines, done.stderr[-3000:]
    assert all(int(d.replace(",", "")) <= int(t.replace(",", "")) for d, t, _ in lines)


_ORCHESTRATED = """
import json, sys
from upsert_kafka_ops.jobs import Pipeline
pipeline_file, remote, which = sys.argv[1:4]
if which == "airflow":
    from upsert_kafka_ops.airflow.operators import UpsertKafkaMaterializeOperator

    op = UpsertKafkaMaterializeOperator(task_id="t", pipeline_file=pipeline_file, job_name="users", spark_master=remote)
    out = op.execute(context={})
else:
    import dagster as dg
    from upsert_kafka_ops.dagster import SparkRuntimeResource, upsert_kafka_assets

    assets = upsert_kafka_assets(pipeline=Pipeline.load(pipeline_file), spark_runtime="spark", row_count_check=False)
    spark = SparkRuntimeResource(runtime="connect", master=remote, token=dg.EnvVar("UKO_CONNECT_TOKEN"))
    done = dg.materialize([a for a in assets if isinstance(a, dg.AssetsDefinition)], resources={"spark": spark})
    assert done.success
    (mat,) = done.asset_materializations_for_node("upsert_kafka_users")
    metadata = {k: getattr(v, "value", v) for k, v in mat.metadata.items()}
    out = {"records_read": metadata["upsert_kafka/records_read"], "mode": metadata["upsert_kafka/mode"],
           "metadata": repr(metadata), "resource": repr(spark)}  # printed: the token must be in neither
print("RESULT " + json.dumps(out, default=str))
"""


@pytest.mark.parametrize("orchestrator", ["airflow", "dagster"])
def test_the_orchestrators_run_a_job_on_spark_connect(
    orchestrator: str,
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    connect_server: ConnectServer,
    spark: SparkSession,
    tmp_path: Path,
) -> None:
    """An Airflow task (``spark_master="sc://..."``, the token in the worker's
    ``SPARK_CONNECT_AUTHENTICATE_TOKEN`` as the chart's overlay sets it) and a Dagster run
    (``SparkRuntimeResource(runtime="connect", token=dg.EnvVar(...))``) run the job on the server:
    their processes start no driver JVM, and their outputs hold no token."""
    servers = kafka.bootstrap_servers
    topic = new_topic(partitions=2)
    n = produce(servers, topic, random_changes(random.Random(5), 80, 20))
    target = tmp_path / "users"
    p = pipeline(servers, [{"name": "users", "kind": "materialize", "source": source(topic, servers),
                            "target": {"kind": "delta", "path": str(target)}}])  # fmt: skip
    file = tmp_path / "pipeline.yaml"
    file.write_text(p.to_yaml())
    env = {k: v for k, v in os.environ.items() if k != "SPARK_CONNECT_AUTHENTICATE_TOKEN"}
    env["SPARK_CONNECT_AUTHENTICATE_TOKEN" if orchestrator == "airflow" else "UKO_CONNECT_TOKEN"] = (
        connect_server.token
    )
    done = subprocess.run([sys.executable, "-c", _ORCHESTRATED, str(file), connect_server.url, orchestrator],
                          capture_output=True, text=True, timeout=600, check=False, env=env)  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert connect_server.token not in done.stdout + done.stderr
    (line,) = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    result = json.loads(line[len("RESULT ") :])
    assert (result["records_read"], result["mode"]) == (n, "full")
    assert "SparkContext: Running Spark version" not in done.stderr  # no driver in the task's process
    assert rows_as_table(spark.read.format("delta").load(str(target)).collect()) == oracle_table(
        servers, topic
    )


_THROUGH_THE_PROXY = """
import json, os, sys
from pyspark.sql.connect.session import SparkSession
from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.jobs import Pipeline
from upsert_kafka_ops.runtime import ConnectRuntime, execute_job
from upsert_kafka_ops.runtime.execute import connect_session

pipeline_file, remote, ca = sys.argv[1:4]
out = {}
plain = SparkSession.builder.remote(remote + "/;use_ssl=true").getOrCreate()
try:  # pyspark's own client, no token: the server refuses it
    plain.range(1).count()
except Exception as exc:
    out["pyspark"] = str(exc)
finally:
    plain.stop()
cases = {"no token": {"ca_cert": "file:" + ca}, "wrong token": {"token": "env:WRONG", "ca_cert": "file:" + ca},
         "no CA": {"token": "env:RIGHT"}}
for case, data in cases.items():
    try:
        connect_session(ConnectRuntime.model_validate({"remote": remote + "/;use_ssl=true", **data}))
    except SpecError as exc:
        out[case] = {"field": exc.field, "message": str(exc)}
os.environ["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = os.environ["RIGHT"]  # what the chart's overlays set
os.environ["UKO_SPARK_CONNECT_CA_CERT"] = ca
result = execute_job(Pipeline.load(pipeline_file), "users", runtime=ConnectRuntime(remote=remote + "/;use_ssl=true"))
out["run"] = {"status": result.status, "records_read": result.records_read}
print("RESULT " + json.dumps(out))
"""


def _chart_proxy_config() -> str:
    """The nginx.conf the chart renders for its Spark Connect server's TLS proxy."""
    import yaml

    root = Path(__file__).resolve().parents[2]
    helm = os.environ.get("UKO_HELM") or str(root / ".tools" / "bin" / "helm")
    done = subprocess.run([helm, "template", "r1", str(root / "charts" / "upsert-kafka-ops"), "--namespace", "uko",
                           "-f", str(root / "tests" / "helm" / "values" / "spark-connect.yaml")],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, f"helm template ({helm}; make helm builds it): {done.stderr[-2000:]}"
    (config,) = [o for o in yaml.safe_load_all(done.stdout) if o and o["kind"] == "ConfigMap"
                 and o["metadata"]["name"].endswith("-spark-connect-proxy")]  # fmt: skip
    (text,) = config["data"].values()
    return str(text)


def test_through_the_charts_tls_proxy_only_the_right_token_gets_in_and_it_shows_nowhere(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    connect_server: ConnectServer,
    spark: SparkSession,
    tmp_path: Path,
) -> None:
    """The chart's proxy config, run by a real nginx with a certificate made here, in front of the
    server: pyspark's own client without a token and the project's runtime with a wrong one are refused
    naming the setting, a CA bundle that does not verify fails at once, and the right token from the
    variables the chart's overlays set runs a job whose table equals the fold of its topic. The token
    is in no process's arguments, no output and no log of the client, the proxy or the server."""
    from tests.integration.test_secret_scan import ProcessList

    from upsert_kafka_ops.local.process import free_port, wait_ready
    from upsert_kafka_ops.local.tls import generate

    tls = generate(tmp_path / "tls")
    for name in ("tls.crt", "tls.key"):  # the keystore holds the key, the certificate and the CA
        (tmp_path / "tls" / name).write_bytes(tls.server_keystore.read_bytes())
    nginx_dir, port = tmp_path / "nginx", free_port()
    nginx_dir.mkdir()
    config = _chart_proxy_config()
    assert "/etc/upsert-kafka-ops/spark-connect-tls/" in config and "15002" in config and "15003" in config
    config = (config.replace("/etc/upsert-kafka-ops/spark-connect-tls/", f"{tmp_path}/tls/")
              .replace("/tmp/nginx/", f"{nginx_dir}/").replace("15002", str(port))
              .replace("15003", str(connect_server.port)))  # fmt: skip
    (nginx_dir / "nginx.conf").write_text(config)
    nginx = os.environ.get("UKO_NGINX") or "nginx"
    with open(nginx_dir / "nginx.log", "wb") as log:
        proxy = subprocess.Popen(  # the config says daemon off
            [nginx, "-p", str(nginx_dir), "-c", str(nginx_dir / "nginx.conf"), "-e", "stderr"],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def answers(left: float) -> bool:
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=min(1.0, left)).close()
            return True
        return False

    try:
        wait_ready(proxy, answers, 30, "nginx", lambda: (nginx_dir / "nginx.log").read_text())
        servers = kafka.bootstrap_servers
        topic = new_topic(partitions=2)
        n = produce(servers, topic, random_changes(random.Random(44), 60, 15))
        target = tmp_path / "users"
        file = tmp_path / "pipeline.yaml"
        file.write_text(pipeline(servers, [{"name": "users", "kind": "materialize", "source": source(topic, servers),
                                            "target": {"kind": "delta", "path": str(target)}}]).to_yaml())  # fmt: skip
        token = connect_server.token
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("SPARK_CONNECT_AUTHENTICATE_TOKEN", "UKO_SPARK_CONNECT_CA_CERT")
        }
        env |= {"RIGHT": token, "WRONG": token[::-1], "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(tls.ca_cert)}
        with ProcessList([token]) as ps:
            done = ps.run([sys.executable, "-c", _THROUGH_THE_PROXY, str(file), f"sc://localhost:{port}",
                           str(tls.ca_cert)], env, timeout=600)  # fmt: skip
    finally:
        proxy.terminate()
        proxy.wait(30)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    (line,) = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    out = json.loads(line[len("RESULT ") :])
    assert "UNAUTHENTICATED" in out["pyspark"] and "No authentication token provided" in out["pyspark"]
    assert out["no token"]["field"] == "token" and "none was sent" in out["no token"]["message"]
    assert out["wrong token"]["field"] == "token" and "refused the token" in out["wrong token"]["message"]
    assert "spark.connect.authenticate.token" in out["wrong token"]["message"]
    assert out["no CA"]["field"] == "ca_cert" and "does not verify" in out["no CA"]["message"]
    assert out["run"] == {"status": "succeeded", "records_read": n}
    assert rows_as_table(spark.read.format("delta").load(str(target)).collect()) == oracle_table(
        servers, topic
    )
    assert ps.marked and not ps.seen  # the client was seen running; no process showed the token
    logs = [done.stdout, done.stderr, (nginx_dir / "nginx.log").read_text(errors="replace")]
    logs += [p.read_text(errors="replace") for p in connect_server.dir.glob("*.log")]
    logs += [(connect_server.dir / "cli.err").read_text(errors="replace")]
    assert len(logs) >= 5 and not [text[:200] for text in logs if token in text]
