"""What a connection's principal may do, asked of the cluster before a job reads or writes anything.

Kafka answers a topic's or a group's description with the operations the asking principal is allowed
on it (KIP-430). A job lists what it needs (READ on its source topics, READ on its consumer group,
WRITE on its sink topic) and :func:`check` fails with every missing grant named: the principal, the
resource, the operation, and the ``kafka-acls.sh`` command that grants it, before a record moves. A
cluster without an authorizer allows everything, and answers so.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from upsert_kafka_ops.kafka.admin import KafkaAccessDeniedError, KafkaAdmin
from upsert_kafka_ops.spec.connection import KafkaConnection

#: Operations another one implies (Kafka's rule: READ, WRITE, DELETE and ALTER imply DESCRIBE).
_IMPLIES = {"READ": {"DESCRIBE"}, "WRITE": {"DESCRIBE"}, "DELETE": {"DESCRIBE"}, "ALTER": {"DESCRIBE"}}
_DENIED = ("TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED")
#: a group coordinator still loading or moving (a broker just started): asked again
_AGAIN = (
    "COORDINATOR_LOAD_IN_PROGRESS",
    "COORDINATOR_NOT_AVAILABLE",
    "NOT_COORDINATOR",
    "LEADER_NOT_AVAILABLE",
)


@dataclass(frozen=True)
class Need:
    """An operation a job needs on a topic or a consumer group, and what for."""

    resource: str  # "topic" or "group"
    name: str
    operation: str  # READ, WRITE, DESCRIBE
    why: str


class AccessDeniedError(KafkaAccessDeniedError):
    """The principal lacks an operation the job needs; nothing was read or written."""


def principal(conn: KafkaConnection) -> str:
    """The principal the cluster sees for ``conn``, as ACLs name it (Kafka's default mapping)."""
    if conn.security_protocol.startswith("SASL") and conn.sasl_mechanism == "GSSAPI":
        name = conn.kerberos_principal or "the Kerberos principal"
        return f"User:{name.split('@')[0].split('/')[0]}"
    if conn.security_protocol.startswith("SASL") and conn.username:
        return f"User:{conn.username}"
    if conn.security_protocol == "SSL":
        return "User:<the client certificate's subject>"
    return "User:ANONYMOUS"


def _allowed(found: Iterable[object] | None) -> set[str] | None:
    if found is None:  # the broker did not say (an old broker): nothing to check
        return None
    ops = {getattr(op, "name", str(op)) for op in found}
    if "ALL" in ops:
        return {"READ", "WRITE", "DESCRIBE", "DELETE", "ALTER", "CREATE"}
    return ops | {implied for op in ops for implied in _IMPLIES.get(op, ())}


def missing(admin: KafkaAdmin, needs: Iterable[Need]) -> list[tuple[Need, set[str]]]:
    """Each need the principal lacks, with the operations it has on that resource (empty: none, not
    even DESCRIBE). Retriable answers (a group coordinator still loading) are asked again within the
    admin's timeout."""
    from confluent_kafka import KafkaException, TopicCollection

    needs = list(needs)
    pending = {(n.resource, n.name) for n in needs}
    have: dict[tuple[str, str], set[str] | None] = {}
    deadline = time.monotonic() + admin.timeout
    while pending:
        futures: dict[tuple[str, str], Any] = {}
        topics = sorted(name for kind, name in pending if kind == "topic")
        groups = sorted(name for kind, name in pending if kind == "group")
        left = max(0.1, deadline - time.monotonic())
        if topics:
            found = admin.client.describe_topics(
                TopicCollection(topics), request_timeout=left, include_authorized_operations=True
            )
            futures.update({("topic", name): fut for name, fut in found.items()})
        if groups:
            found = admin.client.describe_consumer_groups(
                groups, request_timeout=left, include_authorized_operations=True
            )
            futures.update({("group", name): fut for name, fut in found.items()})
        for key, fut in futures.items():
            what = f"describe {key[0]} {key[1]}"
            try:
                desc = fut.result(timeout=max(0.0, deadline - time.monotonic()))
            except KafkaException as exc:
                err: Any = exc.args[0] if exc.args else None
                if err is not None and err.name() in _DENIED:
                    have[key] = set()
                    pending.discard(key)
                elif not (
                    err is not None
                    and (err.retriable() or err.name() in _AGAIN)
                    and time.monotonic() < deadline
                ):
                    raise admin.failure(exc, what) from None
                continue
            except BaseException as exc:
                raise admin.failure(exc, what) from None
            have[key] = _allowed(getattr(desc, "authorized_operations", None))
            pending.discard(key)
        if pending:
            time.sleep(0.2)
    return [
        (need, allowed)
        for need in needs
        if (allowed := have.get((need.resource, need.name))) is not None and need.operation not in allowed
    ]


def _grant(need: Need, who: str, servers: str) -> str:
    what = f"--topic {need.name}" if need.resource == "topic" else f"--group {need.name}"
    operation = "".join(part.capitalize() for part in need.operation.split("_"))  # DescribeConfigs
    return f"kafka-acls.sh --bootstrap-server {servers} --add --allow-principal {who} --operation {operation} {what}"


def check(conn: KafkaConnection, needs: Iterable[Need], job: str, timeout: float = 30.0) -> None:
    """Ask the cluster of ``conn`` whether its principal may do each of ``needs``.

    :raises AccessDeniedError: naming each missing operation and how to grant it.
    """
    needs = list(needs)
    if not needs:
        return
    with KafkaAdmin(conn, timeout=timeout) as admin:
        lacking = missing(admin, needs)
    if not lacking:
        return
    who = principal(conn)
    lines = []
    for need, allowed in lacking:
        has = f"it may {', '.join(sorted(allowed))}" if allowed else "it may not even DESCRIBE it"
        lines.append(
            f"{who} may not {need.operation} {need.resource} {need.name!r} ({has}), which the job needs "
            f"to {need.why}"
        )
    grants = "; ".join(_grant(n, who, conn.bootstrap_servers) for n, _ in lacking)
    raise AccessDeniedError(
        f"job {job!r} cannot run at {conn.bootstrap_servers}: " + "; ".join(lines) + ". Nothing was read or "
        f"written. Grant the operation(s) to the principal (e.g. {grants}), or run the job as a principal "
        "that has them."
    )
