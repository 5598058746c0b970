"""The fold of a small range in this process: which record wins for each key, without a Spark job.

The rules are the engine's (:mod:`upsert_kafka_ops.engine.source`): per key and partition the record
with the largest offset, and across partitions the one whose partition holds the key's newest
timestamp, ties to the higher (topic, partition). Spark still decodes every key and value (one
projection of a local relation, which runs no job); this module only chooses among the decoded
records, and says when it cannot (a key type whose Python value does not compare as Spark's does, an
undecodable key or value that must fail the read): then the read folds with Spark, which reports it.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

#: Spark's simple type names whose Python values are equal exactly when Spark's are (no NaN or -0.0
#: of floats, no local-time ambiguity of timestamps, hashable): the key types folded here
EXACT_KEY_TYPES = ("tinyint", "smallint", "int", "bigint", "string", "boolean", "date", "binary")


def folds_here(key_types: Sequence[str]) -> bool:
    """Whether keys of these Spark types (``DataType.simpleString()``, or DDL names in lower case) are
    folded here."""
    return all(t in EXACT_KEY_TYPES or t.startswith(("decimal(", "char(", "varchar(")) for t in key_types)


#: the rows of DataFrames this process built from an Arrow table it still holds (a fold's result)
_HELD: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def hold_rows(df: Any, rows: Any) -> None:
    """Remember that ``df`` was built from the Arrow table ``rows``, for :func:`held_rows`."""
    _HELD[df] = rows


def held_rows(df: Any) -> Any:
    """The Arrow table ``df`` was built from in this process, or None: a writer in this process takes
    it instead of collecting the same rows back from Spark (0.05 s of a 10-record run)."""
    return _HELD.get(df)


class Decoded(NamedTuple):
    """One record as the fold sees it: its decoded key, where it is, and what its bytes held."""

    key: tuple[Any, ...]
    topic: str
    partition: int
    offset: int
    timestamp: int  # any monotonic unit (microseconds here)
    null_key: bool
    key_error: bool
    tombstone: bool
    value_error: bool
    size: int  # key and value bytes


@dataclass
class Winner:
    """The record a key ends with (its index in the input), and its partition's newest timestamp."""

    index: int
    tombstone: bool
    newest: int
    partitions: int = 1


@dataclass
class Fold:
    """The winners, the input's statistics (the names of the engine's ``RunResult``), and the
    records whose winning value does not decode."""

    winners: dict[tuple[Any, ...], Winner] = field(default_factory=dict)
    stats: dict[str, int] = field(default_factory=dict)
    bad_winners: int = 0


def fold(records: Sequence[Decoded]) -> Fold:
    """Choose each key's last record among ``records`` (records with a NULL or undecodable key take
    no part; they are counted)."""
    last: dict[tuple[tuple[Any, ...], str, int], list[int]] = {}  # (key, t, p) -> [index, newest ts]
    stats = dict.fromkeys(("records", "bytes", "tombs", "null_keys", "key_errors"), 0)
    for i, r in enumerate(records):
        stats["records"] += 1
        stats["bytes"] += r.size
        stats["tombs"] += r.tombstone
        if r.null_key:
            stats["null_keys"] += 1
            continue
        if r.key_error:
            stats["key_errors"] += 1
            continue
        seen = last.get((r.key, r.topic, r.partition))
        if seen is None:
            last[(r.key, r.topic, r.partition)] = [i, r.timestamp]
        else:
            if r.offset > records[seen[0]].offset:
                seen[0] = i
            seen[1] = max(seen[1], r.timestamp)
    out = Fold(stats=stats)
    for (key, topic, partition), (i, newest) in last.items():
        w = out.winners.get(key)
        if w is None:
            out.winners[key] = Winner(i, records[i].tombstone, newest)
            continue
        w.partitions += 1
        mine = records[w.index]
        if (newest, topic, partition) > (w.newest, mine.topic, mine.partition):
            w.index, w.tombstone, w.newest = i, records[i].tombstone, newest
    out.stats["keys"] = len(out.winners)
    out.stats["multi"] = sum(1 for w in out.winners.values() if w.partitions > 1)
    out.bad_winners = sum(1 for w in out.winners.values() if records[w.index].value_error)
    return out
