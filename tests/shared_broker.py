"""One broker for the suites' processes (``scripts/run-suites.sh``): ``python -m tests.shared_broker
FOLDER`` starts a broker with the listeners of ``tests/services.py``'s (PLAINTEXT, SCRAM, SSL), writes
its address to ``FOLDER/state.json`` and keeps it until SIGTERM. A pytest process whose environment
names that file in ``$UKO_TEST_KAFKA`` attaches to it (:func:`attach`) instead of starting its own.

Each broker costs a JVM start and about 0.7 CPU s a minute while it idles; the suites of ``make test``
ran six (the integration suite's two workers, the Airflow, Dagster, object-storage and conformance
suites), each test isolated by topics of its own (random names) and consumer groups it names.
The fault and monitoring suites keep brokers of their own: their tests restart or stop them; so does
the Dagster test of the demo pipeline, whose topics have fixed names that the Airflow suite's example
DAGs create on this one.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from tests.costs import cpu_seconds

from upsert_kafka_ops import jars
from upsert_kafka_ops.local import LocalKafka
from upsert_kafka_ops.local.tls import TlsFiles

#: the state file of the shared broker, when a pytest process runs beside others (run-suites.sh)
ENV = "UKO_TEST_KAFKA"
#: the SASL listener's users
SCRAM_USERS = {"alice": "alice-secret", "bob": "bob-secret"}


def broker(folder: Path, jars_dir: Path) -> LocalKafka:
    """A broker with the listeners every suite's tests may use (not started)."""
    return LocalKafka(folder, jars_dir=jars_dir, scram_users=SCRAM_USERS, ssl=True)


def attach(state_file: Path) -> LocalKafka:
    """The running broker ``state_file`` describes, for tests to use (stopping it is a no-op)."""
    state = json.loads(state_file.read_text())
    found = LocalKafka(state["work_dir"], scram_users=SCRAM_USERS, ssl=True)
    found.ports = {name: int(port) for name, port in state["ports"].items()}
    found.cluster_id, found.pid = state["cluster_id"], int(state["pid"])
    found.tls = TlsFiles(ca_cert=Path(state["ca_cert"]), server_keystore=Path(state["server_keystore"]))
    return found


def main(folder: Path) -> int:
    began = time.monotonic()
    stop = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop)  # waited for below, never delivered mid-start
    jars.fetch(["kafka"], log=False)
    with broker(folder / "kafka", jars.default_jars_dir()) as running:
        assert running.pid is not None and running.tls is not None
        state = {"work_dir": str(running.work_dir), "ports": running.ports, "cluster_id": running.cluster_id,
                 "pid": running.pid, "ca_cert": str(running.tls.ca_cert),
                 "server_keystore": str(running.tls.server_keystore)}  # fmt: skip
        partial = folder / "state.json.partial"
        partial.write_text(json.dumps(state))
        partial.rename(folder / "state.json")  # whole when it appears
        print(f"shared broker: {running.bootstrap_servers} (pid {running.pid})", flush=True)
        signal.sigwait(stop)
        costs = os.environ.get("UKO_TEST_COSTS")
        if costs:  # the cost table's row for it (scripts/test_costs.py): no tests, one broker
            cpu = cpu_seconds(running.pid) or 0.0
            row = {"suite": "shared broker", "service": True, "pid": os.getpid(), "worker": "",
                   "wall_s": time.monotonic() - began, "cpu_s": cpu,
                   "tests": [], "fixtures": [], "kinds": {"kafka broker": {"processes": 1, "jvms": 1, "cpu_s": cpu}}}  # fmt: skip
            (Path(costs) / f"shared-broker-{os.getpid()}.json").write_text(json.dumps(row, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]).resolve()))
