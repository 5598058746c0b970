"""Hooks: a Kafka cluster from Airflow's ``kafka`` connection, a Spark runtime from this provider's.

``UpsertKafkaHook`` reads the same connection as the official Kafka provider (type ``kafka``, id
``kafka_default``, the extra holding librdkafka keys such as ``bootstrap.servers``,
``security.protocol``, ``sasl.mechanism``, ``sasl.username``, ``sasl.password``), so existing
connections work as they are. Every secret in it is registered with Airflow's masker before
anything is logged, including those Airflow's key-name rule misses (``sasl.jaas.config``,
``ssl.key.pem``); it then becomes an in-process secret of the core's ``KafkaConnection``, which is
never serialized (spark-submit receives it through the driver's environment).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

from airflow.sdk import BaseHook
from airflow.sdk.log import mask_secret

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.kafka.admin import KafkaAdmin
from upsert_kafka_ops.runtime.factory import Runtime, runtime_for, runtime_kind
from upsert_kafka_ops.spec.connection import KafkaConnection, SecretRef

#: Extra keys whose values are secrets (librdkafka and Java client spellings).
SECRET_KEYS = frozenset(
    {
        "sasl.password",
        "sasl.jaas.config",
        "sasl.oauthbearer.client.secret",
        "ssl.key.password",
        "ssl.key.pem",
        "ssl.keystore.password",
        "ssl.keystore.key",
        "ssl.truststore.password",
        "ssl.certificate.pem",
    }
)
_T = TypeVar("_T")
_JAAS_PASSWORD = re.compile(r"""password\s*=\s*"([^"]*)"|password\s*=\s*'([^']*)'""", re.IGNORECASE)


def mask_kafka_secrets(extra: dict[str, Any], password: str | None = None) -> None:
    """Register every secret of a Kafka connection's extra (and its password field) with the masker."""
    for key, value in extra.items():
        if value is None:
            continue
        lowered = key.lower()
        if lowered in SECRET_KEYS or any(w in lowered for w in ("password", "secret", "token")):
            mask_secret(str(value))
        if lowered == "sasl.jaas.config":
            for m in _JAAS_PASSWORD.finditer(str(value)):
                mask_secret(m.group(1) or m.group(2) or "")
    if password:
        mask_secret(password)


class UpsertKafkaHook(BaseHook):
    """A Kafka cluster from an Airflow ``kafka`` connection, as the core's ``KafkaConnection``.

    :param kafka_config_id: the connection id (type ``kafka``; extra = librdkafka settings). The
        connection's login/password fields are used as ``sasl.username``/``sasl.password`` when
        the extra has none.
    """

    conn_name_attr = "kafka_config_id"
    default_conn_name = "kafka_default"
    conn_type = "kafka"
    hook_name = "Upsert Kafka"

    def __init__(self, kafka_config_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kafka_config_id = kafka_config_id

    def get_kafka_connection(self) -> KafkaConnection:
        conn = self.get_connection(self.kafka_config_id)
        extra = dict(conn.extra_dejson)
        mask_kafka_secrets(extra, conn.password)
        if conn.login and "sasl.username" not in extra:
            extra["sasl.username"] = conn.login
        if conn.password and "sasl.password" not in extra:
            extra["sasl.password"] = conn.password
        if "bootstrap.servers" not in extra and conn.host:
            extra["bootstrap.servers"] = f"{conn.host}:{conn.port}" if conn.port else conn.host
        try:
            return KafkaConnection.from_librdkafka(extra)
        except SpecError as exc:
            raise SpecError(
                f"Airflow connection {self.kafka_config_id!r}: extra.{exc.field}",
                exc.message,
                exc.fix or 'the extra holds librdkafka keys, e.g. {"bootstrap.servers": "broker:9092"}.',
            ) from None

    def get_admin(self, timeout: float = 10.0) -> KafkaAdmin:
        """A bounded admin client (offsets, groups, topic configs); close it after use."""
        return KafkaAdmin(self.get_kafka_connection(), timeout=timeout)

    def test_connection(self) -> tuple[bool, str]:
        try:
            with self.get_admin() as admin:
                topics = admin.client.list_topics(timeout=admin.timeout).topics
        except Exception as exc:  # the UI shows the message; the core's errors never hold secrets
            return False, str(exc)
        return True, f"connected to {len(topics)} topics"


class SparkRuntimeHook(BaseHook):
    """Where jobs run, from a connection of type ``upsert_kafka_spark``: the host is the Spark master
    (``local[*]`` runs in the task's process, ``sc://host`` on that Spark Connect server, another
    master through spark-submit: :func:`~upsert_kafka_ops.runtime.factory.runtime_for`'s rule); the
    extra may hold ``runtime`` (``local``, ``spark-submit`` or ``connect``: wins over the master),
    ``deploy_mode``, ``conf``, ``jars``, ``py_files``, ``python``, ``spark_submit``, ``result_uri``,
    ``timeout_s`` and ``env`` (masked)."""

    conn_name_attr = "spark_config_id"
    default_conn_name = "upsert_kafka_spark_default"
    conn_type = "upsert_kafka_spark"
    hook_name = "Upsert Kafka: Spark runtime"

    def __init__(self, spark_config_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spark_config_id = spark_config_id

    def get_runtime(self) -> Runtime:
        conn = self.get_connection(self.spark_config_id)
        extra = dict(conn.extra_dejson)
        for value in (extra.get("env") or {}).values():
            mask_secret(str(value))
        where = f"Airflow connection {self.spark_config_id!r}"
        if conn.conn_type == "spark_connect":
            return _connect_runtime(conn, extra, where)
        if conn.conn_type == "spark":  # the Apache Spark provider's spark-submit connection
            extra = {_SPARK_EXTRA.get(k, k): v for k, v in extra.items() if k not in _SPARK_IGNORED}
            extra.setdefault("runtime", "spark-submit")
        master = conn.host or extra.pop("master", None) or "local[*]"
        if conn.port and "://" in master and master.count(":") < 2:
            master = f"{master}:{conn.port}"
        kind = extra.pop("runtime", None)
        if _model(lambda: runtime_kind(master, kind), where) == "connect":  # host, port, login, password
            return _connect_runtime(conn, extra, where)
        return _model(lambda: runtime_for(master, kind=kind, **extra), where)


# the Apache Spark provider's `spark` connection: its extra's names for what SparkSubmitRuntime calls
_SPARK_EXTRA = {"deploy-mode": "deploy_mode", "spark-binary": "spark_submit"}
_SPARK_IGNORED = {"queue", "namespace"}


def _connect_runtime(conn: Any, extra: dict[str, Any], where: str) -> Runtime:
    """A ``spark_connect`` connection as the Apache Spark provider reads it: host (``sc://`` optional)
    and port (15002), login as the user id, the password as the token, extra ``use_ssl`` and
    ``ca_cert`` (the CA bundle of the server's TLS proxy: ``file:/path/ca.crt``); or an
    ``upsert_kafka_spark`` connection on ``sc://host`` (or with ``runtime: connect``). Without a
    password the token is ``SPARK_CONNECT_AUTHENTICATE_TOKEN`` from the worker's environment."""
    host = str(conn.host or extra.pop("remote", "") or "")
    host = host[len("sc://") :] if host.startswith("sc://") else host
    if not host:
        raise SpecError(f"{where}: host", "is empty.", "set the Spark Connect server's host (port 15002).")
    params = [f"user_id={conn.login}"] if conn.login else []
    if extra.pop("use_ssl", False):
        params.append("use_ssl=true")
    hostport = host if ":" in host else f"{host}:{conn.port or 15002}"
    remote = f"sc://{hostport}" + ("/;" + ";".join(params) if params else "")
    data: dict[str, Any] = {"conf": extra.pop("conf", {})}
    if extra.get("ca_cert"):  # a reference (file:/path/ca.crt or env:VAR), as every secret in a spec
        data["ca_cert"] = extra.pop("ca_cert")
    if conn.password:
        mask_secret(conn.password)
        data["token"] = SecretRef.from_value(conn.password)
    return _model(lambda: runtime_for(remote, kind="connect", **data), where)


def _model(build: Callable[[], _T], where: str) -> _T:
    """``build()``, its spec errors named after the connection's extra."""
    try:
        return build()
    except SpecError as exc:
        raise SpecError(f"{where}: extra.{exc.field}", exc.message, exc.fix) from None


def connection_json(extra: dict[str, Any], conn_type: str = "kafka") -> str:
    """An ``AIRFLOW_CONN_<ID>`` value for a connection with this extra (tests, docs, Helm)."""
    return json.dumps({"conn_type": conn_type, "extra": extra})
