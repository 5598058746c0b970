"""The Schema Registry side of Flink's ``avro-confluent`` format: its options and one client per registry.

Options are Flink's (``avro-confluent.url``, ``.subject``, ``.basic-auth.*``, ``.bearer-auth.*``,
``.properties.*``). Credentials are never literal in a spec: ``basic-auth.user-info`` and
``bearer-auth.token`` take ``env:VAR`` or ``file:/path`` (resolved by the process that runs the job,
like every other secret), and so do the store passwords. Flink's Java stores (``ssl.truststore.*``,
``ssl.keystore.*``; JKS, PKCS12 or PEM) are converted to the PEM files the Python client reads, with
the JDK's ``keytool`` (passwords passed to it through its environment, never its command line) into a
private temporary folder of the process; ``properties.ssl.ca.location`` and friends take PEM files
directly.

The client is confluent-kafka's ``SchemaRegistryClient``. Clients are shared per registry within a
process, so a ``mock://<scope>`` URL is one in-process registry per scope, as Confluent's own
serializers treat it (tests use that; a real run uses ``http(s)://``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from upsert_kafka_ops.errors import SpecError, UpsertKafkaOpsError
from upsert_kafka_ops.formats import java_stores as stores

if TYPE_CHECKING:
    from collections.abc import Mapping

#: options whose value is a secret: only references are accepted
SECRET_OPTIONS = frozenset(
    {"basic-auth.user-info", "bearer-auth.token", "ssl.keystore.password", "ssl.truststore.password"}
)
#: Flink's store options -> the internal property names they travel under until conversion
_STORE_OPTIONS = {
    "ssl.truststore.location": "uko.truststore.location",
    "ssl.truststore.password": "uko.truststore.password",
    "ssl.keystore.location": "uko.keystore.location",
    "ssl.keystore.password": "uko.keystore.password",
}
#: client properties that carry secrets (given through ``properties.``): references only
_SECRET_PROPERTIES = frozenset(
    {
        "basic.auth.user.info",
        "bearer.auth.token",
        "ssl.key.password",
        "uko.truststore.password",
        "uko.keystore.password",
    }
)

#: the PEM properties a Java store option stands for
_PEM_FOR = {
    "ssl.truststore": ("ssl.ca.location",),
    "ssl.keystore": ("ssl.certificate.location", "ssl.key.location"),
}


class RegistryError(UpsertKafkaOpsError):
    """The Schema Registry refused a request or could not be reached (the message names the URL)."""


def check_options(prefix: str, options: Mapping[str, str]) -> None:
    """Spec-time rules for ``<prefix>.avro-confluent.*`` options (names without the prefix)."""
    head = f"{prefix}.avro-confluent."
    if not options.get("url"):
        raise SpecError(
            f"{head}url",
            "is required for the 'avro-confluent' format.",
            f"set '{head}url' = 'http://registry:8081'.",
        )
    if "schema" in options:
        raise SpecError(
            f"{head}schema",
            "is not supported: the Avro schema is always derived from the table's columns (Flink's default).",
            "remove it and declare the columns the schema describes.",
        )
    if "ssl.keystore.location" in options and "ssl.keystore.password" not in options:
        raise SpecError(
            f"{head}ssl.keystore.password",
            "is required with ssl.keystore.location (the key inside the store is protected by it).",
            f"set '{head}ssl.keystore.password' = 'env:VAR_NAME'.",
        )
    for key in ("ssl.truststore", "ssl.keystore"):
        if f"{key}.location" in options and f"properties.{_PEM_FOR[key][0]}" in options:
            raise SpecError(
                f"{head}{key}.location",
                f"and {head}properties.{_PEM_FOR[key][0]} both set the same thing.",
                "keep one.",
            )
    for key, value in options.items():
        secret = key in SECRET_OPTIONS or (
            key.startswith("properties.") and key[len("properties.") :] in _SECRET_PROPERTIES
        )
        if secret:
            _reference(head + key, value)
    source = options.get("basic-auth.credentials-source", "USER_INFO").upper()
    if source not in ("USER_INFO", "URL"):
        raise SpecError(
            f"{head}basic-auth.credentials-source",
            f"must be USER_INFO or URL, got {source!r}.",
            "use USER_INFO with basic-auth.user-info, or URL with credentials in the url.",
        )
    bearer = options.get("bearer-auth.credentials-source", "STATIC_TOKEN").upper()
    if bearer != "STATIC_TOKEN":
        raise SpecError(
            f"{head}bearer-auth.credentials-source",
            f"only STATIC_TOKEN is supported, got {bearer!r}.",
            "use STATIC_TOKEN with bearer-auth.token.",
        )


def _reference(option: str, value: str) -> Any:
    from upsert_kafka_ops.spec.connection import SecretRef

    kind, sep, rest = value.partition(":")
    if not (sep and kind in ("env", "file") and rest):
        raise SpecError(
            option,
            "a literal secret is not allowed in a spec.",
            "reference it: 'env:VAR_NAME' or 'file:/path'.",
        )
    return SecretRef.model_validate(value)


@dataclass(frozen=True)
class RegistryConfig:
    """What identifies a registry client: the URL list and the (unresolved) client properties."""

    url: str
    properties: tuple[tuple[str, str], ...]

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> RegistryConfig:
        props: dict[str, str] = {}
        if "basic-auth.user-info" in options:
            props["basic.auth.user.info"] = options["basic-auth.user-info"]
        if "bearer-auth.token" in options:
            props["bearer.auth.credentials.source"] = "STATIC_TOKEN"
            props["bearer.auth.token"] = options["bearer-auth.token"]
        for key, value in options.items():
            if key.startswith("properties."):
                props[key[len("properties.") :]] = value
            elif key in _STORE_OPTIONS:
                props[_STORE_OPTIONS[key]] = value
        return cls(url=options["url"], properties=tuple(sorted(props.items())))

    def client_conf(self) -> dict[str, Any]:
        """confluent-kafka's client configuration, with the secret references resolved and Java
        stores converted to PEM files."""
        conf: dict[str, Any] = {"url": self.url}
        for key, value in self.properties:
            secret = key in _SECRET_PROPERTIES
            conf[key] = _reference(f"avro-confluent {key}", value).resolve() if secret else value
        trust = conf.pop("uko.truststore.location", None)
        trust_pw = conf.pop("uko.truststore.password", None)
        keystore = conf.pop("uko.keystore.location", None)
        keystore_pw = conf.pop("uko.keystore.password", None)
        if trust is not None:
            conf["ssl.ca.location"] = str(stores.truststore_pem(Path(trust), trust_pw))
        if keystore is not None:
            cert_pem, key_pem = stores.keystore_pem(Path(keystore), keystore_pw or "")
            conf["ssl.certificate.location"], conf["ssl.key.location"] = str(cert_pem), str(key_pem)
        return conf

    def __repr__(self) -> str:  # references only, but keep reprs short and obviously secret-free
        return f"RegistryConfig(url={self.url!r}, properties={[k for k, _ in self.properties]})"


_clients: dict[RegistryConfig, Any] = {}
_lock = threading.Lock()


def client(config: RegistryConfig) -> Any:
    """The process's client for this registry (one per URL and properties)."""
    with _lock:
        found = _clients.get(config)
        if found is None:
            try:
                from confluent_kafka.schema_registry import SchemaRegistryClient
            except ImportError as exc:  # httpx/attrs/cachetools/authlib are an extra
                from upsert_kafka_ops.errors import ToolchainError

                raise ToolchainError(
                    f"the 'avro-confluent' format needs the Schema Registry client ({exc.name} is missing). "
                    "Fix: pip install 'upsert-kafka-ops[schema-registry]'."
                ) from None
            try:
                found = SchemaRegistryClient.new_client(config.client_conf())
            except (ValueError, TypeError) as exc:
                raise SpecError("avro-confluent", f"Schema Registry client configuration: {exc}") from None
            _clients[config] = found
        return found


def _call(config: RegistryConfig, what: str, fn: Any, *args: Any) -> Any:
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    try:
        return fn(*args)
    except SchemaRegistryError:
        raise
    except Exception as exc:  # transport errors: name the registry, never the credentials
        raise RegistryError(
            f"Schema Registry {safe_url(config.url)}: {what} failed: {type(exc).__name__}: {exc}"
        ) from None


def safe_url(url: str) -> str:
    """The URL without user info (``https://user:pw@host`` -> ``https://host``)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = []
    for one in url.split(","):
        s = urlsplit(one.strip())
        host = s.hostname or ""
        netloc = host + (f":{s.port}" if s.port else "")
        parts.append(urlunsplit((s.scheme, netloc, s.path, "", "")))
    return ",".join(parts)


def register(config: RegistryConfig, subject: str, schema_json: str) -> int:
    """The id of ``schema_json`` under ``subject``, registering it when new (idempotent)."""
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    c = client(config)
    try:
        return int(
            _call(
                config,
                f"registering under {subject!r}",
                c.register_schema,
                subject,
                Schema(schema_json, "AVRO"),
            )
        )
    except SchemaRegistryError as exc:
        raise RegistryError(
            f"Schema Registry {safe_url(config.url)} refused the schema for subject {subject!r}: "
            f"{exc.error_message} (HTTP {exc.http_status_code}, error {exc.error_code}). Fix: the table's "
            "columns must give a schema compatible with the subject's compatibility rule, or set "
            "avro-confluent.subject."
        ) from None


def writer_schemas(config: RegistryConfig, subjects: list[str]) -> dict[int, str]:
    """Schema id -> Avro schema text of every version registered under ``subjects``.

    A subject that does not exist yet has no versions (a topic never written with this format).
    """
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    c = client(config)
    out: dict[int, str] = {}
    for subject in subjects:
        try:
            versions = _call(config, f"listing {subject!r}", c.get_versions, subject)
        except SchemaRegistryError as exc:
            if exc.http_status_code == 404:
                continue
            raise RegistryError(
                f"Schema Registry {safe_url(config.url)}: listing subject {subject!r}: {exc.error_message} "
                f"(HTTP {exc.http_status_code})."
            ) from None
        for version in versions:
            registered = _call(config, f"reading {subject!r} v{version}", c.get_version, subject, version)
            if registered.schema.schema_type not in (None, "AVRO"):
                continue
            out[int(registered.schema_id)] = registered.schema.schema_str
    return out
