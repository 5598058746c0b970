"""Dagster resources: a Kafka connection (secrets as ``dg.EnvVar``) and the Spark runtime of a run."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from pydantic import Field

import dagster as dg
from upsert_kafka_ops.runtime.factory import Runtime, RuntimeKind, runtime_for
from upsert_kafka_ops.spec.connection import KafkaConnection, SecretRef

_SECRET_FIELDS = ("password", "ssl_key_password")


class UpsertKafkaResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """One Kafka cluster. Give the password as ``dg.EnvVar("KAFKA_PASSWORD")``: Dagster resolves it
    when the run starts and it stays in the process (a :class:`SecretRef` value), never in metadata,
    logs, reprs or a spark-submit job file."""

    bootstrap_servers: str = Field(description="Comma-separated host:port list of brokers.")
    security_protocol: str = Field(
        default="PLAINTEXT", description="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."
    )
    sasl_mechanism: str | None = Field(default=None, description="PLAIN, SCRAM-SHA-256, SCRAM-SHA-512.")
    username: str | None = Field(default=None, description="SASL username.")
    password: str | None = Field(default=None, description="SASL password: give it as dg.EnvVar(...).")
    ssl_ca_location: str | None = Field(default=None, description="CA certificates to trust (PEM file).")
    ssl_certificate_location: str | None = Field(default=None, description="Client certificate (PEM).")
    ssl_key_location: str | None = Field(default=None, description="Client private key (PEM).")
    ssl_key_password: str | None = Field(default=None, description="Password of the key: dg.EnvVar(...).")
    properties: dict[str, str] = Field(default_factory=dict, description="Other Java client properties.")

    def connection(self) -> KafkaConnection:
        """The core's connection; secrets become in-process :class:`SecretRef` values."""
        data: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap_servers,
            "security_protocol": self.security_protocol,
            "sasl_mechanism": self.sasl_mechanism,
            "username": self.username,
            "ssl_truststore_location": self.ssl_ca_location,
            "ssl_certificate_location": self.ssl_certificate_location,
            "ssl_key_location": self.ssl_key_location,
            "properties": dict(self.properties),
        }
        if self.password:
            data["password"] = SecretRef.from_value(self.password)
        if self.ssl_key_password:
            data["ssl_key_password"] = SecretRef.from_value(self.ssl_key_password)
        return KafkaConnection.model_validate({k: v for k, v in data.items() if v is not None})

    def __repr_args__(self) -> Any:
        for name, value in super().__repr_args__():
            yield name, ("**********" if name in _SECRET_FIELDS and value else value)


class SparkRuntimeResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """Where a job's Spark work runs: ``local`` (in the run's process: the active SparkSession, else
    one built with ``master``/``conf``), ``spark-submit`` (``master``, ``deploy_mode``, ``conf``,
    ``timeout_s``) or ``connect`` (a Spark Connect server: ``master`` is its ``sc://host:port``, the
    token a ``dg.EnvVar``, ``ca_cert`` its TLS proxy's CA bundle; the run's process holds no driver)."""

    runtime: RuntimeKind = Field(default="local", description="local, spark-submit or connect.")
    master: str = Field(default="local[*]", description="Spark master URL (connect: sc://host:port).")
    token: str | None = Field(
        default=None,
        description="connect: the server's token, as dg.EnvVar(...) (default: SPARK_CONNECT_AUTHENTICATE_TOKEN "
        "in the run's environment).",
    )
    ca_cert: str | None = Field(
        default=None,
        description="connect: the path of the CA bundle (PEM) of the server's TLS proxy; turns TLS on "
        "(default, with use_ssl=true: the file UKO_SPARK_CONNECT_CA_CERT names).",
    )
    conf: dict[str, str] = Field(default_factory=dict, description="Extra Spark configuration.")
    deploy_mode: str = Field(default="client", description="spark-submit: client or cluster.")
    timeout_s: float | None = Field(default=None, description="spark-submit: kill the driver after this.")
    history_url: str | None = Field(
        default=None,
        description="The Spark History Server (http://host:18080): each materialization links to its run's "
        "application there (upsert_kafka/spark_history). The runs must write event logs where it reads "
        "(spark.eventLog.enabled, spark.eventLog.dir in conf).",
    )

    def __repr_args__(self) -> Any:
        for name, value in super().__repr_args__():
            yield name, ("**********" if name == "token" and value else value)

    def history_link(self, app_id: str) -> str | None:
        """The application's page in the History Server, when both are known."""
        if not self.history_url or not app_id:
            return None
        return f"{self.history_url.rstrip('/')}/history/{quote(app_id)}/"

    def runtime_spec(self) -> Runtime:
        """The core's runtime for :func:`upsert_kafka_ops.runtime.execute_job`
        (:func:`~upsert_kafka_ops.runtime.factory.runtime_for` of ``runtime`` at ``master``)."""
        token = SecretRef.from_value(self.token) if self.token else None
        ca_cert = SecretRef(file=self.ca_cert) if self.ca_cert else None
        return runtime_for(
            self.master,
            kind=self.runtime,
            conf=self.conf,
            applicable={
                "deploy_mode": self.deploy_mode,
                "timeout_s": self.timeout_s,
                "token": token,
                "ca_cert": ca_cert,
            },
        )
