"""Authorization (issue 23, item 2): a broker of its own enforcing ACLs with KRaft's StandardAuthorizer,
a SCRAM user ``etl`` granted one operation at a time. A job whose principal lacks READ on its source,
READ on its consumer group or WRITE on its sink fails before anything is read or written, naming the
principal, the resource, the operation and the grant; the lag of a job whose principal may not
DESCRIBE its group or topic is an error that says so, never "no lag"."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from pyspark.sql import SparkSession
from tests.integration.jobs_support import oracle_table, produce, random_changes, rows_as_table, source

from upsert_kafka_ops.jobs import Pipeline, run_job
from upsert_kafka_ops.jobs.lag import pipeline_lag
from upsert_kafka_ops.kafka.access import AccessDeniedError
from upsert_kafka_ops.local import LocalKafka

pytestmark = pytest.mark.integration
USER, PASSWORD = "etl", "etl-acl-secret"


@pytest.fixture(scope="module")
def secured(jars_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    with LocalKafka(tmp_path_factory.mktemp("acl-kafka"), jars_dir=jars_dir, heap="512m",
                    scram_users={USER: PASSWORD}, acls=True) as broker:  # fmt: skip
        yield broker


def _grant(broker: LocalKafka, kind: Any, name: str, operation: Any) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})  # User:ANONYMOUS, a super user
    binding = AclBinding(kind, name, ResourcePatternType.LITERAL, f"User:{USER}", "*", operation,
                         AclPermissionType.ALLOW)  # fmt: skip
    for f in admin.create_acls([binding]).values():
        f.result(timeout=30)
    time.sleep(0.5)  # the authorizer applies the new ACL from the metadata log


def _pipeline(broker: LocalKafka, jobs: list[dict[str, Any]]) -> Pipeline:
    conn = {"bootstrap_servers": broker.sasl_bootstrap_servers, "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-512", "username": USER, "password": {"env": "UKO_TEST_ACL_PASSWORD"}}  # fmt: skip
    return Pipeline.model_validate({"connections": {"main": conn}, "jobs": jobs})


def _denied(p: Pipeline, spark: SparkSession, job: str) -> str:
    began = time.monotonic()
    with pytest.raises(AccessDeniedError) as err:
        run_job(p, job, spark=spark)
    assert time.monotonic() - began < 30  # asked of the cluster, not found by a stalled read
    return str(err.value)


def test_a_job_without_a_grant_fails_before_it_reads_or_writes_naming_what_to_grant(
    secured: LocalKafka, spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UKO_TEST_ACL_PASSWORD", PASSWORD)
    servers = secured.bootstrap_servers
    for topic in ("users", "copy"):
        secured.create_topic(topic, partitions=2)
    produce(servers, "users", random_changes(random.Random(81), 40, 10))
    path = tmp_path / "users"
    p = _pipeline(secured, [
        {"name": "users", "kind": "materialize", "source": source("users", servers),
         "target": {"kind": "delta", "path": str(path)}},
        {"name": "copy", "kind": "topic-to-topic", "execution": "snapshot", "query": "SELECT * FROM users",
         "sources": {"users": source("users", servers)}, "sink": source("copy", servers)},
    ])  # fmt: skip

    # nothing granted: the topic is not even visible
    message = _denied(p, spark, "users")
    assert f"User:{USER} may not READ topic 'users' (it may not even DESCRIBE it)" in message
    assert f"User:{USER} may not DESCRIBE_CONFIGS topic 'users'" in message
    assert f"User:{USER} may not READ group 'upsert-kafka-ops.users'" in message
    assert "Nothing was read or written" in message
    assert f"kafka-acls.sh --bootstrap-server {secured.sasl_bootstrap_servers} --add --allow-principal User:{USER} " \
           "--operation Read --topic users" in message  # fmt: skip
    assert not path.exists() and PASSWORD not in message

    # READ on the topic (and its settings): the group is what is missing
    _grant(secured, ResourceType.TOPIC, "users", AclOperation.READ)
    _grant(secured, ResourceType.TOPIC, "users", AclOperation.DESCRIBE_CONFIGS)
    message = _denied(p, spark, "users")
    assert "topic 'users'" not in message and "may not READ group 'upsert-kafka-ops.users'" in message
    assert not path.exists()

    # and on the group: the job runs
    _grant(secured, ResourceType.GROUP, "upsert-kafka-ops.users", AclOperation.READ)
    result = run_job(p, "users", spark=spark)
    assert result.records_read == 40
    rows = spark.read.format("delta").load(str(path)).select("id", "name", "region", "score").collect()
    assert rows_as_table(rows) == oracle_table(servers, "users")

    # a topic-to-topic job may read but not write its sink: refused before the first record
    _grant(secured, ResourceType.GROUP, "upsert-kafka-ops.copy", AclOperation.READ)
    message = _denied(p, spark, "copy")
    assert f"User:{USER} may not WRITE topic 'copy' (it may not even DESCRIBE it)" in message
    assert "--operation Write --topic copy" in message
    assert oracle_table(servers, "copy") == {}
    _grant(secured, ResourceType.TOPIC, "copy", AclOperation.WRITE)
    assert "may not DESCRIBE_CONFIGS topic 'copy' (it may DESCRIBE, WRITE)" in _denied(p, spark, "copy")
    _grant(secured, ResourceType.TOPIC, "copy", AclOperation.DESCRIBE_CONFIGS)
    run_job(p, "copy", spark=spark)
    assert oracle_table(servers, "copy") == oracle_table(servers, "users")


def test_lag_the_principal_may_not_read_is_an_error_naming_it_not_zero(
    secured: LocalKafka, new_topic: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from upsert_kafka_ops.metrics.documents import jobs_lag_document

    monkeypatch.setenv("UKO_TEST_ACL_PASSWORD", PASSWORD)
    servers = secured.bootstrap_servers
    secured.create_topic("clicks", partitions=2)
    produce(servers, "clicks", random_changes(random.Random(82), 10, 5))
    p = _pipeline(secured, [
        {"name": "count", "kind": "topic-to-topic", "execution": "snapshot", "query": "SELECT * FROM c",
         "sources": {"c": source("clicks", servers)}, "sink": source("clicks", servers)},
    ])  # fmt: skip
    (jl,) = pipeline_lag(p, timeout=10)  # nothing granted: the group is the first thing read
    assert jl.report is None and "group 'upsert-kafka-ops.count'" in (jl.error or ""), jl.error
    assert "access denied to User:etl" in (jl.error or "")
    document = jobs_lag_document([(jl, None)])
    assert "access denied" in str(document) and PASSWORD not in str(document)
    _grant(secured, ResourceType.GROUP, "upsert-kafka-ops.count", AclOperation.DESCRIBE)
    (jl,) = pipeline_lag(p, timeout=10)  # then the topic
    assert (
        jl.report is None and "access denied to User:etl" in (jl.error or "") and "clicks" in (jl.error or "")
    )
    _grant(secured, ResourceType.TOPIC, "clicks", AclOperation.DESCRIBE)
    _grant(secured, ResourceType.TOPIC, "clicks", AclOperation.DESCRIBE_CONFIGS)
    (jl,) = pipeline_lag(p, timeout=10)
    assert (
        jl.report is not None and jl.error is None and jl.report.total_lag == 10
    )  # never committed: all of it
