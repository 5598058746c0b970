"""A real single-node Apache Kafka broker (KRaft) on 127.0.0.1, from the Maven Central jars.

Use it as a context manager::

    with LocalKafka(tmp_path) as kafka:
        print(kafka.bootstrap_servers)

or from the command line (``upsert-kafka-ops local kafka start|stop|status``), which keeps the
pid and the bootstrap address in ``state.json`` of the state folder.

Optional listeners: ``SASL_PLAINTEXT`` with SCRAM-SHA-256/512 users created at format time,
``SSL`` with a generated CA and a server certificate valid for IP 127.0.0.1, and ``KERBEROS``
(SASL_PLAINTEXT with GSSAPI) against a KDC the caller started (any :class:`KerberosRealm`: the test
suites pass their MIT KDC), advertised as ``localhost`` so that clients ask for the service principal
``kafka/localhost``.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
import uuid
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from upsert_kafka_ops import jars
from upsert_kafka_ops.errors import KafkaConnectionError, LocalServiceError
from upsert_kafka_ops.local.process import alive, free_ports, java_executable, terminate, wait_ready
from upsert_kafka_ops.local.tls import TlsFiles, generate
from upsert_kafka_ops.spec.connection import KRB5_LOGIN_MODULE

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
#: the broker's Kerberos service: clients name it as ``sasl.kerberos.service.name``
KERBEROS_SERVICE = "kafka"
KERBEROS_HOST = "localhost"
_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.state.name = state.change.logger
logger.state.level = WARN
"""


class KerberosRealm(Protocol):
    """What the broker's ``KERBEROS`` listener needs of a started KDC: the service principal
    ``kafka/localhost`` created with its keys in a keytab, and the ``krb5.conf`` that finds the KDC."""

    @property
    def krb5_conf(self) -> Path:
        """The configuration a JVM reads (``-Djava.security.krb5.conf``)."""
        ...

    def add_principal(self, name: str) -> Path:
        """Create ``name`` in the realm; returns the keytab with its keys."""
        ...

    def keytab(self, name: str) -> Path:
        """The keytab :meth:`add_principal` wrote for ``name``."""
        ...

    def principal(self, name: str) -> str:
        """``name@REALM``."""
        ...


def default_state_dir() -> Path:
    from platformdirs import user_state_dir

    return Path(user_state_dir("upsert-kafka-ops")) / "local-kafka"


#: what the JVM logs when a listener's port was taken by another process
_PORT_TAKEN = "Address already in use"
#: starts on newly allocated ports before a taken port is reported (LocalKafka.start)
_START_ATTEMPTS = 3


class _PortTaken(LocalServiceError):
    """The broker exited at start because another process had taken one of its ports."""


def _cluster_id() -> str:
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid


class LocalKafka:
    """A single-node KRaft broker (broker and controller in one JVM) on free loopback ports.

    :param work_dir: folder for the properties, data, TLS files and logs (created).
    :param jars_dir: jar cache (see :mod:`upsert_kafka_ops.jars`); the ``kafka`` group must be fetched.
    :param scram_users: ``{user: password}``; enables a ``SASL_PLAINTEXT`` listener with
        SCRAM-SHA-256 and SCRAM-SHA-512, each user created for both mechanisms at format time.
    :param ssl: enable an ``SSL`` listener with a generated CA (:attr:`ca_file`).
    :param kerberos: a started KDC (:class:`KerberosRealm`); enables a ``KERBEROS`` listener (SASL_PLAINTEXT, GSSAPI) whose
        service principal ``kafka/localhost`` is created in it.
    :param heap: JVM heap (``-Xmx``).
    :param properties: extra broker properties (override the defaults).
    :param port: the PLAINTEXT listener's port (default: a free one).
    :param acls: enforce ACLs with KRaft's ``StandardAuthorizer``: the PLAINTEXT and controller
        listeners' clients (``User:ANONYMOUS``) are super users, the SASL and SSL listeners' need
        grants (create them over PLAINTEXT with an admin client or ``kafka-acls.sh``).
    """

    def __init__(
        self,
        work_dir: Path | str,
        *,
        jars_dir: Path | None = None,
        scram_users: dict[str, str] | None = None,
        ssl: bool = False,
        kerberos: KerberosRealm | None = None,
        heap: str = "1g",
        properties: dict[str, str] | None = None,
        port: int | None = None,
        acls: bool = False,
    ) -> None:
        self.work_dir = Path(work_dir).resolve()
        self.port = port
        self.acls = acls
        self.jars_dir = jars_dir
        self.scram_users = dict(scram_users or {})
        self.ssl = ssl
        self.kerberos = kerberos
        self.heap = heap
        self.extra_properties = dict(properties or {})
        self.ports: dict[str, int] = {}
        #: the KRaft cluster id the storage is formatted with (kept when the broker restarts)
        self.cluster_id = _cluster_id()
        self.tls: TlsFiles | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self.pid: int | None = None

    # -- addresses -------------------------------------------------------------------------
    def _address(self, listener: str) -> str:
        if listener not in self.ports:
            raise LocalServiceError(f"The {listener} listener is not enabled on this broker.")
        return f"127.0.0.1:{self.ports[listener]}"

    @property
    def bootstrap_servers(self) -> str:
        """The PLAINTEXT listener."""
        return self._address("PLAINTEXT")

    @property
    def sasl_bootstrap_servers(self) -> str:
        return self._address("SASL_PLAINTEXT")

    @property
    def ssl_bootstrap_servers(self) -> str:
        return self._address("SSL")

    @property
    def kerberos_bootstrap_servers(self) -> str:
        """The GSSAPI listener, by the host name its service principal carries."""
        self._address("KERBEROS")
        return f"{KERBEROS_HOST}:{self.ports['KERBEROS']}"

    @property
    def ca_file(self) -> Path:
        if self.tls is None:
            raise LocalServiceError("This broker has no SSL listener (pass ssl=True).")
        return self.tls.ca_cert

    @property
    def log_file(self) -> Path:
        return self.work_dir / "logs" / "server.log"

    @property
    def stdout_file(self) -> Path:
        return self.work_dir / "logs" / "broker.out"

    def client_config(self, **extra: Any) -> dict[str, Any]:
        """librdkafka settings for the PLAINTEXT listener."""
        return {"bootstrap.servers": self.bootstrap_servers, **extra}

    # -- lifecycle -------------------------------------------------------------------------
    def _properties(self) -> str:
        p = self.ports
        listeners = [f"PLAINTEXT://127.0.0.1:{p['PLAINTEXT']}", f"CONTROLLER://127.0.0.1:{p['CONTROLLER']}"]
        advertised = [f"PLAINTEXT://127.0.0.1:{p['PLAINTEXT']}"]
        for name in ("SASL_PLAINTEXT", "SSL"):
            if name in p:
                listeners.append(f"{name}://127.0.0.1:{p[name]}")
                advertised.append(f"{name}://127.0.0.1:{p[name]}")
        if "KERBEROS" in p:
            listeners.append(f"KERBEROS://127.0.0.1:{p['KERBEROS']}")
            advertised.append(f"KERBEROS://{KERBEROS_HOST}:{p['KERBEROS']}")
        props: dict[str, str] = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{p['CONTROLLER']}",
            "listeners": ",".join(listeners),
            "advertised.listeners": ",".join(advertised),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": (
                "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,"
                "KERBEROS:SASL_PLAINTEXT"
            ),
            "log.dirs": str(self.work_dir / "data"),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",
            "log.cleaner.backoff.ms": "1000",
            # the controller's no-op record every 500 ms (KIP-835's liveness signal for a quorum's
            # followers; a one-node cluster has none) cost an idle broker 2.0% of a core, 1.3% without
            "metadata.max.idle.interval.ms": "0",
        }
        if "SASL_PLAINTEXT" in p:
            props["sasl.enabled.mechanisms"] = ",".join(SCRAM_MECHANISMS)
            for mech in SCRAM_MECHANISMS:
                props[f"listener.name.sasl_plaintext.{mech.lower()}.sasl.jaas.config"] = (
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;"
                )
        if self.kerberos is not None:
            principal = self.kerberos.principal(f"{KERBEROS_SERVICE}/{KERBEROS_HOST}")
            keytab = self.kerberos.keytab(f"{KERBEROS_SERVICE}/{KERBEROS_HOST}")
            props["listener.name.kerberos.sasl.enabled.mechanisms"] = "GSSAPI"
            props["listener.name.kerberos.sasl.kerberos.service.name"] = KERBEROS_SERVICE
            props["listener.name.kerberos.gssapi.sasl.jaas.config"] = (
                f"{KRB5_LOGIN_MODULE} required useKeyTab=true storeKey=true "
                f'keyTab="{keytab}" principal="{principal}";'
            )
        if self.tls is not None:
            props["listener.name.ssl.ssl.keystore.type"] = "PEM"
            props["listener.name.ssl.ssl.keystore.location"] = str(self.tls.server_keystore)
            props["listener.name.ssl.ssl.client.auth"] = "none"
        if self.acls:
            props["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
            props["super.users"] = "User:ANONYMOUS"
        props.update(self.extra_properties)
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def _run_tool(self, java: str, classpath: str, args: list[str]) -> None:
        proc = subprocess.run(
            [
                java,
                "-cp",
                classpath,
                f"-Dlog4j2.configurationFile={self.work_dir / 'tools-log4j2.properties'}",
                *args,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            lines = (proc.stdout + proc.stderr).splitlines()
            # the exception's message is at the top; the stack trace below it says little
            shown = [ln for ln in lines if not ln.lstrip().startswith("at ")][:20]
            raise LocalServiceError(
                f"Kafka storage format failed (exit {proc.returncode}):\n" + "\n".join(shown)
            )

    def start(self, timeout: float = 120.0) -> LocalKafka:
        """Format the storage folder and start the broker; returns once it answers metadata requests."""
        if self._proc is not None:
            raise LocalServiceError("This broker is already started.")
        fresh_ports = not self.ports and not self.port  # a restart, or a port the caller chose, stays
        for _ in range(_START_ATTEMPTS - 1):
            try:
                return self._start(timeout)
            except _PortTaken:
                if not fresh_ports:
                    raise
                # ports are free when allocated and bound seconds later, when the JVM is up: on a busy
                # machine another process can take one in between; new ones are as good
                self.ports = {}
        return self._start(timeout)

    def _start(self, timeout: float) -> LocalKafka:
        java = java_executable()
        classpath = str(jars.group_dir("kafka", self.jars_dir) / "*")
        jars.jar_paths("kafka", self.jars_dir)  # raises a clear error when not fetched
        self.work_dir.mkdir(parents=True, exist_ok=True)
        (self.work_dir / "logs").mkdir(exist_ok=True)
        if not self.ports:  # a restart keeps the ports, the TLS files and the principal it had
            self._allocate()
        props_file = self.work_dir / "server.properties"
        props_file.write_text(self._properties())
        (self.work_dir / "log4j2.properties").write_text(_LOG4J2.format(log=self.log_file))
        (self.work_dir / "tools-log4j2.properties").write_text(
            _LOG4J2.format(log=self.work_dir / "logs" / "tools.log")
        )

        fmt = [
            "kafka.tools.StorageTool",
            "format",
            "-t",
            self.cluster_id,
            "-c",
            str(props_file),
            "--ignore-formatted",
        ]
        for user, password in self.scram_users.items():
            for mech in SCRAM_MECHANISMS:
                fmt += ["--add-scram", f"{mech}=[name={user},password={password}]"]
        self._run_tool(java, classpath, fmt)

        cmd = [
            java,
            f"-Xmx{self.heap}",
            "-Xms256m",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.work_dir / 'log4j2.properties'}",
            *([f"-Djava.security.krb5.conf={self.kerberos.krb5_conf}"] if self.kerberos else []),
            "-cp",
            classpath,
            "kafka.Kafka",
            str(props_file),
        ]
        with open(self.stdout_file, "ab") as out:
            self._proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )
        self.pid = self._proc.pid
        try:
            self._wait_ready(timeout)
        except LocalServiceError as exc:
            exited = self._proc is not None and self._proc.poll() is not None
            self.stop()
            if exited and _PORT_TAKEN in self.log_tail():
                raise _PortTaken(str(exc)) from None
            raise
        except BaseException:
            self.stop()
            raise
        return self

    def _allocate(self) -> None:
        names = ["PLAINTEXT", "CONTROLLER"]
        names += ["SASL_PLAINTEXT"] * bool(self.scram_users) + ["SSL"] * self.ssl
        names += ["KERBEROS"] * (self.kerberos is not None)
        self.ports = dict(zip(names, free_ports(len(names), first=self.port or 0), strict=True))
        if self.ssl:
            self.tls = generate(self.work_dir / "tls")
        if self.kerberos is not None:
            self.kerberos.add_principal(f"{KERBEROS_SERVICE}/{KERBEROS_HOST}")

    def restart(self, down_s: float = 0.0, kill: bool = False, timeout: float = 120.0) -> LocalKafka:
        """Stop the broker (SIGTERM, or SIGKILL with ``kill``: a crash), stay down ``down_s`` seconds,
        and start it again on the same ports with the same log folder, as a restarted production broker
        comes back. Returns once it answers metadata requests."""
        if self._proc is None:
            raise LocalServiceError("This broker is not running.")
        if kill:
            self._proc.kill()
            self._proc.wait(timeout=30)
        else:
            terminate(self._proc.pid, 30.0, self._proc)
        self._proc = None
        time.sleep(down_s)
        return self.start(timeout)

    def _wait_ready(self, timeout: float) -> None:
        from upsert_kafka_ops.kafka.admin import probe

        def answers(left: float) -> bool:
            try:
                # log_level 0: "connection refused" until the broker listens is expected, not news
                metadata = probe(self.client_config(log_level=0), timeout=min(5.0, max(0.5, left)))
            except KafkaConnectionError:
                return False
            # this broker, not another one that took the port between its allocation and this JVM's
            # bind (this one then exits with "Address already in use", which wait_ready reports)
            return bool(metadata.cluster_id == self.cluster_id)

        wait_ready(self._proc, answers, timeout, "The Kafka broker", self.log_tail)

    def log_tail(self, lines: int = 30) -> str:
        """The broker's first ERROR lines and the last lines of its log and console output."""
        parts = []
        for f in (self.log_file, self.stdout_file):
            if not f.is_file():
                continue
            text = f.read_text(errors="replace").splitlines()
            errors = [ln for ln in text if "] ERROR " in ln or ln.startswith(("Exception", "Caused by"))][:10]
            if errors:
                parts.append(f"--- {f} (errors)\n" + "\n".join(errors))
            parts.append(f"--- {f} (last {min(lines, len(text))} lines)\n" + "\n".join(text[-lines:]))
        return "\n".join(parts) or "(no broker log was written)"

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the broker by its pid (SIGTERM, then SIGKILL after ``timeout``) and wait for exit."""
        if self._proc is None:
            return
        terminate(self._proc.pid, timeout, self._proc)
        self._proc = None

    def __enter__(self) -> LocalKafka:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- topics ----------------------------------------------------------------------------
    def create_topic(
        self, name: str, partitions: int = 1, config: dict[str, str] | None = None, timeout: float = 30.0
    ) -> None:
        """Create a topic and wait until its metadata is visible."""
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        admin = AdminClient(self.client_config())
        futures = admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1, config=dict(config or {}))],
            operation_timeout=timeout,
            request_timeout=timeout,
        )
        futures[name].result(timeout=timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            md = admin.list_topics(topic=name, timeout=5)
            t = md.topics.get(name)
            if t is not None and t.error is None and len(t.partitions) == partitions:
                return
            time.sleep(0.1)
        raise LocalServiceError(f"Topic {name!r} did not appear within {timeout:g}s.")


# -- detached mode (the CLI) -------------------------------------------------------------------
def _state_file(state_dir: Path) -> Path:
    return state_dir / "state.json"


def _is_our_broker(pid: int, state_dir: Path) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"kafka.Kafka" in cmdline and str(state_dir.resolve() / "server.properties").encode() in cmdline


def detached_status(state_dir: Path) -> dict[str, Any]:
    """``{"running": bool, ...state}`` for a broker started with :func:`start_detached`."""
    f = _state_file(state_dir)
    if not f.is_file():
        return {"running": False, "dir": str(state_dir)}
    state: dict[str, Any] = json.loads(f.read_text())
    state["running"] = alive(int(state["pid"])) and _is_our_broker(int(state["pid"]), state_dir)
    return state


def start_detached(
    state_dir: Path,
    jars_dir: Path | None = None,
    timeout: float = 120.0,
    *,
    port: int | None = None,
    topics: dict[str, int] | None = None,
) -> LocalKafka:
    """Start a broker that outlives this process; its pid and address go to ``state.json``.

    :param port: the PLAINTEXT listener's port (default: a free one).
    :param topics: compacted topics to create, ``{name: partitions}``.
    """
    status = detached_status(state_dir)
    if status["running"]:
        raise LocalServiceError(
            f"A local broker is already running (pid {status['pid']}, {status['bootstrap_servers']}); "
            "stop it first with `upsert-kafka-ops local kafka stop`."
        )
    broker = LocalKafka(state_dir, jars_dir=jars_dir, port=port)
    broker.start(timeout=timeout)
    assert broker.pid is not None
    try:
        for name, partitions in (topics or {}).items():
            broker.create_topic(name, partitions, {"cleanup.policy": "compact"})
    except Exception:
        broker.stop()
        raise
    _state_file(state_dir).write_text(
        json.dumps(
            {
                "pid": broker.pid,
                "bootstrap_servers": broker.bootstrap_servers,
                "dir": str(broker.work_dir),
                "log": str(broker.log_file),
            }
        )
    )
    # the Popen object is dropped on purpose: the broker keeps running in its own session
    broker._proc = None
    return broker


def stop_detached(state_dir: Path, timeout: float = 30.0) -> bool:
    """Stop the broker recorded in ``state.json``; False when none was running."""
    status = detached_status(state_dir)
    f = _state_file(state_dir)
    if not status["running"]:
        f.unlink(missing_ok=True)
        return False
    terminate(int(status["pid"]), timeout)
    f.unlink(missing_ok=True)
    return True
