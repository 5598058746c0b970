"""Flink SQL data types: parsing, synonyms, canonical Flink text and the Spark mapping."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.spec.types import RowField, SqlType, parse_type

INT = SqlType("INT")
STRING = SqlType("STRING")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("INT", INT),
        ("int", INT),
        ("Integer", INT),
        ("STRING", STRING),
        ("BOOLEAN", SqlType("BOOLEAN")),
        ("TINYINT", SqlType("TINYINT")),
        ("SMALLINT", SqlType("SMALLINT")),
        ("BIGINT", SqlType("BIGINT")),
        ("FLOAT", SqlType("FLOAT")),
        ("REAL", SqlType("FLOAT")),
        ("DOUBLE", SqlType("DOUBLE")),
        ("double  precision", SqlType("DOUBLE")),
        ("DATE", SqlType("DATE")),
        ("BYTES", SqlType("BYTES")),
        # character strings: VARCHAR without a length is STRING in Flink DDL, CHAR is CHAR(1)
        ("VARCHAR", STRING),
        ("VARCHAR(2147483647)", STRING),
        ("VARCHAR(10)", SqlType("VARCHAR", params=(10,))),
        ("CHAR", SqlType("CHAR", params=(1,))),
        ("char(3)", SqlType("CHAR", params=(3,))),
        ("VARBINARY", SqlType("BYTES")),
        ("VARBINARY(2147483647)", SqlType("BYTES")),
        ("VARBINARY(16)", SqlType("VARBINARY", params=(16,))),
        ("BINARY", SqlType("BINARY", params=(1,))),
        ("BINARY(16)", SqlType("BINARY", params=(16,))),
        # decimals
        ("DECIMAL", SqlType("DECIMAL", params=(10, 0))),
        ("DECIMAL(5)", SqlType("DECIMAL", params=(5, 0))),
        ("DECIMAL(10, 2)", SqlType("DECIMAL", params=(10, 2))),
        ("DEC(38,38)", SqlType("DECIMAL", params=(38, 38))),
        ("numeric(12, 4)", SqlType("DECIMAL", params=(12, 4))),
        # time
        ("TIME", SqlType("TIME", params=(0,))),
        ("TIME(3)", SqlType("TIME", params=(3,))),
        ("TIME(3) WITHOUT TIME ZONE", SqlType("TIME", params=(3,))),
        ("TIMESTAMP", SqlType("TIMESTAMP", params=(6,))),
        ("TIMESTAMP(3)", SqlType("TIMESTAMP", params=(3,))),
        ("TIMESTAMP(9) WITHOUT TIME ZONE", SqlType("TIMESTAMP", params=(9,))),
        ("timestamp without time zone", SqlType("TIMESTAMP", params=(6,))),
        ("TIMESTAMP_LTZ", SqlType("TIMESTAMP_LTZ", params=(6,))),
        ("TIMESTAMP_LTZ(3)", SqlType("TIMESTAMP_LTZ", params=(3,))),
        ("TIMESTAMP(3) WITH LOCAL TIME ZONE", SqlType("TIMESTAMP_LTZ", params=(3,))),
        ("TIMESTAMP WITH LOCAL TIME ZONE", SqlType("TIMESTAMP_LTZ", params=(6,))),
        # nullability
        ("INT NOT NULL", SqlType("INT", nullable=False)),
        ("int not null", SqlType("INT", nullable=False)),
        ("INT NULL", INT),
        ("DECIMAL(10, 2) NOT NULL", SqlType("DECIMAL", nullable=False, params=(10, 2))),
        # collections
        ("ARRAY<INT>", SqlType("ARRAY", element=INT)),
        ("INT ARRAY", SqlType("ARRAY", element=INT)),
        (
            "INT NOT NULL ARRAY NOT NULL",
            SqlType("ARRAY", nullable=False, element=SqlType("INT", nullable=False)),
        ),
        ("ARRAY<INT NOT NULL>", SqlType("ARRAY", element=SqlType("INT", nullable=False))),
        ("MULTISET<STRING>", SqlType("MULTISET", element=STRING)),
        ("STRING MULTISET", SqlType("MULTISET", element=STRING)),
        ("MAP<STRING, BYTES>", SqlType("MAP", key=STRING, value=SqlType("BYTES"))),
        (
            "MAP<STRING NOT NULL, INT NOT NULL> NOT NULL",
            SqlType(
                "MAP",
                nullable=False,
                key=SqlType("STRING", nullable=False),
                value=SqlType("INT", nullable=False),
            ),
        ),
        # rows
        ("ROW<a INT, b STRING>", SqlType("ROW", fields=(RowField("a", INT), RowField("b", STRING)))),
        ("ROW(a INT, b STRING)", SqlType("ROW", fields=(RowField("a", INT), RowField("b", STRING)))),
        ("row<`a` int, `b` string>", SqlType("ROW", fields=(RowField("a", INT), RowField("b", STRING)))),
        ("ROW<`we``ird name` INT>", SqlType("ROW", fields=(RowField("we`ird name", INT),))),
        ("ROW<>", SqlType("ROW")),
        (
            "ROW<a INT NOT NULL 'the a', b STRING 'it''s b'> NOT NULL",
            SqlType(
                "ROW",
                nullable=False,
                fields=(
                    RowField("a", SqlType("INT", nullable=False), "the a"),
                    RowField("b", STRING, "it's b"),
                ),
            ),
        ),
        # nesting, with nullability at every level
        (
            "MAP<STRING, ARRAY<ROW<x INT NOT NULL>>>",
            SqlType(
                "MAP",
                key=STRING,
                value=SqlType(
                    "ARRAY", element=SqlType("ROW", fields=(RowField("x", SqlType("INT", nullable=False)),))
                ),
            ),
        ),
        (
            "ROW<inner ROW<deep ARRAY<TIMESTAMP(3) WITH LOCAL TIME ZONE NOT NULL> NOT NULL>>",
            SqlType(
                "ROW",
                fields=(
                    RowField(
                        "inner",
                        SqlType(
                            "ROW",
                            fields=(
                                RowField(
                                    "deep",
                                    SqlType(
                                        "ARRAY",
                                        nullable=False,
                                        element=SqlType("TIMESTAMP_LTZ", nullable=False, params=(3,)),
                                    ),
                                ),
                            ),
                        ),
                    ),
                ),
            ),
        ),
        ("  MAP < STRING , INT >  ", SqlType("MAP", key=STRING, value=INT)),
    ],
)
def test_parse_type(text: str, expected: SqlType) -> None:
    assert parse_type(text) == expected


@pytest.mark.parametrize(
    ("text", "flink"),
    [
        ("integer", "INT"),
        ("varchar", "STRING"),
        ("VARCHAR(10)", "VARCHAR(10)"),
        ("dec", "DECIMAL(10, 0)"),
        ("DECIMAL(10,2) NOT NULL", "DECIMAL(10, 2) NOT NULL"),
        ("TIMESTAMP(3) WITH LOCAL TIME ZONE", "TIMESTAMP_LTZ(3)"),
        ("TIMESTAMP", "TIMESTAMP(6)"),
        ("TIME", "TIME(0)"),
        ("BINARY", "BINARY(1)"),
        ("MAP<STRING, BYTES>", "MAP<STRING, BYTES>"),
        ("INT ARRAY NOT NULL", "ARRAY<INT> NOT NULL"),
        ("ROW(a INT, b STRING)", "ROW<`a` INT, `b` STRING>"),
        ("ROW<`a``b` INT NOT NULL 'it''s'>", "ROW<`a``b` INT NOT NULL 'it''s'>"),
    ],
)
def test_to_flink_is_canonical(text: str, flink: str) -> None:
    assert parse_type(text).to_flink() == flink


_LEAVES = st.one_of(
    st.sampled_from(
        ["STRING", "BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DATE", "BYTES"]
    ).map(SqlType),
    st.builds(
        lambda n, p: SqlType(n, params=(p,)),
        st.sampled_from(["VARCHAR", "CHAR", "BINARY", "VARBINARY"]),
        st.integers(1, 65535),
    ),
    st.integers(1, 38).flatmap(lambda p: st.integers(0, p).map(lambda s: SqlType("DECIMAL", params=(p, s)))),
    st.builds(
        lambda n, p: SqlType(n, params=(p,)),
        st.sampled_from(["TIME", "TIMESTAMP", "TIMESTAMP_LTZ"]),
        st.integers(0, 9),
    ),
)
_NAMES = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=8)


def _nested(children: st.SearchStrategy[SqlType]) -> st.SearchStrategy[SqlType]:
    fields = st.lists(
        st.builds(RowField, _NAMES, children, st.none() | st.text(max_size=8)),
        max_size=3,
        unique_by=lambda f: f.name,
    )
    return st.one_of(
        st.builds(lambda e: SqlType("ARRAY", element=e), children),
        st.builds(lambda e: SqlType("MULTISET", element=e), children),
        st.builds(lambda k, v: SqlType("MAP", key=k, value=v), children, children),
        fields.map(lambda fs: SqlType("ROW", fields=tuple(fs))),
    )


_TYPES = st.recursive(_LEAVES, _nested, max_leaves=8).flatmap(
    lambda t: st.booleans().map(lambda nullable: t.with_nullable(nullable))
)


@given(_TYPES)
def test_to_flink_round_trips(sql_type: SqlType) -> None:
    assert parse_type(sql_type.to_flink()) == sql_type


def test_with_nullable() -> None:
    t = parse_type("ROW<a INT>")
    assert t.with_nullable(False).to_flink() == "ROW<`a` INT> NOT NULL"
    assert t.with_nullable(False).with_nullable(True) == t
    assert t.nullable  # frozen: the original is unchanged


@pytest.mark.parametrize(
    ("text", "spark"),
    [
        ("STRING", "STRING"),
        ("VARCHAR(10)", "STRING"),
        ("CHAR(3)", "STRING"),
        ("BOOLEAN", "BOOLEAN"),
        ("TINYINT", "TINYINT"),
        ("SMALLINT", "SMALLINT"),
        ("INT NOT NULL", "INT"),
        ("BIGINT", "BIGINT"),
        ("FLOAT", "FLOAT"),
        ("DOUBLE", "DOUBLE"),
        ("DECIMAL(10, 2)", "DECIMAL(10,2)"),
        ("DECIMAL(38, 0)", "DECIMAL(38,0)"),
        ("DATE", "DATE"),
        ("TIME(3)", "STRING"),
        ("TIMESTAMP(3)", "TIMESTAMP_NTZ"),
        ("TIMESTAMP_LTZ(3)", "TIMESTAMP"),
        ("TIMESTAMP(6) WITH LOCAL TIME ZONE", "TIMESTAMP"),
        ("BYTES", "BINARY"),
        ("BINARY(4)", "BINARY"),
        ("VARBINARY(4)", "BINARY"),
        ("ARRAY<INT NOT NULL>", "ARRAY<INT>"),
        ("MULTISET<STRING>", "MAP<STRING, INT>"),
        ("MAP<STRING, BYTES>", "MAP<STRING, BINARY>"),
        ("ROW<a INT, b STRING>", "STRUCT<`a`: INT, `b`: STRING>"),
        (
            "ROW<a INT NOT NULL 'doc', `b``c` TIMESTAMP(3)>",
            "STRUCT<`a`: INT NOT NULL, `b``c`: TIMESTAMP_NTZ>",
        ),
        ("MAP<STRING, ARRAY<ROW<x DECIMAL(5, 1)>>>", "MAP<STRING, ARRAY<STRUCT<`x`: DECIMAL(5,1)>>>"),
    ],
)
def test_to_spark(text: str, spark: str) -> None:
    assert parse_type(text).to_spark() == spark


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("INTERVAL DAY TO SECOND(3)", "INTERVAL"),
        ("interval year", "INTERVAL"),
        ("RAW('java.lang.Object', 'AA==')", "RAW"),
        ("NULL", "the NULL type"),
        ("VARIANT", "VARIANT"),
        ("ARRAY<INTERVAL MONTH>", "INTERVAL"),
        ("my_catalog.my_db.MyType", "user-defined type 'my_catalog'"),
        ("attr_type", "user-defined type 'attr_type'"),
        ("TIMESTAMP(3) WITH TIME ZONE", "TIMESTAMP with a time zone"),
    ],
)
def test_unsupported_types_are_named(text: str, what: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_type(text)
    assert info.value.field == "type"
    assert f"{what} is not supported by upsert-kafka-ops (in {text!r})" in str(info.value)


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ("", "expected a type name"),
        ("INT(3)", "unexpected '('"),
        ("INT INT", "unexpected 'INT'"),
        ("VARCHAR(0)", "VARCHAR length must be between 1 and 2147483647, not 0"),
        ("CHAR(2147483648)", "CHAR length must be between 1 and 2147483647, not 2147483648"),
        ("DECIMAL(39)", "DECIMAL needs 1 <= precision <= 38"),
        ("DECIMAL(5, 6)", "DECIMAL needs 1 <= precision <= 38 and 0 <= scale <= precision"),
        ("DECIMAL(10, 2, 1)", "expected ')', found ','"),
        ("TIMESTAMP(10)", "TIMESTAMP precision must be between 0 and 9, not 10"),
        ("TIME(x)", "expected a number"),
        ("ARRAY", "expected '<', found the end"),
        ("ARRAY<INT", "expected '>', found the end"),
        ("MAP<INT>", "expected ',', found '>'"),
        ("ROW<a>", "expected a type name"),
        ("ROW<a INT,>", "expected a field name"),
        ("ROW<a INT b INT>", "expected ',', found 'b'"),
        ("ROW<a INT, a STRING>", "duplicate ROW field name 'a'"),
        ("ROW", "expected '(', found the end"),
        ("INT NOT", "unexpected 'NOT'"),
    ],
)
def test_malformed_types_are_named(text: str, detail: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_type(text)
    assert info.value.field == "type"
    assert f"malformed data type {text!r}: {detail}" in str(info.value)
    assert info.value.fix
