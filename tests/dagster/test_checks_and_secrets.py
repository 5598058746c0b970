"""The blocking keys check fails on crafted bad data (a key produced into two partitions), over the
SASL listener with the password given as ``dg.EnvVar``: the
password appears in no metadata value, no event and no captured output."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.dagster.support import RESOURCES, checks, metadata, one_job, produce_at
from tests.shared_broker import SCRAM_USERS

import dagster as dg
from upsert_kafka_ops.dagster import (
    KEYS_CHECK,
    ROW_COUNT_CHECK,
    UpsertKafkaResource,
    op_name,
    upsert_kafka_assets,
)
from upsert_kafka_ops.local import LocalKafka

PASSWORD = SCRAM_USERS["alice"]
ROW = {"name": "n", "region": "Berlin", "score": "1.00"}


@pytest.fixture
def password_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("UKO_TEST_KAFKA_PASSWORD", PASSWORD)
    yield "UKO_TEST_KAFKA_PASSWORD"


def _no_secret(result: dg.ExecuteInProcessResult, instance: dg.DagsterInstance) -> None:
    for entry in instance.all_logs(result.run_id):
        assert PASSWORD not in str(entry), entry
    for event in result.all_events:
        assert PASSWORD not in str(event), event


def test_blocking_keys_check_fails_on_a_key_in_two_partitions_over_sasl_without_leaking_the_password(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    spark: Any,
    instance: dg.DagsterInstance,
    tmp_path: Path,
    password_env: str,
    capfd: pytest.CaptureFixture[str],
) -> None:
    topic = new_topic(partitions=2)
    path = tmp_path / "users"
    # the file's connection is the plain listener; the resource points the job at the SASL one
    pipe = one_job(kafka.bootstrap_servers, topic, path)
    sasl = UpsertKafkaResource(
        bootstrap_servers=kafka.sasl_bootstrap_servers, security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256", username="alice", password=dg.EnvVar(password_env),
    )  # fmt: skip
    assert PASSWORD not in repr(sasl)
    assets = upsert_kafka_assets(pipeline=pipe, kafka_resources=RESOURCES)
    op = op_name(pipe.jobs[0].name)

    # key 1 in both partitions: its order is not defined, the blocking check fails the run
    produce_at(kafka.bootstrap_servers, topic, 0, 1, ROW)
    produce_at(kafka.bootstrap_servers, topic, 1, 1, {**ROW, "name": "other"})
    produce_at(kafka.bootstrap_servers, topic, 1, 2, ROW)
    r1 = dg.materialize(assets, resources={"kafka": sasl}, instance=instance, raise_on_error=False)
    assert not r1.success
    assert checks(r1) == {KEYS_CHECK: False, ROW_COUNT_CHECK: True}
    (keys_eval,) = [e for e in r1.get_asset_check_evaluations() if e.check_name == KEYS_CHECK]
    assert keys_eval.metadata["keys_in_several_partitions"].value == 1
    assert metadata(r1, op)["upsert_kafka/keys_in_several_partitions"] == 1
    _no_secret(r1, instance)

    out, err = capfd.readouterr()
    assert "upsert-kafka job" in err  # the runs did log to the captured stderr
    assert PASSWORD not in out and PASSWORD not in err
