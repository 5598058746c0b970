"""Flink SQL's ``INSERT INTO ... SELECT`` read by sqlglot and written as Spark SQL.

sqlglot has no Flink dialect; Flink's query syntax is close to Spark's (backquoted names, the same
operators and most functions), so :class:`Flink` is sqlglot's Spark dialect with what Flink means
differently: ``TIMESTAMP`` is a timestamp without a time zone (Spark's ``TIMESTAMP_NTZ``; Flink's
``TIMESTAMP_LTZ`` is Spark's ``TIMESTAMP``), ``BYTES`` is ``BINARY``, ``TO_TIMESTAMP`` gives a
timestamp without a time zone, and Flink's own ``SPLIT_INDEX``, ``JSON_VALUE`` (path form) and
``PROCTIME`` become Spark's expressions for them (``tests/conformance/test_flink_sql_script.py``
compares what real Flink and a job write with them). Event-time windows and temporal joins have no
Spark form here and are refused with their line and column.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.spec.ddl import position

_WINDOW = re.compile(r"(?i)\b(TUMBLE|HOP|SESSION|CUMULATE)(_START|_END|_ROWTIME)?\s*\(")
_TEMPORAL = re.compile(r"(?i)\bFOR\s+SYSTEM_TIME\s+AS\s+OF\b")


@dataclass(frozen=True)
class Insert:
    """An ``INSERT INTO sink SELECT ...``: the sink table, the tables the query reads (sorted), the
    query as Spark SQL, and whether it is ``SELECT * FROM`` one table and nothing more (a copy)."""

    sink: str
    reads: tuple[str, ...]
    query: str
    plain_copy: bool


class SqlError(SpecError):
    """A statement Flink accepts that has no equivalent here, at ``column`` of ``line`` (1-based, in
    the statement's text)."""

    def __init__(self, line: int, column: int, what: str, message: str, fix: str) -> None:
        self.line, self.column, self.what = line, column, what
        super().__init__("sql", f"{what}: {message} (line {line}, column {column}).", f"{fix}.")
        self.reason = message


@functools.cache
def _dialect() -> Any:
    from sqlglot import exp
    from sqlglot.dialects.spark import Spark
    from sqlglot.parsers.spark import SparkParser
    from sqlglot.tokenizer_core import TokenType

    def split_index(args: list[Any]) -> Any:
        """Flink's SPLIT_INDEX: NULL past the last part, and for an empty string (which has no parts,
        where Spark's split gives one empty part). sqlglot's Split takes a plain separator and its
        Spark form quotes it for Spark's regular-expression split."""
        text, separator, index = args
        part = exp.Anonymous(
            this="get", expressions=[exp.Split(this=text.copy(), expression=separator), index]
        )
        return exp.If(this=exp.EQ(this=text, expression=exp.Literal.string("")), true=exp.Null(), false=part)

    class Flink(Spark):
        class Tokenizer(Spark.Tokenizer):
            KEYWORDS = {  # noqa: RUF012 (sqlglot's own class attribute)
                **Spark.Tokenizer.KEYWORDS,
                "BYTES": TokenType.VARBINARY,
                "TIMESTAMP": TokenType.TIMESTAMPNTZ,
                "TIMESTAMP_LTZ": TokenType.TIMESTAMPLTZ,
            }

        class Parser(SparkParser):
            FUNCTIONS = {  # noqa: RUF012
                **SparkParser.FUNCTIONS,
                "SPLIT_INDEX": split_index,
                "JSON_VALUE": lambda args: exp.Anonymous(this="get_json_object", expressions=args),
                "PROCTIME": lambda args: exp.CurrentTimestamp(),
                "TO_TIMESTAMP": lambda args: exp.Anonymous(this="to_timestamp_ntz", expressions=args),
            }

    return Flink


def read_insert(statement: str) -> Insert:
    """The ``INSERT INTO ... SELECT`` statement ``statement`` (Flink SQL) with its query in Spark SQL.

    :raises SqlError: the statement is not one, cannot be read, or uses what has no equivalent here.
    """
    import sqlglot
    from sqlglot import exp

    for pattern, what, message, fix in (
        (
            _WINDOW,
            None,
            "an event-time window has no equivalent here yet",
            "aggregate without a window, or keep this INSERT in Flink",
        ),
        (
            _TEMPORAL,
            "FOR SYSTEM_TIME AS OF",
            "a temporal join has no equivalent here yet (Flink itself refuses a "
            "processing-time one over an upsert-kafka table)",
            "join the upsert table's latest rows with a plain JOIN",
        ),
    ):
        found = pattern.search(statement)
        if found:
            raise SqlError(
                *position(statement, found.start()), what or found.group(0).rstrip("( "), message, fix
            )
    try:
        tree = sqlglot.parse_one(statement, read=_dialect())
    except sqlglot.errors.ParseError as exc:
        error = exc.errors[0] if exc.errors else {}
        raise SqlError(
            int(error.get("line") or 1),
            int(error.get("col") or 1),
            "INSERT INTO",
            f"cannot be read: {error.get('description', exc)}",
            "write the query in the SQL subset Flink and Spark share",
        ) from None
    if not isinstance(tree, exp.Insert) or not isinstance(tree.expression, exp.Query):
        raise SqlError(1, 1, "INSERT INTO", "is not INSERT INTO table SELECT ...", "write it as one")
    if tree.args.get("overwrite"):
        raise SqlError(
            1, 1, "INSERT OVERWRITE", "has no equivalent: a job writes changes by key", "write INSERT INTO"
        )
    if isinstance(tree.this, exp.Schema):
        raise SqlError(
            1,
            1,
            "INSERT INTO t (columns)",
            "has no equivalent: columns go by position",
            "drop the column list and select the sink's columns in its order",
        )
    query = tree.expression
    ctes = {cte.alias for cte in query.find_all(exp.CTE)}
    reads = tuple(sorted({t.name for t in query.find_all(exp.Table)} - ctes))
    plain_copy = (
        isinstance(query, exp.Select)
        and len(query.expressions) == 1
        and isinstance(query.expressions[0], exp.Star)
        and len(list(query.find_all(exp.Table))) == 1
        and not any(
            query.args.get(k) for k in ("where", "group", "having", "joins", "order", "limit", "distinct")
        )
    )
    return Insert(tree.this.name, reads, query.sql(dialect="spark", pretty=True), plain_copy)
