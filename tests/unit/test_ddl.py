"""Flink ``CREATE TABLE`` parsing: the Flink documentation corpus, accepted and rejected constructs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.spec.ddl import DdlColumn, DdlError, DdlTable, find_create_tables, parse_create_table
from upsert_kafka_ops.spec.types import parse_type

# The Flink documentation copies live next to the repository clone, in shared/reference.
REFERENCE = Path(__file__).resolve().parents[2].parent / "shared" / "reference"


@dataclass(frozen=True)
class Parses:
    """The statement parses into this table (name, column names, PRIMARY KEY, 'connector' option)."""

    name: str
    columns: tuple[str, ...]
    primary_key: tuple[str, ...] | None
    connector: str


@dataclass(frozen=True)
class Rejected:
    """The statement raises DdlError for this construct, at this line and column of the statement."""

    construct: str
    line: int
    column: int


ORDERS = (
    "order_id",
    "order_channel",
    "order_time",
    "pay_amount",
    "real_pay",
    "pay_time",
    "user_id",
    "user_name",
    "area_id",
)
# Flattened HTML: a '--' comment runs to the end of the physical line and swallows the rest of the
# statement, so it ends where the next CREATE TABLE on that line starts, inside its WITH clause.
TRUNCATED_BY_COMMENT = "syntax error"

# Every CREATE TABLE statement of every document, in document order, keyed by file and by the
# 1-based line where the statement starts (flattened lines hold two statements).
CORPUS: dict[str, list[tuple[int, Parses | Rejected]]] = {
    "flip-149-upsert-kafka.txt": [
        (127, Parses("dbz_users", ("user_id", "user_name", "region"), None, "kafka")),
        (
            153,
            Parses("users", ("user_id", "user_name", "user_level", "region"), ("user_id",), "upsert-kafka"),
        ),
        (184, Rejected("computed column", 5, 3)),  # proctime AS PROCTIME()
        (210, Rejected("WATERMARK", 6, 3)),
        (
            244,
            Parses(
                "pageviews_per_region_5min",
                ("window_start", "region", "view_count"),
                ("window_start", "region"),
                "upsert-kafka",
            ),
        ),
        (279, Parses("pageviews_per_region", ("region", "view_count"), ("region",), "upsert-kafka")),
    ],
    "kafka-connector-dli.txt": [
        (9, Rejected("data type", 1, 37)),  # grammar template: attr_name attr_type (',' ...)*
        (215, Rejected("syntax error", 1, 158)),  # ... placeholder in WITH
        (219, Rejected("syntax error", 1, 158)),  # ... placeholder in WITH
        (226, Rejected("syntax error", 1, 149)),  # ... placeholder in WITH
        (
            232,
            Parses(
                "kafkaSource",
                (
                    "topic",
                    "partition",
                    "headers",
                    "leader-epoch",
                    "offset",
                    "timestamp-type",
                    "event_time",
                    "message",
                ),
                None,
                "kafka",
            ),
        ),
        # '-- Indicates that ...' swallows ') WITH (...);': the JSON sample on the next line is unexpected
        (232, Rejected("syntax error", 2, 1)),
        (239, Parses("kafkaSource", ORDERS, None, "kafka")),
        (239, Parses("kafkaSink", ORDERS, None, "kafka")),
        (248, Rejected(TRUNCATED_BY_COMMENT, 1, 1182)),
        (248, Parses("ordersSink", ORDERS, None, "print")),
        (250, Rejected(TRUNCATED_BY_COMMENT, 1, 1318)),
        (250, Parses("ordersSink", ORDERS, None, "print")),
        (251, Rejected(TRUNCATED_BY_COMMENT, 1, 823)),
        (251, Parses("ordersSink", ORDERS, None, "print")),
        (253, Rejected(TRUNCATED_BY_COMMENT, 1, 1073)),
        (253, Parses("ordersSink", ORDERS, None, "print")),
    ],
    "kafka-connector-vvr.txt": [
        (217, Parses("KafkaTable", ("user_id", "item_id", "behavior", "ts"), None, "kafka")),
        (235, Rejected("syntax error", 8, 3)),  # ... placeholder column
        (248, Rejected("syntax error", 4, 3)),  # ... placeholder column
        (792, Rejected("syntax error", 8, 3)),  # ... placeholder option
        (807, Rejected("syntax error", 8, 3)),  # ... placeholder option
        (867, Rejected("syntax error", 2, 3)),  # ... placeholder column
        (927, Parses("kafka_source", ("id", "name", "age"), None, "kafka")),
        (939, Parses("kafka_sink", ("id", "name", "age"), None, "kafka")),
        (957, Rejected("PRIMARY KEY on a METADATA column", 4, 16)),  # PRIMARY KEY (`part`, `offset`)
        (971, Rejected("CTAS", 4, 3)),  # ) AS TABLE vvp.`default`.kafkaTable
        (980, Parses("kafkaTable", ("key_id", "val_name"), None, "kafka")),
        (996, Rejected("syntax error", 2, 1)),  # `sync_kafka`( followed by WITH
        (1008, Rejected("computed column", 5, 3)),  # `date` AS CAST(`timestamp` AS DATE)
        (1024, Rejected("CTAS", 3, 3)),
        (1046, Parses("kafka_source", ("id", "name", "properties"), None, "kafka")),
        (1726, Rejected("missing WITH clause", 1, 50)),  # prose: CREATE TABLE db1.t1 (...);
        (1726, Rejected("missing WITH clause", 1, 32)),  # prose: CREATE TABLE db1.t2 (...);
        (2280, Rejected("missing WITH clause", 1, 50)),
        (2280, Rejected("missing WITH clause", 1, 32)),
    ],
    "upsert-kafka-connector-dli.txt": [
        (23, Rejected("data type", 1, 36)),  # grammar template
        (97, Parses("upsertKafkaSource", ORDERS, ("order_id",), "upsert-kafka")),
        (97, Parses("printSink", ORDERS, ("order_id",), "print")),
        (107, Parses("orders", ORDERS, None, "kafka")),
        (107, Parses("upsertKafkaSink", ORDERS, ("order_id",), "upsert-kafka")),
        (117, Rejected(TRUNCATED_BY_COMMENT, 1, 854)),
        (117, Parses("printSink", ORDERS, ("order_id",), "print")),
    ],
    "upsert-kafka-connector-vvr.txt": [
        (41, Rejected("WATERMARK", 6, 1)),
        (54, Parses("pageviews_per_region", ("user_region", "pv", "uv"), ("user_region",), "upsert-kafka")),
        (77, Parses("upsert_kafka_sink", ("user_region", "pv", "uv"), ("user_region",), "upsert-kafka")),
    ],
}
STATEMENT_COUNTS = {
    "flip-149-upsert-kafka.txt": 6,
    "kafka-connector-dli.txt": 16,
    "kafka-connector-vvr.txt": 19,
    "upsert-kafka-connector-dli.txt": 7,
    "upsert-kafka-connector-vvr.txt": 3,
}


def _reference_folder() -> Path:
    assert REFERENCE.is_dir(), (
        f"The Flink reference documents are missing: expected the folder {REFERENCE} "
        "(shared/reference next to the repository clone)."
    )
    return REFERENCE


def test_the_corpus_table_covers_every_reference_document() -> None:
    names = sorted(p.name for p in _reference_folder().glob("*.txt"))
    assert names == sorted(CORPUS) == sorted(STATEMENT_COUNTS)
    assert sum(STATEMENT_COUNTS.values()) == 51


@pytest.mark.parametrize("file_name", sorted(CORPUS))
def test_every_corpus_statement_parses_or_is_rejected_as_expected(file_name: str) -> None:
    text = (_reference_folder() / file_name).read_text(encoding="utf-8")
    found = find_create_tables(text)
    expected = CORPUS[file_name]
    assert len(found) == len(expected) == STATEMENT_COUNTS[file_name]
    assert [line for line, _ in found] == [line for line, _ in expected]
    for (line, statement), (_, outcome) in zip(found, expected, strict=True):
        if isinstance(outcome, Parses):
            table = parse_create_table(statement)
            got = (
                table.name,
                tuple(c.name for c in table.columns),
                table.primary_key,
                table.options["connector"],
            )
            assert got == (outcome.name, outcome.columns, outcome.primary_key, outcome.connector), line
        else:
            with pytest.raises(DdlError) as info:
                parse_create_table(statement)
            assert (info.value.construct, info.value.line, info.value.column) == (
                outcome.construct,
                outcome.line,
                outcome.column,
            ), f"line {line}: {info.value}"
            assert f"(line {outcome.line}, column {outcome.column})" in str(info.value)


# -- accepted constructs

FULL = """-- a leading comment
/* a block
   comment */
CREATE TEMPORARY TABLE IF NOT EXISTS cat.`my db`.`we``ird` (
  `id` BIGINT NOT NULL PRIMARY KEY NOT ENFORCED COMMENT 'the key',
  name VARCHAR(20), -- a trailing comment
  amount DECIMAL(10, 2),
  tags MAP<STRING, ARRAY<ROW<x INT, y STRING>>>,
  ts TIMESTAMP(3) WITH LOCAL TIME ZONE NOT NULL METADATA FROM 'timestamp' VIRTUAL COMMENT 'record time',
  `offset` BIGINT METADATA VIRTUAL,
  headers MAP<STRING, /* inside a type */ BYTES> METADATA
) COMMENT 'it''s a table' WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'users', /* between options */ 'key.format' = 'json',
  'value.format' = 'json',
  'properties.sasl.jaas.config' = 'x required username=''u'';'
);
"""


def test_a_statement_with_every_accepted_construct() -> None:
    assert parse_create_table(FULL) == DdlTable(
        name="we`ird",
        qualified_name=("cat", "my db", "we`ird"),
        columns=(
            DdlColumn("id", parse_type("BIGINT NOT NULL"), comment="the key", line=5, column=3),
            DdlColumn("name", parse_type("VARCHAR(20)"), line=6, column=3),
            DdlColumn("amount", parse_type("DECIMAL(10, 2)"), line=7, column=3),
            DdlColumn("tags", parse_type("MAP<STRING, ARRAY<ROW<x INT, y STRING>>>"), line=8, column=3),
            DdlColumn(
                "ts",
                parse_type("TIMESTAMP_LTZ(3) NOT NULL"),
                metadata_key="timestamp",
                virtual=True,
                comment="record time",
                line=9,
                column=3,
            ),
            DdlColumn("offset", parse_type("BIGINT"), metadata_key="offset", virtual=True, line=10, column=3),
            DdlColumn("headers", parse_type("MAP<STRING, BYTES>"), metadata_key="headers", line=11, column=3),
        ),
        primary_key=("id",),
        primary_key_enforced=False,
        options={
            "connector": "upsert-kafka",
            "topic": "users",
            "key.format": "json",
            "value.format": "json",
            "properties.sasl.jaas.config": "x required username='u';",
        },
        comment="it's a table",
    )


def test_options_keep_their_order() -> None:
    table = parse_create_table(FULL)
    assert list(table.options) == [
        "connector",
        "topic",
        "key.format",
        "value.format",
        "properties.sasl.jaas.config",
    ]


def test_a_table_constraint_lists_the_key_in_constraint_order() -> None:
    table = parse_create_table(
        """CREATE TABLE t (
  a INT,
  b STRING,
  c BIGINT,
  CONSTRAINT pk PRIMARY KEY (c, `a`) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka')"""
    )
    assert table.primary_key == ("c", "a")
    assert table.primary_key_enforced is False
    assert [c.type.to_flink() for c in table.columns] == ["INT", "STRING", "BIGINT"]  # types as declared


def test_a_named_column_constraint() -> None:
    table = parse_create_table(
        "CREATE TABLE t (a INT, b STRING CONSTRAINT pk PRIMARY KEY NOT ENFORCED) WITH ('k' = 'v')"
    )
    assert table.primary_key == ("b",)


def test_keywords_are_case_insensitive_and_names_keep_their_case() -> None:
    table = parse_create_table(
        "create temporary table if not exists Db.MyTable (Id int primary key not enforced comment 'c', "
        "M string not null metadata from 'topic' virtual) comment 'x' with ('connector' = 'kafka');"
    )
    assert table.qualified_name == ("Db", "MyTable")
    assert table.name == "MyTable"
    assert [(c.name, c.type.to_flink(), c.metadata_key, c.virtual) for c in table.columns] == [
        ("Id", "INT", None, False),
        ("M", "STRING NOT NULL", "topic", True),
    ]
    assert table.primary_key == ("Id",)
    assert table.comment == "x"


def test_without_primary_key_and_without_semicolon() -> None:
    table = parse_create_table(
        "CREATE TABLE t (a ROW(x INT, y ARRAY<INT>), b INT ARRAY) WITH ('connector' = 'kafka')"
    )
    assert table.primary_key is None
    assert table.comment is None
    assert [c.type.to_flink() for c in table.columns] == ["ROW<`x` INT, `y` ARRAY<INT>>", "ARRAY<INT>"]


# -- rejected constructs: (statement, construct, line, column, message fragment)

PROCTIME = """CREATE TABLE pageviews (
  user_id BIGINT,
  page_id BIGINT,
  viewtime TIMESTAMP,
  -- processing time
  proctime AS PROCTIME()
) WITH ('connector' = 'kafka')"""

REJECTED = [
    pytest.param(
        PROCTIME,
        "computed column",
        6,
        3,
        "computed column 'proctime' (AS PROCTIME()) is not supported (line 6, column 3); "
        "declare a physical or METADATA column instead.",
        id="computed-column",
    ),
    pytest.param(
        "CREATE TABLE t (\n  ts TIMESTAMP(3),\n  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND\n) WITH ('k' = 'v')",
        "WATERMARK",
        3,
        3,
        "WATERMARK definition is not supported (line 3, column 3)",
        id="watermark",
    ),
    pytest.param(
        "CREATE TABLE t (a INT)\nPARTITIONED BY (a)\nWITH ('k' = 'v')",
        "PARTITIONED BY",
        2,
        1,
        "PARTITIONED BY is not supported (line 2, column 1)",
        id="partitioned-by",
    ),
    pytest.param(
        "CREATE TABLE t (a INT) DISTRIBUTED BY HASH(a) INTO 4 BUCKETS WITH ('k' = 'v')",
        "DISTRIBUTED BY",
        1,
        24,
        "DISTRIBUTED BY is not supported (line 1, column 24)",
        id="distributed-by",
    ),
    pytest.param(
        "CREATE TABLE t (a INT) COMMENT 'c' DISTRIBUTED INTO 4 BUCKETS WITH ('k' = 'v')",
        "DISTRIBUTED BY",
        1,
        36,
        "DISTRIBUTED BY is not supported (line 1, column 36)",
        id="distributed-into",
    ),
    pytest.param(
        "CREATE TABLE t (a INT)\nWITH ('k' = 'v')\nLIKE base (EXCLUDING ALL)",
        "LIKE",
        3,
        1,
        "CREATE TABLE ... LIKE is not supported (line 3, column 1)",
        id="like-after-with",
    ),
    pytest.param(
        "CREATE TABLE t LIKE base",
        "LIKE",
        1,
        16,
        "LIKE is not supported (line 1, column 16)",
        id="like-alone",
    ),
    pytest.param(
        "CREATE TABLE t WITH ('connector' = 'kafka') AS SELECT * FROM s",
        "CTAS",
        1,
        45,
        "CREATE TABLE ... AS (CTAS) is not supported (line 1, column 45)",
        id="ctas-select",
    ),
    pytest.param(
        "CREATE TABLE t (a INT)\nWITH ('k' = 'v')\nAS TABLE src;",
        "CTAS",
        3,
        1,
        "(CTAS) is not supported (line 3, column 1)",
        id="ctas-table",
    ),
    pytest.param("CREATE TABLE t AS SELECT 1", "CTAS", 1, 16, "(line 1, column 16)", id="ctas-without-with"),
    pytest.param(
        "CREATE TABLE t (\n  a INT,\n  PRIMARY KEY (a)\n) WITH ('k' = 'v')",
        "PRIMARY KEY without NOT ENFORCED",
        3,
        3,
        "a PRIMARY KEY without NOT ENFORCED is not supported",
        id="pk-enforced",
    ),
    pytest.param(
        "CREATE TABLE t (\n  a INT,\n  CONSTRAINT pk PRIMARY KEY (a) ENFORCED\n) WITH ('k' = 'v')",
        "PRIMARY KEY without NOT ENFORCED",
        3,
        3,
        "(line 3, column 3); write PRIMARY KEY (...) NOT ENFORCED.",
        id="pk-explicitly-enforced",
    ),
    pytest.param(
        "CREATE TABLE t (a INT PRIMARY KEY, b INT) WITH ('k' = 'v')",
        "PRIMARY KEY without NOT ENFORCED",
        1,
        23,
        "(line 1, column 23)",
        id="inline-pk-enforced",
    ),
    pytest.param(
        "CREATE TABLE t (\n  a INT PRIMARY KEY NOT ENFORCED,\n  b INT,\n  PRIMARY KEY (b) NOT ENFORCED\n) WITH ('k' = 'v')",
        "duplicate PRIMARY KEY",
        4,
        3,
        "a second PRIMARY KEY is not supported (line 4, column 3)",
        id="two-primary-keys",
    ),
    pytest.param(
        "CREATE TABLE t (\n  a INT PRIMARY KEY NOT ENFORCED,\n  b INT CONSTRAINT k2 PRIMARY KEY NOT ENFORCED\n) WITH ('k' = 'v')",
        "duplicate PRIMARY KEY",
        3,
        9,
        "a second PRIMARY KEY is not supported (line 3, column 9)",
        id="two-inline-primary-keys",
    ),
    pytest.param(
        "CREATE TABLE t (\n  a INT,\n  `a` STRING\n) WITH ('k' = 'v')",
        "duplicate column",
        3,
        3,
        "duplicate column 'a' (line 3, column 3)",
        id="duplicate-column",
    ),
    pytest.param(
        "CREATE TABLE t (\n  a INT,\n  PRIMARY KEY (a, zz) NOT ENFORCED\n) WITH ('k' = 'v')",
        "unknown PRIMARY KEY column",
        3,
        19,
        "PRIMARY KEY column 'zz' is not a column of the table (line 3, column 19); choose from a.",
        id="unknown-key-column",
    ),
    pytest.param(
        "CREATE TABLE t (\n  a INT,\n  PRIMARY KEY (a, a) NOT ENFORCED\n) WITH ('k' = 'v')",
        "duplicate PRIMARY KEY column",
        3,
        19,
        "column 'a' appears twice in the PRIMARY KEY (line 3, column 19)",
        id="duplicate-key-column",
    ),
    pytest.param(
        "CREATE TABLE t (\n  m INT METADATA FROM 'partition',\n  PRIMARY KEY (m) NOT ENFORCED\n) WITH ('k' = 'v')",
        "PRIMARY KEY on a METADATA column",
        3,
        16,
        "PRIMARY KEY column 'm' is a METADATA column",
        id="metadata-key-column",
    ),
    pytest.param(
        "CREATE TABLE t (a INT)\nWITH ('connector' = 'kafka', 'connector' = 'upsert-kafka')",
        "duplicate option",
        2,
        30,
        "option 'connector' is set twice (line 2, column 30)",
        id="duplicate-option",
    ),
    pytest.param(
        "CREATE TABLE t (a INT);",
        "missing WITH clause",
        1,
        23,
        "a CREATE TABLE without a WITH clause is not supported (line 1, column 23)",
        id="missing-with",
    ),
    pytest.param(
        "CREATE TABLE t WITH ('connector' = 'kafka')",
        "missing column list",
        1,
        16,
        "a CREATE TABLE without a column list is not supported (line 1, column 16)",
        id="missing-columns",
    ),
    pytest.param(
        "CREATE TABLE t (\n  a INT,\n  d INTERVAL DAY\n) WITH ('k' = 'v')",
        "data type",
        3,
        5,
        "invalid data type for column 'd': INTERVAL is not supported by upsert-kafka-ops (in 'INTERVAL DAY') "
        "(line 3, column 5)",
        id="unsupported-type",
    ),
    pytest.param(
        "CREATE TABLE t (a INT, b DECIMAL(50, 2)) WITH ('k' = 'v')",
        "data type",
        1,
        26,
        "invalid data type for column 'b': malformed data type 'DECIMAL(50, 2)'",
        id="malformed-type",
    ),
    pytest.param(
        "CREATE TABLE t (\n  a INT,\n  ...\n) WITH ('k' = 'v')",
        "syntax error",
        3,
        3,
        "syntax error: unexpected '...' (line 3, column 3); expected a column name.",
        id="placeholder-column",
    ),
    pytest.param(
        "CREATE TABLE t (a INT) WITH (\n  'connector' = 'kafka',\n  ...\n)",
        "syntax error",
        3,
        3,
        "syntax error: unexpected '...' (line 3, column 3); expected an option key in quotes",
        id="placeholder-option",
    ),
    pytest.param(
        "CREATE TABLE t () WITH ('k' = 'v')",
        "syntax error",
        1,
        17,
        "unexpected ')' (line 1, column 17); expected a column name",
        id="empty-column-list",
    ),
    pytest.param(
        "CREATE TABLE t (a, b INT) WITH ('k' = 'v')",
        "syntax error",
        1,
        18,
        "unexpected ',' (line 1, column 18); expected a data type",
        id="missing-type",
    ),
    pytest.param(
        "CREATE TABLE t (\nWITH ('k' = 'v')",
        "syntax error",
        2,
        1,
        "unexpected 'WITH' (line 2, column 1); expected a column name",
        id="reserved-word-as-column",
    ),
    pytest.param(
        "CREATE TABLE t (a INT) WITH ('k' = 'v',)",
        "syntax error",
        1,
        40,
        "unexpected ')' (line 1, column 40); expected an option key",
        id="trailing-comma",
    ),
    pytest.param(
        "CREATE TABLE t (a INT) WITH ('k' 'v')",
        "syntax error",
        1,
        34,
        "unexpected \"'v'\" (line 1, column 34); expected '='",
        id="missing-equals",
    ),
    pytest.param(
        "CREATE TABLE t (a INT) WITH (connector = 'kafka')",
        "syntax error",
        1,
        30,
        "unexpected 'connector' (line 1, column 30); expected an option key in quotes",
        id="unquoted-key",
    ),
    pytest.param(
        "CREATE TABLE t (a INT) WITH ('connector' = 'kafka)",
        "syntax error",
        1,
        44,
        "unexpected unterminated quote (line 1, column 44)",
        id="unterminated-string",
    ),
    pytest.param(
        "CREATE TABLE t (a INT) WITH ('k' = 'v'); SELECT 1",
        "syntax error",
        1,
        42,
        "unexpected 'SELECT' (line 1, column 42); expected the end of the statement",
        id="two-statements",
    ),
    pytest.param(
        "CREATE TABLE t (\n  a INT",
        "syntax error",
        2,
        8,
        "unexpected end of input (line 2, column 8); expected ',' or ')'",
        id="end-of-input",
    ),
    pytest.param(
        "CREATE VIEW v AS SELECT 1",
        "syntax error",
        1,
        8,
        "unexpected 'VIEW' (line 1, column 8)",
        id="create-view",
    ),
    pytest.param("", "syntax error", 1, 1, "unexpected end of input (line 1, column 1)", id="empty"),
]


@pytest.mark.parametrize(("sql", "construct", "line", "column", "message"), REJECTED)
def test_rejected_construct(sql: str, construct: str, line: int, column: int, message: str) -> None:
    with pytest.raises(DdlError) as info:
        parse_create_table(sql)
    error = info.value
    assert (error.construct, error.line, error.column) == (construct, line, column)
    assert message in str(error)
    assert f"(line {line}, column {column}); " in str(error)


def test_ddl_error_is_a_spec_error_with_a_fix() -> None:
    with pytest.raises(DdlError) as info:
        parse_create_table(PROCTIME)
    error = info.value
    assert isinstance(error, SpecError)
    assert isinstance(error, ValueError)
    assert error.field == "ddl"
    assert error.fix == "declare a physical or METADATA column instead"
    assert str(error) == (
        "ddl: computed column 'proctime' (AS PROCTIME()) is not supported (line 6, column 3); "
        "declare a physical or METADATA column instead."
    )


# -- finding statements in scripts and documents

SCRIPT = """-- setup
CREATE TABLE a (x INT) WITH ('connector' = 'kafka', 'key.fields' = 'x;y');
-- CREATE TABLE commented_out (x INT) WITH ('connector' = 'kafka');
INSERT INTO b SELECT * FROM a;
create temporary table b (
  x INT
) with (
  'connector' = 'upsert-kafka',
  'sql' = 'CREATE TABLE not_a_statement (y INT) WITH ()'
);
"""


def test_find_statements_in_a_script() -> None:
    assert find_create_tables(SCRIPT) == [
        (2, "CREATE TABLE a (x INT) WITH ('connector' = 'kafka', 'key.fields' = 'x;y');"),
        (
            5,
            "create temporary table b (\n  x INT\n) with (\n  'connector' = 'upsert-kafka',\n"
            "  'sql' = 'CREATE TABLE not_a_statement (y INT) WITH ()'\n);",
        ),
    ]


def test_without_semicolon_a_statement_ends_with_its_with_clause() -> None:
    prose = (
        "The CREATE TABLE statement below declares a source.\n"
        "CREATE TABLE src (\n  x INT\n) WITH (\n  'connector' = 'kafka'\n)\n"
        "The value format will be configured with ROW<x INT>; that's all.\n"
    )
    assert find_create_tables(prose) == [
        (2, "CREATE TABLE src (\n  x INT\n) WITH (\n  'connector' = 'kafka'\n)")
    ]


def test_a_ctas_statement_continues_after_its_with_clause() -> None:
    text = "CREATE TABLE t WITH (\n  'connector' = 'x'\n) AS TABLE src\nADD COLUMN c AS x;\n-- trailing\n"
    assert find_create_tables(text) == [
        (1, "CREATE TABLE t WITH (\n  'connector' = 'x'\n) AS TABLE src\nADD COLUMN c AS x;")
    ]


def test_a_flattened_line_where_a_comment_swallows_the_end_of_a_statement() -> None:
    line = (
        "CREATE TABLE a (x INT) WITH ('connector' = 'kafka', -- a note 'k' = 'v' ); "
        "CREATE TABLE b (y INT) WITH ('connector' = 'print'); INSERT INTO b SELECT * FROM a;"
    )
    first = "CREATE TABLE a (x INT) WITH ('connector' = 'kafka', -- a note 'k' = 'v' );"
    second = "CREATE TABLE b (y INT) WITH ('connector' = 'print');"
    assert find_create_tables(f"Example:\n{line}\nMore prose.") == [(2, first), (2, second)]
    with pytest.raises(DdlError) as info:
        parse_create_table(first)
    assert (info.value.construct, info.value.line, info.value.column) == ("syntax error", 1, len(first) + 1)
    assert parse_create_table(second).options == {"connector": "print"}


def test_a_statement_that_never_closes_runs_to_the_end() -> None:
    assert find_create_tables("intro\ncreate table t (\n  a INT,\n\n") == [(2, "create table t (\n  a INT,")]


def test_no_statements() -> None:
    assert find_create_tables("") == []
    assert find_create_tables("Use CREATE TABLE statements to declare tables; CREATE TABLE is DDL.") == []
