"""Every option of Flink's ``upsert-kafka`` and ``kafka`` connectors and every metadata key, with what
it does here: the same as in Flink, differently (and how), or refused at validation (and the fix).

Validation refuses from this table (:func:`check_refused`), and ``upsert-kafka-ops docs options``
renders it with the formats' options (``formats.registry``) as docs/options.md. Nothing is accepted
and then ignored: an option this table does not list is an unknown option, refused as well.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from upsert_kafka_ops.errors import SpecError

Status = Literal["same", "differs", "refused"]
UPSERT = ("upsert-kafka",)
PLAIN = ("kafka",)
BOTH = ("upsert-kafka", "kafka")


@dataclass(frozen=True)
class Option:
    """A Flink option (``properties.*`` stands for a family) and what it does here."""

    key: str
    status: Status
    note: str
    connectors: tuple[str, ...] = BOTH
    #: for a refused option: how to do without it
    fix: str = "remove it."


_ONE_RUN = "each run reads the partitions the topic has when it starts"
_EXACTLY_ONCE = "it applies to 'exactly-once' delivery, which is refused (see sink.delivery-guarantee)"

CONNECTOR_OPTIONS: tuple[Option, ...] = (
    Option("connector", "same", "'upsert-kafka' (UpsertKafkaTable) or 'kafka' (KafkaTable)."),
    Option("topic", "same", "One topic, or a list 'a;b' to read several (a table written to needs one)."),
    Option("topic-pattern", "same", "A Java regex of topics to read (sources only, as in Flink)."),
    Option(
        "properties.bootstrap.servers", "same", "The brokers; a pipeline's connection may give them instead."
    ),
    Option(
        "properties.*",
        "same",
        "Passed to every Kafka client a run uses (Spark's reader and writer, the admin client). The "
        "security ones (security.protocol, sasl.*, ssl.*) set the table's connection over a pipeline "
        "connection's defaults (two different explicit values are an error naming both); their secrets "
        "(sasl.jaas.config, store and key passwords) are 'env:NAME' or 'file:/path' references. The "
        "properties the connector sets itself (serializers, enable.auto.commit, auto.offset.reset, "
        "partitioner.class, transactional.id) are refused. Batch reads default max.poll.records to 10000 "
        "and fetch.max.wait.ms to 10 (a bounded read has nothing to wait for; set either to override). "
        "Kerberos: sasl.mechanism GSSAPI with "
        "sasl.kerberos.service.name ('kafka' when unset) and a Krb5LoginModule sasl.jaas.config (keytab and "
        "principal; no secret, so a literal line is allowed); the offset, lag and admin clients need "
        "confluent-kafka built against a librdkafka with GSSAPI (make kerberos; docs/kerberos.md).",
    ),
    Option(
        "properties.connector.kerberos.*",
        "same",
        "Huawei DLI's Kerberos keys, as its connector pages write them: connector.kerberos.principal, "
        ".keytab and .krb5 (the krb5.conf) with connector.auth.open = 'true'. Keytab and krb5.conf are "
        "paths on every machine a client runs on (an obs:// or other remote file is refused: nothing is "
        "downloaded); one krb5.conf per process (KRB5_CONFIG, the JVM's java.security.krb5.conf).",
    ),
    Option("key.format", "same", "json, csv, raw, avro or avro-confluent (see the formats below)."),
    Option(
        "value.format", "same", "As key.format; a 'kafka' table also takes CDC formats (debezium-json, ...)."
    ),
    Option("format", "same", "The 'kafka' connector's short form of value.format.", PLAIN),
    Option("key.fields", "same", "The columns read from the key ('a;b').", PLAIN),
    Option("key.fields-prefix", "same", "Only with value.fields-include = 'EXCEPT_KEY', as in Flink."),
    Option("value.fields-include", "same", "ALL or EXCEPT_KEY."),
    Option(
        "scan.bounded.mode",
        "differs",
        "latest-offset, group-offsets, timestamp and specific-offsets end the read where Flink's do. "
        "'unbounded' (the default) reads up to the end offsets when the run starts: every run is a bounded "
        "batch, scheduled again for what comes later. A plain 'kafka' source with a bound is read in "
        "batch (a topic-to-topic job over it recomputes its query each run; a stream cannot stop at a bound).",
    ),
    Option(
        "scan.bounded.specific-offsets",
        "same",
        "'partition:0,offset:42;...' (one topic); a partition not listed ends at the committed offset of "
        "properties.group.id, else is not read; with no group.id that is an error, as in Flink.",
    ),
    Option("scan.bounded.timestamp-millis", "same", "The end: the first offset at or after this time."),
    Option(
        "scan.startup.mode",
        "differs",
        "earliest-offset, latest-offset, group-offsets (a partition without a committed offset follows "
        "properties.auto.offset.reset: earliest, latest or none, Flink's default, which fails the read), "
        "timestamp and specific-offsets start the read where Flink's do. A start applies to a read "
        "(read_append) and to a topic-to-topic job's stream when its checkpoint is new, as Flink's applies "
        "to a job started without state; a job that recomputes its query each run refuses a start other "
        "than earliest-offset. Unset means earliest-offset here (Flink's default is group-offsets).",
        PLAIN,
    ),
    Option(
        "scan.startup.specific-offsets",
        "same",
        "'partition:0,offset:42;...' (one topic); a partition not listed starts at the group's committed "
        "offset (properties.group.id), else at the earliest.",
        PLAIN,
    ),
    Option(
        "scan.startup.timestamp-millis", "same", "The start: the first offset at or after this time.", PLAIN
    ),
    Option(
        "scan.parallelism",
        "refused",
        "Spark sizes the read from the topic's partitions and the cluster's cores.",
        fix="remove it (Spark's own settings size the job).",
    ),
    Option(
        "scan.topic-partition-discovery.interval",
        "refused",
        f"There is no running source to discover for: {_ONE_RUN}.",
    ),
    Option("sink.parallelism", "same", "The number of Spark tasks writing."),
    Option(
        "sink.partitioner",
        "differs",
        "default (Kafka's partitioner: murmur2 of the key bytes; records without a key spread over the "
        "partitions), fixed (each writing task to one partition: task index modulo the partitions, as "
        "Flink's subtasks) or round-robin (one record to each partition in turn within a writing task). "
        "A partitioner class is refused: it runs inside Flink's sink.",
        PLAIN,
        "use default, fixed or round-robin.",
    ),
    Option(
        "sink.buffer-flush.max-rows",
        "differs",
        "Without the buffer options every change is written, in order, as in Flink. With both > 0 a write "
        "is one buffer: the last change of each key is written (Flink also flushes every max-rows keys "
        "and every interval, so a long stream keeps some intermediate changes there).",
        UPSERT,
    ),
    Option("sink.buffer-flush.interval", "differs", "See sink.buffer-flush.max-rows.", UPSERT),
    Option(
        "sink.delivery-guarantee",
        "differs",
        "'at-least-once' as in Flink; 'none' is written at least once too (idempotent producer, acks=all); "
        "'exactly-once' is refused: Kafka transactions are not implemented.",
    ),
    Option("sink.transactional-id-prefix", "refused", f"Not used: {_EXACTLY_ONCE}."),
    Option("sink.transaction-naming-strategy", "refused", f"Not used: {_EXACTLY_ONCE}."),
    Option(
        "sink.*",
        "refused",
        "Not an option of a plain 'kafka' table written here (write_append): it takes sink.partitioner, "
        "sink.parallelism and sink.delivery-guarantee.",
        PLAIN,
    ),
)

METADATA: tuple[Option, ...] = (
    Option("topic", "same", "STRING: the record's topic."),
    Option("partition", "same", "INT: the record's partition."),
    Option("offset", "same", "BIGINT: the record's offset."),
    Option("timestamp", "same", "TIMESTAMP_LTZ(3): the record's timestamp."),
    Option("timestamp-type", "same", "STRING: CreateTime or LogAppendTime."),
    Option("headers", "same", "MAP<STRING, BYTES>: the record's headers."),
    Option(
        "leader-epoch",
        "differs",
        "INT: NULL, always (Spark's Kafka source does not expose it); a NOT NULL declaration is refused.",
    ),
)


def _matches(pattern: str, key: str) -> bool:
    return key.startswith(pattern[:-1]) if pattern.endswith("*") else key == pattern


def connector_option(connector: str, key: str) -> Option | None:
    """The table's row for ``key`` of ``connector``: an exact key first, then a family (``sink.*``)."""
    rows = [o for o in CONNECTOR_OPTIONS if connector in o.connectors and _matches(o.key, key)]
    rows.sort(key=lambda o: o.key.endswith("*"))
    return rows[0] if rows else None


def check_refused(connector: str, options: Mapping[str, str]) -> None:
    """Raise for the first refused option given, naming it, why, and the fix."""
    for key in sorted(options):
        row = connector_option(connector, key)
        if row is not None and row.status == "refused":
            raise SpecError(key, f"is not supported by the {connector!r} connector here: {row.note}", row.fix)


def render() -> str:
    """The option matrix as Markdown (docs/options.md)."""
    from upsert_kafka_ops.formats.registry import FORMATS

    out = [
        "# Flink's options here",
        "",
        "Generated by `upsert-kafka-ops docs options` from the code that validates them; do not edit by hand.",
        "Every option of Flink's `upsert-kafka` and `kafka` connectors, every format option and every metadata",
        "key is listed with what it does here: **same** as in Flink, **differs** (how), or **refused** at",
        "validation with an error that names it and the fix. An option not listed is refused as unknown.",
        "",
        "## Connector options",
        "",
        "| option | connectors | status | here |",
        "|---|---|---|---|",
    ]
    for o in CONNECTOR_OPTIONS:
        out.append(f"| `{o.key}` | {', '.join(o.connectors)} | {o.status} | {_cell(o.note)} |")
    out += ["", "## Format options", "", "Given as `key.<format>.<option>` or `value.<format>.<option>`.", ""]
    out += ["| format | option | status | here |", "|---|---|---|---|"]
    for fmt, info in FORMATS.items():
        names = sorted(info.options | {f"{p}<key>" for p in info.option_prefixes}) or ["*"]
        if not info.supported:
            names = ["*"]
        for name in names:
            status, why = info.status(name)
            out.append(f"| {fmt} | `{name}` | {status} | {_cell(why)} |")
    out += ["", "## Metadata keys", "", "| key | status | here |", "|---|---|---|"]
    for m in METADATA:
        out.append(f"| `{m.key}` | {m.status} | {_cell(m.note)} |")
    return "\n".join(out) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
