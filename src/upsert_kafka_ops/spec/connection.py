"""Kafka connections and secret references.

A :class:`KafkaConnection` is one cluster: bootstrap servers, security protocol, SASL and TLS. It maps
to the Java client options Spark needs (:meth:`KafkaConnection.to_spark_options`, ``kafka.*`` keys)
and to librdkafka options for confluent-kafka (:meth:`KafkaConnection.to_librdkafka`).

Secrets are :class:`SecretRef` values: an environment variable, a file, or an in-process value. A
spec serialized to JSON (for spark-submit, YAML pipelines, Helm values) carries the reference, never
the value; the driver resolves it when it builds the client options. Secrets never appear in
``repr``, ``str``, JSON, logs or errors.

Example::

    conn = KafkaConnection(
        bootstrap_servers="broker:9093",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        username="etl",
        password={"env": "KAFKA_PASSWORD"},
        ssl_truststore_location="/etc/kafka/ca.pem",
    )
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, field_serializer, model_serializer, model_validator

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.spec.base import SpecModel

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI"]
StoreType = Literal["PEM", "JKS", "PKCS12"]

KRB5_LOGIN_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
#: librdkafka's and Kafka's Java client's default Kerberos service name of the brokers
DEFAULT_KERBEROS_SERVICE = "kafka"
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
# Client properties that carry secrets or that the connection builds itself: they must be given
# through the typed fields, so that they are references and never literal values in a spec.
_OWNED = {
    "bootstrap.servers": "bootstrap_servers",
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "username",
    "sasl.password": "password",
    "sasl.jaas.config": "password (or sasl_jaas_config for OAUTHBEARER)",
    "ssl.key.password": "ssl_key_password",
    "ssl.keystore.password": "ssl_keystore_password",
    "ssl.truststore.password": "ssl_truststore_password",
    "ssl.keystore.location": "ssl_keystore_location",
    "ssl.truststore.location": "ssl_truststore_location",
    "ssl.ca.location": "ssl_truststore_location",
    "ssl.certificate.location": "ssl_certificate_location",
    "ssl.key.location": "ssl_key_location",
    "ssl.key.pem": "ssl_key_location",
    "ssl.keystore.key": "ssl_key_location",
    "sasl.oauthbearer.client.secret": "password",
    "sasl.kerberos.service.name": "kerberos_service_name",
    "sasl.kerberos.principal": "kerberos_principal",
    "sasl.kerberos.keytab": "kerberos_keytab",
}


#: Kafka's config providers a secret reference may name (``${env:NAME}``).
CONFIG_PROVIDERS = {"env": "org.apache.kafka.common.config.provider.EnvVarConfigProvider"}


class SecretRef(SpecModel):
    """A reference to a secret: exactly one of ``env``, ``file`` or an in-process ``value``.

    ``env`` and ``file`` serialize as themselves. An in-process value (:meth:`from_value`) cannot be
    serialized to JSON: a job that goes to another process must use ``env`` or ``file``.
    """

    env: str | None = Field(default=None, description="Name of the environment variable holding the secret.")
    file: str | None = Field(
        default=None, description="Path of a file holding the secret (one trailing newline is stripped)."
    )
    value: SecretStr | None = Field(default=None, description="In-process value; never serialized to JSON.")

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, data: Any) -> Any:
        if isinstance(data, str):
            kind, sep, rest = data.partition(":")
            if sep and kind in ("env", "file") and rest:
                return {kind: rest}
            raise SpecError(
                "",
                "a literal secret is not allowed in a spec.",
                "reference it: {'env': 'VAR_NAME'} (or 'env:VAR_NAME'), {'file': '/path'} (or 'file:/path'), "
                "or SecretRef.from_value(...) for a value that stays in this process.",
            )
        return data

    @model_validator(mode="after")
    def _exactly_one(self) -> SecretRef:
        given = [k for k in ("env", "file", "value") if getattr(self, k) is not None]
        if len(given) != 1:
            raise SpecError("", f"exactly one of env, file or value must be set (got {given or 'none'}).")
        return self

    @classmethod
    def from_value(cls, value: str) -> SecretRef:
        """A secret that lives only in this process (e.g. from an Airflow connection)."""
        return cls(value=SecretStr(value))

    @model_serializer(mode="wrap")
    def _drop_unset(self, handler: Any) -> Any:
        data = handler(self)
        return {k: v for k, v in data.items() if v is not None} if isinstance(data, dict) else data

    @field_serializer("value")
    def _serialize_value(self, value: SecretStr | None, info: Any) -> Any:
        if value is not None and info.mode == "json":
            raise SpecError(
                "secret",
                "an in-process secret value cannot be serialized.",
                "use {'env': 'VAR_NAME'} or {'file': '/path'} for a spec that leaves this process.",
            )
        return value

    def resolve(self) -> str:
        """The secret's value. Errors name the variable or file, never the value."""
        if self.value is not None:
            return self.value.get_secret_value()
        if self.env is not None:
            if self.env not in os.environ:
                raise SpecError(
                    "secret", f"environment variable {self.env!r} is not set.", f"export {self.env}=..."
                )
            return os.environ[self.env]
        path = Path(str(self.file))
        try:
            text = path.read_text()
        except OSError as exc:
            raise SpecError("secret", f"cannot read secret file {str(path)!r}: {exc.strerror}.") from None
        return text[:-1] if text.endswith("\n") else text

    def __repr__(self) -> str:
        if self.env is not None:
            return f"SecretRef(env={self.env!r})"
        if self.file is not None:
            return f"SecretRef(file={self.file!r})"
        return "SecretRef(value='**********')"

    __str__ = __repr__


def _jaas_quote(text: str) -> str:
    """A JAAS quoted string: Kafka's JaasConfig (java.io.StreamTokenizer) ends a quoted string at a
    raw line break and reads backslash escapes, so ``\\``, ``"``, CR and LF are escaped."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return '"' + escaped + '"'


def _jaas_credentials(jaas: str) -> dict[str, str]:
    """``sasl.username``/``sasl.password`` from a PLAIN or SCRAM JAAS line (librdkafka has no JAAS)."""
    found = dict(re.findall(r'\b(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"', jaas))
    if set(found) != {"username", "password"}:
        raise SpecError(
            "sasl_jaas_config",
            'has no username="..." and password="..." for the Kafka admin and lag clients (librdkafka).',
            "write a PLAIN or SCRAM login module line with both, or set username and password instead.",
        )
    return {f"sasl.{k}": re.sub(r"\\(.)", r"\1", v) for k, v in found.items()}


def _jaas_kerberos(jaas: str) -> tuple[str | None, str | None]:
    """``(principal, keytab)`` of a Krb5LoginModule JAAS line (keytab None unless useKeyTab=true);
    values quoted (with JAAS's backslash escapes) or bare."""
    found = {
        name: re.sub(r"\\(.)", r"\1", quoted) if quoted or not bare else bare
        for name, quoted, bare in re.findall(
            r'\b(principal|keyTab|useKeyTab)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;]+))', jaas
        )
    }
    keytab = found.get("keyTab") if found.get("useKeyTab", "").lower() == "true" else None
    return found.get("principal"), keytab


def _local_path(value: str, field: str, what: str) -> None:
    """Refuse a URI where a file on this machine is needed (e.g. DLI's ``obs://`` keytab)."""
    scheme = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://", value)
    if scheme is None:
        return
    if scheme.group(1).lower() == "file":
        raise SpecError(
            field, f"is {value!r}, a URL: the Kerberos libraries take a plain path.", "write the path itself."
        )
    raise SpecError(
        field,
        f"is {value!r}: the {what} is read from the file system of every machine a client runs on, "
        f"and {scheme.group(1)}:// files are not downloaded here.",
        "copy it there (e.g. a Kubernetes secret mounted as a file) and give its path.",
    )


def krb5_conf_unset(current: str | None, path: str, holder: str) -> bool:
    """Whether ``holder`` (``KRB5_CONFIG``, a JVM's ``java.security.krb5.conf``), which names the one
    krb5.conf a process's Kerberos library reads and now holds ``current``, still needs ``path``.

    :raises SpecError: when it names another file: one process cannot use two.
    """
    if current is None:
        return True
    if os.path.realpath(current) != os.path.realpath(path):
        raise SpecError(
            "kerberos_krb5_conf",
            f"is {path!r}, but this process already uses {holder}={current!r} (a Kerberos library reads "
            "one krb5.conf per process).",
            "use one krb5.conf that lists every realm, for every connection this process runs.",
        )
    return False


def use_krb5_conf(path: str) -> None:
    """Point this process's MIT Kerberos library (librdkafka's GSSAPI, and the kinit it runs) at
    ``path`` through ``KRB5_CONFIG``, the one file it reads."""
    if krb5_conf_unset(os.environ.get("KRB5_CONFIG"), path, "KRB5_CONFIG"):
        os.environ["KRB5_CONFIG"] = path


#: the principal each ticket cache holds for librdkafka's kinit, in this process: ``{cache: principal}``
_TICKET_CACHES: dict[str, str] = {}


def _use_ticket_cache(principal: str) -> None:
    """librdkafka's kinit writes the principal's ticket into the process's ticket cache
    (``KRB5CCNAME``), which its GSSAPI login then reads: without one set, a private cache of this
    process (never the user's own ``/tmp/krb5cc_<uid>``); one principal per cache."""
    import tempfile

    cache = os.environ.get("KRB5CCNAME")
    if cache is None:
        cache = f"FILE:{tempfile.mkdtemp(prefix='uko-krb5cc-')}/krb5cc"
        os.environ["KRB5CCNAME"] = cache
    held = _TICKET_CACHES.setdefault(cache, principal)
    if held != principal:
        raise SpecError(
            "kerberos_principal",
            f"is {principal!r}, but this process's ticket cache ({cache}) already holds {held!r}'s tickets "
            "for librdkafka (one principal per cache).",
            "run tables of different principals in different processes (jobs), or give each its own "
            "KRB5CCNAME.",
        )


def _read_pem(path: str, field: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise SpecError(
            field, f"cannot read {path!r}: {exc.strerror}.", "give a readable PEM file."
        ) from None


class KafkaConnection(SpecModel):
    """One Kafka cluster and how to reach it."""

    bootstrap_servers: str = Field(description="Comma-separated host:port list of brokers.")
    security_protocol: SecurityProtocol = Field(default="PLAINTEXT", description="Kafka security protocol.")
    sasl_mechanism: SaslMechanism | None = Field(
        default=None, description="SASL mechanism, required for SASL_PLAINTEXT and SASL_SSL."
    )
    username: str | None = Field(default=None, description="SASL username (PLAIN, SCRAM).")
    password: SecretRef | None = Field(
        default=None, description="SASL password (PLAIN, SCRAM), or the OAuth client secret for librdkafka."
    )
    sasl_jaas_config: SecretRef | None = Field(
        default=None,
        description="Java client JAAS config used as is (e.g. OAUTHBEARER); overrides the one built from username/password.",
    )
    ssl_truststore_location: str | None = Field(
        default=None,
        description="CA certificates to trust: a PEM file, or a JKS/PKCS12 store (librdkafka's clients get its certificates as PEM, exported by the JDK's keytool).",
    )
    ssl_truststore_type: StoreType = Field(default="PEM", description="Format of ssl_truststore_location.")
    ssl_truststore_password: SecretRef | None = Field(
        default=None, description="Password of a JKS/PKCS12 truststore."
    )
    ssl_certificate_location: str | None = Field(
        default=None, description="Client certificate (PEM) for mutual TLS; goes with ssl_key_location."
    )
    ssl_key_location: str | None = Field(default=None, description="Client private key (PEM) for mutual TLS.")
    ssl_key_password: SecretRef | None = Field(
        default=None, description="Password of the client private key."
    )
    ssl_keystore_location: str | None = Field(
        default=None,
        description="Client keystore for mutual TLS: PKCS12, or JKS (exported to PEM by keytool for librdkafka's clients; needs its password).",
    )
    ssl_keystore_type: Literal["JKS", "PKCS12"] = Field(
        default="PKCS12", description="Format of ssl_keystore_location."
    )
    ssl_keystore_password: SecretRef | None = Field(
        default=None, description="Password of the client keystore."
    )
    ssl_endpoint_identification: bool = Field(
        default=True, description="Verify that the broker certificate names the host (https identification)."
    )
    properties: dict[str, str] = Field(
        default_factory=dict,
        description="Extra Java client properties (Flink's properties.*), passed to Spark as kafka.<key>.",
    )
    kerberos_principal: str | None = Field(
        default=None, description="GSSAPI: the client's Kerberos principal, e.g. etl@EXAMPLE.COM."
    )
    kerberos_keytab: str | None = Field(
        default=None,
        description="GSSAPI: keytab file with the principal's keys, a path on every machine a client runs on.",
    )
    kerberos_service_name: str | None = Field(
        default=None,
        description="GSSAPI: the brokers' Kerberos service name (sasl.kerberos.service.name); 'kafka' when unset.",
    )
    kerberos_krb5_conf: str | None = Field(
        default=None,
        description="GSSAPI: krb5.conf naming the realm's KDCs; else KRB5_CONFIG, the JVM's java.security.krb5.conf or /etc/krb5.conf. One per process.",
    )
    librdkafka_properties: dict[str, str] = Field(
        default_factory=dict,
        description="Extra librdkafka properties for confluent-kafka (admin, lag, tests).",
    )

    @model_validator(mode="after")
    def _check(self) -> KafkaConnection:
        if not self.bootstrap_servers.strip():
            raise SpecError("bootstrap_servers", "must not be empty.", "give host:port[,host:port...].")
        for server in self.bootstrap_servers.split(","):
            host, sep, port = server.strip().rpartition(":")
            if not sep or not host or not port.isdigit():
                raise SpecError(
                    "bootstrap_servers", f"{server.strip()!r} is not host:port.", "write e.g. 'broker:9092'."
                )
        sasl = self.security_protocol.startswith("SASL_")
        if sasl and self.sasl_mechanism is None:
            raise SpecError(
                "sasl_mechanism",
                f"is required with security_protocol={self.security_protocol}.",
                "set PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or GSSAPI.",
            )
        if not sasl and self.sasl_mechanism is not None:
            raise SpecError(
                "sasl_mechanism",
                f"is set but security_protocol is {self.security_protocol}.",
                "use SASL_PLAINTEXT or SASL_SSL.",
            )
        needs_login = sasl and self.sasl_mechanism in _LOGIN_MODULES and self.sasl_jaas_config is None
        if needs_login and (not self.username or self.password is None):
            raise SpecError(
                "username" if not self.username else "password",
                f"{self.sasl_mechanism} needs username and password.",
                "set username, and password as a reference: {'env': 'VAR_NAME'} or {'file': '/path'}.",
            )
        self._check_kerberos()
        if (self.ssl_certificate_location is None) != (self.ssl_key_location is None):
            raise SpecError(
                "ssl_key_location" if self.ssl_key_location is None else "ssl_certificate_location",
                "ssl_certificate_location and ssl_key_location go together.",
                "set both (client certificate and its private key, PEM), or neither.",
            )
        for where, props in (
            ("properties", self.properties),
            ("librdkafka_properties", self.librdkafka_properties),
        ):
            for key in props:
                if key.lower() in _OWNED:
                    raise SpecError(
                        f"{where}.{key}",
                        "is owned by the connection.",
                        f"use the field {_OWNED[key.lower()]!r}.",
                    )
        return self

    def _check_kerberos(self) -> None:
        kerberos = [
            f
            for f in ("kerberos_principal", "kerberos_keytab", "kerberos_service_name", "kerberos_krb5_conf")
            if getattr(self, f) is not None
        ]
        if self.sasl_mechanism != "GSSAPI":
            if kerberos:
                raise SpecError(
                    kerberos[0],
                    f"is set but sasl_mechanism is {self.sasl_mechanism}.",
                    "set sasl_mechanism GSSAPI (with SASL_PLAINTEXT or SASL_SSL), or drop the kerberos_* fields.",
                )
            return
        if (self.kerberos_principal is None) != (self.kerberos_keytab is None):
            raise SpecError(
                "kerberos_keytab" if self.kerberos_keytab is None else "kerberos_principal",
                "kerberos_principal and kerberos_keytab go together.",
                "set both (the principal and the keytab holding its keys).",
            )
        if self.kerberos_principal is not None and self.sasl_jaas_config is not None:
            raise SpecError(
                "sasl_jaas_config",
                "and kerberos_principal/kerberos_keytab both give the Kerberos login (from the table and "
                "the connection, or both in one), and the Java and librdkafka clients could log in as "
                "different principals.",
                "keep one: the Krb5LoginModule line, or the principal and keytab.",
            )
        if self.kerberos_principal is None and self.sasl_jaas_config is None:
            raise SpecError(
                "kerberos_principal",
                "GSSAPI needs a principal and its keytab.",
                f"set kerberos_principal and kerberos_keytab, or sasl_jaas_config with a {KRB5_LOGIN_MODULE} line.",
            )
        for field, what in (("kerberos_keytab", "keytab"), ("kerberos_krb5_conf", "krb5.conf")):
            value = getattr(self, field)
            if value is not None:
                _local_path(value, field, what)

    # -- Java client (Spark) ---------------------------------------------------------------------
    def java_client_properties(
        self, reference: Callable[[SecretRef], str | None] | None = None
    ) -> dict[str, str]:
        """Java client properties with secrets resolved (no ``kafka.`` prefix).

        :param reference: for each secret, the Kafka config provider reference that stands for it
            (``${env:NAME}``) or None to give its value; the providers used are configured too.
        """
        providers: set[str] = set()

        def secret(ref: SecretRef) -> str:
            found = reference(ref) if reference is not None else None
            if found is None:
                return ref.resolve()
            providers.add(found.split(":", 1)[0].removeprefix("${"))
            return found

        out: dict[str, str] = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": self.security_protocol,
        }
        if self.sasl_mechanism is not None:
            out["sasl.mechanism"] = self.sasl_mechanism
            if self.sasl_jaas_config is not None:
                out["sasl.jaas.config"] = secret(self.sasl_jaas_config)
            elif self.sasl_mechanism == "GSSAPI":
                out["sasl.jaas.config"] = (
                    # refreshKrb5Config: the login reads the krb5.conf named now, not one loaded before
                    f"{KRB5_LOGIN_MODULE} required useKeyTab=true storeKey=true refreshKrb5Config=true "
                    f"keyTab={_jaas_quote(self.kerberos_keytab or '')} "
                    f"principal={_jaas_quote(self.kerberos_principal or '')};"
                )
            elif self.sasl_mechanism in _LOGIN_MODULES:
                assert self.username is not None and self.password is not None
                out["sasl.jaas.config"] = (
                    f"{_LOGIN_MODULES[self.sasl_mechanism]} required "
                    f"username={_jaas_quote(self.username)} password={_jaas_quote(secret(self.password))};"
                )
            if self.sasl_mechanism == "GSSAPI":
                out["sasl.kerberos.service.name"] = self.kerberos_service_name or DEFAULT_KERBEROS_SERVICE
        if self.security_protocol in ("SSL", "SASL_SSL"):
            if self.ssl_truststore_location:
                out["ssl.truststore.type"] = self.ssl_truststore_type
                out["ssl.truststore.location"] = self.ssl_truststore_location
                if self.ssl_truststore_password is not None:
                    out["ssl.truststore.password"] = secret(self.ssl_truststore_password)
            if self.ssl_keystore_location:
                out["ssl.keystore.type"] = self.ssl_keystore_type
                out["ssl.keystore.location"] = self.ssl_keystore_location
                if self.ssl_keystore_password is not None:
                    out["ssl.keystore.password"] = secret(self.ssl_keystore_password)
            elif self.ssl_certificate_location and self.ssl_key_location:
                out["ssl.keystore.type"] = "PEM"
                out["ssl.keystore.certificate.chain"] = _read_pem(
                    self.ssl_certificate_location, "ssl_certificate_location"
                )
                out["ssl.keystore.key"] = _read_pem(self.ssl_key_location, "ssl_key_location")
            if self.ssl_key_password is not None:
                out["ssl.key.password"] = secret(self.ssl_key_password)
            if not self.ssl_endpoint_identification:
                out["ssl.endpoint.identification.algorithm"] = ""
        out.update(self.properties)
        if providers:
            out["config.providers"] = ",".join(sorted(providers))
        for name in sorted(providers):
            out[f"config.providers.{name}.class"] = CONFIG_PROVIDERS[name]
        return out

    def to_spark_options(self, reference: Callable[[SecretRef], str | None] | None = None) -> dict[str, str]:
        """Options for Spark's Kafka source and sink: every Java client property as ``kafka.<key>``
        (secrets as config provider references where ``reference`` gives one)."""
        return {f"kafka.{k}": v for k, v in self.java_client_properties(reference).items()}

    # -- librdkafka (confluent-kafka) ------------------------------------------------------------
    def to_librdkafka(self) -> dict[str, str]:
        """librdkafka configuration with secrets resolved.

        A JKS or PKCS12 truststore and a JKS keystore (librdkafka reads PEM, and PKCS12 keystores) are
        exported to PEM files by the JDK's keytool, in a private folder removed at exit.
        """
        out: dict[str, str] = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": self.security_protocol,
        }
        if self.sasl_mechanism is not None:
            out["sasl.mechanism"] = self.sasl_mechanism
            if self.sasl_mechanism == "OAUTHBEARER":
                if self.password is not None:
                    out["sasl.oauthbearer.client.secret"] = self.password.resolve()
            elif self.sasl_mechanism == "GSSAPI":
                out.update(self._librdkafka_kerberos())
            elif self.username and self.password is not None:
                out["sasl.username"] = self.username
                out["sasl.password"] = self.password.resolve()
            elif self.sasl_jaas_config is not None:  # librdkafka has no JAAS: its credentials
                out.update(_jaas_credentials(self.sasl_jaas_config.resolve()))
        if self.security_protocol in ("SSL", "SASL_SSL"):
            from upsert_kafka_ops.formats import java_stores

            if self.ssl_truststore_location:
                if self.ssl_truststore_type == "PEM":
                    out["ssl.ca.location"] = self.ssl_truststore_location
                else:  # librdkafka takes CA certificates as PEM: the store's, exported by the JDK's keytool
                    trust_pw = (
                        self.ssl_truststore_password.resolve() if self.ssl_truststore_password else None
                    )
                    pem = java_stores.truststore_pem(
                        Path(self.ssl_truststore_location), trust_pw, "ssl_truststore_location"
                    )
                    out["ssl.ca.location"] = str(pem)
            key_password = self.ssl_key_password
            if self.ssl_keystore_location and self.ssl_keystore_type == "JKS":  # librdkafka reads no JKS
                if self.ssl_keystore_password is None:
                    raise SpecError(
                        "ssl_keystore_password",
                        "is needed to read the JKS keystore for librdkafka's clients (admin, offsets, lag).",
                        "set it (an env: or file: reference), or give PKCS12 or PEM files.",
                    )
                cert, key = java_stores.keystore_pem(
                    Path(self.ssl_keystore_location),
                    self.ssl_keystore_password.resolve(),
                    "ssl_keystore_location",
                )
                out["ssl.certificate.location"], out["ssl.key.location"] = str(cert), str(key)
                key_password = None  # the PEM key is written unencrypted, in a private folder
            elif self.ssl_keystore_location:
                out["ssl.keystore.location"] = self.ssl_keystore_location
                if self.ssl_keystore_password is not None:
                    out["ssl.keystore.password"] = self.ssl_keystore_password.resolve()
            elif self.ssl_certificate_location and self.ssl_key_location:
                out["ssl.certificate.location"] = self.ssl_certificate_location
                out["ssl.key.location"] = self.ssl_key_location
            if key_password is not None:
                out["ssl.key.password"] = key_password.resolve()
            if not self.ssl_endpoint_identification:
                out["ssl.endpoint.identification.algorithm"] = "none"
        out.update(self.librdkafka_properties)
        return out

    def _librdkafka_kerberos(self) -> dict[str, str]:
        """librdkafka's GSSAPI settings: its principal and keytab (from the fields, or the JAAS line the
        Java clients use); with a ticket cache and no keytab, no kinit runs. The krb5.conf becomes this
        process's KRB5_CONFIG."""
        principal, keytab = self.kerberos_principal, self.kerberos_keytab
        if principal is None and self.sasl_jaas_config is not None:
            jaas = self.sasl_jaas_config.resolve()
            if not jaas.strip().startswith(KRB5_LOGIN_MODULE):
                raise SpecError(
                    "sasl_jaas_config",
                    f"is not a {KRB5_LOGIN_MODULE} line, which GSSAPI needs (librdkafka's clients take "
                    "its principal and keytab).",
                    f'write "{KRB5_LOGIN_MODULE} required useKeyTab=true keyTab="/path" principal="user@REALM";".',
                )
            principal, keytab = _jaas_kerberos(jaas)
        out = {"sasl.kerberos.service.name": self.kerberos_service_name or DEFAULT_KERBEROS_SERVICE}
        if principal:
            out["sasl.kerberos.principal"] = principal
        if keytab:
            out["sasl.kerberos.keytab"] = keytab
            _use_ticket_cache(principal or "")
        else:  # tickets come from the cache (kinit done outside): librdkafka must not run kinit itself
            out["sasl.kerberos.min.time.before.relogin"] = "0"
        if self.kerberos_krb5_conf is not None:
            use_krb5_conf(self.kerberos_krb5_conf)
        return out

    @classmethod
    def from_librdkafka(cls, config: dict[str, Any]) -> KafkaConnection:
        """Build a connection from librdkafka keys (e.g. an Airflow ``kafka`` connection's extra).

        Literal secrets found there (``sasl.password``, ``ssl.key.password``, ...) become in-process
        :class:`SecretRef` values: they are usable here and never serialized.
        """
        conf = {str(k): v for k, v in config.items()}

        def take(*keys: str) -> Any:
            found = None
            for k in keys:
                if k in conf:
                    found = conf.pop(k)
            return found

        def secret(*keys: str) -> SecretRef | None:
            value = take(*keys)
            return None if value is None else SecretRef.from_value(str(value))

        servers = take("bootstrap.servers", "metadata.broker.list")
        if not servers:
            raise SpecError("bootstrap.servers", "is missing from the librdkafka configuration.")
        protocol = str(take("security.protocol") or "PLAINTEXT").upper()
        mechanism = take("sasl.mechanism", "sasl.mechanisms")
        ssl_ca = take("ssl.ca.location")
        endpoint = take("ssl.endpoint.identification.algorithm")
        data: dict[str, Any] = {
            "bootstrap_servers": str(servers),
            "security_protocol": protocol,
            "sasl_mechanism": str(mechanism).upper() if mechanism else None,
            "username": take("sasl.username"),
            "password": secret("sasl.password", "sasl.oauthbearer.client.secret"),
            "sasl_jaas_config": secret("sasl.jaas.config"),  # a Java client key some connections carry
            "ssl_truststore_location": ssl_ca,
            "ssl_certificate_location": take("ssl.certificate.location"),
            "ssl_key_location": take("ssl.key.location"),
            "ssl_key_password": secret("ssl.key.password"),
            "ssl_keystore_location": take("ssl.keystore.location"),
            "ssl_keystore_password": secret("ssl.keystore.password"),
            "ssl_endpoint_identification": endpoint is None or str(endpoint).lower() not in ("none", ""),
            "kerberos_principal": take("sasl.kerberos.principal"),
            "kerberos_keytab": take("sasl.kerberos.keytab"),
            "kerberos_service_name": take("sasl.kerberos.service.name"),
        }
        data["librdkafka_properties"] = {k: str(v) for k, v in conf.items()}
        return cls(**{k: v for k, v in data.items() if v is not None})


# -- security given in a table's WITH clause ----------------------------------------------------------
#: Flink's ``properties.*`` client keys that set a connection field, as Flink users write them in DDL
TABLE_SECURITY = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.jaas.config": "sasl_jaas_config",
    "ssl.truststore.location": "ssl_truststore_location",
    "ssl.truststore.type": "ssl_truststore_type",
    "ssl.truststore.password": "ssl_truststore_password",
    "ssl.keystore.location": "ssl_keystore_location",
    "ssl.keystore.type": "ssl_keystore_type",
    "ssl.keystore.password": "ssl_keystore_password",
    "ssl.key.password": "ssl_key_password",
    "ssl.endpoint.identification.algorithm": "ssl_endpoint_identification",
    "sasl.kerberos.service.name": "kerberos_service_name",
    # Huawei DLI's Kerberos keys, as its Flink connector pages write them
    "connector.kerberos.principal": "kerberos_principal",
    "connector.kerberos.keytab": "kerberos_keytab",
    "connector.kerberos.krb5": "kerberos_krb5_conf",
}
#: the ones holding a secret: in a table they are references (``env:NAME`` or ``file:/path``)
SECRET_PROPERTIES = (
    "sasl.jaas.config",
    "ssl.truststore.password",
    "ssl.keystore.password",
    "ssl.key.password",
)


def check_table_sasl(properties: dict[str, str]) -> None:
    """Check a table's Kerberos keys at validation: DLI's ``connector.auth.open`` switch is 'true' or
    'false' and 'true' whenever ``connector.kerberos.*`` is given; keytab and krb5.conf are local files."""
    auth_open = properties.get("connector.auth.open")
    dli = sorted(k for k in properties if k.startswith("connector.kerberos."))
    if auth_open is not None and auth_open.strip().lower() not in ("true", "false"):
        raise SpecError("properties.connector.auth.open", f"is {auth_open!r}.", "write 'true' or 'false'.")
    if dli and auth_open is not None and auth_open.strip().lower() == "false":
        raise SpecError(
            "properties.connector.auth.open",
            f"is 'false' but properties.{dli[0]} is set.",
            "write 'true' to log in with Kerberos, or drop the connector.kerberos.* keys.",
        )
    for key, what in (("connector.kerberos.keytab", "keytab"), ("connector.kerberos.krb5", "krb5.conf")):
        if key in properties:
            _local_path(properties[key], f"properties.{key}", what)


def check_table_secrets(properties: dict[str, str]) -> None:
    """Refuse a literal secret among a table's client properties (it would reach its DDL, job files
    and logs): the value must be ``env:NAME`` or ``file:/path``, resolved only when a client starts."""
    for key in SECRET_PROPERTIES:
        value = properties.get(key)
        if value is None or _kerberos_jaas(key, value):
            continue
        kind, sep, rest = value.partition(":")
        if not (sep and kind in ("env", "file") and rest):
            raise SpecError(
                f"properties.{key}",
                "holds a literal secret, which would be written wherever the table goes (DDL, job files, logs).",
                f"put it in an environment variable or a file and write 'env:NAME' or 'file:/path' as "
                f"'properties.{key}'.",
            )


def _kerberos_jaas(key: str, value: str) -> bool:
    """A Krb5LoginModule line names a keytab and a principal, no password: not a secret."""
    return (
        key == "sasl.jaas.config" and value.strip().startswith(KRB5_LOGIN_MODULE) and "password" not in value
    )


def _table_value(key: str, value: str) -> Any:
    if _kerberos_jaas(key, value):
        return SecretRef.from_value(value)
    if key in SECRET_PROPERTIES:
        return SecretRef.model_validate(value)
    if key == "ssl.endpoint.identification.algorithm":
        return value.strip().lower() == "https"
    return value.upper() if key in ("security.protocol", "sasl.mechanism", "ssl.truststore.type") else value


def for_table(connection: KafkaConnection, properties: dict[str, str]) -> KafkaConnection:
    """The connection a table's Kafka clients use: the table's security properties (Flink's
    ``'properties.security.protocol'`` and the like) over the connection's defaults. A field both
    set explicitly to different values is an error naming both; ``bootstrap.servers`` stays the
    connection's."""
    updates: dict[str, Any] = {}
    for key, field in TABLE_SECURITY.items():
        if key not in properties:
            continue
        value = _table_value(key, properties[key])
        if field in connection.model_fields_set and getattr(connection, field) not in (None, value):
            raise SpecError(
                f"properties.{key}",
                f"is {properties[key]!r} in the table, but the connection sets {field} = "
                f"{getattr(connection, field)!r}.",
                "keep one of the two: the table's WITH clause or the connection.",
            )
        if getattr(connection, field) != value:
            updates[field] = value
    for store in ("truststore", "keystore"):  # Kafka's Java client reads a store as JKS unless told
        location, kind = f"ssl.{store}.location", f"ssl_{store}_type"
        if (
            location in properties
            and f"ssl.{store}.type" not in properties
            and kind not in connection.model_fields_set
        ):
            pem = properties[location].lower().endswith((".pem", ".crt"))
            kind_value = "PEM" if pem and store == "truststore" else "JKS"
            if getattr(connection, kind) != kind_value:
                updates[kind] = kind_value
    if not updates:  # nothing to change (a connection already built for this table comes back as is)
        return connection
    values = {name: getattr(connection, name) for name in connection.model_fields_set}
    return KafkaConnection(**{**values, **updates})


def client_properties(properties: dict[str, str]) -> dict[str, str]:
    """A table's client properties minus the ones :func:`for_table` moves into the connection (and
    ``auto.offset.reset``, which says where a 'group-offsets' start begins, not a client setting here,
    and DLI's ``connector.auth.open`` switch)."""
    return {
        k: v
        for k, v in properties.items()
        if k not in ("bootstrap.servers", "auto.offset.reset", "connector.auth.open")
        and k not in TABLE_SECURITY
    }
