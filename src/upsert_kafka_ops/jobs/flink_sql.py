"""Flink SQL scripts as pipelines (``upsert-kafka-ops import-flink-sql job.sql > pipeline.yaml``).

A script of ``CREATE TABLE`` statements, ``INSERT INTO ... SELECT`` statements (alone or in a
statement set), ``SET`` lines and comments becomes a pipeline file: each Kafka table (``upsert-kafka``
or ``kafka``) goes into its ``tables`` section as written, with a connection for its
``properties.bootstrap.servers``; each INSERT becomes a job:

- into an ``upsert-kafka`` or ``kafka`` table: a topic-to-topic job, its query translated from Flink's
  dialect to Spark SQL by sqlglot, its sources the tables the query reads;
- into a warehouse table (``jdbc`` on PostgreSQL, ``filesystem`` with Parquet, ``delta``), from
  ``SELECT * FROM`` one upsert-kafka table: a materialize job.

Whatever has no equivalent here is reported with its line, its column and the reason, and nothing is
written; ``SET`` keys that only tune Flink's own runtime are dropped with a note saying so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.pipeline import Pipeline
from upsert_kafka_ops.pipeline.flink_dialect import SqlError, read_insert
from upsert_kafka_ops.spec.ddl import DdlError, DdlTable, parse_create_table, position, split_statements
from upsert_kafka_ops.spec.table import KafkaTable, UpsertKafkaTable

#: SET keys that tune Flink's runtime (parallelism, checkpoints, state, its own planner): a Spark
#: run over a bounded read has no such setting, so they are dropped, with a note.
_RUNTIME_KEYS = re.compile(
    r"^(parallelism\.default|execution\.runtime-mode|execution\.checkpointing\..*|state\..*|"
    r"table\.exec\..*|table\.optimizer\..*|pipeline\.(?!name$).*|restart-strategy.*|taskmanager\..*|"
    r"jobmanager\..*|sql-client\..*|table\.dml-sync)$"
)
#: Flink's checkpoint folder: each topic-to-topic job keeps its streaming checkpoint under it
_CHECKPOINT_KEYS = ("execution.checkpointing.dir", "state.checkpoints.dir")
_SET = re.compile(r"(?is)^SET\s+'((?:[^']|'')*)'\s*=\s*'((?:[^']|'')*)'$")
_STATEMENT_SET = re.compile(r"(?is)^(?:EXECUTE\s+STATEMENT\s+SET\s+BEGIN|BEGIN\s+STATEMENT\s+SET)\s+")
_INSERT = re.compile(r"(?is)^INSERT\s+(?:INTO|OVERWRITE)\s+")
_CREATE_TABLE = re.compile(r"(?is)^CREATE\s+(?:TEMPORARY\s+)?TABLE\b")
_KAFKA = ("upsert-kafka", "kafka")
_JOB_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass
class Imported:
    """A pipeline file's content from a script, and what was dropped on the way (one note a line)."""

    pipeline: dict[str, Any]
    notes: list[str] = field(default_factory=list)


@dataclass
class _Script:
    problems: list[SpecError] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tables: dict[str, tuple[int, DdlTable, str]] = field(default_factory=dict)  # name -> line, parsed, text
    inserts: list[tuple[int, int, str]] = field(default_factory=list)
    name: str | None = None
    #: where streaming jobs keep their checkpoints: Flink's checkpoint folder when the script sets one
    checkpoints: str = "${UKO_CHECKPOINT_DIR}"

    def problem(self, line: int, column: int, what: str, message: str, fix: str) -> None:
        self.problems.append(
            SpecError(f"line {line}, column {column}", f"{what}: {message}.", f"{fix}." if fix else None)
        )


def import_flink_sql(text: str, name: str | None = None) -> Imported:
    """The pipeline a Flink SQL script stands for (``name``: the pipeline's, unless a ``SET
    'pipeline.name'`` gives one).

    :raises SpecError: every construct without an equivalent here, each with its line and column.
    """
    script = _Script(name=name)
    for line, column, statement in split_statements(text):
        _statement(script, line, column, statement)
    jobs = [_job(script, *insert) for insert in script.inserts]
    if not script.inserts and not script.problems:
        script.problems.append(SpecError("script", "has no INSERT INTO statement, so no job.", "add one."))
    if script.problems:
        raise SpecError.of(
            sorted(script.problems, key=lambda p: [int(n) for n in re.findall(r"\d+", p.field)])
        )
    connections = _connections(script)
    data: dict[str, Any] = {"version": 1}
    name = _JOB_NAME.sub("-", script.name or "").strip("-.")
    if name:
        data["name"] = name
    data["connections"] = {conn: {"bootstrap_servers": servers} for servers, conn in connections.items()}
    data["tables"] = {
        table: {"connection": connections[_servers(parsed)], "ddl": ddl.strip() + "\n"}
        for table, (_, parsed, ddl) in script.tables.items()
        if parsed.options.get("connector") in _KAFKA
    }
    data["jobs"] = _unique_names([j for j in jobs if j is not None])
    for job in data["jobs"]:  # a query that can run incrementally streams, from a checkpoint of its own
        if job["kind"] == "topic-to-topic":
            job["checkpoint"] = {"path": f"{script.checkpoints}/{job['name']}"}
    Pipeline.model_validate(data)  # what the file will say is a pipeline this project runs
    return Imported(data, script.notes)


def _statement(script: _Script, line: int, column: int, statement: str) -> None:
    set_prefix = _STATEMENT_SET.match(statement)
    if set_prefix:  # the first INSERT of a statement set; the others follow as statements of their own
        line, column = _after(statement, set_prefix.end(), line, column)
        statement = statement[set_prefix.end() :]
    if statement.upper() == "END":
        return
    if _CREATE_TABLE.match(statement):
        _create_table(script, line, column, statement)
    elif _INSERT.match(statement):
        script.inserts.append((line, column, statement))
    elif statement.upper().startswith("SET"):
        _set(script, line, column, statement)
    else:
        words = " ".join(statement.split()[:3])
        script.problem(
            line,
            column,
            words,
            "has no equivalent in a pipeline file",
            "a script here holds CREATE TABLE, INSERT INTO ... SELECT and SET statements; "
            "write a view's query into the INSERT that reads it",
        )


def _after(text: str, offset: int, line: int, column: int) -> tuple[int, int]:
    """The script position of ``offset`` in a statement that starts at ``line``, ``column``."""
    return _after_line(*position(text, offset), line, column)


def _without_watermark(statement: str, error: DdlError) -> str:
    """``statement`` without the ``WATERMARK FOR ... AS ...`` entry of its column list that ``error``
    points at."""
    start = sum(len(line) + 1 for line in statement.split("\n")[: error.line - 1]) + error.column - 1
    depth, quote, end = 0, "", len(statement)
    for i in range(start, len(statement)):
        char = statement[i]
        if quote:
            quote = "" if char == quote else quote
        elif char in "'`":
            quote = char
        elif char == "(":
            depth += 1
        elif char in ")," and depth == 0:
            end = i
            break
        elif char == ")":
            depth -= 1
    if end < len(statement) and statement[end] == ",":
        return statement[:start] + statement[end + 1 :].lstrip(" \t").lstrip("\n")
    before = statement[:start].rstrip()  # the last entry: drop the comma before it
    return before.removesuffix(",") + "\n" + statement[end:]


def _create_table(script: _Script, line: int, column: int, statement: str) -> None:
    try:
        parsed = parse_create_table(statement)
    except DdlError as exc:
        if exc.construct == "WATERMARK":
            script.notes.append(
                f"line {line + exc.line - 1}: WATERMARK dropped: a run here reads a bounded "
                "range of offsets, and the script's queries have no event-time windows"
            )
            _create_table(script, line, column, _without_watermark(statement, exc))
            return
        problem = exc.message.split(" (line ", 1)[0]
        script.problem(
            *_after_line(exc.line, exc.column, line, column), exc.construct, problem, exc.fix or ""
        )
        return
    connector = parsed.options.get("connector")
    if connector not in (*_KAFKA, *_WAREHOUSES):
        script.problem(
            line,
            column,
            f"table {parsed.name}",
            f"has connector {connector!r}, which a pipeline neither reads nor writes",
            f"use one of: upsert-kafka, kafka, {', '.join(sorted(_WAREHOUSES))}",
        )
        return
    try:  # a Kafka table's options and columns, as the pipeline will read them
        if connector in _KAFKA:
            (UpsertKafkaTable if connector == "upsert-kafka" else KafkaTable).from_flink_ddl(statement)
    except SpecError as exc:
        script.problem(line, column, f"table {parsed.name}", f"{exc.field}: {exc.message}", exc.fix or "")
        return
    if parsed.name in script.tables:
        script.problem(line, column, f"table {parsed.name}", "is created twice", "keep one CREATE TABLE")
        return
    script.tables[parsed.name] = (line, parsed, statement)


def _set(script: _Script, line: int, column: int, statement: str) -> None:
    match = _SET.match(statement)
    if match is None:
        script.problem(line, column, "SET", "is not SET 'key' = 'value'", "quote the key and the value")
        return
    key, value = match.group(1).replace("''", "'"), match.group(2).replace("''", "'")
    if key == "pipeline.name":
        script.name = script.name or value
    elif key in _CHECKPOINT_KEYS:
        folder = re.sub(r"^file://", "", re.sub(r"^s3[ap]?://", "s3a://", value)).rstrip("/")
        if re.match(r"^[a-z][a-z0-9+.-]*://", folder) and not folder.startswith("s3a://"):
            script.problem(
                line,
                column,
                f"SET '{key}'",
                f"is {value!r}: checkpoints here are in a local folder or on S3",
                "give a file:// or s3:// folder",
            )
        else:
            script.checkpoints = folder
    elif key == "table.local-time-zone" and value.upper() in ("UTC", "Z", "+00:00"):
        script.notes.append(f"line {line}: SET '{key}' = '{value}': runs here are in UTC already")
    elif _RUNTIME_KEYS.match(key):
        script.notes.append(
            f"line {line}: SET '{key}' dropped: it tunes Flink's runtime, which a Spark run "
            "over a bounded read does not have"
        )
    else:
        script.problem(
            line,
            column,
            f"SET '{key}'",
            "has no equivalent here",
            "remove it (a Spark setting goes to the runtime's spark_conf)",
        )


def _servers(table: DdlTable) -> str:
    return table.options.get("properties.bootstrap.servers", "${KAFKA_BOOTSTRAP_SERVERS}")


def _connections(script: _Script) -> dict[str, str]:
    """Bootstrap servers -> connection name: ``kafka`` for the first cluster, ``kafka2``... after it."""
    found: dict[str, str] = {}
    for _, parsed, _ in script.tables.values():
        if parsed.options.get("connector") in _KAFKA and _servers(parsed) not in found:
            found[_servers(parsed)] = "kafka" if not found else f"kafka{len(found) + 1}"
    return found


def _job(script: _Script, line: int, column: int, statement: str) -> dict[str, Any] | None:
    try:
        insert = read_insert(statement)
    except SqlError as exc:
        script.problem(*_after_line(exc.line, exc.column, line, column), exc.what, exc.reason, exc.fix or "")
        return None
    unknown = [t for t in [insert.sink, *insert.reads] if t not in script.tables]
    if unknown:
        script.problem(
            line,
            column,
            f"table {unknown[0]}",
            "is not created in the script",
            "add its CREATE TABLE statement before the INSERT",
        )
        return None
    sink, reads = insert.sink, insert.reads
    sink_line, sink_table, _ = script.tables[sink]
    connector = sink_table.options["connector"]
    if connector in _KAFKA:
        for table in reads:
            if script.tables[table][1].options.get("connector") not in _KAFKA:
                script.problem(
                    line,
                    column,
                    f"table {table}",
                    "is a warehouse table: a job reads Kafka tables",
                    "read the topic the warehouse table was written from",
                )
                return None
        return {
            "name": sink,
            "kind": "topic-to-topic",
            "sources": {t: {"table": t} for t in reads},
            "query": insert.query,
            "sink": {"table": sink},
        }
    if not (insert.plain_copy and script.tables[reads[0]][1].options.get("connector") == "upsert-kafka"):
        script.problem(
            line,
            column,
            f"INSERT INTO {sink}",
            "writes a warehouse table from a query: a materialize job folds one upsert-kafka table",
            "write SELECT * FROM the upsert-kafka table; compute the query in a topic-to-topic job "
            "into an upsert-kafka table first",
        )
        return None
    source_columns = [c.name for c in script.tables[reads[0]][1].columns if c.metadata_key is None]
    if [c.name for c in sink_table.columns] != source_columns:
        script.problem(
            line,
            column,
            f"INSERT INTO {sink}",
            f"table {sink} has the columns "
            f"{[c.name for c in sink_table.columns]}, {reads[0]} {source_columns}",
            "a materialize job writes the upsert table's columns: declare the same ones",
        )
        return None
    target_spec = _WAREHOUSES[connector](script, sink_line, sink_table)
    if target_spec is None:
        return None
    return {"name": sink, "kind": "materialize", "source": {"table": reads[0]}, "target": target_spec}


def _after_line(at_line: int, at_column: int, line: int, column: int) -> tuple[int, int]:
    """A position in a statement (1-based) as a position in the script, the statement starting at
    ``line``, ``column``."""
    return line + at_line - 1, at_column + (column - 1 if at_line == 1 else 0)


def _jdbc(script: _Script, line: int, table: DdlTable) -> dict[str, Any] | None:
    url = table.options.get("url", "")
    match = re.match(r"^jdbc:postgresql://([^/:?]+)(?::(\d+))?/([^?]+)", url)
    if match is None or "table-name" not in table.options or "username" not in table.options:
        script.problem(
            line,
            1,
            f"table {table.name}",
            "is a jdbc table without a jdbc:postgresql:// url, 'table-name' and 'username'",
            "a PostgreSQL target needs all three",
        )
        return None
    spec: dict[str, Any] = {
        "kind": "postgres",
        "host": match.group(1),
        "database": match.group(3),
        "user": table.options["username"],
        "table": table.options["table-name"],
    }
    if match.group(2):
        spec["port"] = int(match.group(2))
    if "password" in table.options:
        variable = f"{table.name.upper()}_PASSWORD"
        spec["password"] = {"env": variable}
        script.notes.append(
            f"line {line}: table {table.name}'s password is read from ${variable} "
            "(a pipeline file holds references, never a secret)"
        )
    return spec


def _filesystem(script: _Script, line: int, table: DdlTable) -> dict[str, Any] | None:
    if table.options.get("format") != "parquet" or "path" not in table.options:
        script.problem(
            line,
            1,
            f"table {table.name}",
            "is a filesystem table that is not Parquet with a 'path'",
            "write 'format' = 'parquet' and a 'path'",
        )
        return None
    return {"kind": "parquet", "path": table.options["path"]}


def _delta(script: _Script, line: int, table: DdlTable) -> dict[str, Any] | None:
    if "table-path" not in table.options:
        script.problem(line, 1, f"table {table.name}", "is a delta table without 'table-path'", "add it")
        return None
    return {"kind": "delta", "path": table.options["table-path"]}


_WAREHOUSES = {"jdbc": _jdbc, "filesystem": _filesystem, "delta": _delta}


def _unique_names(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Job names from their sink tables (``-2``, ``-3`` when several INSERTs write one)."""
    seen: dict[str, int] = {}
    for job in jobs:
        base = _JOB_NAME.sub("-", job["name"].replace("_", "-")).strip("-.") or "job"
        seen[base] = seen.get(base, 0) + 1
        job["name"] = base if seen[base] == 1 else f"{base}-{seen[base]}"
    return jobs
