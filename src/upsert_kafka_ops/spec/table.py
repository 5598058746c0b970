"""Table specs: an upsert-kafka table and a plain (append-only) Kafka table, with Flink's options.

Both accept Flink's option names as they are (:meth:`UpsertKafkaTable.from_options`) and Flink
``CREATE TABLE`` statements (:meth:`UpsertKafkaTable.from_flink_ddl`), and validate like Flink's
upsert-kafka factory; every error names the option and the fix.

Example::

    users = UpsertKafkaTable.from_flink_ddl('''
        CREATE TABLE users (
          user_id BIGINT, user_name STRING, region STRING,
          PRIMARY KEY (user_id) NOT ENFORCED
        ) WITH ('connector' = 'upsert-kafka', 'topic' = 'users',
                'properties.bootstrap.servers' = 'localhost:9092',
                'key.format' = 'json', 'value.format' = 'json')
    ''')
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from pydantic import Field, field_validator, model_validator

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.formats.registry import FORMATS
from upsert_kafka_ops.spec.base import SpecModel
from upsert_kafka_ops.spec.connection import check_table_sasl, check_table_secrets
from upsert_kafka_ops.spec.options import check_refused
from upsert_kafka_ops.spec.types import SqlType, parse_type

if TYPE_CHECKING:
    from upsert_kafka_ops.formats.codecs import Codec

#: Kafka client properties that the connector sets itself (Flink rejects or overrides them).
OWNED_CLIENT_PROPERTIES = frozenset(
    {
        "key.deserializer",
        "value.deserializer",
        "key.serializer",
        "value.serializer",
        "enable.auto.commit",
        "auto.offset.reset",
        "partitioner.class",
        "transactional.id",
    }
)
METADATA_KEYS = {
    "topic": "STRING",
    "partition": "INT",
    "headers": "MAP<STRING, BYTES>",
    "leader-epoch": "INT",
    "offset": "BIGINT",
    "timestamp": "TIMESTAMP_LTZ(3)",
    "timestamp-type": "STRING",
}
_DURATION = re.compile(
    r"^\s*(\d+)\s*(ms|milli|millis|millisecond|milliseconds|s|sec|secs|second|seconds|"
    r"min|m|minute|minutes|h|hour|hours|d|day|days)?\s*$",
    re.IGNORECASE,
)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(text: str, option: str) -> int:
    """Flink's duration text (``1s``, ``500 ms``, ``2min``; a bare number is milliseconds) in ms."""
    m = _DURATION.match(str(text))
    if not m:
        raise SpecError(option, f"{text!r} is not a duration.", "write e.g. '1s', '500ms' or '2min'.")
    unit = (m.group(2) or "ms").lower()
    key = "ms" if unit.startswith("milli") or unit == "ms" else "m" if unit.startswith("m") else unit[0]
    return int(m.group(1)) * _UNIT_MS[key]


class Column(SpecModel):
    """A table column: a name and a Flink SQL type; a METADATA column reads Kafka record metadata."""

    name: str = Field(description="Column name.")
    type: str = Field(description="Flink SQL type, e.g. BIGINT, DECIMAL(10, 2), TIMESTAMP(3), ROW<a INT>.")
    metadata: str | None = Field(
        default=None,
        description="For METADATA columns: the metadata key (topic, partition, offset, timestamp, ...).",
    )
    virtual: bool = Field(default=False, description="METADATA ... VIRTUAL: read-only, never written.")

    @field_validator("type")
    @classmethod
    def _canonical_type(cls, value: str) -> str:
        return parse_type(value).to_flink()

    @model_validator(mode="after")
    def _check_metadata(self) -> Column:
        if self.virtual and self.metadata is None:
            raise SpecError(
                f"columns.{self.name}.virtual",
                "VIRTUAL applies to METADATA columns only.",
                "set metadata (e.g. 'offset'), or drop virtual.",
            )
        if self.metadata is not None and self.metadata not in METADATA_KEYS:
            raise SpecError(
                f"columns.{self.name}.metadata",
                f"unknown metadata key {self.metadata!r}.",
                f"use one of {', '.join(METADATA_KEYS)}.",
            )
        if self.metadata == "leader-epoch" and not parse_type(self.type).nullable:
            raise SpecError(
                f"columns.{self.name}.type",
                "'leader-epoch' is NULL here: Spark's Kafka source does not expose a record's leader epoch, so a "
                "NOT NULL declaration could never hold.",
                "declare it without NOT NULL (INT), or leave the column out.",
            )
        return self

    @cached_property
    def sql_type(self) -> SqlType:
        return parse_type(self.type)


def _split_topics(value: Any) -> Any:
    if isinstance(value, str):
        return [t.strip() for t in value.split(";") if t.strip()]
    return value


def _enum_upper(value: Any) -> Any:
    """Flink matches enum option values case-insensitively ('except_key' is EXCEPT_KEY)."""
    return value.upper() if isinstance(value, str) else value


def _enum_lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


def _format_options(prefix: str, fmt: str, options: dict[str, str]) -> None:
    """Validate ``<prefix>.<fmt>.<option>`` keys against the format's known options."""
    info = FORMATS[fmt]
    head = f"{prefix}.{fmt}."
    for key in options:
        name = key[len(head) :]
        known = name in info.options or any(
            name.startswith(p) and len(name) > len(p) for p in info.option_prefixes
        )
        if not key.startswith(head) or not known:
            listed = sorted(
                [*(head + o for o in info.options), *(head + p + "<key>" for p in info.option_prefixes)]
            )
            raise SpecError(
                key,
                f"is not an option of the {prefix} format {fmt!r}.",
                f"{fmt} options are: {', '.join(listed)}.",
            )
    if fmt == "avro-confluent":
        from upsert_kafka_ops.formats.schema_registry import check_options

        check_options(prefix, {k[len(head) :]: v for k, v in options.items()})


def _check_key_prefix(prefix: str, fields_include: str, key_columns: list[str], what: str) -> None:
    """Flink's rules for ``key.fields-prefix``: only with EXCEPT_KEY, and on every key column."""
    if not prefix:
        return
    if fields_include == "ALL":
        raise SpecError(
            "key.fields-prefix",
            "A key prefix is not allowed when option 'value.fields-include' is set to 'ALL'.",
            "set 'value.fields-include' = 'EXCEPT_KEY' to avoid field overlaps.",
        )
    for column in key_columns:
        if not column.startswith(prefix):
            raise SpecError(
                "key.fields-prefix",
                f"All fields in {what} must be prefixed with '{prefix}' when option 'key.fields-prefix' is "
                f"set but field '{column}' is not prefixed.",
                f"rename the column to '{prefix}{column}'.",
            )


def _check_format(option: str, fmt: str, *, upsert: bool) -> None:
    if fmt not in FORMATS:
        raise SpecError(option, f"unknown format {fmt!r}.", f"use one of {', '.join(sorted(FORMATS))}.")
    info = FORMATS[fmt]
    if upsert and not info.insert_only:
        which = "key" if option.startswith("key") else "value"
        raise SpecError(
            option,
            f"'upsert-kafka' connector doesn't support '{fmt}' as {which} format, because '{fmt}' is not in "
            "insert-only mode.",
            "read a CDC topic with a plain KafkaTable source and write it to an upsert-kafka table.",
        )
    if option.startswith("key") and not info.insert_only:
        raise SpecError(
            option,
            f"'{fmt}' is a changelog format; a key format must be insert-only.",
            "use json, csv, raw or avro for the key, and the changelog format for the value.",
        )
    if not info.supported:
        raise SpecError(option, f"the {fmt!r} format is not supported by upsert-kafka-ops yet.")


class _KafkaTableBase(SpecModel):
    #: client properties the table may not set (see OWNED_CLIENT_PROPERTIES)
    _owned_properties: ClassVar[frozenset[str]] = OWNED_CLIENT_PROPERTIES

    name: str = Field(default="kafka_table", description="Table name (used in DDL and as a Spark view name).")
    columns: list[Column] = Field(min_length=1, description="Columns in declaration order.")
    topic: list[str] | None = Field(
        default=None, description="Topic, or a list of topics for sources ('a;b')."
    )
    topic_pattern: str | None = Field(default=None, description="Java regex of topics to read (sources).")
    properties: dict[str, str] = Field(
        default_factory=dict,
        description="Kafka client properties (Flink's properties.*, without the prefix).",
    )
    format_options: dict[str, str] = Field(
        default_factory=dict,
        description="Format options with Flink's full names, e.g. 'value.json.ignore-parse-errors': 'true'.",
    )

    _topic = field_validator("topic", mode="before")(lambda cls, v: _split_topics(v))

    def side_options(self, side: Literal["key", "value"]) -> dict[str, str]:
        """The key's or the value's format options without their ``<side>.<format>.`` prefix."""
        head = f"{side}.{getattr(self, f'{side}_format')}."
        return {k[len(head) :]: v for k, v in self.format_options.items() if k.startswith(head)}

    @model_validator(mode="after")
    def _check_common(self) -> _KafkaTableBase:
        names = [c.name for c in self.columns]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise SpecError("columns", f"duplicate column name(s): {', '.join(dupes)}.")
        if self.topic is not None and self.topic_pattern is not None:
            raise SpecError(
                "topic", "Option 'topic' and 'topic-pattern' shouldn't be set together.", "keep one."
            )
        if not self.topic and self.topic_pattern is None:
            raise SpecError(
                "topic",
                "Either 'topic' or 'topic-pattern' must be set.",
                "set 'topic' (one topic, or a list 'a;b') or 'topic-pattern' (a Java regex).",
            )
        check_table_secrets(self.properties)
        check_table_sasl(self.properties)
        for key in self.properties:
            if key in self._owned_properties:
                raise SpecError(
                    f"properties.{key}",
                    "is set by the connector itself (keys and values are bytes; offsets are managed per run).",
                    "remove it.",
                )
        return self

    @property
    def physical_columns(self) -> list[Column]:
        return [c for c in self.columns if c.metadata is None]

    @property
    def metadata_columns(self) -> list[Column]:
        return [c for c in self.columns if c.metadata is not None]

    def option(self, key: str, default: str | None = None) -> str | None:
        """A format option by its full Flink name (``value.json.ignore-parse-errors``)."""
        return self.format_options.get(key, default)


class UpsertKafkaTable(_KafkaTableBase):
    """A table backed by a compacted Kafka topic read as an upsert changelog (Flink's 'upsert-kafka')."""

    name: str = Field(
        default="upsert_table", description="Table name (used in DDL and as a Spark view name)."
    )
    primary_key: list[str] = Field(description="PRIMARY KEY columns, in declaration order: the Kafka key.")
    key_format: str = Field(description="Format of the Kafka key (key.format): json, csv, raw, avro.")
    value_format: str = Field(description="Format of the Kafka value (value.format): json, csv, raw, avro.")
    key_fields_prefix: str = Field(
        default="", description="key.fields-prefix: prefix of key column names, stripped in the key format."
    )
    value_fields_include: Literal["ALL", "EXCEPT_KEY"] = Field(
        default="ALL", description="value.fields-include: ALL (key columns also in the value) or EXCEPT_KEY."
    )
    sink_parallelism: int | None = Field(
        default=None, ge=1, description="sink.parallelism: Spark tasks writing."
    )
    sink_buffer_flush_max_rows: int = Field(
        default=0,
        ge=0,
        description="sink.buffer-flush.max-rows (with the interval): rows per producer flush.",
    )
    sink_buffer_flush_interval_ms: int = Field(
        default=0, ge=0, description="sink.buffer-flush.interval in ms (with max-rows)."
    )
    sink_delivery_guarantee: Literal["at-least-once", "none"] = Field(
        default="at-least-once", description="sink.delivery-guarantee; exactly-once is rejected (see docs)."
    )

    scan_bounded_mode: Literal[
        "unbounded", "latest-offset", "group-offsets", "timestamp", "specific-offsets"
    ] = Field(
        default="unbounded",
        description="scan.bounded.mode: the default end of a read ('unbounded' means the end offsets at the start "
        "of each run, since every run here is a bounded batch read).",
    )
    scan_bounded_specific_offsets: str | None = Field(
        default=None,
        description="scan.bounded.specific-offsets: 'partition:0,offset:42;partition:1,offset:300'.",
    )
    scan_bounded_timestamp_millis: int | None = Field(
        default=None,
        description="scan.bounded.timestamp-millis: end at the first record at or after this time.",
    )

    _value_fields_include = field_validator("value_fields_include", mode="before")(
        lambda cls, v: _enum_upper(v)
    )
    _scan_bounded_mode = field_validator("scan_bounded_mode", mode="before")(lambda cls, v: _enum_lower(v))

    @field_validator("sink_delivery_guarantee", mode="before")
    @classmethod
    def _no_exactly_once(cls, value: Any) -> Any:
        value = _enum_lower(value)
        if value == "exactly-once":
            raise SpecError(
                "sink.delivery-guarantee",
                "exactly-once is not available: Spark's Kafka writer has no transactions.",
                "use at-least-once (the default). Under upsert semantics a duplicate re-writes the same "
                "latest value for its key, so at-least-once delivery converges to the same table.",
            )
        return value

    @model_validator(mode="before")
    @classmethod
    def _key_columns_not_null(cls, data: Any) -> Any:
        """PRIMARY KEY columns are NOT NULL, as Flink's CREATE TABLE makes them (this shows in the
        Avro schema of the key and of a value that includes the key: a bare type, not a union)."""
        if not isinstance(data, dict) or not isinstance(data.get("primary_key"), list):
            return data
        keys = set(data["primary_key"])
        columns = []
        for c in data.get("columns") or []:
            fields = c.model_dump() if isinstance(c, Column) else c if isinstance(c, dict) else {}
            ctype = fields.get("type")
            if fields.get("name") in keys and fields.get("metadata") is None and isinstance(ctype, str):
                try:
                    strict = parse_type(ctype).with_nullable(False).to_flink()
                except SpecError:
                    strict = ctype  # the column's own validation names the problem
                c = (
                    c.model_copy(update={"type": strict})
                    if isinstance(c, Column)
                    else {**fields, "type": strict}
                )
            columns.append(c)
        return {**data, "columns": columns} if "columns" in data else data

    @model_validator(mode="after")
    def _check_upsert(self) -> UpsertKafkaTable:
        if not self.primary_key:
            raise SpecError(
                "primary_key",
                "'upsert-kafka' tables require to define a PRIMARY KEY constraint. The PRIMARY KEY specifies "
                "which columns should be read from or write to the Kafka message key.",
                "add PRIMARY KEY (col, ...) NOT ENFORCED.",
            )
        dupes = sorted({k for k in self.primary_key if self.primary_key.count(k) > 1})
        if dupes:
            raise SpecError(
                "primary_key",
                f"column(s) {', '.join(dupes)} appear twice in the PRIMARY KEY.",
                "list each once.",
            )
        physical = {c.name for c in self.physical_columns}
        for pk in self.primary_key:
            if pk not in physical:
                raise SpecError(
                    "primary_key",
                    f"Could not find the field '{pk}' in the table schema for usage in the key format. "
                    "A key field must be a regular, physical column.",
                    f"choose from: {', '.join(c.name for c in self.physical_columns)}.",
                )
        _check_key_prefix(
            self.key_fields_prefix, self.value_fields_include, self.primary_key, "the PRIMARY KEY"
        )
        if (self.sink_buffer_flush_max_rows > 0) != (self.sink_buffer_flush_interval_ms > 0):
            raise SpecError(
                "sink.buffer-flush.max-rows",
                "'sink.buffer-flush.max-rows' and 'sink.buffer-flush.interval' must be set to be greater than "
                "zero together to enable sink buffer flushing.",
                "set both, or neither.",
            )
        _check_position(
            self,
            "bounded",
            self.scan_bounded_mode,
            self.scan_bounded_timestamp_millis,
            self.scan_bounded_specific_offsets,
        )
        _check_format("key.format", self.key_format, upsert=True)
        _check_format("value.format", self.value_format, upsert=True)
        fmt_opts = {k: v for k, v in self.format_options.items() if k.startswith("key.")}
        _format_options("key", self.key_format, fmt_opts)
        _format_options(
            "value", self.value_format, {k: v for k, v in self.format_options.items() if k not in fmt_opts}
        )
        self.key_codec(), self.value_codec()  # a format's option values and column types, checked now
        return self

    def bounded_offsets(self) -> dict[int, int]:
        """``scan.bounded.specific-offsets`` as {partition: end offset (exclusive)}."""
        return specific_offsets(self.scan_bounded_specific_offsets or "", "scan.bounded.specific-offsets")

    def start_position(self) -> str:
        """Where a read starts: an upsert source always reads from the earliest offset, as in Flink."""
        return "earliest"

    def end_position(self) -> Any:
        """Where a read ends by ``scan.bounded.*``, as :func:`~upsert_kafka_ops.engine.bounds.resolve_bounds`
        takes it."""
        return _end_position(
            self.scan_bounded_mode, self.bounded_offsets, self.scan_bounded_timestamp_millis, self.properties
        )

    @property
    def key_columns(self) -> list[Column]:
        by_name = {c.name: c for c in self.columns}
        return [by_name[k] for k in self.primary_key]

    @property
    def value_columns(self) -> list[Column]:
        """Columns encoded in the Kafka value (all physical ones, or those not in the key)."""
        if self.value_fields_include == "ALL":
            return self.physical_columns
        return [c for c in self.physical_columns if c.name not in self.primary_key]

    def key_field_name(self, column: str) -> str:
        """The field name of a key column inside the key format (the prefix stripped)."""
        return column[len(self.key_fields_prefix) :]

    def key_codec(self) -> Codec:
        """The key format's codec: the key columns, named without the prefix and NOT NULL (Flink makes
        PRIMARY KEY columns NOT NULL, so an avro key is a plain record, not a union)."""
        fields = [(self.key_field_name(c.name), c.sql_type.with_nullable(False)) for c in self.key_columns]
        return _codec(self, "key", self.key_format, fields)

    def value_codec(self) -> Codec:
        """The value format's codec: every physical column, or those not in the key."""
        return _codec(self, "value", self.value_format, [(c.name, c.sql_type) for c in self.value_columns])

    # -- Flink options -----------------------------------------------------------------------------
    @classmethod
    def from_options(
        cls,
        options: dict[str, str],
        columns: list[Column] | list[dict[str, Any]],
        primary_key: list[str],
        name: str = "upsert_table",
    ) -> UpsertKafkaTable:
        """Build from Flink's option map (``'connector' = 'upsert-kafka'`` and friends)."""
        return _validate_options(
            cls, {"name": name, "columns": columns, "primary_key": primary_key, **_upsert_fields(options)}
        )

    @classmethod
    def from_flink_ddl(cls, sql: str) -> UpsertKafkaTable:
        """Build from a Flink ``CREATE TABLE ... WITH ('connector' = 'upsert-kafka', ...)`` statement."""
        from upsert_kafka_ops.spec.ddl import parse_create_table

        ddl = parse_create_table(sql)
        connector = ddl.options.get("connector")
        if connector != "upsert-kafka":
            raise SpecError(
                "connector", f"is {connector!r}, not 'upsert-kafka'.", "use KafkaTable.from_flink_ddl."
            )
        columns = [_ddl_column(c) for c in ddl.columns]
        return cls.from_options(dict(ddl.options), columns, list(ddl.primary_key or []), name=ddl.name)

    def to_options(self) -> dict[str, str]:
        """Flink's option map for this table."""
        out: dict[str, str] = {"connector": "upsert-kafka"}
        out.update(_topic_options(self))
        out.update({f"properties.{k}": v for k, v in self.properties.items()})
        out["key.format"] = self.key_format
        out["value.format"] = self.value_format
        if self.key_fields_prefix:
            out["key.fields-prefix"] = self.key_fields_prefix
        if self.value_fields_include != "ALL":
            out["value.fields-include"] = self.value_fields_include
        if self.sink_parallelism is not None:
            out["sink.parallelism"] = str(self.sink_parallelism)
        if self.sink_buffer_flush_max_rows:
            out["sink.buffer-flush.max-rows"] = str(self.sink_buffer_flush_max_rows)
            out["sink.buffer-flush.interval"] = f"{self.sink_buffer_flush_interval_ms}ms"
        if self.sink_delivery_guarantee != "at-least-once":
            out["sink.delivery-guarantee"] = self.sink_delivery_guarantee
        if self.scan_bounded_mode != "unbounded":
            out["scan.bounded.mode"] = self.scan_bounded_mode
        if self.scan_bounded_specific_offsets is not None:
            out["scan.bounded.specific-offsets"] = self.scan_bounded_specific_offsets
        if self.scan_bounded_timestamp_millis is not None:
            out["scan.bounded.timestamp-millis"] = str(self.scan_bounded_timestamp_millis)
        out.update(self.format_options)
        return out

    def to_flink_ddl(self) -> str:
        """A Flink ``CREATE TABLE`` statement for this table."""
        return _ddl(self.name, self.columns, self.primary_key, self.to_options())


class KafkaTable(_KafkaTableBase):
    """A plain append-only Kafka topic (Flink's 'kafka' connector), e.g. an input of a topic-to-topic job."""

    #: 'auto.offset.reset' says where a 'group-offsets' start begins (checked in _check_scan)
    _owned_properties: ClassVar[frozenset[str]] = OWNED_CLIENT_PROPERTIES - {"auto.offset.reset"}

    value_format: str = Field(
        description="Format of the value (format / value.format): json, csv, raw, avro."
    )
    key_format: str | None = Field(
        default=None, description="Format of the key (key.format), if the key is read."
    )
    key_fields: list[str] = Field(default_factory=list, description="key.fields: columns read from the key.")
    key_fields_prefix: str = Field(default="", description="key.fields-prefix.")
    value_fields_include: Literal["ALL", "EXCEPT_KEY"] = Field(
        default="ALL", description="value.fields-include."
    )
    scan_options: dict[str, str] = Field(
        default_factory=dict,
        description="Flink's scan.* options (startup mode, bounds), kept for the DDL round trip.",
    )
    sink_options: dict[str, str] = Field(
        default_factory=dict, description="Flink's sink.* options, kept as given."
    )

    _key_fields = field_validator("key_fields", mode="before")(lambda cls, v: _split_topics(v))
    _value_fields_include = field_validator("value_fields_include", mode="before")(
        lambda cls, v: _enum_upper(v)
    )

    @model_validator(mode="after")
    def _check_plain(self) -> KafkaTable:
        check_refused("kafka", {**self.scan_options, **self.sink_options})
        unknown = sorted(set(self.scan_options) - {*_STARTUP, *_BOUNDED}) + sorted(
            set(self.sink_options) - set(_PLAIN_SINK)
        )
        if unknown:
            raise SpecError(unknown[0], "is not an option of the 'kafka' connector.", "remove it.")
        self._check_scan()
        self._check_sink()
        _check_format("value.format", self.value_format, upsert=False)
        if self.key_format is not None:
            _check_format("key.format", self.key_format, upsert=False)
            if not self.key_fields:
                raise SpecError(
                    "key.fields", "is required when 'key.format' is set.", "list the key columns: 'a;b'."
                )
        elif self.key_fields:
            raise SpecError(
                "key.fields",
                "The option 'key.fields' can only be declared if a key format is defined by using 'key.format'.",
                "set 'key.format', or remove 'key.fields'.",
            )
        physical = {c.name for c in self.physical_columns}
        for k in self.key_fields:
            if k not in physical:
                raise SpecError("key.fields", f"column {k!r} is not a physical column.")
        _check_key_prefix(self.key_fields_prefix, self.value_fields_include, self.key_fields, "'key.fields'")
        key_opts = {k: v for k, v in self.format_options.items() if k.startswith("key.")}
        if key_opts and self.key_format is None:
            raise SpecError(
                min(key_opts), "is a key format option but 'key.format' is not set.", "remove it."
            )
        if self.key_format is not None:
            _format_options("key", self.key_format, key_opts)
        _format_options(
            "value", self.value_format, {k: v for k, v in self.format_options.items() if k not in key_opts}
        )
        if FORMATS[self.value_format].insert_only:  # a CDC format's envelope is decoded by engine.cdc
            self.key_codec(), self.value_codec()
        return self

    def _scan(self, key: str, default: str | None = None) -> str | None:
        value = self.scan_options.get(key, default)
        return None if value is None else value.strip()

    def _check_scan(self) -> None:
        """Flink's rules for ``scan.startup.*`` and ``scan.bounded.*`` (KafkaConnectorOptionsUtil)."""
        for option, modes in (("scan.startup.mode", STARTUP_MODES), ("scan.bounded.mode", BOUNDED_MODES)):
            mode = (self._scan(option) or modes[0]).lower()
            if mode not in modes:
                raise SpecError(option, f"Invalid value '{mode}'.", f"use one of {', '.join(modes)}.")
            side = option.split(".")[1]
            for used_by, extra in (
                ("timestamp", "timestamp-millis"),
                ("specific-offsets", "specific-offsets"),
            ):
                if mode != used_by and self._scan(f"scan.{side}.{extra}") is not None:
                    raise SpecError(
                        f"scan.{side}.{extra}",
                        f"is used only in '{used_by}' {side} mode, and '{option}' is '{mode}'.",
                        f"set '{option}' = '{used_by}', or remove it.",
                    )
            stamp = self._scan(f"scan.{side}.timestamp-millis")
            _check_position(self, side, mode, stamp, self._scan(f"scan.{side}.specific-offsets"))
            if mode == "timestamp" and not (stamp or "").isdigit():
                raise SpecError(
                    f"scan.{side}.timestamp-millis",
                    f"'{stamp}' is not a number of milliseconds.",
                    "give epoch milliseconds, e.g. 1767225600000.",
                )
        reset = self.properties.get("auto.offset.reset")
        if reset is not None and (self.startup_mode != "group-offsets" or reset.lower() not in OFFSET_RESETS):
            raise SpecError(
                "properties.auto.offset.reset",
                f"'{reset}': it says where a 'group-offsets' start begins in a partition the group has no "
                f"committed offset for ({', '.join(OFFSET_RESETS)}); other start modes fix the start themselves "
                "(an unset 'scan.startup.mode' is 'earliest-offset' here, where Flink's default is 'group-offsets').",
                "remove it, or set 'scan.startup.mode' = 'group-offsets'.",
            )

    def _check_sink(self) -> None:
        partitioner = self.sink_partitioner
        if partitioner not in SINK_PARTITIONERS:
            raise SpecError(
                "sink.partitioner",
                f"'{partitioner}': a partitioner class runs inside Flink's sink; Spark's Kafka writer takes "
                "a partition per record instead.",
                f"use one of {', '.join(SINK_PARTITIONERS)}.",
            )
        parallelism = self.sink_options.get("sink.parallelism")
        if parallelism is not None and not (parallelism.strip().isdigit() and int(parallelism) > 0):
            raise SpecError(
                "sink.parallelism", f"'{parallelism}' is not a positive whole number.", "e.g. '4'."
            )
        guarantee = self.sink_options.get("sink.delivery-guarantee", "at-least-once").strip().lower()
        if guarantee not in ("at-least-once", "none"):
            raise SpecError(
                "sink.delivery-guarantee",
                f"'{guarantee}': Spark's Kafka writer has no transactions, so only 'at-least-once' (and 'none', "
                "written at least once too) can be kept."
                if guarantee == "exactly-once"
                else f"Invalid value '{guarantee}'.",
                "use 'at-least-once'.",
            )

    @property
    def sink_partitioner(self) -> str:
        """``sink.partitioner``: default (Kafka's partitioner: the key's hash, or spread when there is no
        key), fixed (each writing task to one partition) or round-robin."""
        return self.sink_options.get("sink.partitioner", "default").strip()

    @property
    def sink_parallelism(self) -> int | None:
        value = self.sink_options.get("sink.parallelism")
        return int(value) if value else None

    @property
    def startup_mode(self) -> str:
        """``scan.startup.mode``; unset is 'earliest-offset' here (Flink's default is 'group-offsets')."""
        return (self._scan("scan.startup.mode") or "earliest-offset").lower()

    def start_position(self) -> str | StartAt:
        """Where a read starts by ``scan.startup.*``: 'earliest', 'latest', or a :class:`StartAt`."""
        mode = self.startup_mode
        if mode in ("earliest-offset", "latest-offset"):
            return mode.split("-")[0]
        stamp = self._scan("scan.startup.timestamp-millis")
        text = self._scan("scan.startup.specific-offsets")
        return StartAt(
            mode=mode,
            timestamp_ms=int(stamp) if mode == "timestamp" and stamp else None,
            offsets=specific_offsets(text, "scan.startup.specific-offsets")
            if mode == "specific-offsets" and text
            else {},
            group=self.properties.get("group.id"),
            reset=self.properties.get("auto.offset.reset", "none").lower(),
        )

    def end_position(self) -> Any:
        """Where a read ends by ``scan.bounded.*`` (see :meth:`UpsertKafkaTable.end_position`)."""
        mode = (self._scan("scan.bounded.mode") or "unbounded").lower()
        stamp = self._scan("scan.bounded.timestamp-millis")
        return _end_position(
            mode,
            lambda: specific_offsets(
                self._scan("scan.bounded.specific-offsets") or "", "scan.bounded.specific-offsets"
            ),
            int(stamp) if stamp else None,
            self.properties,
        )

    @property
    def value_fields(self) -> list[Column]:
        """The physical columns the value format holds (all, or those not in ``key.fields``)."""
        keys = set(self.key_fields)
        return [c for c in self.physical_columns if self.value_fields_include == "ALL" or c.name not in keys]

    def key_codec(self) -> Codec | None:
        """The key format's codec over ``key.fields`` (named without the prefix), if a key is read."""
        if self.key_format is None:
            return None
        by_name = {c.name: c for c in self.columns}
        fields = [(k[len(self.key_fields_prefix) :], by_name[k].sql_type) for k in self.key_fields]
        return _codec(self, "key", self.key_format, fields)

    def value_codec(self) -> Codec:
        return _codec(self, "value", self.value_format, [(c.name, c.sql_type) for c in self.value_fields])

    @classmethod
    def from_options(
        cls, options: dict[str, str], columns: list[Column] | list[dict[str, Any]], name: str = "kafka_table"
    ) -> KafkaTable:
        opts = dict(options)
        connector = opts.pop("connector", "kafka")
        if connector != "kafka":
            raise SpecError("connector", f"is {connector!r}, not 'kafka'.")
        data: dict[str, Any] = {"name": name, "columns": columns}
        _common_fields(opts, data)
        fmt = opts.pop("value.format", None) or opts.pop("format", None)
        if fmt is None:
            raise SpecError("value.format", "is required ('format' or 'value.format').")
        data["value_format"] = fmt
        for opt, field in (
            ("key.format", "key_format"),
            ("key.fields", "key_fields"),
            ("key.fields-prefix", "key_fields_prefix"),
            ("value.fields-include", "value_fields_include"),
        ):
            if opt in opts:
                data[field] = opts.pop(opt)
        data["scan_options"] = {k: opts.pop(k) for k in list(opts) if k.startswith("scan.")}
        data["sink_options"] = {k: opts.pop(k) for k in list(opts) if k.startswith("sink.")}
        key_fmt = data.get("key_format")
        fmt_opts = {}
        for k in list(opts):
            bare = k.startswith(f"{fmt}.")
            if bare or k.startswith(f"value.{fmt}.") or (key_fmt and k.startswith(f"key.{key_fmt}.")):
                fmt_opts["value." + k if bare else k] = opts.pop(k)
        data["format_options"] = fmt_opts
        if opts:
            raise SpecError(
                sorted(opts)[0],
                "Unsupported option for the 'kafka' connector.",
                f"remove: {', '.join(sorted(opts))}.{_dew_hint(opts)}",
            )
        return _validate_options(cls, data)

    @classmethod
    def from_flink_ddl(cls, sql: str) -> KafkaTable:
        from upsert_kafka_ops.spec.ddl import parse_create_table

        ddl = parse_create_table(sql)
        if ddl.primary_key:
            raise SpecError(
                "primary_key", "a plain 'kafka' table has no PRIMARY KEY.", "use UpsertKafkaTable."
            )
        return cls.from_options(dict(ddl.options), [_ddl_column(c) for c in ddl.columns], name=ddl.name)

    def to_options(self) -> dict[str, str]:
        out: dict[str, str] = {"connector": "kafka"}
        out.update(_topic_options(self))
        out.update({f"properties.{k}": v for k, v in self.properties.items()})
        out["value.format"] = self.value_format
        if self.key_format:
            out["key.format"] = self.key_format
            out["key.fields"] = ";".join(self.key_fields)
        if self.key_fields_prefix:
            out["key.fields-prefix"] = self.key_fields_prefix
        if self.value_fields_include != "ALL":
            out["value.fields-include"] = self.value_fields_include
        out.update(self.scan_options)
        out.update(self.sink_options)
        out.update(self.format_options)
        return out

    def to_flink_ddl(self) -> str:
        return _ddl(self.name, self.columns, [], self.to_options())


# -- helpers ---------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class StartAt:
    """Where a plain table's read starts, by its ``scan.startup.*`` options: ``mode`` 'timestamp' (the
    first offset at or after ``timestamp_ms``), 'group-offsets' (``group``'s committed offsets; a partition
    without one follows ``reset``: earliest, latest, or none, which fails) or 'specific-offsets'
    (``offsets`` per partition; a partition not listed starts at ``group``'s committed offset if any,
    else at the earliest, as Flink's specified-offsets initializer does)."""

    mode: str
    timestamp_ms: int | None = None
    offsets: dict[int, int] = dataclasses.field(default_factory=dict)
    group: str | None = None
    reset: str = "none"

    def __post_init__(self) -> None:
        if self.mode not in ("timestamp", "group-offsets", "specific-offsets"):
            raise SpecError(
                "scan.startup.mode",
                f"'{self.mode}' is not a start StartAt describes.",
                "use 'earliest' or 'latest' for those; StartAt takes timestamp, group-offsets or specific-offsets.",
            )
        if self.mode == "timestamp" and self.timestamp_ms is None:
            raise SpecError(
                "scan.startup.timestamp-millis", "is required in 'timestamp' startup mode but missing."
            )
        if self.mode == "group-offsets" and not self.group:
            raise SpecError("properties.group.id", "is required in 'group-offsets' startup mode.", "set it.")
        if self.reset not in OFFSET_RESETS:
            raise SpecError(
                "properties.auto.offset.reset",
                f"Invalid value '{self.reset}'.",
                f"use one of {', '.join(OFFSET_RESETS)}.",
            )


STARTUP_MODES = ("earliest-offset", "latest-offset", "group-offsets", "timestamp", "specific-offsets")
BOUNDED_MODES = ("unbounded", "latest-offset", "group-offsets", "timestamp", "specific-offsets")
#: what ``properties.auto.offset.reset`` may say for a 'group-offsets' start (Flink's default: none)
OFFSET_RESETS = ("earliest", "latest", "none")
_STARTUP = ("scan.startup.mode", "scan.startup.specific-offsets", "scan.startup.timestamp-millis")
_PLAIN_SINK = ("sink.partitioner", "sink.parallelism", "sink.delivery-guarantee")
SINK_PARTITIONERS = ("default", "fixed", "round-robin")


def specific_offsets(text: str, option: str) -> dict[int, int]:
    """Flink's ``'partition:0,offset:42;partition:1,offset:300'`` as {partition: offset}."""
    out: dict[int, int] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        m = re.fullmatch(r"partition:(\d+),offset:(\d+)", part.replace(" ", ""))
        if not m:
            raise SpecError(
                option,
                f"should follow the format 'partition:0,offset:42;partition:1,offset:300', but is '{text}'.",
            )
        out[int(m.group(1))] = int(m.group(2))
    return out


@dataclasses.dataclass(frozen=True)
class StopAt:
    """Where a read ends by ``scan.bounded.specific-offsets``: ``offsets`` per partition (exclusive); a
    partition not listed ends at ``group``'s committed offset if any, else at the earliest (it is not
    read), as Flink's specified-offsets initializer does; without a group it is an error, as in Flink."""

    offsets: dict[int, int]
    group: str | None = None


#: Where a read ends (``None``: the table's own ``scan.bounded.*``): ``latest`` (fixed as the read
#: starts), a time, ``{"timestamp_ms": N}``, a consumer group's committed offsets
#: (``{"group": name}``), a table's bounded mode (:class:`StopAt`), or offsets by
#: ``(topic, partition)`` or ``{topic: {partition: offset}}``.
ReadEnd = Literal["latest"] | datetime | StopAt | Mapping[Any, Any] | None


def _check_position(table: _KafkaTableBase, side: str, mode: str, stamp: object, offsets: str | None) -> None:
    """Flink's rules for where one side of a read (``side``: startup or bounded) is in ``mode``: the
    option that mode needs is there, and specific offsets name one topic's partitions."""
    if mode == "timestamp" and stamp is None:
        raise SpecError(
            f"scan.{side}.timestamp-millis", f"is required in 'timestamp' {side} mode but missing.", "set it."
        )
    if mode == "specific-offsets":
        if offsets is None:
            raise SpecError(
                f"scan.{side}.specific-offsets",
                f"is required in 'specific-offsets' {side} mode but missing.",
                "set it, e.g. 'partition:0,offset:42;partition:1,offset:300'.",
            )
        if table.topic_pattern is not None or len(table.topic or []) != 1:
            raise SpecError(
                f"scan.{side}.specific-offsets",
                "Currently Kafka source only supports specific offset for single topic.",
                f"set a single 'topic', or use another 'scan.{side}.mode'.",
            )
        specific_offsets(offsets, f"scan.{side}.specific-offsets")
    if mode == "group-offsets" and "group.id" not in table.properties:
        raise SpecError("properties.group.id", f"is required in 'group-offsets' {side} mode.", "set it.")


def _end_position(mode: str, offsets: Any, timestamp_ms: int | None, properties: dict[str, str]) -> Any:
    if mode == "timestamp":
        return {"timestamp_ms": timestamp_ms}
    if mode == "specific-offsets":
        return StopAt(offsets(), properties.get("group.id"))
    if mode == "group-offsets":
        return {"group": properties["group.id"]}
    return "latest"


UPSERT_OPTIONS = {
    "key.format": "key_format",
    "value.format": "value_format",
    "key.fields-prefix": "key_fields_prefix",
    "value.fields-include": "value_fields_include",
    "sink.parallelism": "sink_parallelism",
    "sink.buffer-flush.max-rows": "sink_buffer_flush_max_rows",
    "sink.delivery-guarantee": "sink_delivery_guarantee",
}
_BOUNDED = ("scan.bounded.mode", "scan.bounded.specific-offsets", "scan.bounded.timestamp-millis")
_UPSERT_OTHER = ("sink.buffer-flush.interval", *_BOUNDED)


_T = TypeVar("_T", bound=_KafkaTableBase)
#: Flink option of each field, so that errors from :meth:`from_options` name the option given.
_OPTION_OF_FIELD = {field: opt for opt, field in UPSERT_OPTIONS.items()} | {
    "topic_pattern": "topic-pattern",
    "sink_buffer_flush_interval_ms": "sink.buffer-flush.interval",
    "scan_bounded_mode": "scan.bounded.mode",
    "scan_bounded_specific_offsets": "scan.bounded.specific-offsets",
    "scan_bounded_timestamp_millis": "scan.bounded.timestamp-millis",
    "key_fields": "key.fields",
}


def _validate_options(cls: type[_T], data: dict[str, Any]) -> _T:
    try:
        return cls.model_validate(data)
    except SpecError as exc:
        option = _OPTION_OF_FIELD.get(exc.field)
        if option is None:
            raise
        error = SpecError(option, exc.message, exc.fix)
    raise error


def _common_fields(opts: dict[str, str], data: dict[str, Any]) -> None:
    if "topic" in opts:
        data["topic"] = opts.pop("topic")
    if "topic-pattern" in opts:
        data["topic_pattern"] = opts.pop("topic-pattern")
    data["properties"] = {
        k[len("properties.") :]: opts.pop(k) for k in list(opts) if k.startswith("properties.")
    }


def _upsert_fields(options: dict[str, str]) -> dict[str, Any]:
    opts = {str(k): str(v) for k, v in options.items()}
    connector = opts.pop("connector", "upsert-kafka")
    if connector != "upsert-kafka":
        raise SpecError("connector", f"is {connector!r}, not 'upsert-kafka'.")
    if opts.get("sink.delivery-guarantee", "").lower() != "exactly-once":  # else that refusal explains
        check_refused("upsert-kafka", opts)
    else:
        for key in ("sink.transactional-id-prefix", "sink.transaction-naming-strategy"):
            opts.pop(key, None)
    data: dict[str, Any] = {}
    _common_fields(opts, data)
    for opt, field in UPSERT_OPTIONS.items():
        if opt in opts:
            data[field] = opts.pop(opt)
    if "sink.buffer-flush.interval" in opts:
        data["sink_buffer_flush_interval_ms"] = parse_duration_ms(
            opts.pop("sink.buffer-flush.interval"), "sink.buffer-flush.interval"
        )
    for opt, field in (
        ("scan.bounded.mode", "scan_bounded_mode"),
        ("scan.bounded.specific-offsets", "scan_bounded_specific_offsets"),
        ("scan.bounded.timestamp-millis", "scan_bounded_timestamp_millis"),
    ):
        if opt in opts:
            data[field] = opts.pop(opt)
    key_fmt, value_fmt = data.get("key_format"), data.get("value_format")
    fmt_keys = [
        k
        for k in opts
        if (key_fmt and k.startswith(f"key.{key_fmt}."))
        or (value_fmt and k.startswith(f"value.{value_fmt}."))
    ]
    data["format_options"] = {k: opts.pop(k) for k in fmt_keys}
    for key in ("key.format", "value.format"):
        if key.split(".")[0] + "_format" not in data:
            raise SpecError(key, "is required.", "set e.g. 'json', 'csv', 'raw' or 'avro'.")
    if opts:
        supported = sorted(
            [
                "connector",
                "topic",
                "topic-pattern",
                "properties.*",
                *UPSERT_OPTIONS,
                *_UPSERT_OTHER,
                f"key.{key_fmt}.*",
                f"value.{value_fmt}.*",
            ]
        )
        raise SpecError(
            ", ".join(sorted(opts)),
            "Unsupported options found for 'upsert-kafka'.",
            f"remove them. Supported options: {', '.join(supported)}.{_dew_hint(opts)}",
        )
    return data


def _dew_hint(options: dict[str, str]) -> str:
    """What to write instead of Huawei DLI's ``dew.*`` keys (secrets kept in its DEW service)."""
    if not any(k.startswith("dew.") for k in options):
        return ""
    return (
        " The dew.* keys fetch secrets from Huawei DLI's DEW service, which is not used here: write the "
        "secret property itself as a reference, e.g. 'properties.ssl.truststore.password' = 'env:TRUST_PASSWORD' "
        "(or 'file:/path')."
    )


def _codec(table: _KafkaTableBase, side: Literal["key", "value"], fmt: str, fields: list[Any]) -> Codec:
    """``make_codec`` for one side of ``table``; its errors name the side's option (``value.json.x``)."""
    from upsert_kafka_ops.formats.codecs import make_codec

    try:
        return make_codec(fmt, fields, table.side_options(side), tuple(table.topic or ()), side)
    except SpecError as exc:
        if exc.field == fmt or exc.field.startswith(f"{fmt}."):
            raise SpecError(f"{side}.{exc.field}", exc.message, exc.fix) from None
        raise


def _topic_options(table: _KafkaTableBase) -> dict[str, str]:
    if table.topic_pattern is not None:
        return {"topic-pattern": table.topic_pattern}
    return {"topic": ";".join(table.topic or [])}


def _ddl_column(c: Any) -> dict[str, Any]:
    return {"name": c.name, "type": c.type.to_flink(), "metadata": c.metadata_key, "virtual": c.virtual}


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _literal(text: str) -> str:
    """A SQL character literal; one with control characters as a Unicode literal (``U&'\\0001'``)."""
    if all(c.isprintable() for c in text):
        return "'" + text.replace("'", "''") + "'"
    return "U&'" + "".join(map(_unicode_char, text)).replace("'", "''") + "'"


def _unicode_char(c: str) -> str:
    if c == "\\":
        return "\\\\"
    if c.isprintable():
        return c
    return f"\\{ord(c):04X}" if ord(c) <= 0xFFFF else f"\\+{ord(c):06X}"


def _ddl(name: str, columns: list[Column], primary_key: list[str], options: dict[str, str]) -> str:
    lines = []
    for c in columns:
        line = f"  {_quote(c.name)} {c.type}"
        if c.metadata is not None:
            line += " METADATA" + ("" if c.metadata == c.name else f" FROM {_literal(c.metadata)}")
            line += " VIRTUAL" if c.virtual else ""
        lines.append(line)
    if primary_key:
        lines.append(f"  PRIMARY KEY ({', '.join(_quote(k) for k in primary_key)}) NOT ENFORCED")
    opts = ",\n".join(f"  {_literal(k)} = {_literal(v)}" for k, v in options.items())
    return f"CREATE TABLE {_quote(name)} (\n" + ",\n".join(lines) + f"\n) WITH (\n{opts}\n)"
