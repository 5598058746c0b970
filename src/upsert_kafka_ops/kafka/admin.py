"""Admin helpers on confluent-kafka: bounded, with errors that say what went wrong.

Every call here takes a timeout and never hangs past it. :class:`KafkaAdmin` keeps one client for
several calls (earliest/end offsets with an explicit isolation level, committed group offsets,
offsets for timestamps, topic ids, partition counts and configs, group state).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from upsert_kafka_ops.errors import KafkaConnectionError, SpecError
from upsert_kafka_ops.spec.connection import KafkaConnection

_LOG = logging.getLogger("upsert_kafka_ops.kafka.client")
_AUTH_HINT = (
    "check the connection's credentials (username and password, or Kerberos principal, keytab and "
    "krb5.conf) and its SASL mechanism"
)
_SSL_HINT = "check the CA file (ssl.ca.location) and that the server certificate names the host"
_K = TypeVar("_K")
#: The group id of record readers: set because librdkafka requires one, never joined nor committed to.
READER_GROUP = "upsert-kafka-ops-lag-reader"
_EARLIEST, _LATEST = -2, -1  # ListOffsets' timestamps for the log start and the end
#: partitions per offsets request. The client's cost grows faster than the list (measured over 10,000
#: partitions on loopback: one ListOffsets 350 ms, twenty of 500 57 ms; one committed-offsets request
#: 173 ms, ten of 1,000 38 ms)
OFFSETS_CHUNK = 500
GROUP_OFFSETS_CHUNK = 1000


@dataclass
class _SharedClient:
    client: Any = None
    errors: list[Any] = field(default_factory=list)


_SHARED: contextvars.ContextVar[dict[tuple[tuple[str, str], ...], _SharedClient] | None] = (
    contextvars.ContextVar("upsert_kafka_ops_shared_admin_clients", default=None)
)


@contextlib.contextmanager
def shared_clients() -> Iterator[None]:
    """Inside the block (in this thread), :func:`probe` and :class:`KafkaAdmin` share one admin
    client per cluster configuration, dropped at the end of the block.

    A job's run asks the cluster for metadata, offsets and topic ids five times; a new client costs a
    connection and a metadata round each time (together 0.28 s of a 1.1 s run of 10 records, on
    loopback)."""
    if _SHARED.get() is not None:  # nested: the outer block's clients
        yield
        return
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


def _shared_client(config: Mapping[str, Any]) -> _SharedClient | None:
    pool = _SHARED.get()
    if pool is None:
        return None
    key = tuple(sorted((k, repr(v)) for k, v in config.items() if not callable(v)))
    return pool.setdefault(key, _SharedClient())


def probe(config: dict[str, Any], timeout: float = 10.0) -> Any:
    """Ask the cluster for its metadata and return it (``ClusterMetadata``).

    :param config: librdkafka configuration (``bootstrap.servers``, security settings).
    :param timeout: seconds before giving up.
    :raises KafkaConnectionError: naming the cause (authentication, TLS, unreachable) when the
        cluster does not answer in time; the message never contains secrets.
    """
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    shared = _shared_client(config)
    if shared is not None and shared.client is not None:
        with contextlib.suppress(KafkaException):  # else a new client says why, as below
            md = shared.client.list_topics(timeout=timeout)
            if md.brokers:
                return md
    seen: list[KafkaError] = shared.errors if shared is not None else []
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
                if shared is not None:
                    shared.client = admin
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
    auth = [e.str() for e in seen if e.code() == KafkaError._AUTHENTICATION]
    if auth:
        cause = f"authentication failed ({_AUTH_HINT})"
        texts = auth  # what the login said, not the "brokers are down" that follows it
    elif any(e.code() == KafkaError._SSL or "SSL" in e.str() for e in seen):
        cause = f"TLS handshake failed ({_SSL_HINT})"
    else:
        cause = f"no broker answered within {timeout:g}s (is it running and reachable?)"
    detail = texts[-1] if texts else last
    return f"Cannot connect to Kafka at {bootstrap}: {cause}." + (f" Client said: {detail}" if detail else "")


# -- bounded admin calls, one client reused ----------------------------------------------------------

#: Which end a consumer reads up to: the last stable offset (``read_committed``, librdkafka's consumer
#: default) or the high watermark (``read_uncommitted``, the Java consumer's default).
Isolation = Literal["read_committed", "read_uncommitted"]
ISOLATIONS: tuple[Isolation, ...] = ("read_committed", "read_uncommitted")

TopicPartitionKey = tuple[str, int]

_DENIED = {
    "TOPIC_AUTHORIZATION_FAILED",
    "GROUP_AUTHORIZATION_FAILED",
    "CLUSTER_AUTHORIZATION_FAILED",
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
    "DELEGATION_TOKEN_AUTHORIZATION_FAILED",
    "SASL_AUTHENTICATION_FAILED",
    "_AUTHENTICATION",
}
_UNREACHABLE = {
    "_TIMED_OUT",
    "REQUEST_TIMED_OUT",
    "_TRANSPORT",
    "_ALL_BROKERS_DOWN",
    "_RESOLVE",
    "_WAIT_COORD",
}
_NOT_FOUND = {"UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_TOPIC", "_UNKNOWN_PARTITION", "UNKNOWN_TOPIC_ID"}
# a partition's leadership is moving or not yet known (just after a topic is created, or while a
# broker restarts): the request is asked again after a metadata refresh, within the timeout
_LEADER_MOVING = {
    "NOT_LEADER_FOR_PARTITION",
    "LEADER_NOT_AVAILABLE",
    "REPLICA_NOT_AVAILABLE",
    "OFFSET_NOT_AVAILABLE",
    "FENCED_LEADER_EPOCH",
    "UNKNOWN_LEADER_EPOCH",
}


class KafkaAccessDeniedError(KafkaConnectionError):
    """The cluster answered but refused the request: authentication failed or an ACL denies it."""


class KafkaTimeoutError(KafkaConnectionError):
    """No answer within the call's time bound (broker down, unreachable, or overloaded)."""


class TopicNotFoundError(SpecError):
    """A named topic does not exist (or this principal may not see it)."""

    def __init__(self, topics: list[str]) -> None:
        self.topics = topics
        super().__init__("topic", f"topic(s) not found: {', '.join(topics)}.", "create them or fix the name.")


@dataclass(frozen=True)
class TopicConfig:
    """The topic settings that decide what lag numbers mean.

    ``compacted``: offset lag is an upper bound of the records left (offsets are sparse) and the
    record at a committed offset may be gone. ``retention_ms`` -1 means unlimited.
    """

    topic: str
    cleanup_policy: tuple[str, ...]
    delete_retention_ms: int | None
    min_compaction_lag_ms: int | None
    retention_ms: int | None
    retention_bytes: int | None
    #: the largest record batch the broker accepts for the topic (Kafka's ``max.message.bytes``)
    max_message_bytes: int | None = None

    @property
    def compacted(self) -> bool:
        return "compact" in self.cleanup_policy

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "cleanup_policy": list(self.cleanup_policy),
            "delete_retention_ms": self.delete_retention_ms,
            "min_compaction_lag_ms": self.min_compaction_lag_ms,
            "retention_ms": self.retention_ms,
            "retention_bytes": self.retention_bytes,
            "max_message_bytes": self.max_message_bytes,
        }


@dataclass(frozen=True)
class TopicInfo:
    """A topic's id (a new id means the topic was deleted and recreated) and partition count."""

    topic: str
    topic_id: str
    partitions: int


@dataclass(frozen=True)
class GroupInfo:
    """A consumer group's state and which member host owns which partition (active members only)."""

    group: str
    state: str
    members: int
    owners: dict[TopicPartitionKey, str] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.members > 0


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


class KafkaAdmin:
    """One confluent-kafka ``AdminClient`` reused for several calls, each bounded by ``timeout``.

    Every method waits at most ``timeout`` seconds in total (not per partition) and raises a
    :class:`KafkaConnectionError` subclass naming the cause: :class:`KafkaTimeoutError` (no answer),
    :class:`KafkaAccessDeniedError` (authentication or ACL), or :class:`TopicNotFoundError`. Messages
    name the bootstrap servers, never a secret.

    :param config: librdkafka settings (``KafkaConnection.to_librdkafka()``) or a ``KafkaConnection``.
    :param timeout: the bound of each call, in seconds.

    Example::

        with KafkaAdmin(conn, timeout=5) as admin:
            ends = admin.end_offsets([("users", 0)], isolation="read_committed")
    """

    def __init__(self, config: Mapping[str, Any] | KafkaConnection, *, timeout: float = 10.0) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        if isinstance(config, KafkaConnection):
            config = config.to_librdkafka()
        self.config: dict[str, Any] = dict(config)
        self.timeout = timeout
        self._client: Any = None
        self._errors: list[Any] = []
        self._readers: dict[tuple[str, str], Any] = {}
        #: the first record lag evaluations found at or after a start offset with :meth:`record_reader`,
        #: kept while this admin is reused (one per partition and isolation, a record never changes at
        #: its offset): ``{(topic, partition, isolation): (start, found, monotonic time)}``
        self.first_records: dict[tuple[str, int, str], tuple[int, Any, float]] = {}

    @property
    def bootstrap_servers(self) -> str:
        return str(self.config.get("bootstrap.servers", "?"))

    def __repr__(self) -> str:  # the config holds resolved secrets: show only the address
        return f"KafkaAdmin(bootstrap_servers={self.bootstrap_servers!r}, timeout={self.timeout:g})"

    def __enter__(self) -> KafkaAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Drop the clients (librdkafka closes its connections when a handle is destroyed)."""
        self._client = None
        self.first_records = {}
        readers, self._readers = self._readers, {}
        for consumer in readers.values():
            consumer.close()

    def record_reader(self, isolation: Isolation) -> Any:
        """A ``Consumer`` for reading single records by ``assign`` (never subscribes nor commits, so
        its group is never joined), kept for reuse until :meth:`close`."""
        return self._consumer("records", isolation)

    def _consumer(self, use: str, isolation: Isolation) -> Any:
        """The kept consumer for ``use`` (reading records, or listing offsets) at ``isolation``."""
        if isolation not in ISOLATIONS:
            raise ValueError(f"isolation must be one of {ISOLATIONS}, not {isolation!r}")
        if (use, isolation) not in self._readers:
            from confluent_kafka import Consumer

            conf = {k: v for k, v in self.config.items() if not callable(v) and k != "logger"}
            conf.update(
                {
                    "group.id": READER_GROUP,
                    "enable.auto.commit": False,
                    "enable.auto.offset.store": False,
                    "enable.partition.eof": True,
                    "auto.offset.reset": "error",
                    "isolation.level": isolation,
                    "fetch.wait.max.ms": 10,
                    "socket.nagle.disable": True,
                    "max.partition.fetch.bytes": 65536,
                    "queued.max.messages.kbytes": 8192,
                    "logger": _LOG,
                    "error_cb": self._errors.append,
                    "socket.connection.setup.timeout.ms": max(1000, int(self.timeout * 1000)),
                }
            )
            self._readers[(use, isolation)] = Consumer(conf)
        return self._readers[(use, isolation)]

    @property
    def client(self) -> Any:
        if self._client is None:
            from confluent_kafka.admin import AdminClient

            shared = _shared_client(self.config)
            if shared is not None:  # inside shared_clients(): one client for the block
                self._errors = shared.errors
                if shared.client is not None:
                    self._client = shared.client
                    return self._client
            conf = {k: v for k, v in self.config.items() if not callable(v)}
            conf["error_cb"] = self._errors.append
            conf.setdefault("logger", _LOG)
            conf.setdefault("socket.connection.setup.timeout.ms", max(1000, int(self.timeout * 1000)))
            conf.setdefault("socket.nagle.disable", True)  # small requests: Nagle + delayed ACK add ~40 ms
            client = AdminClient(conf)
            try:
                # metadata first: a request queued on the bootstrap connection while librdkafka
                # replaces it by the broker's own fails with "Handle is terminating"
                client.list_topics(timeout=self.timeout)
            except BaseException as exc:
                self._client = client
                raise self.failure(exc, "read cluster metadata") from None
            self._client = client
            if shared is not None:
                shared.client = client
        return self._client

    # -- waiting and errors ------------------------------------------------------------------------
    def _wait(self, futures: Mapping[_K, Any], what: str, deadline: float | None = None) -> dict[_K, Any]:
        """Every future's result before ``deadline`` (monotonic), or a typed error."""
        end = deadline if deadline is not None else time.monotonic() + self.timeout
        out: dict[_K, Any] = {}
        try:
            for key, fut in futures.items():
                out[key] = fut.result(timeout=max(0.0, end - time.monotonic()))
        except BaseException as exc:
            raise self.failure(exc, what) from None
        return out

    def failure(self, exc: BaseException, what: str, topic: str | None = None) -> Exception:
        """The typed error for a failed call (also used for errors found inside results: ``topic`` is
        the topic the result is about, named when it is not found)."""
        from confluent_kafka import KafkaException

        if self._client is not None:
            self._client.poll(0)  # serve error callbacks: they tell authentication and TLS failures
        auth = [e for e in self._errors if e.name() in _DENIED]
        if auth:
            return KafkaAccessDeniedError(
                self._text(what, f"authentication failed ({auth[-1].str()}); {_AUTH_HINT}")
            )
        if isinstance(exc, concurrent.futures.TimeoutError):
            cause = _describe(self.bootstrap_servers, self._errors, "", self.timeout)
            return KafkaTimeoutError(f"{cause} (while trying to {what})")
        err: Any = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
        name = str(err.name()) if hasattr(err, "name") else ""
        detail = str(err.str()) if hasattr(err, "str") else str(exc)
        if name in _DENIED:
            user = self.config.get("sasl.username")
            who = f"User:{user}" if user else "the connection's principal"
            return KafkaAccessDeniedError(
                self._text(
                    what,
                    f"access denied to {who} ({detail}); grant {who} the operation (DESCRIBE for "
                    f"offsets and groups, DESCRIBE_CONFIGS for a topic's settings), or {_AUTH_HINT}",
                )
            )
        if name in _UNREACHABLE:
            cause = _describe(self.bootstrap_servers, self._errors, detail, self.timeout)
            return KafkaTimeoutError(f"{cause} (while trying to {what})")
        if name in _NOT_FOUND:
            return TopicNotFoundError([topic or f"one of those asked for (while trying to {what})"])
        if isinstance(exc, KafkaException | KafkaConnectionError | SpecError):
            return (
                exc
                if isinstance(exc, KafkaConnectionError | SpecError)
                else KafkaConnectionError(self._text(what, detail))
            )
        return KafkaConnectionError(self._text(what, f"{type(exc).__name__}: {exc}"))

    def _text(self, what: str, cause: str) -> str:
        return f"Cannot {what} at {self.bootstrap_servers}: {cause}."

    # -- topics ------------------------------------------------------------------------------------
    def describe_topics(self, topics: Iterable[str], *, missing_ok: bool = False) -> dict[str, TopicInfo]:
        """Topic id and partition count of each topic.

        :param missing_ok: leave missing topics out of the result instead of raising.
        :raises TopicNotFoundError: naming every missing topic.
        """
        from confluent_kafka import KafkaException, TopicCollection

        names = sorted(set(topics))
        if not names:
            return {}
        futures = self.client.describe_topics(TopicCollection(names), request_timeout=self.timeout)
        deadline = time.monotonic() + self.timeout
        out: dict[str, TopicInfo] = {}
        missing: list[str] = []
        for name, fut in futures.items():
            try:
                desc = fut.result(timeout=max(0.0, deadline - time.monotonic()))
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                if err is not None and hasattr(err, "name") and err.name() in _NOT_FOUND:
                    missing.append(name)
                    continue
                raise self.failure(exc, f"describe topic {name}", name) from None
            except BaseException as exc:
                raise self.failure(exc, f"describe topic {name}", name) from None
            out[name] = TopicInfo(name, str(desc.topic_id), len(desc.partitions))
        if missing and not missing_ok:
            raise TopicNotFoundError(sorted(missing))
        return out

    def partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        return {t: info.partitions for t, info in self.describe_topics(topics).items()}

    def topic_ids(self, topics: Iterable[str]) -> dict[str, str]:
        """Each topic's id: it changes when a topic is deleted and created again under the same name."""
        return {t: info.topic_id for t, info in self.describe_topics(topics).items()}

    def partitions(self, topics: Iterable[str]) -> list[TopicPartitionKey]:
        return [(t, p) for t, n in sorted(self.partition_counts(topics).items()) for p in range(n)]

    def topic_configs(self, topics: Iterable[str]) -> dict[str, TopicConfig]:
        """cleanup.policy, delete.retention.ms, min.compaction.lag.ms and retention of each topic."""
        from confluent_kafka.admin import ConfigResource, ResourceType  # type: ignore[attr-defined]

        resources = {t: ConfigResource(ResourceType.TOPIC, t) for t in sorted(set(topics))}
        if not resources:
            return {}
        futures = self.client.describe_configs(list(resources.values()), request_timeout=self.timeout)
        by_topic = {t: futures[r] for t, r in resources.items()}
        results = self._wait(by_topic, "describe topic configs")
        out: dict[str, TopicConfig] = {}
        for topic, entries in results.items():

            def value(key: str, entries: Any = entries) -> Any:
                entry = entries.get(key)
                return None if entry is None else entry.value

            policy = str(value("cleanup.policy") or "delete")
            out[topic] = TopicConfig(
                topic=topic,
                cleanup_policy=tuple(p.strip() for p in policy.split(",") if p.strip()),
                delete_retention_ms=_int_or_none(value("delete.retention.ms")),
                min_compaction_lag_ms=_int_or_none(value("min.compaction.lag.ms")),
                retention_ms=_int_or_none(value("retention.ms")),
                retention_bytes=_int_or_none(value("retention.bytes")),
                max_message_bytes=_int_or_none(value("max.message.bytes")),
            )
        return out

    # -- offsets -----------------------------------------------------------------------------------
    def _list_offsets(
        self,
        partitions: Iterable[TopicPartitionKey],
        timestamp: int,
        isolation: Isolation,
        what: str,
        deadline: float | None = None,
    ) -> dict[TopicPartitionKey, int]:
        """Kafka's ListOffsets for every partition at ``timestamp`` (Kafka's -2 earliest and -1 latest, or
        a time in ms), by the offsets consumer of ``isolation`` (the latest offset is the last stable
        one under ``read_committed``). The consumer's call takes the whole list with no future per
        partition (10,000 partitions in chunks: 57 ms, against 159 ms through the admin client's
        futures)."""
        from confluent_kafka import TopicPartition

        reader = self._consumer("offsets", isolation)
        end = deadline if deadline is not None else time.monotonic() + self.timeout
        out: dict[TopicPartitionKey, int] = {}
        for chunk in _chunks(list(partitions), OFFSETS_CHUNK):
            pending, pause = chunk, 0.02
            while pending:
                try:
                    found = reader.offsets_for_times(
                        [TopicPartition(t, p, timestamp) for t, p in pending],
                        timeout=max(0.001, end - time.monotonic()),
                    )
                except BaseException as exc:
                    if not (_leader_moving(exc) and time.monotonic() + pause < end):
                        raise self.failure(exc, what) from None
                    found = []
                again = []
                for tp in found:
                    if tp.error is None:
                        out[(tp.topic, tp.partition)] = int(tp.offset)
                    elif tp.error.name() in _LEADER_MOVING and time.monotonic() + pause < end:
                        again.append((tp.topic, tp.partition))
                    else:
                        raise self.failure(_exception(tp.error), what, tp.topic)
                pending = again if found else pending
                if pending:
                    time.sleep(pause)
                    pause = min(pause * 2, 0.5)
        return out

    def earliest_offsets(self, partitions: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """The log start offset of each partition (the same for both isolation levels)."""
        return self._list_offsets(partitions, _EARLIEST, "read_uncommitted", "list earliest offsets")

    def end_offsets(
        self, partitions: Iterable[TopicPartitionKey], *, isolation: Isolation
    ) -> dict[TopicPartitionKey, int]:
        """End offsets (exclusive): the last stable offset for ``read_committed``, else the high watermark."""
        return self._list_offsets(partitions, _LATEST, isolation, "list end offsets")

    def watermarks(
        self, partitions: Iterable[TopicPartitionKey], *, isolation: Isolation
    ) -> dict[TopicPartitionKey, tuple[int, int]]:
        """``(earliest, end)`` per partition, within one timeout."""
        parts = list(partitions)
        deadline = time.monotonic() + self.timeout
        lows = self._list_offsets(parts, _EARLIEST, "read_uncommitted", "list earliest offsets", deadline)
        highs = self._list_offsets(parts, _LATEST, isolation, "list end offsets", deadline)
        return {tp: (lows[tp], highs[tp]) for tp in parts}

    def offsets_for_times(
        self, partitions: Iterable[TopicPartitionKey], timestamp_ms: int, *, isolation: Isolation
    ) -> dict[TopicPartitionKey, int | None]:
        """The first offset whose record timestamp is >= ``timestamp_ms``; ``None`` when no record is
        that late."""
        found = self._list_offsets(partitions, int(timestamp_ms), isolation, "list offsets for a timestamp")
        return {tp: (off if off >= 0 else None) for tp, off in found.items()}

    # -- groups ------------------------------------------------------------------------------------
    def committed_offsets(
        self, group: str, partitions: Iterable[TopicPartitionKey] | None = None
    ) -> dict[TopicPartitionKey, int | None]:
        """A group's committed offsets. With ``partitions``, every one of them is in the result,
        ``None`` where the group never committed (or its offset expired). Without, only the
        partitions the group has committed offsets for."""
        return {
            k: (tp.offset if tp.offset >= 0 else None) for k, tp in self._committed(group, partitions).items()
        }

    def committed_metadata(self, group: str) -> dict[TopicPartitionKey, str]:
        """The metadata string of each offset the group committed ('' where it gave none)."""
        return {k: tp.metadata or "" for k, tp in self._committed(group, None).items() if tp.offset >= 0}

    def _committed(
        self, group: str, partitions: Iterable[TopicPartitionKey] | None
    ) -> dict[TopicPartitionKey, Any]:
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        what = f"read the committed offsets of group {group!r}"
        chunks: list[Any] = [None]
        if partitions is not None:
            chunks = [
                [TopicPartition(t, p) for t, p in c] for c in _chunks(list(partitions), GROUP_OFFSETS_CHUNK)
            ]
            if not chunks:
                return {}
        futures = {  # one group a request (the client's rule): the chunks in flight at once
            i: self.client.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group, chunk)], request_timeout=self.timeout
            )[group]
            for i, chunk in enumerate(chunks)
        }
        out: dict[TopicPartitionKey, Any] = {}
        for result in self._wait(futures, what).values():
            for tp in result.topic_partitions or []:
                if tp.error is not None:
                    raise self.failure(_exception(tp.error), what, tp.topic)
                out[(tp.topic, tp.partition)] = tp
        return out

    def describe_group(self, group: str) -> GroupInfo:
        """The group's state, active member count and partition owners (``host/client_id``)."""
        futures = self.client.describe_consumer_groups([group], request_timeout=self.timeout)
        desc = self._wait(futures, f"describe group {group!r}")[group]
        owners: dict[TopicPartitionKey, str] = {}
        for member in desc.members or []:
            assignment = getattr(member, "assignment", None)
            for tp in getattr(assignment, "topic_partitions", None) or []:
                owners[(tp.topic, tp.partition)] = f"{member.host}/{member.client_id}"
        state = getattr(desc.state, "name", str(desc.state))
        return GroupInfo(group=group, state=str(state), members=len(desc.members or []), owners=owners)


def _chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _leader_moving(exc: BaseException) -> bool:
    from confluent_kafka import KafkaException

    err: Any = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    return hasattr(err, "name") and err.name() in _LEADER_MOVING


def _exception(error: Any) -> Exception:
    from confluent_kafka import KafkaException

    exc: Exception = KafkaException(error)
    return exc
