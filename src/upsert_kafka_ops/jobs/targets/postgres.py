"""A PostgreSQL table kept equal to the topic's latest state.

A run stages its rows over JDBC, then one transaction applies them (``INSERT ... ON CONFLICT DO
UPDATE`` and ``DELETE``, or a truncate and refill) and updates the offsets table's rows
(``target, job, run, topic, partition, offset``). Runs of one table hold a PostgreSQL advisory lock.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from upsert_kafka_ops.jobs.continuity import missing_columns
from upsert_kafka_ops.jobs.core import ConcurrentRunError
from upsert_kafka_ops.jobs.faults import fault_point
from upsert_kafka_ops.jobs.state import StoredState
from upsert_kafka_ops.jobs.targets.base import Stored, Write, wait_for
from upsert_kafka_ops.pipeline import MaintainJob, Pipeline, PostgresTarget

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from upsert_kafka_ops.spec.table import UpsertKafkaTable


@dataclass
class PostgresTable:
    """A ``kind: postgres`` target of ``pipeline``. While a run holds it, the stored state is read on
    the connection that holds the advisory lock (one connection fewer per run)."""

    spec: PostgresTarget
    pipeline: Pipeline
    full_only: ClassVar[bool] = False
    previewed: ClassVar[bool] = False
    held: Any = field(default=None, init=False, repr=False, compare=False)

    @property
    def uri(self) -> str:
        return self.spec.uri

    @property
    def lineage_uri(self) -> str:
        t = self.spec
        return f"postgres://{t.host}:{t.port}/{t.database}.{t.schema_name}.{t.table_name}"

    @property
    def qualified(self) -> str:
        """``schema.table``, never resolved through ``search_path``."""
        return f"{self.spec.schema_name}.{self.spec.table_name}"

    def hold(self, spark: SparkSession, timeout: float) -> AbstractContextManager[None]:
        return self._advisory_lock(timeout)

    @contextmanager
    def _advisory_lock(self, timeout: float) -> Iterator[None]:
        import psycopg

        from upsert_kafka_ops.engine.postgres import pg_lock_key

        key = pg_lock_key(self.uri)
        with psycopg.connect(**self.spec.conninfo(), autocommit=True) as conn:

            def take() -> bool:
                row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
                return bool(row and row[0])

            wait_for(take, timeout, self.uri, f"PostgreSQL advisory lock {key}", "wait for the other run.")
            self.held = conn
            try:
                yield
            finally:
                self.held = None
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

    def stored(self, job: str) -> Stored:
        return Stored(self.read_state())

    def read_state(self) -> StoredState | None:
        import psycopg

        if self.held is not None:
            return read_postgres_state(self.held, self.spec.offsets_table, self.spec.table)
        with psycopg.connect(**self.spec.conninfo(), autocommit=True) as conn:
            return read_postgres_state(conn, self.spec.offsets_table, self.spec.table)

    def gaps(self, spark: SparkSession, table: UpsertKafkaTable) -> str:
        import psycopg

        with psycopg.connect(**self.spec.conninfo(), autocommit=True) as pg:
            rows = pg.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s",
                (self.spec.schema_name, self.spec.table_name),
            ).fetchall()
        if not rows:
            return "the PostgreSQL table is missing: it is rebuilt from the earliest offset"
        return missing_columns(table, {r[0] for r in rows})

    def maintain(self, spark: SparkSession, job: MaintainJob) -> dict[str, int]:
        import psycopg

        from upsert_kafka_ops.engine.postgres import pg_vacuum

        # on the connection that holds the advisory lock (autocommit: VACUUM runs outside a transaction)
        if self.held is not None:
            return pg_vacuum(self.held, self.qualified)
        with psycopg.connect(**self.spec.conninfo(), autocommit=True) as conn:
            return pg_vacuum(conn, self.qualified)

    def write(self, spark: SparkSession, w: Write) -> None:
        import psycopg

        from upsert_kafka_ops.engine import postgres as pgw

        target, job, df, mode, run, payload, result = (
            self.spec,
            w.job,
            w.df,
            w.mode,
            w.run,
            w.payload,
            w.result,
        )
        table, info, qualified = w.written, target.conninfo(), self.qualified
        offsets = [(t, int(p), int(o)) for t, parts in payload["offsets"].items() for p, o in parts.items()]
        incremental = mode == "incremental"
        with psycopg.connect(**info) as pg:
            with pg.transaction():
                result.columns_added = pgw.pg_ensure_table(pg, qualified, table)
                pgw.pg_ensure_offsets_table(pg, target.offsets_table)
            stage = pgw.stage_name(qualified, job.name)
            pgw.pg_create_stage(pg, stage, qualified, table, with_op=incremental)
            pg.commit()
            try:
                frame = pgw.stage_frame(df, table, with_op=incremental)
                pgw.jdbc_write(
                    frame, target.jdbc_url(), pgw.pg_quote(stage), target.user, info.get("password")
                )
                with pg.transaction():
                    current = read_postgres_state(pg, target.offsets_table, target.table)
                    if (current.run if current else 0) >= run:
                        raise ConcurrentRunError(
                            f"{self.uri}: run {run} was already committed by another run; rerun this job."
                        )
                    if incremental:
                        counts = pgw.pg_apply_changes(pg, stage, qualified, table, w.close_only)
                    else:
                        # TRUNCATE is transactional: readers keep the old rows until COMMIT, and grants,
                        # views and foreign keys on the table stay as they are
                        pg.execute(f"TRUNCATE {pgw.pg_quote(qualified)}")
                        n = pgw.pg_fill_from_stage(pg, stage, qualified, table)
                        fault_point("during-swap")
                        counts = {"upserted": n, "deleted": 0}
                    pgw.pg_store_offsets(
                        pg,
                        target.offsets_table,
                        target.table,
                        job.name,
                        run,
                        mode,
                        offsets,
                        payload.get("topic_ids"),
                    )
                    fault_point("in-transaction")
            finally:
                with pg.transaction():
                    pg.execute(f"DROP TABLE IF EXISTS {pgw.pg_quote(stage)}")
        result.rows_upserted, result.rows_deleted = counts["upserted"], counts["deleted"]

    def rows(self, spark: SparkSession, columns: Sequence[str] | None = None) -> DataFrame:
        from upsert_kafka_ops.engine import postgres as pgw

        select = "*" if columns is None else ", ".join(pgw.pg_name(n) for n in columns)
        return self._query(spark, f"SELECT {select} FROM {pgw.pg_quote(self.qualified)}")

    def comparable(
        self, spark: SparkSession, table: UpsertKafkaTable, current: str | None
    ) -> tuple[DataFrame, set[str]]:
        """The columns as text that Spark would read otherwise: ``jsonb`` (held as JSON text),
        ``time`` and ``char`` (``char(n)`` pads with blanks, which ``::text`` drops)."""
        from upsert_kafka_ops.engine import postgres as pgw
        from upsert_kafka_ops.engine.warehouse import target_columns

        cols = target_columns(table)
        texts = {n for n, t in cols if t.name in pgw.NESTED or t.name in ("TIME", "CHAR")}
        select = ", ".join(
            pgw.pg_name(n) + ("::text" if n in texts else "") + f" AS {pgw.pg_name(n)}" for n, _ in cols
        )
        where = f" WHERE {pgw.pg_name(current)}" if current else ""
        rows = self._query(spark, f"SELECT {select} FROM {pgw.pg_quote(self.qualified)}{where}")
        return rows, {n for n, t in cols if t.name in pgw.NESTED}

    def _query(self, spark: SparkSession, query: str) -> DataFrame:
        from upsert_kafka_ops.engine.postgres import jdbc_read

        t = self.spec
        return jdbc_read(spark, t.jdbc_url(), query, t.user, t.conninfo().get("password"))


def read_postgres_state(conn: Any, offsets_table: str, target: str) -> StoredState | None:
    """Rows of ``offsets_table`` for ``target`` (a psycopg connection; the table may not exist)."""
    from psycopg import sql

    schema, _, name = offsets_table.rpartition(".")
    quoted = ".".join('"' + part.replace('"', '""') + '"' for part in offsets_table.split("."))
    exists = conn.execute("SELECT to_regclass(%s)", (quoted,)).fetchone()[0]
    if exists is None:
        return None
    ident = sql.Identifier(schema, name) if schema else sql.Identifier(name)
    rows = conn.execute(
        sql.SQL(
            'SELECT job, run, mode, topic, "partition", "offset", committed_at, topic_id FROM {} WHERE target = %s'
        ).format(ident),
        (target,),
    ).fetchall()
    if not rows:
        return None
    job, run, mode, _, _, _, at, _ = rows[0]
    return StoredState(
        job=job,
        run=int(run),
        mode=mode,
        offsets={(r[3], int(r[4])): int(r[5]) for r in rows},
        committed_at=at.isoformat(timespec="seconds") if at is not None else "",
        extra={"topic_ids": {r[3]: r[7] for r in rows if r[7] is not None}},
    )
