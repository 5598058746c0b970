"""Table specs: Flink's upsert-kafka validation rules (V1-V15), accepted tables and round trips.

Rule numbers (V1-V15) label the validation rules of Flink's upsert-kafka table factory; each section
heading names its rule.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from pydantic import ValidationError

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.spec.connection import client_properties
from upsert_kafka_ops.spec.ddl import DdlError
from upsert_kafka_ops.spec.table import (
    OWNED_CLIENT_PROPERTIES,
    Column,
    KafkaTable,
    StartAt,
    UpsertKafkaTable,
    parse_duration_ms,
)

COLUMNS: list[dict[str, Any]] = [
    {"name": "id", "type": "BIGINT"},
    {"name": "name", "type": "STRING"},
    {"name": "region", "type": "STRING"},
]
BASE = {
    "connector": "upsert-kafka",
    "topic": "users",
    "properties.bootstrap.servers": "localhost:9092",
    "key.format": "json",
    "value.format": "json",
}


def upsert(
    columns: list[dict[str, Any]] | None = None, primary_key: list[str] | None = None, **options: str
) -> UpsertKafkaTable:
    """An upsert table from BASE plus ``options`` (``None`` values remove a BASE option)."""
    merged = {k: v for k, v in {**BASE, **options}.items() if v is not None}
    return UpsertKafkaTable.from_options(
        merged, COLUMNS if columns is None else columns, ["id"] if primary_key is None else primary_key
    )


def opts(**options: str) -> dict[str, str]:
    """Keyword arguments with '__' for '.' and '_' for '-': ``opts(sink__parallelism='2')``."""
    return {k.replace("__", ".").replace("_", "-"): v for k, v in options.items()}


def create_table(columns: str, options: dict[str, str], name: str = "t") -> str:
    with_ = ",\n".join(f"  '{k}' = '{v}'" for k, v in options.items())
    return f"CREATE TABLE {name} (\n{columns}\n) WITH (\n{with_}\n)"


@contextmanager
def raises(match: str, field: str, *, fix: bool = True) -> Iterator[None]:
    """A SpecError matching ``match`` that names ``field`` and, when ``fix``, says how to fix it."""
    with pytest.raises(SpecError, match=match) as info:
        yield
    assert info.value.field == field, f"field {info.value.field!r}, expected {field!r}"
    if fix:
        assert info.value.fix, f"no fix in {info.value}"


# -- V5: PRIMARY KEY ----------------------------------------------------------------------------------
def test_v5_missing_primary_key_from_options() -> None:
    with raises(r"'upsert-kafka' tables require to define a PRIMARY KEY constraint", "primary_key"):
        upsert(primary_key=[])


def test_v5_missing_primary_key_from_ddl() -> None:
    sql = create_table("  id BIGINT,\n  name STRING", BASE)
    with raises(r"PRIMARY KEY specifies which columns should be read from or write to", "primary_key"):
        UpsertKafkaTable.from_flink_ddl(sql)


# -- V7: key columns are physical ---------------------------------------------------------------------
def test_v7_primary_key_on_metadata_column_from_options() -> None:
    columns = [*COLUMNS, {"name": "ts", "type": "TIMESTAMP_LTZ(3)", "metadata": "timestamp"}]
    with raises(r"Could not find the field 'ts' .* must be a regular, physical column", "primary_key"):
        upsert(columns=columns, primary_key=["ts"])


def test_v7_fix_lists_the_physical_columns() -> None:
    columns = [*COLUMNS, {"name": "ts", "type": "TIMESTAMP_LTZ(3)", "metadata": "timestamp"}]
    with pytest.raises(SpecError) as info:
        upsert(columns=columns, primary_key=["id", "ts"])
    assert info.value.fix == "choose from: id, name, region."


def test_v7_primary_key_not_a_column() -> None:
    with raises(r"Could not find the field 'nope'", "primary_key"):
        upsert(primary_key=["nope"])


def test_primary_key_column_listed_twice() -> None:
    # Bug fixed: accepted by from_options (the DDL parser already refused it), giving a key of two 'id's.
    with raises(r"id appear twice in the PRIMARY KEY", "primary_key"):
        upsert(primary_key=["id", "region", "id"])


def test_v7_primary_key_on_metadata_column_from_ddl() -> None:
    sql = create_table(
        "  id BIGINT,\n  ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp',\n  PRIMARY KEY (ts) NOT ENFORCED",
        BASE,
    )
    with pytest.raises(DdlError, match="'ts' is a METADATA column") as info:
        UpsertKafkaTable.from_flink_ddl(sql)
    assert info.value.fix


# -- V8, V9: key.fields-prefix ------------------------------------------------------------------------
PREFIXED = [
    {"name": "k_id", "type": "BIGINT"},
    {"name": "k_region", "type": "STRING"},
    {"name": "id", "type": "BIGINT"},
    {"name": "name", "type": "STRING"},
]


def test_v8_prefix_with_value_fields_include_all() -> None:
    with raises(
        r"A key prefix is not allowed when option 'value.fields-include' is set to 'ALL'", "key.fields-prefix"
    ):
        upsert(columns=PREFIXED, primary_key=["k_id"], **opts(key__fields_prefix="k_"))
    with pytest.raises(SpecError) as info:
        upsert(columns=PREFIXED, primary_key=["k_id"], **opts(key__fields_prefix="k_"))
    assert "EXCEPT_KEY" in str(info.value.fix)


def test_v9_key_column_without_prefix() -> None:
    with raises(r"must be prefixed with 'k_' .* but field 'id' is not prefixed", "key.fields-prefix"):
        upsert(
            columns=PREFIXED,
            primary_key=["k_id", "id"],
            **opts(key__fields_prefix="k_", value__fields_include="EXCEPT_KEY"),
        )


def test_prefix_with_except_key_is_accepted() -> None:
    t = upsert(
        columns=PREFIXED,
        primary_key=["k_region", "k_id"],
        **opts(key__fields_prefix="k_", value__fields_include="EXCEPT_KEY"),
    )
    assert [c.name for c in t.key_columns] == ["k_region", "k_id"]
    assert [c.name for c in t.value_columns] == ["id", "name"]
    assert [t.key_field_name(c.name) for c in t.key_columns] == ["region", "id"]
    assert t.to_options()["key.fields-prefix"] == "k_"
    assert t.to_options()["value.fields-include"] == "EXCEPT_KEY"


# -- V1: options upsert-kafka rejects ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("scan.startup.mode", "earliest-offset"),
        ("scan.startup.specific-offsets", "partition:0,offset:1"),
        ("scan.startup.timestamp-millis", "1000"),
        ("key.fields", "id"),
        ("format", "json"),
        ("sink.partitioner", "fixed"),
        ("sink.semantic", "at-least-once"),
        ("no.such.option", "x"),
        ("value.fields-prefix", "v_"),
    ],
)
def test_v1_unsupported_option_is_named(option: str, value: str) -> None:
    with raises(r"Unsupported options found for 'upsert-kafka'", option):
        upsert(**{option: value})
    with pytest.raises(SpecError) as info:
        upsert(**{option: value})
    assert "Supported options:" in str(info.value.fix)
    assert "key.format" in str(info.value.fix)


def test_v1_all_unsupported_options_are_named_sorted() -> None:
    with raises(r"Unsupported options found for 'upsert-kafka'", "format, key.fields, sink.partitioner"):
        upsert(**{"sink.partitioner": "fixed", "format": "json", "key.fields": "id"})


@pytest.mark.parametrize(
    ("option", "why"),
    [
        ("scan.parallelism", "Spark sizes the read"),
        ("scan.topic-partition-discovery.interval", "each run reads the partitions the topic has"),
        ("sink.transactional-id-prefix", "exactly-once"),
        ("sink.transaction-naming-strategy", "exactly-once"),
    ],
)
def test_options_that_would_mean_nothing_here_are_refused_not_ignored(option: str, why: str) -> None:
    with raises(why, option):
        upsert(**{option: "2"})


@pytest.mark.parametrize(
    ("options", "field", "match"),
    [
        ({"scan.startup.mode": "bogus"}, "scan.startup.mode", "Invalid value 'bogus'"),
        ({"scan.bounded.mode": "sometime"}, "scan.bounded.mode", "Invalid value 'sometime'"),
        ({"scan.startup.timestamp-millis": "1"}, "scan.startup.timestamp-millis", "used only in 'timestamp'"),
        (
            {"scan.startup.mode": "timestamp"},
            "scan.startup.timestamp-millis",
            "required in 'timestamp' startup",
        ),
        (
            {"scan.startup.mode": "timestamp", "scan.startup.timestamp-millis": "yesterday"},
            "scan.startup.timestamp-millis",
            "not a number",
        ),
        (
            {"scan.bounded.mode": "specific-offsets"},
            "scan.bounded.specific-offsets",
            "required in 'specific-offsets' bounded",
        ),
        (
            {"properties.auto.offset.reset": "earliest"},
            "properties.auto.offset.reset",
            "'group-offsets' start",
        ),
        (
            {
                "scan.startup.mode": "group-offsets",
                "properties.group.id": "g",
                "properties.auto.offset.reset": "smallest",
            },
            "properties.auto.offset.reset",
            "earliest, latest, none",
        ),
        ({"sink.partitioner": "org.example.MyPartitioner"}, "sink.partitioner", "a partitioner class"),
        ({"sink.delivery-guarantee": "exactly-once"}, "sink.delivery-guarantee", "no transactions"),
        ({"sink.parallelism": "0"}, "sink.parallelism", "not a positive whole number"),
        ({"sink.buffer-flush.max-rows": "10"}, "sink.buffer-flush.max-rows", "not supported"),
        ({"scan.header-filter": "depart:toy"}, "scan.header-filter", "not an option"),
    ],
)
def test_kafka_table_scan_options_follow_flinks_rules(
    options: dict[str, str], field: str, match: str
) -> None:
    with raises(match, field):
        KafkaTable.from_options({"topic": "t", "format": "json", **options}, KAFKA_COLUMNS)


@pytest.mark.parametrize(
    ("options", "start", "end"),
    [
        ({}, "earliest", "latest"),
        ({"scan.startup.mode": "latest-offset"}, "latest", "latest"),
        (
            {"scan.startup.mode": "timestamp", "scan.startup.timestamp-millis": "1767225600000"},
            StartAt("timestamp", timestamp_ms=1767225600000, group="g"),
            "latest",
        ),
        (
            {"scan.startup.mode": "group-offsets", "properties.auto.offset.reset": "LATEST"},
            StartAt("group-offsets", group="g", reset="latest"),
            "latest",
        ),
        (
            {
                "scan.startup.mode": "specific-offsets",
                "scan.startup.specific-offsets": "partition:1,offset:7",
                "scan.bounded.mode": "group-offsets",
            },
            StartAt("specific-offsets", offsets={1: 7}, group="g"),
            {"group": "g"},
        ),
        (
            {"scan.bounded.mode": "timestamp", "scan.bounded.timestamp-millis": "5"},
            "earliest",
            {"timestamp_ms": 5},
        ),
    ],
)
def test_kafka_table_start_and_end_positions(options: dict[str, str], start: Any, end: Any) -> None:
    table = KafkaTable.from_options(
        {"topic": "t", "format": "json", "properties.group.id": "g", **options}, KAFKA_COLUMNS
    )
    assert (table.start_position(), table.end_position()) == (start, end)
    assert "auto.offset.reset" not in client_properties(table.properties)


def test_a_kafka_table_built_directly_is_checked_the_same() -> None:
    data = KafkaTable.from_options({"topic": "t", "format": "json"}, KAFKA_COLUMNS).model_dump()
    with raises("required in 'group-offsets' startup mode", "properties.group.id"):
        KafkaTable(**{**data, "scan_options": {"scan.startup.mode": "group-offsets"}})


def test_options_from_another_connector_are_rejected() -> None:
    with raises(r"is 'kafka', not 'upsert-kafka'", "connector", fix=False):
        upsert(connector="kafka")


def test_from_flink_ddl_of_a_kafka_table_points_to_kafka_table() -> None:
    sql = create_table("  id BIGINT", {"connector": "kafka", "topic": "t", "format": "json"})
    with raises(r"is 'kafka', not 'upsert-kafka'", "connector"):
        UpsertKafkaTable.from_flink_ddl(sql)
    with pytest.raises(SpecError) as info:
        UpsertKafkaTable.from_flink_ddl(sql)
    assert "KafkaTable" in str(info.value.fix)


# -- V6: topic / topic-pattern -----------------------------------------------------------------------
def test_v6_topic_and_topic_pattern_together() -> None:
    with raises(r"Option 'topic' and 'topic-pattern' shouldn't be set together", "topic"):
        upsert(**{"topic-pattern": "users.*"})


@pytest.mark.parametrize("topic", [None, "", " ; "])
def test_v6_neither_topic_nor_topic_pattern(topic: str | None) -> None:
    with raises(r"Either 'topic' or 'topic-pattern' must be set", "topic"):
        upsert(topic=topic)  # type: ignore[arg-type]


def test_v6_in_ddl() -> None:
    sql = create_table("  id BIGINT,\n  PRIMARY KEY (id) NOT ENFORCED", {**BASE, "topic-pattern": "u.*"})
    with raises(r"shouldn't be set together", "topic"):
        UpsertKafkaTable.from_flink_ddl(sql)


# -- V10: buffer flush -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "options",
    [
        {"sink.buffer-flush.max-rows": "100"},
        {"sink.buffer-flush.interval": "1s"},
        {"sink.buffer-flush.max-rows": "0", "sink.buffer-flush.interval": "1s"},
        {"sink.buffer-flush.max-rows": "100", "sink.buffer-flush.interval": "0"},
    ],
)
def test_v10_buffer_flush_options_go_together(options: dict[str, str]) -> None:
    with raises(
        r"'sink.buffer-flush.max-rows' and 'sink.buffer-flush.interval' must be set to be greater than zero together",
        "sink.buffer-flush.max-rows",
    ):
        upsert(**options)


def test_v10_both_or_neither_accepted() -> None:
    both = upsert(**{"sink.buffer-flush.max-rows": "100", "sink.buffer-flush.interval": "1s"})
    assert (both.sink_buffer_flush_max_rows, both.sink_buffer_flush_interval_ms) == (100, 1000)
    neither = upsert(**{"sink.buffer-flush.max-rows": "0", "sink.buffer-flush.interval": "0"})
    assert (neither.sink_buffer_flush_max_rows, neither.sink_buffer_flush_interval_ms) == (0, 0)
    assert "sink.buffer-flush.max-rows" not in neither.to_options()


def test_negative_max_rows_names_the_option() -> None:
    with raises(r"greater than or equal to 0", "sink.buffer-flush.max-rows", fix=False):
        upsert(**{"sink.buffer-flush.max-rows": "-1"})


# -- durations -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("1s", 1000),
        ("500 ms", 500),
        ("2min", 120_000),
        ("100", 100),
        ("0", 0),
        ("1 h", 3_600_000),
        ("10 seconds", 10_000),
        ("3d", 259_200_000),
        ("1m", 60_000),
        ("5 MIN", 300_000),
        ("250millis", 250),
    ],
)
def test_buffer_flush_interval_durations(text: str, ms: int) -> None:
    assert parse_duration_ms(text, "x") == ms
    if ms:
        t = upsert(**{"sink.buffer-flush.max-rows": "10", "sink.buffer-flush.interval": text})
        assert t.sink_buffer_flush_interval_ms == ms
        assert UpsertKafkaTable.from_options(t.to_options(), t.columns, t.primary_key) == t


@pytest.mark.parametrize("text", ["soon", "1 fortnight", "-1s", "1.5s", "", "s", "1s 2s"])
def test_bad_duration_names_the_option(text: str) -> None:
    with raises(r"is not a duration", "sink.buffer-flush.interval"):
        upsert(**{"sink.buffer-flush.max-rows": "10", "sink.buffer-flush.interval": text})


# -- client properties the connector owns ---------------------------------------------------------------
@pytest.mark.parametrize("key", sorted(OWNED_CLIENT_PROPERTIES))
def test_owned_client_properties_are_rejected(key: str) -> None:
    with raises(r"is set by the connector itself", f"properties.{key}"):
        upsert(**{f"properties.{key}": "x"})


def test_owned_client_property_list_covers_the_usual_suspects() -> None:
    assert {
        "key.deserializer",
        "value.deserializer",
        "key.serializer",
        "value.serializer",
        "auto.offset.reset",
        "enable.auto.commit",
    } <= OWNED_CLIENT_PROPERTIES


def test_properties_are_kept_without_the_prefix() -> None:
    t = upsert(
        **{"properties.group.id": "g", "properties.client.id": "c", "properties.max.poll.records": "5"}
    )
    assert t.properties == {
        "bootstrap.servers": "localhost:9092",
        "group.id": "g",
        "client.id": "c",
        "max.poll.records": "5",
    }
    assert t.to_options()["properties.group.id"] == "g"


# -- formats -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("option", ["key.format", "value.format"])
def test_unknown_format(option: str) -> None:
    with raises(r"unknown format 'protobuf-x'", option):
        upsert(**{option: "protobuf-x"})
    with pytest.raises(SpecError) as info:
        upsert(**{option: "protobuf-x"})
    assert "json" in str(info.value.fix)


@pytest.mark.parametrize("option", ["key.format", "value.format"])
def test_missing_format(option: str) -> None:
    with raises(r"is required", option):
        upsert(**{option: None})  # type: ignore[arg-type]


@pytest.mark.parametrize("fmt", ["debezium-json", "canal-json", "maxwell-json", "ogg-json"])
@pytest.mark.parametrize("which", ["key", "value"])
def test_v3_v4_cdc_format_rejected_with_flinks_message(fmt: str, which: str) -> None:
    message = (
        f"'upsert-kafka' connector doesn't support '{fmt}' as {which} format, because '{fmt}' is not in "
        "insert-only mode."
    )
    with pytest.raises(SpecError) as info:
        upsert(**{f"{which}.format": fmt})
    assert info.value.field == f"{which}.format"
    assert info.value.message == message
    assert "KafkaTable" in str(info.value.fix)


def test_recognised_but_unimplemented_format() -> None:
    with raises(r"'ogg-json' format is not supported by upsert-kafka-ops", "value.format", fix=False):
        KafkaTable.from_options(
            {"connector": "kafka", "topic": "t", "value.format": "ogg-json"},
            columns=[{"name": "id", "type": "BIGINT"}],
        )


def test_format_options_are_kept() -> None:
    t = upsert(
        **{
            "key.format": "csv",
            "key.csv.field-delimiter": "|",
            "value.json.ignore-parse-errors": "true",
            "value.json.timestamp-format.standard": "ISO-8601",
        }
    )
    assert t.format_options == {
        "key.csv.field-delimiter": "|",
        "value.json.ignore-parse-errors": "true",
        "value.json.timestamp-format.standard": "ISO-8601",
    }
    assert t.option("value.json.ignore-parse-errors") == "true"
    assert t.option("value.json.fail-on-missing-field", "false") == "false"
    assert t.to_options()["key.csv.field-delimiter"] == "|"


@pytest.mark.parametrize(
    "option",
    [
        "value.csv.field-delimiter",  # value format is json
        "key.csv.field-delimiter",  # key format is json
        "value.raw.charset",
        "json.ignore-parse-errors",  # plain 'kafka' style, not an upsert-kafka option
    ],
)
def test_options_of_another_format_are_rejected(option: str) -> None:
    with raises(r"Unsupported options found for 'upsert-kafka'", option):
        upsert(**{option: "x"})


@pytest.mark.parametrize("option", ["value.json.no-such-option", "key.json.ignore-parse-error"])
def test_unknown_format_option_names_are_rejected(option: str) -> None:
    with raises(r"is not an option of the (key|value) format 'json'", option):
        upsert(**{option: "true"})
    with pytest.raises(SpecError) as info:
        upsert(**{option: "true"})
    assert f"{option.split('.')[0]}.json.ignore-parse-errors" in str(info.value.fix)


def test_format_options_checked_by_the_constructor_too() -> None:
    t = upsert()
    data = t.model_dump() | {"format_options": {"value.json.bogus": "1"}}
    with raises(r"is not an option of the value format 'json'", "value.json.bogus"):
        UpsertKafkaTable(**data)


# -- sink.delivery-guarantee ---------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["exactly-once", "EXACTLY-ONCE", "Exactly-Once"])
def test_exactly_once_is_rejected_with_the_reason(value: str) -> None:
    with pytest.raises(SpecError, match="exactly-once is not available") as info:
        upsert(**{"sink.delivery-guarantee": value})
    err = info.value
    assert err.field == "sink.delivery-guarantee"
    assert err.fix is not None
    assert "at-least-once" in err.fix
    assert "duplicate" in err.fix and "same" in err.fix


def test_exactly_once_with_its_transactional_id_prefix_still_explains_exactly_once() -> None:
    # A Flink-valid exactly-once table needs the prefix (V11); the error must be about exactly-once.
    with raises(r"exactly-once is not available", "sink.delivery-guarantee"):
        upsert(**{"sink.delivery-guarantee": "exactly-once", "sink.transactional-id-prefix": "tx"})


def test_exactly_once_rejected_from_ddl() -> None:
    sql = create_table(
        "  id BIGINT,\n  PRIMARY KEY (id) NOT ENFORCED", {**BASE, "sink.delivery-guarantee": "exactly-once"}
    )
    with raises(r"exactly-once is not available", "sink.delivery-guarantee"):
        UpsertKafkaTable.from_flink_ddl(sql)


@pytest.mark.parametrize(("value", "expected"), [("none", "none"), ("AT-LEAST-ONCE", "at-least-once")])
def test_other_delivery_guarantees_accepted(value: str, expected: str) -> None:
    assert upsert(**{"sink.delivery-guarantee": value}).sink_delivery_guarantee == expected


def test_unknown_delivery_guarantee_names_the_option() -> None:
    with raises(r"'at-least-once' or 'none'", "sink.delivery-guarantee", fix=False):
        upsert(**{"sink.delivery-guarantee": "twice"})


# -- other typed options name the Flink option in errors ----------------------------------------------
@pytest.mark.parametrize("value", ["abc", "0", "-2", "1.5"])
def test_bad_sink_parallelism_names_the_option(value: str) -> None:
    with raises(r".", "sink.parallelism", fix=False):
        upsert(**{"sink.parallelism": value})


def test_value_fields_include_is_case_insensitive_like_flink() -> None:
    t = upsert(**{"value.fields-include": "except_key"})
    assert t.value_fields_include == "EXCEPT_KEY"
    assert [c.name for c in t.value_columns] == ["name", "region"]


def test_bad_value_fields_include_names_the_option() -> None:
    with raises(r"'ALL' or 'EXCEPT_KEY'", "value.fields-include", fix=False):
        upsert(**{"value.fields-include": "SOME"})


# -- V12-V15: scan.bounded ---------------------------------------------------------------------------
def test_v12_timestamp_mode_needs_timestamp_millis() -> None:
    with raises(r"is required in 'timestamp' bounded mode but missing", "scan.bounded.timestamp-millis"):
        upsert(**{"scan.bounded.mode": "timestamp"})
    t = upsert(**{"scan.bounded.mode": "timestamp", "scan.bounded.timestamp-millis": "1700000000000"})
    assert t.scan_bounded_timestamp_millis == 1_700_000_000_000


def test_bad_timestamp_millis_names_the_option() -> None:
    with raises(r"valid integer", "scan.bounded.timestamp-millis", fix=False):
        upsert(**{"scan.bounded.mode": "timestamp", "scan.bounded.timestamp-millis": "yesterday"})


def test_v13_specific_offsets_mode_needs_offsets() -> None:
    with raises(
        r"is required in 'specific-offsets' bounded mode but missing", "scan.bounded.specific-offsets"
    ):
        upsert(**{"scan.bounded.mode": "specific-offsets"})


@pytest.mark.parametrize("topics", [{"topic": "a;b"}, {"topic": None, "topic-pattern": "a.*"}])
def test_v14_specific_offsets_only_for_a_single_topic(topics: dict[str, str]) -> None:
    with raises(
        r"Currently Kafka source only supports specific offset for single topic",
        "scan.bounded.specific-offsets",
    ):
        upsert(
            **{
                "scan.bounded.mode": "specific-offsets",
                "scan.bounded.specific-offsets": "partition:0,offset:1",
                **topics,
            }
        )


@pytest.mark.parametrize(
    "offsets",
    [
        "partition:0",
        "p:0,o:1",
        "partition:x,offset:1",
        "partition:0,offset:1;junk",
        "offset:1,partition:0",
        "partition:0,offset:-1",
    ],
)
def test_v15_malformed_specific_offsets(offsets: str) -> None:
    with raises(
        r"should follow the format 'partition:0,offset:42;partition:1,offset:300', but is",
        "scan.bounded.specific-offsets",
        fix=False,
    ):
        upsert(**{"scan.bounded.mode": "specific-offsets", "scan.bounded.specific-offsets": offsets})


@pytest.mark.parametrize(
    "offsets",
    ["partition:0,offset:42;partition:1,offset:300", " partition: 0, offset: 42 ; partition:1,offset:300;"],
)
def test_specific_offsets_parsed(offsets: str) -> None:
    t = upsert(**{"scan.bounded.mode": "specific-offsets", "scan.bounded.specific-offsets": offsets})
    assert t.bounded_offsets() == {0: 42, 1: 300}


def test_group_offsets_mode_needs_a_group_id() -> None:
    with raises(r"is required in 'group-offsets' bounded mode", "properties.group.id"):
        upsert(**{"scan.bounded.mode": "group-offsets"})
    t = upsert(**{"scan.bounded.mode": "group-offsets", "properties.group.id": "g"})
    assert t.scan_bounded_mode == "group-offsets"


def test_bounded_mode_values() -> None:
    assert upsert().scan_bounded_mode == "unbounded"
    assert upsert(**{"scan.bounded.mode": "LATEST-OFFSET"}).scan_bounded_mode == "latest-offset"
    with raises(r"'unbounded', 'latest-offset'", "scan.bounded.mode", fix=False):
        upsert(**{"scan.bounded.mode": "earliest-offset"})


# -- columns -------------------------------------------------------------------------------------------
def test_column_types_are_canonical() -> None:
    c = Column(name="x", type="varchar")
    assert c.type == "STRING"
    assert Column(name="d", type="decimal").type == "DECIMAL(10, 0)"
    assert Column(name="t", type="timestamp(3) with local time zone").type == "TIMESTAMP_LTZ(3)"
    assert c.sql_type.to_spark() == "STRING"


def test_bad_column_type() -> None:
    with raises(r"user-defined type 'FOO'", "type"):
        upsert(columns=[{"name": "id", "type": "FOO"}])


def test_duplicate_columns() -> None:
    with raises(r"duplicate column name\(s\): id", "columns", fix=False):
        upsert(columns=[*COLUMNS, {"name": "id", "type": "INT"}])


def test_unknown_metadata_key() -> None:
    with raises(r"unknown metadata key 'row-number'", "columns.rn.metadata"):
        Column(name="rn", type="BIGINT", metadata="row-number")


def test_virtual_only_on_metadata_columns() -> None:
    # Bug fixed: VIRTUAL on a physical column was accepted and then lost by to_flink_ddl().
    with raises(r"VIRTUAL applies to METADATA columns only", "columns.x.virtual"):
        Column(name="x", type="INT", virtual=True)


METADATA_DDL = """
CREATE TABLE pageviews (
  user_id BIGINT,
  page STRING,
  ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp',
  `offset` BIGINT METADATA VIRTUAL,
  part INT METADATA FROM 'partition' VIRTUAL,
  headers MAP<STRING, BYTES> METADATA,
  PRIMARY KEY (user_id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'pageviews',
  'properties.bootstrap.servers' = 'localhost:9092',
  'key.format' = 'json',
  'value.format' = 'json'
)
"""


def test_metadata_columns_from_ddl() -> None:
    t = UpsertKafkaTable.from_flink_ddl(METADATA_DDL)
    meta = {c.name: (c.metadata, c.virtual, c.type) for c in t.metadata_columns}
    assert meta == {
        "ts": ("timestamp", False, "TIMESTAMP_LTZ(3)"),
        "offset": ("offset", True, "BIGINT"),
        "part": ("partition", True, "INT"),
        "headers": ("headers", False, "MAP<STRING, BYTES>"),
    }
    assert [c.name for c in t.physical_columns] == ["user_id", "page"]
    assert [c.name for c in t.value_columns] == ["user_id", "page"]
    assert [c.name for c in t.key_columns] == ["user_id"]
    ddl = t.to_flink_ddl()
    assert "`ts` TIMESTAMP_LTZ(3) METADATA FROM 'timestamp'" in ddl
    assert "`offset` BIGINT METADATA VIRTUAL" in ddl
    assert "`part` INT METADATA FROM 'partition' VIRTUAL" in ddl


# -- accepted tables -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("topic", "topics"), [("a;b", ["a", "b"]), (" a ; b ;", ["a", "b"]), ("one", ["one"])]
)
def test_topic_lists(topic: str, topics: list[str]) -> None:
    t = upsert(topic=topic)
    assert t.topic == topics
    assert t.to_options()["topic"] == ";".join(topics)


def test_topic_pattern() -> None:
    t = upsert(topic=None, **{"topic-pattern": "users-.*"})  # type: ignore[arg-type]
    assert t.topic is None
    assert t.topic_pattern == "users-.*"
    assert t.to_options()["topic-pattern"] == "users-.*"
    assert "topic" not in t.to_options()


def test_composite_key_in_primary_key_order() -> None:
    t = upsert(primary_key=["region", "id"])
    assert [c.name for c in t.key_columns] == ["region", "id"]
    assert [c.name for c in t.value_columns] == ["id", "name", "region"]
    assert t.key_field_name("region") == "region"
    except_key = upsert(primary_key=["region", "id"], **{"value.fields-include": "EXCEPT_KEY"})
    assert [c.name for c in except_key.value_columns] == ["name"]


def test_defaults() -> None:
    t = upsert()
    assert t.name == "upsert_table"
    assert (t.key_fields_prefix, t.value_fields_include) == ("", "ALL")
    assert (t.sink_parallelism, t.sink_delivery_guarantee) == (None, "at-least-once")
    assert t.to_options() == {
        "connector": "upsert-kafka",
        "topic": "users",
        "properties.bootstrap.servers": "localhost:9092",
        "key.format": "json",
        "value.format": "json",
    }


# -- round trips -------------------------------------------------------------------------------------------
FULL_OPTIONS = {
    **BASE,
    "properties.group.id": "g",
    "properties.client.id": "it's mine",
    "key.format": "csv",
    "key.csv.field-delimiter": "|",
    "value.json.ignore-parse-errors": "true",
    "key.fields-prefix": "k_",
    "value.fields-include": "EXCEPT_KEY",
    "sink.parallelism": "3",
    "sink.buffer-flush.max-rows": "1000",
    "sink.buffer-flush.interval": "2s",
    "sink.delivery-guarantee": "none",
    "scan.bounded.mode": "specific-offsets",
    "scan.bounded.specific-offsets": "partition:0,offset:42;partition:1,offset:300",
}
TABLES = {
    "minimal": lambda: upsert(),
    "topic list": lambda: upsert(topic="a;b;c", primary_key=["region", "id"]),
    "pattern": lambda: upsert(topic=None, **{"topic-pattern": "u-.*", "scan.bounded.mode": "latest-offset"}),  # type: ignore[arg-type]
    "everything": lambda: UpsertKafkaTable.from_options(
        FULL_OPTIONS,
        [*PREFIXED, {"name": "rich", "type": "ROW<a INT NOT NULL, `b c` ARRAY<DECIMAL(10, 2)>>"}],
        ["k_region", "k_id"],
        name="odd `name`",
    ),
    "timestamp bound": lambda: upsert(
        **{"scan.bounded.mode": "timestamp", "scan.bounded.timestamp-millis": "1700000000000"}
    ),
    "metadata": lambda: UpsertKafkaTable.from_flink_ddl(METADATA_DDL),
}


@pytest.mark.parametrize("make", TABLES.values(), ids=TABLES.keys())
def test_ddl_round_trip(make: Any) -> None:
    t = make()
    again = UpsertKafkaTable.from_flink_ddl(t.to_flink_ddl())
    assert again == t
    assert again.to_flink_ddl() == t.to_flink_ddl()


@pytest.mark.parametrize("make", TABLES.values(), ids=TABLES.keys())
def test_options_round_trip(make: Any) -> None:
    t = make()
    assert UpsertKafkaTable.from_options(t.to_options(), t.columns, t.primary_key, name=t.name) == t


@pytest.mark.parametrize("make", TABLES.values(), ids=TABLES.keys())
def test_json_round_trip(make: Any) -> None:
    t = make()
    assert UpsertKafkaTable.model_validate_json(t.model_dump_json()) == t
    assert UpsertKafkaTable.model_validate(t.model_dump()) == t


def test_equality_ignores_cached_sql_types() -> None:
    a, b = upsert(), upsert()
    assert a.columns[0].sql_type.name == "BIGINT"  # caches on a only
    assert a == b


def test_everything_table_fields() -> None:
    t = TABLES["everything"]()
    assert t.name == "odd `name`"
    assert (t.sink_parallelism, t.sink_buffer_flush_max_rows, t.sink_buffer_flush_interval_ms) == (
        3,
        1000,
        2000,
    )
    assert t.sink_delivery_guarantee == "none"
    assert t.bounded_offsets() == {0: 42, 1: 300}
    assert t.properties["client.id"] == "it's mine"
    assert "'properties.client.id' = 'it''s mine'" in t.to_flink_ddl()


def test_frozen() -> None:
    t = upsert()
    with pytest.raises(ValidationError, match="frozen"):
        t.name = "other"  # type: ignore[misc]
    with pytest.raises(ValidationError, match="frozen"):
        t.columns[0].name = "other"  # type: ignore[misc]
    assert t.name == "upsert_table"


def test_unknown_constructor_field() -> None:
    data = upsert().model_dump()
    with pytest.raises(SpecError, match="unknown field; did you mean 'primary_key'") as info:
        UpsertKafkaTable(**data, primary_keys=["id"])
    assert info.value.field == "primary_keys"
    assert info.value.fix is not None and "primary_key" in info.value.fix


def test_unknown_field_of_a_column() -> None:
    with raises(r"unknown field\. Fix: remove it; Column accepts: name, type", "columns.1.nullable"):
        upsert(columns=[COLUMNS[0], {"name": "x", "type": "INT", "nullable": False}])


def test_unknown_field_in_json() -> None:
    with raises(r"unknown field\.", "colour"):
        UpsertKafkaTable.model_validate_json(upsert().model_dump_json()[:-1] + ', "colour": "red"}')


def test_missing_constructor_field() -> None:
    data = upsert().model_dump()
    del data["key_format"]
    with raises(r"required field, not given", "key_format"):
        UpsertKafkaTable(**data)


# -- KafkaTable ---------------------------------------------------------------------------------------
KAFKA_DDL = """
CREATE TABLE user_behavior (
  user_id BIGINT,
  item_id BIGINT,
  behavior STRING,
  ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp',
  `partition` INT METADATA VIRTUAL,
  src STRING METADATA FROM 'topic' VIRTUAL
) WITH (
  'connector' = 'kafka',
  'topic' = 'user_behavior;clicks',
  'properties.bootstrap.servers' = 'localhost:9092',
  'properties.group.id' = 'testGroup',
  'scan.startup.mode' = 'earliest-offset',
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'true'
)
"""
KAFKA_KEYED = {
    "connector": "kafka",
    "topic": "t",
    "key.format": "csv",
    "key.fields": "user_id;item_id",
    "key.csv.field-delimiter": "|",
    "value.format": "json",
    "value.json.ignore-parse-errors": "true",
    "value.fields-include": "EXCEPT_KEY",
}
KAFKA_COLUMNS: list[dict[str, Any]] = [
    {"name": "user_id", "type": "BIGINT"},
    {"name": "item_id", "type": "BIGINT"},
    {"name": "behavior", "type": "STRING"},
]


def test_kafka_table_from_ddl() -> None:
    t = KafkaTable.from_flink_ddl(KAFKA_DDL)
    assert t.name == "user_behavior"
    assert t.topic == ["user_behavior", "clicks"]
    assert t.value_format == "json"
    assert t.key_format is None and t.key_fields == []
    assert t.format_options == {
        "value.json.fail-on-missing-field": "false",
        "value.json.ignore-parse-errors": "true",
    }
    assert t.scan_options == {"scan.startup.mode": "earliest-offset"}
    assert t.sink_options == {}
    assert t.properties == {"bootstrap.servers": "localhost:9092", "group.id": "testGroup"}
    meta = {c.name: (c.metadata, c.virtual) for c in t.metadata_columns}
    assert meta == {"ts": ("timestamp", False), "partition": ("partition", True), "src": ("topic", True)}
    assert [c.name for c in t.physical_columns] == ["user_id", "item_id", "behavior"]


def test_kafka_table_format_and_value_format_are_the_same() -> None:
    a = KafkaTable.from_options(
        {"topic": "t", "format": "json", "json.ignore-parse-errors": "true"}, KAFKA_COLUMNS
    )
    b = KafkaTable.from_options(
        {"topic": "t", "value.format": "json", "value.json.ignore-parse-errors": "true"}, KAFKA_COLUMNS
    )
    assert a == b
    assert a.to_options()["value.format"] == "json"


def test_kafka_table_with_key() -> None:
    t = KafkaTable.from_options(KAFKA_KEYED, KAFKA_COLUMNS)
    assert (t.key_format, t.key_fields, t.value_fields_include) == (
        "csv",
        ["user_id", "item_id"],
        "EXCEPT_KEY",
    )
    assert t.format_options == {"key.csv.field-delimiter": "|", "value.json.ignore-parse-errors": "true"}
    assert t.to_options()["key.fields"] == "user_id;item_id"


KAFKA_TABLES = {
    "ddl": lambda: KafkaTable.from_flink_ddl(KAFKA_DDL),
    "keyed": lambda: KafkaTable.from_options(KAFKA_KEYED, KAFKA_COLUMNS, name="keyed"),
    "prefixed": lambda: KafkaTable.from_options(
        {
            "topic-pattern": "t.*",
            "format": "csv",
            "key.format": "raw",
            "key.fields": "k_id",
            "key.fields-prefix": "k_",
            "value.fields-include": "except_key",
        },
        [{"name": "k_id", "type": "STRING"}, {"name": "v", "type": "INT"}],
    ),
}


@pytest.mark.parametrize("make", KAFKA_TABLES.values(), ids=KAFKA_TABLES.keys())
def test_kafka_table_round_trips(make: Any) -> None:
    t = make()
    assert KafkaTable.from_flink_ddl(t.to_flink_ddl()) == t
    assert KafkaTable.from_options(t.to_options(), t.columns, name=t.name) == t
    assert KafkaTable.model_validate_json(t.model_dump_json()) == t


def test_kafka_table_key_format_needs_key_fields() -> None:
    with raises(r"is required when 'key.format' is set", "key.fields"):
        KafkaTable.from_options({"topic": "t", "format": "json", "key.format": "json"}, KAFKA_COLUMNS)


def test_kafka_table_key_fields_need_key_format() -> None:
    # Bug fixed: accepted, then dropped by to_options(). Flink rejects it with this message.
    with raises(r"The option 'key.fields' can only be declared if a key format is defined", "key.fields"):
        KafkaTable.from_options({"topic": "t", "format": "json", "key.fields": "user_id"}, KAFKA_COLUMNS)


def test_kafka_table_key_field_must_be_physical() -> None:
    columns = [*KAFKA_COLUMNS, {"name": "ts", "type": "TIMESTAMP_LTZ(3)", "metadata": "timestamp"}]
    with raises(r"column 'ts' is not a physical column", "key.fields", fix=False):
        KafkaTable.from_options(
            {"topic": "t", "format": "json", "key.format": "json", "key.fields": "ts"}, columns
        )


def test_kafka_table_prefix_rules() -> None:
    options = {
        "topic": "t",
        "format": "json",
        "key.format": "json",
        "key.fields": "user_id",
        "key.fields-prefix": "u",
    }
    with raises(
        r"A key prefix is not allowed when option 'value.fields-include' is set to 'ALL'", "key.fields-prefix"
    ):
        KafkaTable.from_options(options, KAFKA_COLUMNS)
    with raises(r"must be prefixed with 'k_' .* field 'user_id'", "key.fields-prefix"):
        KafkaTable.from_options(
            {**options, "key.fields-prefix": "k_", "value.fields-include": "EXCEPT_KEY"}, KAFKA_COLUMNS
        )


@pytest.mark.parametrize(
    "option",
    [
        "value.csv.field-delimiter",
        "key.fields-prefixx",
        "key.json.ignore-parse-errors",
        "csv.quote-character",
    ],
)
def test_kafka_table_rejects_options_of_other_formats_and_typos(option: str) -> None:
    # Bug fixed: any key.* / value.* option was kept unchecked.
    with raises(r"Unsupported option for the 'kafka' connector", option):
        KafkaTable.from_options({"topic": "t", "format": "json", option: "x"}, KAFKA_COLUMNS)


def test_kafka_table_rejects_unknown_format_option_names() -> None:
    with raises(r"is not an option of the value format 'json'", "value.json.nope"):
        KafkaTable.from_options({"topic": "t", "format": "json", "json.nope": "x"}, KAFKA_COLUMNS)
    with raises(r"is not an option of the key format 'csv'", "key.csv.nope"):
        KafkaTable.from_options({**KAFKA_KEYED, "key.csv.nope": "x"}, KAFKA_COLUMNS)


def test_kafka_table_key_format_option_without_key_format_in_constructor() -> None:
    data = KafkaTable.from_flink_ddl(KAFKA_DDL).model_dump()
    data["format_options"] = {"key.json.ignore-parse-errors": "true"}
    with raises(r"is a key format option but 'key.format' is not set", "key.json.ignore-parse-errors"):
        KafkaTable(**data)


def test_kafka_table_unknown_option() -> None:
    with raises(r"Unsupported option for the 'kafka' connector", "no.such"):
        KafkaTable.from_options({"topic": "t", "format": "json", "no.such": "x"}, KAFKA_COLUMNS)


def test_kafka_table_needs_a_value_format() -> None:
    with raises(r"is required", "value.format", fix=False):
        KafkaTable.from_options({"topic": "t"}, KAFKA_COLUMNS)


def test_kafka_table_unknown_and_unimplemented_formats() -> None:
    with raises(r"unknown format 'yaml'", "value.format"):
        KafkaTable.from_options({"topic": "t", "format": "yaml"}, KAFKA_COLUMNS)
    # a CDC format is a value format of a plain table (as in Flink), never a key format
    table = KafkaTable.from_options({"topic": "t", "format": "debezium-json"}, KAFKA_COLUMNS)
    assert table.value_format == "debezium-json"
    opts = {"topic": "t", "value.format": "canal-json", "key.format": "maxwell-json", "key.fields": "id"}
    with raises(r"'maxwell-json' is a changelog format; a key format must be insert-only", "key.format"):
        KafkaTable.from_options(opts, KAFKA_COLUMNS)
    with raises(r"the 'ogg-json' format is not supported by upsert-kafka-ops", "value.format", fix=False):
        KafkaTable.from_options({"topic": "t", "format": "ogg-json"}, KAFKA_COLUMNS)


def test_kafka_table_topic_rules_and_owned_properties() -> None:
    with raises(r"Either 'topic' or 'topic-pattern' must be set", "topic"):
        KafkaTable.from_options({"format": "json"}, KAFKA_COLUMNS)
    with raises(r"shouldn't be set together", "topic"):
        KafkaTable.from_options({"format": "json", "topic": "a", "topic-pattern": "a.*"}, KAFKA_COLUMNS)
    with raises(r"is set by the connector itself", "properties.value.deserializer"):
        KafkaTable.from_options(
            {"format": "json", "topic": "a", "properties.value.deserializer": "x"}, KAFKA_COLUMNS
        )


def test_kafka_table_rejects_primary_key_and_other_connectors() -> None:
    sql = KAFKA_DDL.replace("behavior STRING,", "behavior STRING, PRIMARY KEY (user_id) NOT ENFORCED,")
    with raises(r"a plain 'kafka' table has no PRIMARY KEY", "primary_key"):
        KafkaTable.from_flink_ddl(sql)
    with raises(r"is 'upsert-kafka', not 'kafka'", "connector", fix=False):
        KafkaTable.from_options({"connector": "upsert-kafka", "topic": "t", "format": "json"}, KAFKA_COLUMNS)


def test_kafka_table_bad_value_fields_include_names_the_option() -> None:
    with raises(r"'ALL' or 'EXCEPT_KEY'", "value.fields-include", fix=False):
        KafkaTable.from_options(
            {"topic": "t", "format": "json", "value.fields-include": "NONE"}, KAFKA_COLUMNS
        )


def test_primary_key_columns_are_not_null_as_in_flink() -> None:
    """Flink's CREATE TABLE makes PRIMARY KEY columns NOT NULL; it shows in the Avro schema of a value
    that includes the key (a bare long, not a union with null)."""
    from upsert_kafka_ops.formats.avro_codec import avro_schema

    t = UpsertKafkaTable.from_flink_ddl(
        "CREATE TABLE users (user_id BIGINT, user_name STRING, PRIMARY KEY (user_id) NOT ENFORCED) WITH ("
        "'connector' = 'upsert-kafka', 'topic' = 'users', 'key.format' = 'csv', 'value.format' = 'avro')"
    )
    assert [(c.name, c.type) for c in t.columns] == [("user_id", "BIGINT NOT NULL"), ("user_name", "STRING")]
    schema = avro_schema([(c.name, c.sql_type) for c in t.value_columns])
    assert [f["type"] for f in schema["fields"]] == ["long", ["null", "string"]]
    assert UpsertKafkaTable.from_flink_ddl(t.to_flink_ddl()) == t  # stable through a round trip


def test_write_append_refuses_what_a_kafka_sink_cannot_write_before_any_spark_work() -> None:
    from upsert_kafka_ops.engine import write_append

    cdc = KafkaTable.from_options({"topic": "t", "format": "debezium-json"}, KAFKA_COLUMNS)
    with raises("changelog envelope", "value.format"):
        write_append(None, cdc)  # type: ignore[arg-type]
    offset = [*KAFKA_COLUMNS, {"name": "off", "type": "BIGINT", "metadata": "offset"}]
    with raises("read-only metadata", "columns.off"):
        write_append(None, KafkaTable.from_options({"topic": "t", "format": "json"}, offset))  # type: ignore[arg-type]
    two = KafkaTable.from_options({"topic": "a;b", "format": "json"}, KAFKA_COLUMNS)
    with raises("exactly one topic", "topic"):
        write_append(None, two)  # type: ignore[arg-type]


def test_a_not_null_leader_epoch_is_refused_since_it_is_always_null_here() -> None:
    ddl = (
        "CREATE TABLE t (id BIGINT, e INT{} METADATA FROM 'leader-epoch' VIRTUAL) "
        "WITH ('connector' = 'kafka', 'topic' = 't', 'format' = 'json')"
    )
    assert KafkaTable.from_flink_ddl(ddl.format("")).metadata_columns[0].metadata == "leader-epoch"
    with raises("could never hold", "columns.e.type"):
        KafkaTable.from_flink_ddl(ddl.format(" NOT NULL"))
