"""The Spark Connect client's channel: how a run reaches a server that wants a token.

A Spark Connect server started with ``spark.connect.authenticate.token`` (or
``SPARK_CONNECT_AUTHENTICATE_TOKEN``) refuses a client without that bearer token. pyspark's own
client sends a token only over TLS, or to the host name ``localhost`` with gRPC's local credentials,
and it takes the token from the ``sc://`` URL, which ends up wherever a URL is logged. The channel
built here takes the token as a value (resolved from a secret reference by the caller) and:

- over TLS (``use_ssl=true`` in the URL, or a CA bundle given) verifies the server's certificate
  against the given CA bundle, or the system's, and sends the token;
- to a loopback address (``localhost``, ``127.0.0.1``, ``::1``) without TLS sends it with gRPC's
  local credentials, which refuse a peer that is not on this machine;
- refuses to send it in clear text to any other host, before a byte leaves.

Before the first call, a TLS handshake of its own checks the certificate, so a wrong CA bundle or a
server that speaks no TLS fails at once with the cause, instead of pyspark retrying for minutes.
The server's refusals of a missing or wrong token are raised as :class:`SpecError` naming ``token``.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
from typing import Any

from upsert_kafka_ops import spark_compat
from upsert_kafka_ops.errors import SpecError

#: pyspark's variable for the token, read when no token is given (the server reads the same name)
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
#: a PEM file of the CA that signed the server's (its TLS proxy's) certificate, read when no CA is given
CA_CERT_ENV = "UKO_SPARK_CONNECT_CA_CERT"

_TOKEN_FIX = (
    "give the token the server was started with (spark.connect.authenticate.token, or "
    f"{TOKEN_ENV} in its environment): ConnectRuntime(token={{'env': 'VAR'}}), the CLI's --token env:VAR, "
    f"the Airflow connection's password, SparkRuntimeResource(token=dg.EnvVar(...)), or {TOKEN_ENV} in "
    "the client's environment."
)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost`` or a loopback address)."""
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def channel_builder(remote: str, token: str | None, ca_cert: bytes | None) -> Any:
    """A pyspark ``ChannelBuilder`` for ``remote`` (``sc://host:port[/;param=value...]``, no token in
    it) that sends ``token`` as the call credentials (see the module's rules). ``ca_cert`` (PEM)
    turns TLS on; ``use_ssl=true`` in ``remote`` with no CA bundle verifies against the system's."""
    import grpc  # type: ignore[import-untyped]

    spark_compat.require_connect("remote")
    from pyspark.sql.connect.client import DefaultChannelBuilder

    class _Builder(DefaultChannelBuilder):
        @property
        def token(self) -> str | None:
            return token

        def toChannel(self) -> Any:
            if self.use_ssl or ca_cert is not None:
                creds = grpc.ssl_channel_credentials(root_certificates=ca_cert)
            elif token is None:
                return self._insecure_channel(self.endpoint)
            else:
                creds = grpc.local_channel_credentials(grpc.LocalConnectionType.LOCAL_TCP)
            if token is not None:
                creds = grpc.composite_channel_credentials(creds, grpc.access_token_call_credentials(token))
            return self._secure_channel(self.endpoint, creds)

    builder = _Builder(remote)
    tls = builder.use_ssl or ca_cert is not None
    if token is not None and not tls and not is_loopback(builder.host):
        raise SpecError(
            "remote",
            f"{builder.host} is not this machine and the connection has no TLS: the token would cross "
            "the network in clear text.",
            "reach the server through its TLS proxy (the chart's sparkConnect.tls) with "
            f"sc://{builder.endpoint}/;use_ssl=true and the proxy's CA bundle (ca_cert), or run the "
            "client on the server's machine (sc://localhost:PORT).",
        )
    if tls:
        check_tls(builder.host, builder.endpoint, ca_cert)
    return builder


def check_tls(host: str, endpoint: str, ca_cert: bytes | None, timeout: float = 10.0) -> None:
    """A TLS handshake with ``endpoint`` that verifies its certificate for ``host`` against
    ``ca_cert`` (PEM; the system's CAs when None). An unreachable endpoint is left to the client
    (it retries while a server restarts); a certificate it cannot verify, or a server without TLS,
    is a :class:`SpecError` naming ``ca_cert`` or ``use_ssl``."""
    context = ssl.create_default_context(cadata=ca_cert.decode() if ca_cert is not None else None)
    context.set_alpn_protocols(["h2"])
    address, _, port = endpoint.rpartition(":")
    try:
        sock = socket.create_connection((address.strip("[]"), int(port)), timeout=timeout)
    except OSError:
        return
    try:
        with context.wrap_socket(sock, server_hostname=host.strip("[]")):
            return
    except ssl.SSLCertVerificationError as exc:
        raise SpecError(
            "ca_cert",
            f"the server at {endpoint} presented a certificate that does not verify: {exc.verify_message}.",
            "give the CA bundle that signed its (its TLS proxy's) certificate, for a name the client "
            f"uses ({host}): ConnectRuntime(ca_cert={{'file': '/path/ca.crt'}}), the CLI's --ca-cert "
            f"file:PATH, the Airflow connection's extra ca_cert, or {CA_CERT_ENV}=/path/ca.crt.",
        ) from None
    except (ssl.SSLError, OSError) as exc:
        raise SpecError(
            "use_ssl",
            f"the server at {endpoint} did not complete a TLS handshake ({exc}): it speaks no TLS.",
            "connect to its TLS proxy's port (the chart's Service), or, on the server's own machine, "
            "drop use_ssl and use sc://localhost:PORT.",
        ) from None
    finally:
        sock.close()


def refused(exc: BaseException, endpoint: str) -> SpecError | None:
    """The :class:`SpecError` for a server's refusal of the token, or None for another error."""
    text = str(exc)
    if "UNAUTHENTICATED" not in text:
        return None
    if "No authentication token provided" in text:
        return SpecError(
            "token", f"the Spark Connect server at {endpoint} requires a token; none was sent.", _TOKEN_FIX
        )
    return SpecError(
        "token", f"the Spark Connect server at {endpoint} refused the token sent (not its token).", _TOKEN_FIX
    )
