"""Flink ``CREATE TABLE`` parsing: accepted and rejected constructs, finding statements in scripts.

The statement shapes of whole documents are in the DDL corpus (test_ddl_corpus.py)."""

from __future__ import annotations

import pytest

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.spec.ddl import DdlColumn, DdlError, DdlTable, find_create_tables, parse_create_table
from upsert_kafka_ops.spec.types import parse_type

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


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        ("U&'\\0001'", "\x01"),
        ("u&'tab\\0009end'", "tab\tend"),
        ("U&'\\+01F600'", "\U0001f600"),
        ("U&'back\\\\slash'", "back\\slash"),
        ("U&'it''s'", "it's"),
        ("U&'!0041!!' UESCAPE '!'", "A!"),
    ],
)
def test_unicode_literals_read_as_flink_reads_them(literal: str, value: str) -> None:
    ddl = parse_create_table(f"CREATE TABLE t (id BIGINT) WITH ('connector' = 'kafka', 'x' = {literal})")
    assert ddl.options["x"] == value


@pytest.mark.parametrize("literal", ["U&'\\00G1'", "U&'\\12'", "U&'\\+FFFFFF'", "U&'x' UESCAPE '+'"])
def test_a_bad_unicode_literal_is_an_error_naming_it(literal: str) -> None:
    with pytest.raises(DdlError) as info:
        parse_create_table(f"CREATE TABLE t (id BIGINT) WITH ('x' = {literal})")
    assert info.value.construct in ("Unicode literal", "UESCAPE") and info.value.line == 1
