"""A parser for Flink SQL ``CREATE TABLE`` statements, the subset that describes a Kafka table.

:func:`parse_create_table` reads one statement::

    CREATE [TEMPORARY] TABLE [IF NOT EXISTS] [catalog.][db.]name (
        name type [NOT NULL] [[CONSTRAINT c] PRIMARY KEY NOT ENFORCED] [COMMENT 'text'],
        name type [NOT NULL] METADATA [FROM 'key'] [VIRTUAL] [COMMENT 'text'],
        [CONSTRAINT c] PRIMARY KEY (a, b) NOT ENFORCED
    ) [COMMENT 'text'] WITH ('key' = 'value', ...) [;]

with ``--`` and ``/* */`` comments anywhere. Everything else Flink accepts there (computed columns,
watermarks, ``PARTITIONED BY``, ``DISTRIBUTED BY``, ``LIKE``, ``CREATE TABLE ... AS``) raises a
:class:`DdlError` naming the construct and where it starts. :func:`find_create_tables` picks the
statements out of a larger text: a SQL script, or documentation prose around examples.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.spec.types import SqlType, parse_type

# Words that cannot be unquoted column or table names (reserved in Flink SQL).
_RESERVED = frozenset(
    ("AS", "CONSTRAINT", "CREATE", "FROM", "LIKE", "NOT", "NULL", "PRIMARY", "TABLE", "WATERMARK", "WITH")
)
# Words that end a column's data type (outside <> and ()).
_AFTER_TYPE = {"METADATA", "COMMENT", "PRIMARY", "CONSTRAINT"}
_LEXEME = re.compile(
    r"(?P<space>\s+)"
    r"|(?P<comment>--[^\n]*|/\*.*?(?:\*/|\Z))"
    r"|(?P<ustring>[Uu]&'(?:[^']|'')*')"
    r"|(?P<word>[^\W\d]\w*)"
    r"|(?P<name>`(?:[^`]|``)*`)"
    r"|(?P<string>'(?:[^']|'')*')"
    r"|(?P<open>['`].*)"
    r"|(?P<number>\d+)"
    r"|(?P<symbol>\.\.\.|.)",
    re.DOTALL,
)
_NAME = r"(?:[^\W\d]\w*|`(?:[^`]|``)*`)"
_START = re.compile(
    rf"\bCREATE\s+(?:TEMPORARY\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?{_NAME}(?:\s*\.\s*{_NAME})*\s*"
    r"(?:\(|WITH\s*\(|COMMENT\s*'|AS\s+(?:SELECT|TABLE)\b|LIKE\b|PARTITIONED\s+BY\b|DISTRIBUTED\s+(?:BY|INTO)\b)",
    re.IGNORECASE,
)


class DdlError(SpecError):
    """A ``CREATE TABLE`` statement is malformed or uses a construct upsert-kafka-ops does not support.

    :param construct: what is at fault, e.g. ``computed column``, ``WATERMARK`` or ``syntax error``.
    :param line: 1-based line, in the statement text, where the construct starts.
    :param column: 1-based column of that line.
    :param problem: what is wrong, naming the construct.
    :param remedy: how to fix it.
    """

    def __init__(self, construct: str, line: int, column: int, problem: str, remedy: str) -> None:
        self.construct = construct
        self.line = line
        self.column = column
        super().__init__("ddl", f"{problem} (line {line}, column {column}); {remedy}.")
        self.fix = remedy


@dataclass(frozen=True)
class DdlColumn:
    """A column of a ``CREATE TABLE`` statement.

    :param name: the column name, unquoted.
    :param type: its data type, as declared.
    :param metadata_key: for METADATA columns, the ``FROM 'key'`` or, without ``FROM``, the column name.
    :param virtual: ``METADATA ... VIRTUAL``: read, never written.
    :param comment: the ``COMMENT 'text'``.
    :param line: 1-based line where the column starts.
    :param column: 1-based column where the column starts.
    """

    name: str
    type: SqlType
    metadata_key: str | None = None
    virtual: bool = False
    comment: str | None = None
    line: int = 0
    column: int = 0


@dataclass(frozen=True)
class DdlTable:
    """A parsed ``CREATE TABLE`` statement.

    :param name: the table name: the last part of the qualified name, unquoted.
    :param qualified_name: all parts of the name, unquoted (``catalog``, ``db``, ``name``).
    :param columns: the columns, in declaration order.
    :param primary_key: the PRIMARY KEY columns in constraint order, ``None`` without a PRIMARY KEY.
    :param primary_key_enforced: always ``False``: Flink only accepts ``NOT ENFORCED`` keys.
    :param options: the ``WITH`` options, in order, unquoted.
    :param comment: the table ``COMMENT``.
    """

    name: str
    qualified_name: tuple[str, ...]
    columns: tuple[DdlColumn, ...]
    primary_key: tuple[str, ...] | None
    primary_key_enforced: bool
    options: dict[str, str]
    comment: str | None = None


def parse_create_table(sql: str) -> DdlTable:
    """Parse one Flink ``CREATE TABLE`` statement (see the module documentation for the grammar).

    :raises DdlError: the statement is malformed or uses an unsupported construct; the error names
        the construct and its line and column in ``sql``.
    """
    return _Parser(sql).statement()


def find_create_tables(text: str) -> list[tuple[int, str]]:
    """Find the ``CREATE TABLE`` statements of a SQL script or of a document with SQL examples.

    A statement starts at ``CREATE [TEMPORARY] TABLE [IF NOT EXISTS] name`` followed by what may
    follow a table name (``(``, ``WITH (``, ``AS SELECT``, ...), not on a ``--`` comment line. It
    ends at the ``;`` that closes it, or at the end of its ``WITH (...)`` clause when neither ``;``
    nor ``AS``/``LIKE`` follows; a statement that never closes (documentation flattened onto one
    line, where a ``--`` comment swallows the rest of the line) ends where the next one starts.

    :returns: ``(line, statement)`` pairs: the 1-based line where each statement starts, and its text.
    """
    starts = [m.start() for m in _START.finditer(text) if not _commented(text, m.start())]
    found: list[tuple[int, str]] = []
    end = 0
    for index, start in enumerate(starts):
        if start >= end:
            end = _statement_end(text, start, starts[index + 1 :])
            found.append((text.count("\n", 0, start) + 1, text[start:end]))
    return found


def split_statements(text: str) -> list[tuple[int, int, str]]:
    """The statements of a SQL script, split at each ``;`` outside literals, quoted names and
    comments, with the comments between statements left out (those inside one stay in its text).

    :returns: ``(line, column, statement)``: where each statement starts (1-based) and its text,
        without the closing ``;``; a last statement without one is included.
    """
    found: list[tuple[int, int, str]] = []
    start = None
    for tok in _lex(text):
        if tok.kind == "end" or tok.is_(";"):
            if start is not None:
                found.append((*position(text, start), text[start : tok.start].rstrip()))
            start = None
        elif start is None:
            start = tok.start
    return found


@dataclass(frozen=True)
class _Token:
    kind: str  # word, name, string, open (unterminated quote), number, symbol, end
    text: str
    start: int
    end: int

    def is_(self, word: str) -> bool:
        return self.kind in ("word", "symbol") and self.text.upper() == word


def _lex(text: str, pos: int = 0) -> Iterator[_Token]:
    """The tokens of ``text`` from ``pos`` on, without whitespace and comments, then an ``end`` token."""
    last = pos
    while m := _LEXEME.match(text, pos):
        pos = m.end()
        if m.lastgroup != "space":
            last = pos
        if m.lastgroup not in ("space", "comment"):
            yield _Token(str(m.lastgroup), m.group(), m.start(), pos)
    yield _Token("end", "", last, last)


def position(text: str, offset: int) -> tuple[int, int]:
    """The 1-based line and column of ``offset`` in ``text``."""
    return text.count("\n", 0, offset) + 1, offset - text.rfind("\n", 0, offset)


def _commented(text: str, offset: int) -> bool:
    return text[text.rfind("\n", 0, offset) + 1 : offset].lstrip().startswith("--")


def _statement_end(text: str, start: int, later_starts: list[int]) -> int:
    bounds = iter([*later_starts, len(text)])
    bound = next(bounds)
    depth, in_with, with_end, tail = 0, False, -1, False
    for tok in _lex(text, start):
        if with_end >= 0 and not tail:
            if not (tok.is_(";") or tok.is_("AS") or tok.is_("LIKE")):
                return with_end
            tail = True
        while tok.kind in ("string", "name") and tok.start < bound < tok.end:
            bound = next(bounds)  # that "CREATE TABLE" is inside a literal of this statement
        if tok.start >= bound:
            return start + len(text[start:bound].rstrip())
        if tok.is_(";"):
            return tok.end
        if tok.is_("("):
            depth += 1
        elif tok.is_(")"):
            depth -= 1
            if depth == 0 and in_with:
                with_end = tok.end
        elif depth == 0 and tok.is_("WITH"):
            in_with = True
    return tok.end  # the end token: the text ends before the statement closes


class _Parser:
    """Recursive descent over the tokens of one statement."""

    def __init__(self, sql: str) -> None:
        self.sql = sql
        self.tokens = list(_lex(sql))
        self.pos = 0

    # -- token helpers

    def peek(self, ahead: int = 0) -> _Token:
        return self.tokens[min(self.pos + ahead, len(self.tokens) - 1)]

    def at(self, *words: str) -> bool:
        return all(self.peek(i).is_(w) for i, w in enumerate(words))

    def accept(self, *words: str) -> bool:
        if self.at(*words):
            self.pos += len(words)
            return True
        return False

    def expect(self, *words: str, what: str) -> None:
        for word in words:
            if not self.accept(word):
                raise self.unexpected(what)

    def error(self, construct: str, tok: _Token, problem: str, remedy: str) -> DdlError:
        return DdlError(construct, *position(self.sql, tok.start), problem, remedy)

    def unexpected(self, what: str) -> DdlError:
        tok = self.peek()
        found = {"end": "end of input", "open": "unterminated quote"}.get(tok.kind, repr(tok.text))
        return self.error("syntax error", tok, f"syntax error: unexpected {found}", f"expected {what}")

    def string(self, what: str) -> str:
        """A character literal: ``'text'`` (``''`` is a quote) or a Unicode literal ``U&'\\0001'``
        (``\\XXXX`` or ``\\+XXXXXX`` code points, ``\\\\`` a backslash, another escape
        character with ``UESCAPE 'c'``), as Flink's SQL parser reads them."""
        tok = self.peek()
        if tok.kind not in ("string", "ustring"):
            raise self.unexpected(what)
        self.pos += 1
        if tok.kind == "string":
            return tok.text[1:-1].replace("''", "'")
        escape = "\\"
        if self.accept("UESCAPE"):
            esc = self.peek()
            escape = self.string("an escape character in quotes, e.g. UESCAPE '!'")
            if len(escape) != 1 or escape in "+'\"" or escape.isspace() or escape in "0123456789abcdefABCDEF":
                raise self.error(
                    "UESCAPE", esc, f"invalid escape character {escape!r}", "use one character such as '!'"
                )
        return self._unicode(tok, tok.text[3:-1].replace("''", "'"), escape)

    def _unicode(self, tok: _Token, body: str, escape: str) -> str:
        out, i = [], 0
        while i < len(body):
            if body[i] != escape:
                out.append(body[i])
                i += 1
                continue
            if body[i + 1 : i + 2] == escape:
                out.append(escape)
                i += 2
                continue
            long = body[i + 1 : i + 2] == "+"
            digits = body[i + 2 : i + 8] if long else body[i + 1 : i + 5]
            if len(digits) != (6 if long else 4) or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise self.error(
                    "Unicode literal",
                    tok,
                    f"invalid escape in {tok.text}",
                    f"write {escape}XXXX (4 hex digits), {escape}+XXXXXX (6) or {escape}{escape}",
                )
            code = int(digits, 16)
            if code > 0x10FFFF:
                raise self.error(
                    "Unicode literal", tok, f"code point {digits} is out of range", "use at most 10FFFF"
                )
            out.append(chr(code))
            i += len(digits) + (2 if long else 1)
        return "".join(out)

    def identifier(self, what: str) -> str:
        tok = self.peek()
        if tok.kind == "name":
            value = tok.text[1:-1].replace("``", "`")
        elif tok.kind == "word" and tok.text.upper() not in _RESERVED:
            value = tok.text
        else:
            raise self.unexpected(what)
        self.pos += 1
        return value

    def skip_balanced(self, stop_words: set[str], data_type: bool) -> str:
        """Skip tokens up to a top-level ``,``, ``)``, ``;`` or stop word and return their text.

        A data type nests ``<>`` as well as ``()`` and ends at any other symbol. Comments become spaces.
        """
        start, depth = self.pos, 0
        opening, closing = ("(<", ")>") if data_type else ("(", ")")
        while (tok := self.peek()).kind != "end":
            if depth == 0 and any(tok.is_(word) for word in (",", ")", ";", *stop_words)):
                break
            if data_type and tok.kind in ("symbol", "open") and tok.text not in "()<>,":
                break
            if tok.kind == "symbol":
                depth += (tok.text in opening) - (tok.text in closing)
            self.pos += 1
        text = ""
        for index in range(start, self.pos):
            gap = self.sql[self.tokens[index - 1].end : self.tokens[index].start] if text else ""
            text += (gap if not gap.strip() else " ") + self.tokens[index].text
        return text

    # -- grammar

    def statement(self) -> DdlTable:
        self.expect("CREATE", what="CREATE TABLE")
        self.accept("TEMPORARY")
        self.expect("TABLE", what="TABLE")
        self.accept("IF", "NOT", "EXISTS")
        qualified = [self.identifier("a table name")]
        while self.accept("."):
            qualified.append(self.identifier("a table name after '.'"))
        after_name = self.peek()
        columns, primary_key = self.elements() if self.accept("(") else ((), None)
        comment = self.string("a comment in quotes") if self.accept("COMMENT") else None
        self.reject_clauses()
        if not self.at("WITH"):
            if self.peek().kind == "end" or self.at(";"):
                raise self.error(
                    "missing WITH clause",
                    self.peek(),
                    "a CREATE TABLE without a WITH clause is not supported",
                    "add the connector options: WITH ('connector' = 'upsert-kafka', ...)",
                )
            raise self.unexpected("WITH (...)")
        options = self.options()
        self.reject_clauses()
        if not columns:
            raise self.error(
                "missing column list",
                after_name,
                "a CREATE TABLE without a column list is not supported",
                "declare the columns: CREATE TABLE name (column TYPE, ...) WITH (...)",
            )
        self.accept(";")
        if self.peek().kind != "end":
            raise self.unexpected("the end of the statement")
        return DdlTable(qualified[-1], tuple(qualified), columns, primary_key, False, options, comment)

    def reject_clauses(self) -> None:
        tok = self.peek()
        if self.at("PARTITIONED") or self.at("DISTRIBUTED"):
            clause = f"{tok.text.upper()} BY"
            raise self.error(
                clause,
                tok,
                f"{clause} is not supported",
                "Kafka partitions by the message key: remove the clause",
            )
        if self.at("LIKE"):
            raise self.error(
                "LIKE",
                tok,
                "CREATE TABLE ... LIKE is not supported",
                "declare all columns and options explicitly",
            )
        if self.at("AS"):
            raise self.error(
                "CTAS",
                tok,
                "CREATE TABLE ... AS (CTAS) is not supported",
                "declare the columns and the WITH options, and run the query as its own job",
            )

    def elements(self) -> tuple[tuple[DdlColumn, ...], tuple[str, ...] | None]:
        columns: dict[str, DdlColumn] = {}
        keys: list[tuple[_Token, str]] | None = None
        while True:
            tok = self.peek()
            if self.at("WATERMARK"):
                raise self.error(
                    "WATERMARK",
                    tok,
                    "WATERMARK definition is not supported",
                    "upsert-kafka-ops has no event time: remove the WATERMARK FOR ... clause",
                )
            key_start: _Token | None = tok
            if self.at("CONSTRAINT") or self.at("PRIMARY"):
                new_keys = self.primary_key(with_columns=True)
            else:
                column, key_start = self.column()
                if column.name in columns:
                    raise self.error(
                        "duplicate column",
                        tok,
                        f"duplicate column {column.name!r}",
                        "give every column its own name",
                    )
                columns[column.name] = column
                new_keys = [(tok, column.name)]
            if key_start is not None:
                if keys is not None:
                    raise self.error(
                        "duplicate PRIMARY KEY",
                        key_start,
                        "a second PRIMARY KEY is not supported",
                        "declare one PRIMARY KEY with all its columns: PRIMARY KEY (a, b) NOT ENFORCED",
                    )
                keys = new_keys
            if not self.accept(","):
                self.expect(")", what="',' or ')'")
                break
        return tuple(columns.values()), None if keys is None else self.check_keys(keys, columns)

    def check_keys(self, keys: list[tuple[_Token, str]], columns: dict[str, DdlColumn]) -> tuple[str, ...]:
        names = [name for _, name in keys]
        for index, (tok, name) in enumerate(keys):
            column = columns.get(name)
            if name in names[:index]:
                raise self.error(
                    "duplicate PRIMARY KEY column",
                    tok,
                    f"column {name!r} appears twice in the PRIMARY KEY",
                    "list each key column once",
                )
            if column is None:
                raise self.error(
                    "unknown PRIMARY KEY column",
                    tok,
                    f"PRIMARY KEY column {name!r} is not a column of the table",
                    f"choose from {', '.join(columns)}",
                )
            if column.metadata_key is not None:
                raise self.error(
                    "PRIMARY KEY on a METADATA column",
                    tok,
                    f"PRIMARY KEY column {name!r} is a METADATA column, which Flink does not allow",
                    "key the table by physical columns",
                )
        return tuple(names)

    def primary_key(self, with_columns: bool) -> list[tuple[_Token, str]]:
        start = self.peek()
        if self.accept("CONSTRAINT"):
            self.identifier("a constraint name")
        self.expect("PRIMARY", "KEY", what="PRIMARY KEY")
        keys: list[tuple[_Token, str]] = []
        if with_columns:
            self.expect("(", what="'(' and the key columns")
            while not keys or self.accept(","):
                keys.append((self.peek(), self.identifier("a column name")))
            self.expect(")", what="',' or ')'")
        if not self.accept("NOT", "ENFORCED"):
            raise self.error(
                "PRIMARY KEY without NOT ENFORCED",
                start,
                "a PRIMARY KEY without NOT ENFORCED is not supported: Flink does not enforce keys",
                "write PRIMARY KEY (...) NOT ENFORCED",
            )
        return keys

    def column(self) -> tuple[DdlColumn, _Token | None]:
        """A column, and where its inline PRIMARY KEY starts (``None`` without one)."""
        start = self.peek()
        name = self.identifier("a column name")
        if self.at("AS"):
            expression = " ".join(self.skip_balanced({"COMMENT"}, data_type=False).split())
            raise self.error(
                "computed column",
                start,
                f"computed column {name!r} ({expression}) is not supported",
                "declare a physical or METADATA column instead",
            )
        type_tok = self.peek()
        type_text = self.skip_balanced(_AFTER_TYPE, data_type=True)
        if not type_text:
            raise self.unexpected("a data type")
        try:
            sql_type = parse_type(type_text)
        except SpecError as err:
            detail = str(err).removeprefix("type: ").removesuffix(f" Fix: {err.fix}").rstrip(".")
            raise self.error(
                "data type", type_tok, f"invalid data type for column {name!r}: {detail}", err.fix or ""
            ) from None
        metadata_key, virtual, key_start = None, False, None
        if self.accept("METADATA"):
            metadata_key = self.string("a metadata key in quotes") if self.accept("FROM") else name
            virtual = self.accept("VIRTUAL")
        elif self.at("CONSTRAINT") or self.at("PRIMARY"):
            key_start = self.peek()
            self.primary_key(with_columns=False)
        comment = self.string("a comment in quotes") if self.accept("COMMENT") else None
        line, col = position(self.sql, start.start)
        return DdlColumn(name, sql_type, metadata_key, virtual, comment, line, col), key_start

    def options(self) -> dict[str, str]:
        self.expect("WITH", "(", what="WITH (")
        options: dict[str, str] = {}
        while not options or self.accept(","):
            tok = self.peek()
            key = self.string("an option key in quotes, e.g. 'connector'")
            self.expect("=", what="'='")
            if key in options:
                raise self.error(
                    "duplicate option", tok, f"option {key!r} is set twice", "keep one value for each option"
                )
            options[key] = self.string("an option value in quotes")
        self.expect(")", what="',' or ')'")
        return options
