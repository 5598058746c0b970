"""Warehouse targets on Spark: Delta (MERGE), PostgreSQL (JDBC staging + one transaction), Parquet.

Each write carries the run's state (processed offsets; see :mod:`upsert_kafka_ops.jobs.state`) so
that data and offsets land together or not at all:

- Delta: the MERGE (or overwrite, or an empty append when nothing changed) commits with
  ``userMetadata`` = the state and Delta's idempotent-write identifiers (txnAppId, txnVersion), so a
  replayed run version is skipped by Delta itself. The session-wide confs are reset afterwards.
- PostgreSQL: rows are staged with Spark's JDBC writer into an unlogged table, then one psycopg
  transaction upserts (``INSERT ... ON CONFLICT DO UPDATE``), deletes, updates the offsets table and
  drops the staging table. A full rebuild loads a new table and swaps it in inside the transaction.
- Parquet: a full overwrite, then the state file renamed into place.

Change DataFrames have an ``op`` column: ``+U`` (upsert the row) or ``-D`` (delete the key).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from upsert_kafka_ops.errors import UpsertKafkaOpsError
from upsert_kafka_ops.spec.table import UpsertKafkaTable
from upsert_kafka_ops.spec.types import SqlType, parse_type, quote_name

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession
    from pyspark.sql.types import StructType

FAULT_ENV = "UKO_FAULT_POINT"


def fault_point(name: str) -> None:
    """Test hooks at named points of a run, driven by ``$UKO_FAULT_POINT``:

    - ``NAME``: kill this process here (SIGKILL, no cleanup);
    - ``pause:NAME:FLAG``: create ``FLAG.reached`` here, then wait (up to 10 minutes) until ``FLAG``
      exists, so a test can act while a run holds its target.
    """
    spec = os.environ.get(FAULT_ENV, "")
    if spec == name:
        os.kill(os.getpid(), signal.SIGKILL)
    if spec.startswith("pause:"):
        _, point, flag = spec.split(":", 2)
        if point == name:
            Path(flag + ".reached").touch()
            deadline = time.monotonic() + 600
            while not Path(flag).exists() and time.monotonic() < deadline:
                time.sleep(0.1)


class TargetSchemaError(UpsertKafkaOpsError):
    """The target table does not fit the spec (a type changed)."""


def target_columns(table: UpsertKafkaTable) -> list[tuple[str, SqlType]]:
    """The columns a warehouse target holds: the table's columns in declaration order."""
    return [(c.name, parse_type(c.type)) for c in table.columns]


def columns_to_add(
    existing: dict[str, Any], table: UpsertKafkaTable, where: str, fix: str, same: Any = None
) -> list[str]:
    """The ``name TYPE`` definitions of the spec's columns a target's schema lacks; a column whose
    Spark type differs from the spec's is an error (before any write).

    :param existing: the target's column name -> Spark ``DataType``.
    :param same: ``(have, want) -> bool`` where the target stores a type as another (default ``==``).
    """
    from pyspark.sql.types import _parse_datatype_string

    added = []
    for name, t in target_columns(table):
        want = _parse_datatype_string(t.to_spark())
        if name not in existing:
            added.append(f"{quote_name(name)} {t.to_spark()}")
        elif not (same(existing[name], want) if same is not None else existing[name] == want):
            raise TargetSchemaError(
                f"{where}: column {name!r} is {existing[name].simpleString()} but the spec says "
                f"{t.to_spark()}. {fix}"
            )
    return added


def merge_sql(target: str, view: str, table: UpsertKafkaTable, close_only: Sequence[str] = ()) -> str:
    """The ``MERGE INTO target`` of the last change per key in ``view`` (``op`` +U/-D): delete,
    update or insert by the primary key. With ``close_only`` (a history table), a row whose ``op``
    is ``close`` sets only those columns of the row it matches."""
    names = [c for c, _ in target_columns(table)]
    on = " AND ".join(f"t.{quote_name(k)} = s.{quote_name(k)}" for k in table.primary_key)
    cols = ", ".join(quote_name(c) for c in names)
    sets = ", ".join(f"t.{quote_name(c)} = s.{quote_name(c)}" for c in names)
    close = ""
    upsert = "s.op <> '-D'"
    if close_only:
        close = (
            "WHEN MATCHED AND s.op = 'close' THEN UPDATE SET "
            + ", ".join(f"t.{quote_name(c)} = s.{quote_name(c)}" for c in close_only)
            + " "
        )
        upsert = "s.op NOT IN ('-D', 'close')"
    return (
        f"MERGE INTO {target} AS t USING {view} AS s ON {on} "
        "WHEN MATCHED AND s.op = '-D' THEN DELETE "
        f"{close}"
        f"WHEN MATCHED AND {upsert} THEN UPDATE SET {sets} "
        f"WHEN NOT MATCHED AND {upsert} THEN INSERT ({cols}) "
        f"VALUES ({', '.join(f's.{quote_name(c)}' for c in names)})"
    )


#: Delta and Iceberg read a commit's transaction id and metadata (the stored offsets) from the
#: session's conf, which every thread of the process shares: two jobs committing at once in one
#: session would each take the other's offsets. One commit at a time per process.
_COMMIT_CONF_LOCK = threading.RLock()


@contextmanager
def commit_confs(spark: SparkSession, confs: dict[str, str]) -> Iterator[None]:
    """Session confs that the next commit reads, set for the ``with`` block only (one block at a
    time in this process)."""
    with _COMMIT_CONF_LOCK:
        for k, v in confs.items():
            spark.conf.set(k, v)
        try:
            yield
        finally:  # session-wide: the next write in this session must not reuse them
            for k in confs:
                spark.conf.unset(k)


# -- Delta ----------------------------------------------------------------------------------------
def _delta_commit_confs(spark: SparkSession, app_id: str, version: int, metadata: str) -> Any:
    return commit_confs(
        spark,
        {
            "spark.databricks.delta.write.txnAppId": app_id,
            "spark.databricks.delta.write.txnVersion": str(version),
            "spark.databricks.delta.commitInfo.userMetadata": metadata,
        },
    )


def sql_string(value: str) -> str:
    """``value`` as a Spark SQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def delta_ref(path: str) -> str:
    """The SQL name of the Delta table at ``path`` (``delta.`path```)."""
    return "delta.`" + path.replace("`", "``") + "`"


def delta_schema(spark: SparkSession, path: str) -> StructType | None:
    """The schema of the Delta table at ``path``, or None when there is none. SQL and the DataFrame
    reader only (no ``DeltaTable`` API): it works the same in a Spark Connect session, whose server
    needs no Delta Connect plugin for it."""
    from pyspark.errors import AnalysisException

    try:
        return spark.read.format("delta").load(path).schema
    except AnalysisException:
        return None


def delta_last_commit(spark: SparkSession, path: str) -> Row | None:
    """The newest entry of the table's history (``DESCRIBE HISTORY``): version, operationMetrics, ..."""
    return spark.sql(f"DESCRIBE HISTORY {delta_ref(path)} LIMIT 1").first()


def ensure_delta_table(
    spark: SparkSession, path: str, table: UpsertKafkaTable, *, as_of_column: str | None = None
) -> list[str]:
    """Create the Delta table from the spec when missing; add columns the spec gained. Returns the
    names of added columns. A column whose type changed is an error (before any write).

    :param as_of_column: a snapshot table: this TIMESTAMP column leads the key and partitions it.
    """
    from pyspark.sql.types import TimestampType

    wanted = target_columns(table)
    have = delta_schema(spark, path)
    if have is None:
        columns = [f"{quote_name(as_of_column)} TIMESTAMP NOT NULL"] if as_of_column else []
        columns += [
            f"{quote_name(name)} {t.to_spark()}{' NOT NULL' if name in table.primary_key else ''}"
            for name, t in wanted
        ]
        properties = {"upsert_kafka_ops.primary_key": ",".join(table.primary_key)}
        if as_of_column:
            properties["upsert_kafka_ops.as_of_column"] = as_of_column
        props = ", ".join(f"'{k}' = {sql_string(v)}" for k, v in properties.items())
        spark.sql(
            f"CREATE TABLE IF NOT EXISTS {delta_ref(path)} ({', '.join(columns)}) USING delta"
            + (f" PARTITIONED BY ({quote_name(as_of_column)})" if as_of_column else "")
            + f" TBLPROPERTIES ({props})"
        )
        return []
    existing = {f.name: f.dataType for f in have.fields}
    if as_of_column and existing.get(as_of_column) != TimestampType():
        raise TargetSchemaError(
            f"Delta table {path}: the snapshot column {as_of_column!r} is missing or not a TIMESTAMP (the "
            "table was not created as a snapshot table). Write the snapshots under a new path."
        )
    added = columns_to_add(
        existing,
        table,
        f"Delta table {path}",
        "Rebuild the target under a new path (mode full), or change the spec back.",
    )
    if added:
        spark.sql(f"ALTER TABLE {delta_ref(path)} ADD COLUMNS ({', '.join(added)})")
    return [a.split(" ")[0].strip("`") for a in added]


def _last_commit_metrics(spark: SparkSession, path: str) -> dict[str, str]:
    """The ``operationMetrics`` of the table's newest commit."""
    row = delta_last_commit(spark, path)
    return dict(row["operationMetrics"] or {}) if row is not None else {}


def delta_merge(
    spark: SparkSession,
    changes: DataFrame,
    path: str,
    table: UpsertKafkaTable,
    *,
    app_id: str,
    version: int,
    metadata: dict[str, Any],
    rows: int | None = None,
    close_only: Sequence[str] = (),
) -> dict[str, int]:
    """MERGE the last change per key (``op`` +U/-D) into the Delta table; one commit with the state.
    With no changes, an empty append commits the state alone.

    :param rows: the number of changes, when known (spares a Spark job that finds out).
    :param close_only: see :func:`merge_sql`."""
    import uuid

    names = [c for c, _ in target_columns(table)]
    text = json.dumps(metadata, sort_keys=True)
    src = changes.select("op", *names)
    with _delta_commit_confs(spark, app_id, version, text):
        if rows == 0 if rows is not None else src.isEmpty():
            spark.createDataFrame([], spark.read.format("delta").load(path).schema).write.format(
                "delta"
            ).mode("append").save(path)
            return {"upserted": 0, "deleted": 0}
        # SQL's MERGE (the same Delta command as the DeltaTable API, which a Spark Connect server
        # serves only with the Delta Connect plugin); its result row holds the counts
        view = f"upsert_kafka_ops_changes_{uuid.uuid4().hex[:12]}"
        src.createOrReplaceTempView(view)
        try:
            merged = spark.sql(merge_sql(delta_ref(path), view, table, close_only)).first()
        finally:
            spark.catalog.dropTempView(view)
    assert merged is not None
    return {
        "upserted": int(merged["num_updated_rows"]) + int(merged["num_inserted_rows"]),
        "deleted": int(merged["num_deleted_rows"]),
    }


def delta_overwrite(
    spark: SparkSession,
    rows: DataFrame,
    path: str,
    table: UpsertKafkaTable,
    *,
    app_id: str,
    version: int,
    metadata: dict[str, Any],
) -> dict[str, int]:
    """Replace the table's content with ``rows`` in one commit (the new version is the swap)."""
    names = [c for c, _ in target_columns(table)]
    with _delta_commit_confs(spark, app_id, version, json.dumps(metadata, sort_keys=True)):
        rows.select(*names).write.format("delta").mode("overwrite").save(path)
    return {"upserted": int(_last_commit_metrics(spark, path).get("numOutputRows", 0)), "deleted": 0}


def delta_replace_snapshot(
    spark: SparkSession,
    rows: DataFrame,
    path: str,
    table: UpsertKafkaTable,
    *,
    as_of_column: str,
    as_of_ms: int,
    app_id: str,
    version: int,
    metadata: dict[str, Any],
) -> dict[str, int]:
    """Replace the snapshot ``as_of_column = as_of_ms`` with ``rows`` in one commit (Delta
    ``replaceWhere``); the other snapshots are untouched."""
    from pyspark.sql import functions as F

    names = [c for c, _ in target_columns(table)]
    stamp = f"timestamp_millis({int(as_of_ms)})"
    out = rows.select(F.expr(stamp).alias(as_of_column), *names)
    with _delta_commit_confs(spark, app_id, version, json.dumps(metadata, sort_keys=True)):
        out.write.format("delta").mode("overwrite").option(
            "replaceWhere", f"{quote_name(as_of_column)} = {stamp}"
        ).save(path)
    m = _last_commit_metrics(spark, path)
    return {"upserted": int(m.get("numOutputRows", 0)), "deleted": 0}


# -- Parquet --------------------------------------------------------------------------------------
def parquet_overwrite(rows: DataFrame, path: str, table: UpsertKafkaTable) -> None:
    names = [c for c, _ in target_columns(table)]
    rows.select(*names).write.mode("overwrite").parquet(path)


# -- PostgreSQL -----------------------------------------------------------------------------------
_PG = {
    "STRING": "text",
    "VARCHAR": "varchar",
    "CHAR": "char",
    "BOOLEAN": "boolean",
    "TINYINT": "smallint",
    "SMALLINT": "smallint",
    "INT": "integer",
    "BIGINT": "bigint",
    "FLOAT": "real",
    "DOUBLE": "double precision",
    "DATE": "date",
    "TIME": "time",
    "TIMESTAMP": "timestamp",
    "TIMESTAMP_LTZ": "timestamptz",
    "BYTES": "bytea",
    "BINARY": "bytea",
    "VARBINARY": "bytea",
}
#: types a PostgreSQL target stores as ``jsonb`` (sent and read back as JSON text)
NESTED = {"ARRAY", "MAP", "MULTISET", "ROW"}


def pg_type(t: SqlType) -> str:
    """The PostgreSQL column type of a Flink SQL type (nested types as ``jsonb``)."""
    if t.name in NESTED:
        return "jsonb"
    if t.name == "DECIMAL":
        return "numeric({},{})".format(*t.params)
    if t.name in ("VARCHAR", "CHAR") and t.params and t.params[0] < 10485760:
        return f"{_PG[t.name]}({t.params[0]})"
    if t.name in ("TIMESTAMP", "TIMESTAMP_LTZ", "TIME") and t.params:
        return f"{_PG[t.name]}({min(t.params[0], 6)})"
    return _PG[t.name]


def stage_frame(df: DataFrame, table: UpsertKafkaTable, with_op: bool) -> DataFrame:
    """What Spark's JDBC writer can send: nested values as JSON text, TIME as text."""
    from pyspark.sql import functions as F

    cols = []
    for name, t in target_columns(table):
        c = F.col(quote_name(name))
        if t.name in NESTED:
            c = F.to_json(c)
        cols.append(c.alias(name))
    return df.select(*([F.col("op")] if with_op else []), *cols)


def _ident(qualified: str) -> Any:
    from psycopg import sql

    schema, _, name = qualified.rpartition(".")
    return sql.Identifier(schema, name) if schema else sql.Identifier(name)


def _cast_list(table: UpsertKafkaTable, prefix: str = "") -> Any:
    """``s."a"::jsonb, s."b"`` for INSERT ... SELECT from the staging table."""
    from psycopg import sql

    parts = []
    for name, t in target_columns(table):
        col = sql.SQL(prefix) + sql.Identifier(name)
        parts.append(col + sql.SQL(f"::{pg_type(t)}") if t.name in NESTED or t.name == "TIME" else col)
    return sql.SQL(", ").join(parts)


def pg_ensure_table(conn: Any, qualified: str, table: UpsertKafkaTable) -> list[str]:
    """Create the target from the spec when missing (columns, primary key); add new columns."""
    from psycopg import sql

    schema, _, name = qualified.rpartition(".")
    schema = schema or "public"
    rows = conn.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = %s AND table_name = %s",
        (schema, name),
    ).fetchall()
    wanted = target_columns(table)
    if not rows:
        cols = [
            sql.SQL("{} {}{}").format(
                sql.Identifier(n), sql.SQL(pg_type(t)), sql.SQL(" NOT NULL" if n in table.primary_key else "")
            )
            for n, t in wanted
        ]
        pk = sql.SQL(", ").join(sql.Identifier(k) for k in table.primary_key)
        conn.execute(
            sql.SQL("CREATE TABLE {} ({}, PRIMARY KEY ({}))").format(
                _ident(f"{schema}.{name}"), sql.SQL(", ").join(cols), pk
            )
        )
        return []
    have = {r[0] for r in rows}
    added = []
    for n, t in wanted:
        if n not in have:
            conn.execute(
                sql.SQL("ALTER TABLE {} ADD COLUMN {} {}").format(
                    _ident(f"{schema}.{name}"), sql.Identifier(n), sql.SQL(pg_type(t))
                )
            )
            added.append(n)
    return added


def pg_ensure_offsets_table(conn: Any, offsets_table: str) -> None:
    from psycopg import sql

    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (target text NOT NULL, job text NOT NULL, run bigint NOT NULL, "
            'mode text NOT NULL, topic text NOT NULL, "partition" integer NOT NULL, "offset" bigint NOT NULL, '
            "topic_id text, committed_at timestamptz NOT NULL DEFAULT now(), "
            'PRIMARY KEY (target, topic, "partition"))'
        ).format(_ident(offsets_table))
    )


def pg_lock_key(target: str) -> int:
    """A stable 63-bit advisory lock key for a target (the same in every process)."""
    import hashlib

    return int.from_bytes(hashlib.sha256(f"upsert-kafka-ops:{target}".encode()).digest()[:8], "big") >> 1


def jdbc_write(df: DataFrame, url: str, table: str, user: str, password: str | None) -> None:
    props = {
        "driver": "org.postgresql.Driver",
        "user": user,
        "batchsize": "10000",
        "stringtype": "unspecified",
    }
    if password is not None:
        props["password"] = password
    df.write.jdbc(url, table, mode="append", properties=props)


def jdbc_read(spark: SparkSession, url: str, query: str, user: str, password: str | None) -> DataFrame:
    """The rows of a PostgreSQL ``query`` (``timestamp`` columns as TIMESTAMP_NTZ, as the fold has them)."""
    reader = (
        spark.read.format("jdbc")
        .option("driver", "org.postgresql.Driver")
        .option("url", url)
        .option("query", query)
        .option("user", user)
        .option("preferTimestampNTZ", "true")
        .option("fetchsize", "10000")
    )
    if password is not None:
        reader = reader.option("password", password)
    return reader.load()


def pg_name(name: str) -> str:
    """One PostgreSQL identifier (a column's name) quoted for SQL text."""
    return '"' + name.replace('"', '""') + '"'


def pg_quote(qualified: str) -> str:
    """A schema-qualified PostgreSQL table name quoted for SQL text: ``"schema"."table"``."""
    return ".".join(pg_name(p) for p in qualified.split("."))


def pg_create_stage(conn: Any, stage: str, target: str, table: UpsertKafkaTable, with_op: bool) -> None:
    """An unlogged staging table with the target's columns (nested values as text)."""
    from psycopg import sql

    conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(_ident(stage)))
    cols: list[Any] = [sql.SQL("op text")] if with_op else []
    for n, t in target_columns(table):
        kind = "text" if t.name in NESTED or t.name == "TIME" else pg_type(t)
        cols.append(sql.SQL("{} {}").format(sql.Identifier(n), sql.SQL(kind)))
    conn.execute(sql.SQL("CREATE UNLOGGED TABLE {} ({})").format(_ident(stage), sql.SQL(", ").join(cols)))


def stage_name(target: str, job: str) -> str:
    """The job's staging table beside the target: one name per job (runs are serialized), so a
    killed run's leftover is dropped by the next run instead of accumulating."""
    schema, _, _ = target.rpartition(".")
    base = f"_uko_stage_{''.join(ch if ch.isalnum() else '_' for ch in job)[:40]}".lower()
    return f"{schema or 'public'}.{base}"


def pg_apply_changes(
    conn: Any, stage: str, target: str, table: UpsertKafkaTable, close_only: Sequence[str] = ()
) -> dict[str, int]:
    """Upsert the staged +U rows and delete the staged -D keys (inside the caller's transaction);
    with ``close_only`` (a history table), a staged ``close`` row sets only those columns."""
    from psycopg import sql

    names = [n for n, _ in target_columns(table)]
    pk = table.primary_key
    non_key = [n for n in names if n not in pk]
    match = sql.SQL(" AND ").join(sql.SQL("t.{0} = s.{0}").format(sql.Identifier(k)) for k in pk)
    closed = 0
    if close_only:
        closed = conn.execute(
            sql.SQL("UPDATE {t} AS t SET {sets} FROM {s} AS s WHERE s.op = 'close' AND {cond}").format(
                t=_ident(target),
                s=_ident(stage),
                sets=sql.SQL(", ").join(sql.SQL("{0} = s.{0}").format(sql.Identifier(c)) for c in close_only),
                cond=match,
            )
        ).rowcount
    update = (
        sql.SQL("DO UPDATE SET ")
        + sql.SQL(", ").join(sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(n)) for n in non_key)
        if non_key
        else sql.SQL("DO NOTHING")
    )
    upserted = conn.execute(
        sql.SQL(
            "INSERT INTO {t} ({cols}) SELECT {casts} FROM {s} WHERE op NOT IN ('-D', 'close') ON CONFLICT ({pk}) "
        ).format(
            t=_ident(target),
            cols=sql.SQL(", ").join(sql.Identifier(n) for n in names),
            casts=_cast_list(table),
            s=_ident(stage),
            pk=sql.SQL(", ").join(sql.Identifier(k) for k in pk),
        )
        + update
    ).rowcount
    deleted = conn.execute(
        sql.SQL("DELETE FROM {t} AS t USING {s} AS s WHERE s.op = '-D' AND {cond}").format(
            t=_ident(target), s=_ident(stage), cond=match
        )
    ).rowcount
    return {"upserted": int(upserted) + int(closed), "deleted": int(deleted)}


def pg_fill_from_stage(conn: Any, stage: str, target: str, table: UpsertKafkaTable) -> int:
    from psycopg import sql

    names = [n for n, _ in target_columns(table)]
    return int(
        conn.execute(
            sql.SQL("INSERT INTO {t} ({cols}) SELECT {casts} FROM {s}").format(
                t=_ident(target),
                cols=sql.SQL(", ").join(sql.Identifier(n) for n in names),
                casts=_cast_list(table),
                s=_ident(stage),
            )
        ).rowcount
    )


def pg_store_offsets(
    conn: Any,
    offsets_table: str,
    target: str,
    job: str,
    run: int,
    mode: str,
    offsets: Sequence[tuple[str, int, int]],
    topic_ids: dict[str, str] | None = None,
) -> None:
    from psycopg import sql

    conn.execute(sql.SQL("DELETE FROM {} WHERE target = %s").format(_ident(offsets_table)), (target,))
    with conn.cursor() as cur:
        cur.executemany(
            sql.SQL(
                'INSERT INTO {} (target, job, run, mode, topic, "partition", "offset", topic_id) '
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
            ).format(_ident(offsets_table)),
            [(target, job, run, mode, t, p, o, (topic_ids or {}).get(t)) for t, p, o in offsets],
        )
