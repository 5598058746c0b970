"""Does a warehouse table still equal the fold of its topic? (``upsert-kafka-ops verify``)

A materialize or backfill job stores its offsets with its table. :func:`verify_job` folds the job's
source from the earliest offset up to exactly those offsets (the same fold a run makes, decoding only
each key's winning value) and compares it with the table key by key in Spark: one hash of each row's
non-key columns on each side, a full outer join on the primary key, and counts per outcome. Only the
first ``show`` keys of each kind of difference come back to the driver, never rows or values.

A difference is one of: a key the topic holds that the table lacks (``missing``); a key in the table
that the topic deleted or never had (``unexpected``); a key whose row differs (``changed``, with the
columns that differ for the keys listed); a key the table holds more than once (``duplicated``).

Writes are not blocked: the stored state is read before and after the table is; when a run committed
in between, the comparison is repeated. The table is read as it is now, so a change made behind the
job's back (a DELETE, an UPDATE, a restored backup) after its last run is seen.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from upsert_kafka_ops.engine.hashing import ROW_JSON, quoted, row_hash
from upsert_kafka_ops.errors import SpecError, UpsertKafkaOpsError
from upsert_kafka_ops.jobs.core import ConcurrentRunError
from upsert_kafka_ops.jobs.targets import WarehouseTable, is_warehouse, read_stored_offsets, target_for
from upsert_kafka_ops.pipeline import AnyJob, BackfillJob, MaterializeJob, WarehouseJob, source_table
from upsert_kafka_ops.spec.connection import for_table

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from upsert_kafka_ops.jobs.state import StoredState
    from upsert_kafka_ops.pipeline import Pipeline

#: the kinds of difference, in the order they are reported
KINDS = ("missing", "unexpected", "changed", "duplicated")
_SAYS = {
    "missing": "key(s) the topic holds are missing from the table",
    "unexpected": "key(s) in the table that the topic deleted or never had",
    "changed": "key(s) whose row differs from the topic's latest value",
    "duplicated": "key(s) the table holds more than once",
}
_ATTEMPTS = 3
#: the comparison's own columns, named apart from any column of a table
_H, _H2, _N, _KIND = "__uko_hash", "__uko_hash_max", "__uko_rows", "__uko_kind"


class NotVerifiableError(UpsertKafkaOpsError):
    """The target holds nothing to compare yet (no run has stored offsets with it)."""


@dataclass
class Verification:
    """The outcome of one comparison of ``target`` with the fold of its topic up to ``offsets``."""

    job: str
    target: str
    run: int
    offsets: dict[str, dict[str, int]]
    table_rows: int
    topic_rows: int
    differences: dict[str, int] = field(default_factory=dict)
    #: per kind, the first keys in key order (each a {column: value} of the primary key, JSON values)
    keys: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: for the listed changed keys, the columns whose values differ (by position in ``keys``)
    changed_columns: list[list[str]] = field(default_factory=list)
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not any(self.differences.values())

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}

    def summary(self) -> str:
        """One paragraph: the verdict, the counts, and the listed keys of each difference."""
        head = (
            f"{self.target} (job {self.job}, run {self.run}): {self.table_rows:,} row(s) in the table, "
            f"{self.topic_rows:,} live key(s) in the topic up to the stored offsets"
        )
        if self.ok:
            return f"{head}: equal."
        lines = [f"{head}: DIFFERENT."]
        for kind in KINDS:
            n = self.differences.get(kind, 0)
            if not n:
                continue
            listed = self.keys.get(kind, [])
            shown = []
            for i, k in enumerate(listed):
                key = ", ".join(f"{c}={json.dumps(v)}" for c, v in k.items())
                cols = self.changed_columns[i] if kind == "changed" and i < len(self.changed_columns) else []
                shown.append(f"{{{key}}}" + (f" ({', '.join(cols)})" if cols else ""))
            more = f", and {n - len(listed):,} more" if n > len(listed) else ""
            lines.append(f"  {n:,} {_SAYS[kind]}: {'; '.join(shown)}{more}")
        return "\n".join(lines)


def verify_job(spark: SparkSession, pipeline: Pipeline, job_name: str, *, show: int = 10) -> Verification:
    """Compare ``job_name``'s warehouse table with the fold of its source up to the offsets the table
    stored; ``show``: how many keys of each kind of difference to list."""
    job, target = _verifiable(pipeline.job(job_name), pipeline)
    began = time.monotonic()
    for _ in range(_ATTEMPTS):
        stored = read_stored_offsets(job, pipeline)
        if stored is None:
            raise NotVerifiableError(
                f"{target.uri} has no offsets stored with it: job {job.name!r} has not written it yet. "
                "Run the job first; verify compares what a run wrote."
            )
        outcome = _compare(spark, pipeline, job, target, stored, show)
        after = read_stored_offsets(job, pipeline)
        if after is not None and after.run == stored.run:
            outcome.duration_s = round(time.monotonic() - began, 3)
            return outcome
    raise ConcurrentRunError(
        f"{target.uri}: runs of job {job.name!r} committed during each of {_ATTEMPTS} comparisons. "
        "Verify between runs (an orchestrator: after the job's task)."
    )


def refusal(job: AnyJob) -> SpecError | None:
    """Why ``job`` has no table verify can compare (None: it has one): not a materialize or backfill
    job, a topic target, a snapshot table, or a history ordered by a column (its current versions
    are not the topic's fold; a history in the topic's order compares its current versions)."""
    if not isinstance(job, MaterializeJob | BackfillJob):
        return SpecError(
            "--job",
            f"{job.name!r} is a {job.kind} job: verify compares a warehouse table with its topic.",
            "name a materialize or backfill job.",
        )
    target = job.target
    if not is_warehouse(target):
        return SpecError(
            "--job",
            f"{job.name!r} writes a topic: verify compares a warehouse table with its topic.",
            "name a job whose target is a Delta, Parquet, Iceberg or PostgreSQL table.",
        )
    if target.snapshot_column:
        return SpecError(
            f"jobs.{job.name}.target.as_of_column",
            f"{job.name!r} keeps snapshots in one table, not the topic's latest state.",
            "verify a materialize job of the same source instead.",
        )
    history = job.history
    if history is not None and history.sequence_by is not None:
        return SpecError(
            f"jobs.{job.name}.history.sequence_by",
            f"{job.name!r}'s current versions are the largest {history.sequence_by!r} of each key, not the "
            "topic's latest record.",
            "verify a materialize job of the same source, or a history ordered by the topic.",
        )
    return None


def _verifiable(job: AnyJob, pipeline: Pipeline) -> tuple[WarehouseJob, WarehouseTable]:
    refused = refusal(job)
    if refused is not None:
        raise refused
    assert isinstance(job, MaterializeJob | BackfillJob) and is_warehouse(job.target)  # what refusal checks
    return job, target_for(job.target, pipeline)


def _compare(
    spark: SparkSession,
    pipeline: Pipeline,
    job: WarehouseJob,
    target: WarehouseTable,
    stored: StoredState,
    show: int,
) -> Verification:
    from upsert_kafka_ops.jobs.to_warehouse import fold_source

    table = source_table(job.source)
    keys = list(table.primary_key)
    conn = for_table(pipeline.connections[job.source.connection], table.properties)
    read = fold_source(spark, job.source, conn, until=dict(stored.offsets))
    try:
        history = job.history
        raw, texts = target.comparable(spark, table, history.is_current if history else None)
        absent = [f.name for f in read.df.schema if f.name not in set(raw.columns)]
        if absent:
            raise NotVerifiableError(
                f"{target.uri} lacks the column(s) {', '.join(absent)} of job {job.name!r}'s table. "
                "Run the job (a run adds the columns its table gained), then verify again."
            )
        topic, rows = _comparable(read.df, raw, texts)
        values = [f.name for f in topic.schema if f.name not in keys]
        counts, listed = _tally(_judged(topic, rows, keys, values), keys, show)
        columns = _changed_columns(topic, rows, keys, values, listed.get("changed", []))
    finally:
        read.release()
    return Verification(
        job=job.name,
        target=target.uri,
        run=stored.run,
        offsets=stored.offsets_json(),
        table_rows=sum(r for k, (_, r) in counts.items() if k != "missing"),
        topic_rows=sum(n for k, (n, _) in counts.items() if k != "unexpected"),
        differences={k: counts.get(k, (0, 0))[0] for k in KINDS},
        keys={k: [{c: _plain(v) for c, v in key.items()} for key in ks] for k, ks in listed.items()},
        changed_columns=columns,
    )


def _judged(topic: DataFrame, rows: DataFrame, keys: list[str], values: list[str]) -> DataFrame:
    """Per key of either side: its ``kind`` (a difference, or ``equal``) and ``n``, how many rows the
    table holds for it."""
    from pyspark.sql import functions as F

    ours = _hashed(topic, keys, values).alias("f")
    theirs = (
        _hashed(rows, keys, values)
        .groupBy(*[quoted(k) for k in keys])
        .agg(F.count(F.lit(1)).alias(_N), F.min(_H).alias(_H), F.max(_H).alias(_H2))
        .alias("t")
    )
    t_n, t_h, t_h2, f_h = (F.col(f"{side}.{c}") for side, c in (("t", _N), ("t", _H), ("t", _H2), ("f", _H)))
    kind = (
        F.when(t_n.isNull(), "missing")
        .when(f_h.isNull(), "unexpected")
        .when(t_n > 1, "duplicated")
        .when((t_h != f_h) | (t_h2 != f_h), "changed")
        .otherwise("equal")
    )
    joined = ours.join(theirs, on=keys, how="full_outer")
    return joined.select(*[quoted(k) for k in keys], kind.alias(_KIND), t_n.alias(_N))


def _tally(
    judged: DataFrame, keys: list[str], show: int
) -> tuple[dict[str, tuple[int, int]], dict[str, list[dict[str, Any]]]]:
    """Keys and table rows per kind, and the first ``show`` keys of each difference (key order)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    order = [quoted(c) for c in keys]
    judged.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        per_kind = judged.groupBy(_KIND).agg(F.count(F.lit(1)).alias("keys"), F.sum(_N).alias("rows"))
        counts = {r[_KIND]: (int(r["keys"]), int(r["rows"] or 0)) for r in per_kind.collect()}
        listed = {k: _first(judged, k, order, show) for k in KINDS if counts.get(k, (0, 0))[0] and show > 0}
    finally:
        judged.unpersist()
    return counts, listed


def _first(judged: DataFrame, kind: str, order: list[str], show: int) -> list[dict[str, Any]]:
    from pyspark.sql import functions as F

    picked = judged.filter(F.col(_KIND) == kind).select(*order).orderBy(*order).limit(show)
    return [r.asDict() for r in picked.collect()]


def _plain(value: Any) -> Any:
    """A key's value as JSON has it (bytes as hex, dates and decimals as text)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, bytes | bytearray):
        return "0x" + bytes(value).hex()
    return str(value)


def _hashed(df: DataFrame, keys: list[str], values: list[str]) -> DataFrame:
    """The key columns and a hash of the other columns (names included, so a NULL in one
    column never equals a value in another)."""
    from pyspark.sql import functions as F

    return df.select(*[F.col(quoted(k)) for k in keys], row_hash(values).alias(_H))


def _changed_columns(
    topic: DataFrame, rows: DataFrame, keys: list[str], values: list[str], listed: list[dict[str, Any]]
) -> list[list[str]]:
    """For each listed changed key, the value columns whose contents differ (names only)."""
    from pyspark.sql import functions as F

    if not listed:
        return []
    wanted = topic.sparkSession.createDataFrame(
        listed, schema=topic.select(*[quoted(k) for k in keys]).schema
    )
    cols = [quoted(k) for k in keys] + [
        F.to_json(F.struct(F.col(quoted(v))), ROW_JSON).alias(v) for v in values
    ]
    mine = {tuple(r[k] for k in keys): r for r in topic.join(wanted, on=keys).select(*cols).collect()}
    theirs = {tuple(r[k] for k in keys): r for r in rows.join(wanted, on=keys).select(*cols).collect()}
    out = []
    for k in listed:
        at = tuple(k[c] for c in keys)
        a, b = mine.get(at), theirs.get(at)
        out.append([v for v in values if a is None or b is None or a[v] != b[v]])
    return out


def _comparable(fold: DataFrame, raw: DataFrame, texts: set[str]) -> tuple[DataFrame, DataFrame]:
    """Both sides in the fold's columns and types; ``texts`` (a PostgreSQL table's ``jsonb`` columns,
    read as the database's JSON text in its own key order) as canonical JSON text on both sides, the
    fold's in the form the writer sends."""
    from pyspark.sql import functions as F

    def ours(name: str) -> Column:
        c = F.col(quoted(name))
        return (_canonical_json(F.to_json(c)) if name in texts else c).alias(name)

    def theirs(name: str, kind: Any) -> Column:
        c = F.col(quoted(name))
        return (_canonical_json(c) if name in texts else c.cast(kind)).alias(name)

    topic = fold.select(*[ours(f.name) for f in fold.schema])
    return topic, raw.select(*[theirs(f.name, f.dataType) for f in fold.schema])


def _canonical_json(column: Column) -> Column:
    """JSON text with sorted keys and no spaces (a Python UDF: only for PostgreSQL ``jsonb`` columns)."""
    from pyspark.sql import functions as F

    def canonical(text: str | None) -> str | None:
        return None if text is None else json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))

    return F.udf(canonical, "string")(column)
