"""PostgreSQL targets: rows staged with Spark's JDBC writer into an unlogged table, then one psycopg
transaction upserts (``INSERT ... ON CONFLICT DO UPDATE``), deletes, updates the offsets table and
drops the stage. A full rebuild truncates and refills the table inside the transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from upsert_kafka_ops.engine.warehouse import target_columns
from upsert_kafka_ops.spec.table import UpsertKafkaTable
from upsert_kafka_ops.spec.types import SqlType, quote_name

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


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


def pg_vacuum(conn: Any, qualified: str) -> dict[str, int]:
    """``VACUUM (ANALYZE)`` of the table (``conn`` in autocommit: VACUUM runs outside a transaction):
    dead row versions that updates and deletes left are reclaimed and the planner's statistics
    refreshed. Returns the dead rows PostgreSQL's statistics counted before and after; empty when
    the table does not exist yet."""

    def dead() -> int | None:
        row = conn.execute(
            "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = to_regclass(%s)", (pg_quote(qualified),)
        ).fetchone()
        return int(row[0]) if row else None

    before = dead()
    if before is None:
        return {}
    conn.execute(f"VACUUM (ANALYZE) {pg_quote(qualified)}")
    return {"dead_rows_before": before, "dead_rows_after": dead() or 0}
