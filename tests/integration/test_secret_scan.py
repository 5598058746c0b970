"""Secrets, scanned (issue 23, item 6): every job kind runs through the CLI with distinctive secret
values (a SCRAM password, a truststore password, PostgreSQL's password), then everything a user or
another tenant can see is searched for them: the process list sampled while the runs go on, stdout
and stderr, Spark's event logs (uncompressed, so their text is searched), the pipeline file and results, the run metrics and OpenLineage events
the runs export, every temporary file the processes wrote (TMPDIR, Spark's local dirs and the JVM's
temporary folder point into one folder), the Delta logs and the PostgreSQL tables the runs wrote.
A job that fails (its sink topic does not exist), the last of the same run, is scanned the same way.
Zero occurrences.

The orchestrators' own surfaces are scanned in their suites (tests/airflow, tests/dagster), the
chart's rendered objects in tests/helm."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from tests.integration.jobs_support import produce, random_changes, source
from tests.integration.test_jobs_postgres import pg_target

from upsert_kafka_ops.local import LocalKafka, LocalPostgres

pytestmark = pytest.mark.integration
SCRAM_USER = "scanned"


class ProcessList:
    """``ps -eo pid,args`` sampled every 0.2 s in a thread; :attr:`seen` keeps the lines holding a
    secret, :attr:`marked` counts the samples that caught one of :attr:`pids` (the runs were seen: a
    process's arguments may show cut short, so they are not what proves it)."""

    def __init__(self, secrets: list[str]) -> None:
        self.secrets, self.seen, self.samples, self.marked = secrets, [], 0, 0
        self.pids: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            lines = subprocess.run(
                ["ps", "-eo", "pid=,args="], capture_output=True, text=True
            ).stdout.splitlines()
            self.samples += 1
            self.marked += any(line.split(None, 1)[0] in self.pids for line in lines if line.strip())
            self.seen += [line for line in lines if any(s in line for s in self.secrets)]

    def run(self, args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
        """Run ``args`` as a watched process."""
        proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.pids.add(str(proc.pid))
        out, err = proc.communicate(timeout=timeout)
        return subprocess.CompletedProcess(args, proc.returncode, out, err)

    def __enter__(self) -> ProcessList:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _files_holding(roots: list[Path], secrets: list[str]) -> list[str]:
    """Each file under ``roots`` whose bytes hold a secret, as ``path: secret``."""
    found = []
    for root in roots:
        for path in [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file()):
            data = path.read_bytes()
            found += [f"{path}: {s}" for s in secrets if s.encode() in data]
    return found


@pytest.fixture
def scram_password(kafka: LocalKafka) -> Iterator[str]:
    password = f"scram-{uuid.uuid4().hex}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    upsert = UserScramCredentialUpsertion(SCRAM_USER, info, password.encode())
    for f in admin.alter_user_scram_credentials([upsert]).values():
        f.result(timeout=30)
    yield password


def _truststore(kafka: LocalKafka, path: Path, password: str) -> None:
    made = subprocess.run(
        ["keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", str(kafka.ca_file), "-keystore",
         str(path), "-storetype", "PKCS12", "-storepass:env", "UKO_SCAN_STORE"],
        env={**os.environ, "UKO_SCAN_STORE": password}, capture_output=True, text=True,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr


def _pipeline(
    kafka: LocalKafka, postgres: LocalPostgres, work: Path, topics: dict[str, str]
) -> dict[str, Any]:
    servers = kafka.bootstrap_servers

    def on(connection: str, topic: str) -> dict[str, Any]:
        return {**source(topic, servers), "connection": connection}

    delta = work / "users-delta"
    return {
        "connections": {
            "sasl": {"bootstrap_servers": kafka.sasl_bootstrap_servers, "security_protocol": "SASL_PLAINTEXT",
                     "sasl_mechanism": "SCRAM-SHA-512", "username": SCRAM_USER, "password": {"env": "UKO_SCAN_SCRAM"}},
            "tls": {"bootstrap_servers": kafka.ssl_bootstrap_servers, "security_protocol": "SSL",
                    "ssl_truststore_location": str(work / "trust.p12"), "ssl_truststore_type": "PKCS12",
                    "ssl_truststore_password": {"env": "UKO_SCAN_STORE"}},
        },
        "jobs": [
            {"name": "to-delta", "kind": "materialize", "source": on("sasl", topics["src"]),
             "target": {"kind": "delta", "path": str(delta)}},
            {"name": "to-postgres", "kind": "materialize", "source": on("sasl", topics["src"]),
             "target": pg_target(postgres, topics["pg_table"])},
            {"name": "refill", "kind": "backfill", "source": on("sasl", topics["src"]),
             "target": {**on("tls", topics["refill"]), "kind": "topic"}},
            {"name": "copy", "kind": "topic-to-topic", "execution": "snapshot", "query": "SELECT * FROM users",
             "sources": {"users": on("sasl", topics["src"])}, "sink": on("sasl", topics["copy"])},
            {"name": "pub", "kind": "publish", "sink": on("tls", topics["pub"]),
             "source": {"kind": "query", "query": f"SELECT * FROM delta.`{delta}`"}},
            {"name": "broken", "kind": "topic-to-topic", "execution": "snapshot", "query": "SELECT * FROM users",
             "sources": {"users": on("sasl", topics["src"])}, "sink": on("tls", "no-such-topic")},
        ],
    }  # fmt: skip


def test_no_secret_reaches_anything_a_user_or_another_tenant_sees(
    kafka: LocalKafka,
    postgres: LocalPostgres,
    new_topic: Callable[..., str],
    scram_password: str,
    jars_dir: Path,
    tmp_path: Path,
) -> None:
    store_password = f"store-{uuid.uuid4().hex}"
    secrets = [scram_password, store_password, postgres.password]
    work, tmp, events, metrics = (tmp_path / d for d in ("work", "tmp", "events", "metrics"))
    for d in (work, tmp, events, metrics, tmp_path / "conf"):
        d.mkdir()
    _truststore(kafka, work / "trust.p12", store_password)
    (tmp_path / "conf" / "spark-defaults.conf").write_text(
        f"spark.eventLog.enabled true\nspark.eventLog.dir {events.as_uri()}\nspark.eventLog.compress false\n"
    )
    topics = {"src": new_topic(partitions=2), "refill": new_topic(partitions=2), "copy": new_topic(partitions=2),
              "pub": new_topic(partitions=1), "pg_table": f"scan_{uuid.uuid4().hex[:8]}"}  # fmt: skip
    produce(kafka.bootstrap_servers, topics["src"], random_changes(random.Random(71), 50, 12))
    pipeline_file = work / "pipeline.yaml"
    pipeline_file.write_text(yaml.safe_dump(_pipeline(kafka, postgres, work, topics)))
    lineage = work / "lineage.jsonl"
    env = {
        **os.environ,
        "UPSERT_KAFKA_OPS_JARS_DIR": str(jars_dir),
        "UKO_SCAN_SCRAM": scram_password,
        "UKO_SCAN_STORE": store_password,
        "UKO_TEST_PG_PASSWORD": postgres.password,
        "TMPDIR": str(tmp),
        "SPARK_LOCAL_DIRS": str(tmp),
        "JAVA_TOOL_OPTIONS": f"-Djava.io.tmpdir={tmp}",
        "SPARK_CONF_DIR": str(tmp_path / "conf"),
        "UKO_METRICS_TEXTFILE_DIR": str(metrics),
        "UKO_OPENLINEAGE_FILE": str(lineage),
    }
    env.pop("OPENLINEAGE_URL", None)
    cli = [sys.executable, "-m", "upsert_kafka_ops.cli", "run", str(pipeline_file), "--json", "-v"]
    jobs = ("to-delta", "to-postgres", "refill", "copy", "pub", "broken")  # the last one fails
    with ProcessList(secrets) as ps:
        done = ps.run([*cli, *(f"--job={j}" for j in jobs)], env, 900)

    # a failed job: exit 1, its JSON result failed, and stderr says why
    assert done.returncode == 1, done.stderr[-3000:]
    results = json.loads(done.stdout)["results"]
    assert [r["status"] for r in results] == ["succeeded"] * 5 + ["failed"]
    assert all(r["records_read"] > 0 for r in results[:4]) and results[4]["records_written"] > 0
    assert "no-such-topic" in results[5]["error"] and "no-such-topic" in done.stderr
    # -v: the driver JVM's own lines, from its first ones
    assert " INFO SparkContext: Running Spark version" in done.stderr
    assert "WARNING: Using incubator modules: jdk.incubator.vector" in done.stderr
    # what was scanned is not empty: the run left an event log, metrics, lineage and temporary files
    assert ps.samples > 20 and ps.marked > 10  # the samples caught the run's processes
    assert len(list(events.iterdir())) == 1 and list(metrics.iterdir()) and lineage.stat().st_size > 0
    assert any(tmp.rglob("*")), "the runs wrote no temporary file where TMPDIR points"

    leaks = [f"process list: {line[:200]}" for line in ps.seen]
    leaks += [f"run {stream}: {s}" for stream in ("stdout", "stderr") for s in secrets
              if s in getattr(done, stream)]  # fmt: skip
    leaks += _files_holding([work, tmp, events, metrics], secrets)
    with psycopg.connect(postgres.conninfo) as pg:
        for table in (topics["pg_table"], "upsert_kafka_ops_offsets"):
            text = json.dumps(pg.execute(f"SELECT * FROM {table}").fetchall(), default=str)
            leaks += [f"postgres table {table}: {s}" for s in secrets if s in text]
    assert leaks == []
