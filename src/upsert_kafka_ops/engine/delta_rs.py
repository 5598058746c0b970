"""A small change merged into a Delta table by delta-rs in this process: the same commit as Spark's
MERGE, without a Spark job.

Spark's Delta MERGE plans and runs about a dozen jobs whatever the change's size: ten rows into a
table of 100,000 keys take 2-3 s on a warm local session (two cores), and its floor is the same as a
bare ``MERGE INTO ... USING VALUES``. delta-rs (the ``deltalake`` package) merges the same ten rows in
tens of milliseconds. The commit carries what Spark's would: one MERGE with the run's ``txn``
(``appId`` = the job, ``version`` = the run) and the stored offsets as ``userMetadata``, so Spark,
delta-rs and this project read the table, its offsets and a replayed run the same way.

:func:`merge_here` says why a change cannot be merged here (then Spark's MERGE writes it): no
``deltalake`` package, a table not on this process's file system (on an object store, or on a Spark
Connect server's own disk), a DataFrame without ``toArrow`` (Spark 3.5), or a column name delta-rs
cannot quote.
"""

from __future__ import annotations

import importlib.util
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from upsert_kafka_ops.engine.fold_here import held_rows
from upsert_kafka_ops.engine.warehouse import VALUE_FILTERED_KEY_TYPES, target_columns
from upsert_kafka_ops.spec.table import UpsertKafkaTable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

#: the most changes (rows of the last change per key) a run merges here; more go to Spark's MERGE.
#: Both rewrite each file holding a touched key; Spark's MERGE adds its dozen jobs, so delta-rs stays
#: faster well past small runs: a warm run of 250,000 records (about 92,000 changes) into a table of
#: 100,000 keys took 5.8-8.6 s with it and 8.3-16.7 s with Spark's MERGE (a continuous job's batches
#: under load are that size). The bound keeps the changes this process holds (collected from Spark
#: as Arrow when Spark folded them) to tens of megabytes.
SMALL_MERGE = 200_000


def merge_here(changes: DataFrame, path: str, table: UpsertKafkaTable, rows: int | None) -> str | None:
    """None when ``rows`` changes can be merged into ``path`` by delta-rs here, else why not."""
    if rows is None or rows > SMALL_MERGE:
        return "the number of changes is unknown" if rows is None else f"more than {SMALL_MERGE:,} changes"
    if importlib.util.find_spec("deltalake") is None or importlib.util.find_spec("pyarrow") is None:
        return "the deltalake package is not installed (pip install 'upsert-kafka-ops[delta]')"
    if "://" in path and not path.startswith("file:"):
        return "the table is not on the local file system"
    if _local_table(path) is None:
        return "the table's log is not visible from this process (a Spark Connect server's own disk?)"
    if not hasattr(changes, "toArrow"):
        return "this Spark's DataFrame has no toArrow (Spark 4.0 and later have it)"
    if any("`" in c for c, _ in target_columns(table)):
        return "a column name holds a backtick"
    return None


def _local_table(path: str) -> Path | None:
    """The folder of the Delta table at ``path`` when its log is on this process's file system."""
    if "://" in path and not path.startswith("file:"):
        return None
    folder = Path(urlparse(path).path if "://" in path else path.removeprefix("file:"))
    return folder if (folder / "_delta_log").is_dir() else None


def table_schema(path: str) -> StructType | None:
    """The schema of the Delta table at ``path``, read from its log here by delta-rs: milliseconds,
    where Spark's read of it is a query (0.2 s of a small run on a warm session, a round trip more on
    Spark Connect). None when it cannot be read here (no ``deltalake`` package, a table not on this
    process's file system, no table, a table feature delta-rs does not read): then Spark reads it."""
    if importlib.util.find_spec("deltalake") is None:
        return None
    folder = _local_table(path)
    if folder is None:
        return None
    from deltalake import DeltaTable as RsDeltaTable
    from pyspark.sql.types import StructType

    try:  # the log's schema is Spark's own JSON form of the table's StructType
        return StructType.fromJson(json.loads(RsDeltaTable(str(folder)).schema().to_json()))
    except Exception as exc:  # Spark reads it instead, and says what is wrong if it cannot either
        log.debug("delta-rs cannot read the schema of %s (%s): Spark reads it", path, exc)
        return None


def _q(alias: str, name: str) -> str:
    return f"{alias}.`{name}`"


#: the most distinct values of a key column a MERGE names in its key filter (more: no filter)
KEY_FILTER_VALUES = 1000


def _literal(value: object) -> str:
    """``value`` (an int or a str of a key column) as a delta-rs (DataFusion) SQL literal."""
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"  # a backslash is itself there (checked by a test)
    return str(int(value))  # type: ignore[call-overload]


def key_filter(source: Any, table: UpsertKafkaTable) -> str:
    """A condition on the target's key columns naming the change's own key values (``t.id IN (3, 7)``),
    or ``""`` when the key has a column of another type, a null, or more than
    ``KEY_FILTER_VALUES`` distinct values. Each MERGE condition ``t.k = s.k`` implies it, so it
    changes nothing a MERGE does; it lets delta-rs skip the files whose statistics exclude every
    changed key instead of reading them all, which is what keeps a small run into a large table whose
    files each hold a range of keys (a ``maintain`` job's ``cluster``) about as fast as into a small
    one (``benchmarks/bench_delta_layout.py``)."""
    import pyarrow.compute as pc

    kinds = dict(target_columns(table))
    parts = []
    for k in table.primary_key:
        if kinds[k].name not in VALUE_FILTERED_KEY_TYPES:
            return ""
        values = pc.unique(source.column(k))
        if values.null_count or len(values) > KEY_FILTER_VALUES:
            return ""
        parts.append(f"{_q('t', k)} IN ({', '.join(_literal(v) for v in values.to_pylist())})")
    return " AND ".join(parts)


def merge_small(
    changes: DataFrame,
    path: str,
    table: UpsertKafkaTable,
    *,
    app_id: str,
    version: int,
    metadata: dict[str, Any],
    rows: int,
    close_only: Sequence[str] = (),
) -> dict[str, int]:
    """MERGE the last change per key (``op`` +U/-D, and ``close`` with ``close_only``) into the Delta
    table at the local ``path`` with delta-rs: one commit with the run's txn and ``userMetadata``, as
    :func:`~upsert_kafka_ops.engine.delta.delta_merge` writes with Spark (``rows`` 0: an empty append
    that commits the state alone). Raises delta-rs's errors
    unchanged (a protocol it cannot write, a conflicting commit) before anything is committed. Like
    Spark, it commits nothing when the table's txn for ``app_id`` is already at ``version`` or later."""
    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

    target = DeltaTable(path)
    done = target.transaction_version(app_id)
    if done is not None and done >= version:  # as Spark skips a write whose txn is not new
        return {"upserted": 0, "deleted": 0}
    props = CommitProperties(
        custom_metadata={"userMetadata": json.dumps(metadata, sort_keys=True)},
        app_transactions=[Transaction(app_id, version)],
    )
    if rows == 0:  # a MERGE of nothing commits nothing: an empty append commits the state alone
        empty = pa.schema(target.schema().to_arrow()).empty_table()
        write_deltalake(target, empty, mode="append", commit_properties=props)
        return {"upserted": 0, "deleted": 0}
    names = [c for c, _ in target_columns(table)]
    held = held_rows(changes)  # the fold's own rows, when it folded them in this process
    source = held.select(["op", *names]) if held is not None else changes.select("op", *names).toArrow()
    upsert = "s.op NOT IN ('-D', 'close')" if close_only else "s.op <> '-D'"
    on = [f"{_q('t', k)} = {_q('s', k)}" for k in table.primary_key]
    narrow = key_filter(source, table)
    merger = target.merge(
        source,
        predicate=" AND ".join([*on, narrow] if narrow else on),
        source_alias="s",
        target_alias="t",
        commit_properties=props,
    ).when_matched_delete(predicate="s.op = '-D'")
    if close_only:
        merger = merger.when_matched_update(
            updates={f"`{c}`": _q("s", c) for c in close_only}, predicate="s.op = 'close'"
        )
    every = {f"`{c}`": _q("s", c) for c in names}
    metrics = (
        merger.when_matched_update(updates=every, predicate=upsert)
        .when_not_matched_insert(updates=every, predicate=upsert)
        .execute()
    )
    return {
        "upserted": int(metrics["num_target_rows_updated"]) + int(metrics["num_target_rows_inserted"]),
        "deleted": int(metrics["num_target_rows_deleted"]),
    }
