"""The project's DDL corpus (tests/data/ddl): every statement shape the docs promise, each accepted
into a table spec or refused with the error its ``-- expect:`` line names (see the folder's README)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.formats.registry import FORMATS
from upsert_kafka_ops.spec.ddl import DdlError, find_create_tables, parse_create_table
from upsert_kafka_ops.spec.options import CONNECTOR_OPTIONS, connector_option
from upsert_kafka_ops.spec.table import METADATA_KEYS, KafkaTable, UpsertKafkaTable

CORPUS = Path(__file__).resolve().parents[1] / "data" / "ddl"
_EXPECT = re.compile(r"^--\s*expect:\s*(?P<kind>\S+)\s*(?P<rest>.*)$")
_DDL_ERROR = re.compile(r"^(?P<construct>.+) at (?P<line>\d+):(?P<column>\d+)$")
_SPEC_ERROR = re.compile(r"^(?P<field>\S+): (?P<text>.+)$")

#: the upsert-kafka options of Flink's connector page; each must appear in an accepted statement
BOUNDED_MODES = {"latest-offset", "group-offsets", "timestamp", "specific-offsets"}


@dataclass(frozen=True)
class Statement:
    file: str
    line: int  # where the statement starts in its file
    sql: str
    kind: str  # upsert-kafka | kafka | ddl-error | spec-error
    detail: str

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line}"


def _load() -> list[Statement]:
    out = []
    for path in sorted(CORPUS.glob("*.sql")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for line, sql in find_create_tables("\n".join(lines)):
            above = lines[line - 2] if line >= 2 else ""
            m = _EXPECT.match(above.strip())
            assert m, f"{path.name}:{line}: the line above a statement must be '-- expect: ...'"
            out.append(Statement(path.name, line, sql, m["kind"], m["rest"].strip()))
    return out


STATEMENTS = _load()


def _build(sql: str) -> UpsertKafkaTable | KafkaTable:
    connector = parse_create_table(sql).options.get("connector")
    builder = UpsertKafkaTable if connector == "upsert-kafka" else KafkaTable
    return builder.from_flink_ddl(sql)


def _rendered(value: Any) -> str:
    if callable(value):
        value = value()
    if isinstance(value, dict):
        return ",".join(f"{k}:{v}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def _field(table: Any, path: str) -> str:
    attribute, _, key = path.partition(".")
    value = getattr(table, attribute)
    return _rendered(value[key] if key else value)


def test_the_corpus_is_there_and_every_kind_of_expectation_occurs() -> None:
    files = {s.file for s in STATEMENTS}
    assert files == {"bounded.sql", "flip149.sql", "formats.sql", "keys.sql", "metadata.sql", "rejected.sql",
                     "security.sql"}  # fmt: skip
    assert {s.kind for s in STATEMENTS} == {"upsert-kafka", "kafka", "ddl-error", "spec-error"}
    assert len(STATEMENTS) >= 70


@pytest.mark.parametrize("statement", STATEMENTS, ids=lambda s: s.id)
def test_statement(statement: Statement) -> None:
    if statement.kind == "ddl-error":
        m = _DDL_ERROR.match(statement.detail)
        assert m, statement.detail
        with pytest.raises(DdlError) as info:
            parse_create_table(statement.sql)
        got = (info.value.construct, info.value.line, info.value.column)
        assert got == (m["construct"], int(m["line"]), int(m["column"])), str(info.value)
        return
    if statement.kind == "spec-error":
        m = _SPEC_ERROR.match(statement.detail)
        assert m, statement.detail
        with pytest.raises(SpecError) as spec_info:
            _build(statement.sql)
        assert not isinstance(spec_info.value, DdlError), str(spec_info.value)
        assert spec_info.value.field == m["field"], str(spec_info.value)
        assert m["text"] in spec_info.value.message, str(spec_info.value)
        return
    table = _build(statement.sql)
    expected_type = UpsertKafkaTable if statement.kind == "upsert-kafka" else KafkaTable
    assert type(table) is expected_type
    for pair in statement.detail.split():
        path, _, value = pair.partition("=")
        assert _field(table, path) == value, pair
    # what the spec prints back is the same table
    assert type(table).from_flink_ddl(table.to_flink_ddl()) == table


def _accepted() -> list[Statement]:
    return [s for s in STATEMENTS if s.kind in ("upsert-kafka", "kafka")]


def test_every_upsert_kafka_option_of_the_matrix_is_accepted_or_refused_in_the_corpus() -> None:
    used = {k for s in _accepted() if s.kind == "upsert-kafka" for k in parse_create_table(s.sql).options}
    refused = {
        m["field"] for s in STATEMENTS if s.kind == "spec-error" and (m := _SPEC_ERROR.match(s.detail))
    }
    for option in CONNECTOR_OPTIONS:
        if "upsert-kafka" not in option.connectors or option.key.endswith("*"):
            continue
        where = refused if option.status == "refused" else used
        assert option.key in where, f"{option.key} ({option.status}) has no statement in the corpus"


def test_the_accepted_statements_use_only_options_the_matrix_lists() -> None:
    for s in _accepted():
        for key in parse_create_table(s.sql).options:
            listed = connector_option(s.kind, key) is not None or any(
                key.startswith(head) and _format_option(fmt, key[len(head) :])
                for fmt in FORMATS
                for head in (f"key.{fmt}.", f"value.{fmt}.", f"{fmt}.")
            )
            assert listed, f"{s.file}:{s.line}: {key} is accepted but not in the option matrix"


def test_the_accepted_statements_use_every_option_of_every_supported_format() -> None:
    used: dict[str, set[str]] = {}
    for s in _accepted():
        for key in parse_create_table(s.sql).options:
            for fmt in FORMATS:
                for head in (f"key.{fmt}.", f"value.{fmt}.", f"{fmt}."):
                    if key.startswith(head):
                        used.setdefault(fmt, set()).add(key[len(head) :])
    for fmt, info in FORMATS.items():
        if not info.supported:
            continue
        prefixed = {o for o in used.get(fmt, set()) if any(o.startswith(p) for p in info.option_prefixes)}
        missing = set(info.options) - used.get(fmt, set())
        if fmt == "avro-confluent":
            missing -= {"schema"}  # refused with the fix (formats.sql shows it)
        assert missing == set(), fmt
        assert len(prefixed) >= len(info.option_prefixes), fmt


def _format_option(fmt: str, name: str) -> bool:
    info = FORMATS[fmt]
    return name in info.options or any(name.startswith(p) for p in info.option_prefixes)


def test_the_accepted_statements_read_every_metadata_key_and_bounded_mode() -> None:
    tables = [_build(s.sql) for s in _accepted()]
    keys = {c.metadata for t in tables for c in t.columns if c.metadata is not None}
    assert keys == set(METADATA_KEYS)
    modes = {t.scan_bounded_mode for t in tables if isinstance(t, UpsertKafkaTable)}
    assert modes >= BOUNDED_MODES
    assert any(t.primary_key and len(t.primary_key) > 1 for t in tables if isinstance(t, UpsertKafkaTable))
