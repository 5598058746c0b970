"""The local KRaft broker: start, stop, topics, and the CLI."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from upsert_kafka_ops.errors import LocalServiceError
from upsert_kafka_ops.kafka.admin import probe
from upsert_kafka_ops.local import LocalKafka
from upsert_kafka_ops.local import kafka as kafka_module
from upsert_kafka_ops.local.process import alive, free_port


def test_compacted_topic_is_created_with_its_cleanup_policy(
    kafka: LocalKafka, new_topic: Callable[..., str]
) -> None:
    name = new_topic(partitions=3, config={"cleanup.policy": "compact"})
    admin = AdminClient(kafka.client_config())
    resource = ConfigResource(ResourceType.TOPIC, name)
    configs = admin.describe_configs([resource])[resource].result(timeout=10)
    assert configs["cleanup.policy"].value == "compact"
    assert len(admin.list_topics(topic=name, timeout=10).topics[name].partitions) == 3


def test_start_and_stop_leave_no_process_behind(jars_dir: Path, tmp_path: Path) -> None:
    broker = LocalKafka(tmp_path / "b", jars_dir=jars_dir, heap="512m")
    with broker:
        pid = broker.pid
        assert pid is not None and alive(pid)
        assert broker.log_file.is_file()
    assert not alive(pid)
    assert not Path(f"/proc/{pid}").exists()


def test_failed_start_shows_the_broker_log(jars_dir: Path, tmp_path: Path) -> None:
    broker = LocalKafka(
        tmp_path / "bad", jars_dir=jars_dir, heap="256m", properties={"node.id": "not-a-number"}
    )
    with pytest.raises(LocalServiceError) as info:
        broker.start(timeout=60)
    text = str(info.value)
    # Kafka's own message names the bad value (node.id is an alias of broker.id)
    assert "Invalid value not-a-number" in text
    assert broker.pid is None  # it failed at format time, before any broker process


def test_broker_that_dies_at_start_shows_its_log_tail(
    jars_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The PLAINTEXT listener's port is taken between its allocation and the broker's bind: the broker
    exits at start and the error holds its log's tail. The port was the caller's choice, so it is
    reported at once (ports the broker chose itself are replaced instead: the next test)."""
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    real_free_ports = kafka_module.free_ports
    allocations = []

    def busy_first(count: int, first: int = 0) -> list[int]:
        allocations.append(busy.getsockname()[1])
        return [busy.getsockname()[1], *real_free_ports(count)[1:]]

    monkeypatch.setattr(kafka_module, "free_ports", busy_first)
    broker = LocalKafka(tmp_path / "busy", jars_dir=jars_dir, heap="256m", port=free_port())
    try:
        with pytest.raises(LocalServiceError) as info:
            broker.start(timeout=90)
    finally:
        busy.close()
    text = str(info.value)
    assert "exited with code" in text
    assert "Address already in use" in text  # from the broker's log tail
    assert broker.pid is not None and not alive(broker.pid)
    assert len(allocations) == 1  # one start: a port the caller chose is never replaced


def test_a_port_taken_by_another_broker_before_the_bind_is_replaced(
    kafka: LocalKafka, jars_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ports are free when allocated and bound when the JVM is up, seconds later: on a busy machine
    another broker can take one in between. Its answer on the port is not this broker's (another
    cluster id); this one exits, and starts again on new ports."""
    taken = kafka.ports["PLAINTEXT"]
    real_free_ports = kafka_module.free_ports
    allocations: list[list[int]] = []

    def taken_once(count: int, first: int = 0) -> list[int]:
        ports = real_free_ports(count)
        allocations.append(ports if allocations else [taken, *ports[1:]])
        return allocations[-1]

    monkeypatch.setattr(kafka_module, "free_ports", taken_once)
    with LocalKafka(tmp_path / "second", jars_dir=jars_dir, heap="256m") as broker:
        assert len(allocations) == 2 and broker.ports["PLAINTEXT"] == allocations[1][0] != taken
        metadata = probe(broker.client_config(), timeout=30)
        assert metadata.cluster_id == broker.cluster_id != kafka.cluster_id
    assert "Address already in use" in broker.stdout_file.read_text() + broker.log_file.read_text()


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "upsert_kafka_ops.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def test_cli_start_status_stop(jars_dir: Path, tmp_path: Path) -> None:
    env = {**os.environ, "UPSERT_KAFKA_OPS_JARS_DIR": str(jars_dir)}
    state = str(tmp_path / "state")
    port = free_port()
    bad = _cli("local", "kafka", "start", "--dir", state, "--topic", "users:0", env=env)
    assert bad.returncode == 2 and "--topic 'users:0': write NAME or NAME:PARTITIONS" in bad.stderr
    started = _cli("local", "kafka", "start", "--dir", state, "--port", str(port),
                   "--topic", "users:2", "--topic", "audit", env=env)  # fmt: skip
    assert started.returncode == 0, started.stderr
    info = json.loads(started.stdout)
    try:
        assert info["bootstrap_servers"] == f"127.0.0.1:{port}"
        admin = AdminClient({"bootstrap.servers": info["bootstrap_servers"]})
        topics = admin.list_topics(timeout=10).topics
        assert (len(topics["users"].partitions), len(topics["audit"].partitions)) == (2, 1)
        resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in ("users", "audit")]
        for future in admin.describe_configs(resources).values():
            assert future.result(timeout=10)["cleanup.policy"].value == "compact"
        taken = _cli(
            "local", "kafka", "start", "--dir", str(tmp_path / "other"), "--port", str(port), env=env
        )
        assert taken.returncode == 2 and f"Port {port} on 127.0.0.1 is in use" in taken.stderr
        status = _cli("local", "kafka", "status", "--dir", state, env=env)
        assert status.returncode == 0
        assert json.loads(status.stdout)["running"] is True
        assert json.loads(status.stdout)["bootstrap_servers"] == info["bootstrap_servers"]
        md = AdminClient({"bootstrap.servers": info["bootstrap_servers"]}).list_topics(timeout=10)
        assert md.brokers
        again = _cli("local", "kafka", "start", "--dir", state, env=env)
        assert again.returncode == 2 and "already running" in again.stderr
    finally:
        stopped = _cli("local", "kafka", "stop", "--dir", state, env=env)
    assert stopped.returncode == 0 and stopped.stdout.strip() == "stopped"
    assert not alive(int(info["pid"]))
    after = _cli("local", "kafka", "status", "--dir", state, env=env)
    assert after.returncode == 3 and json.loads(after.stdout)["running"] is False


def test_a_run_shares_one_admin_client_per_cluster_and_drops_it_after(kafka: LocalKafka) -> None:
    from upsert_kafka_ops.kafka.admin import KafkaAdmin, shared_clients
    from upsert_kafka_ops.kafka.offsets import topic_partitions

    config = kafka.client_config()
    with KafkaAdmin(config) as a, KafkaAdmin(config) as b:
        assert a.client is not b.client  # outside a run: each admin its own client
    with shared_clients():
        with KafkaAdmin(config) as a:
            first = a.client
        md = probe(config)  # the metadata through the same client
        with KafkaAdmin(config) as b:
            assert b.client is first
        with shared_clients(), KafkaAdmin(config) as c:  # nested: still the run's client
            assert c.client is first
        other = {**config, "client.id": "another"}
        with KafkaAdmin(other) as d:
            assert d.client is not first  # another configuration, another client
        assert md.brokers and topic_partitions(config, pattern="__nothing__") == []
    with KafkaAdmin(config) as e:
        assert e.client is not first  # the run's clients went with it
