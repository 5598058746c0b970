"""Admin helpers on confluent-kafka: bounded, with errors that say what went wrong.

Every call here takes a timeout and never hangs past it.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from upsert_kafka_ops.errors import KafkaConnectionError

_LOG = logging.getLogger("upsert_kafka_ops.kafka.client")
_AUTH_HINT = "check the username, password and SASL mechanism of the connection"
_SSL_HINT = "check the CA file (ssl.ca.location) and that the server certificate names the host"


def probe(config: dict[str, Any], timeout: float = 10.0) -> Any:
    """Ask the cluster for its metadata and return it (``ClusterMetadata``).

    :param config: librdkafka configuration (``bootstrap.servers``, security settings).
    :param timeout: seconds before giving up.
    :raises KafkaConnectionError: naming the cause (authentication, TLS, unreachable) when the
        cluster does not answer in time; the message never contains secrets.
    """
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    seen: list[KafkaError] = []
    conf = dict(config)
    conf["error_cb"] = seen.append
    conf.setdefault("logger", _LOG)  # librdkafka logs go to Python logging, not stderr
    conf.setdefault("socket.connection.setup.timeout.ms", max(1000, int(timeout * 1000)))
    admin = AdminClient(conf)
    deadline = time.monotonic() + timeout
    last = ""  # a message, not the exception: a kept traceback would keep the client alive
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            md = admin.list_topics(timeout=min(2.0, remaining))
            if md.brokers:
                return md
        except KafkaException as exc:
            last = str(exc)
        if any(_is_fatal(e) for e in seen):
            break
        # list_topics already waited; poll to surface error callbacks
        admin.poll(0)
    raise KafkaConnectionError(_describe(str(conf.get("bootstrap.servers")), seen, last, timeout))


def _is_fatal(err: Any) -> bool:
    from confluent_kafka import KafkaError

    return bool(err.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL)) or "SSL handshake" in err.str()


def _describe(bootstrap: str, seen: list[Any], last: str, timeout: float) -> str:
    from confluent_kafka import KafkaError

    texts = [e.str() for e in seen]
    if any(e.code() == KafkaError._AUTHENTICATION for e in seen):
        cause = f"authentication failed ({_AUTH_HINT})"
    elif any(e.code() == KafkaError._SSL or "SSL" in e.str() for e in seen):
        cause = f"TLS handshake failed ({_SSL_HINT})"
    else:
        cause = f"no broker answered within {timeout:g}s (is it running and reachable?)"
    detail = texts[-1] if texts else last
    return f"Cannot connect to Kafka at {bootstrap}: {cause}." + (f" Client said: {detail}" if detail else "")
