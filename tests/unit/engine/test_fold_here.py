"""The fold of a small range in this process chooses what the tests' oracle folds, record for record."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.integration.oracle import Record, fold

from upsert_kafka_ops.engine.fold_here import Decoded, folds_here
from upsert_kafka_ops.engine.fold_here import fold as fold_here

# one record: (key or None, partition, timestamp, value or None); keys are small ints so they meet
# across partitions, timestamps run backwards too (a producer's clock is not the log's order)
record = st.tuples(
    st.one_of(st.none(), st.integers(0, 4)),
    st.sampled_from([("a", 0), ("a", 1), ("b", 0)]),
    st.integers(0, 6),
    st.one_of(st.none(), st.binary(min_size=0, max_size=3)),
)


def _records(drawn: list[tuple[int | None, tuple[str, int], int, bytes | None]]) -> list[Record]:
    offsets: dict[tuple[str, int], int] = {}
    out = []
    for key, (topic, partition), ts, value in drawn:
        offset = offsets.get((topic, partition), 0)
        offsets[(topic, partition)] = offset + 1
        out.append(Record(topic, partition, offset, ts, None if key is None else b"%d" % key, value))
    return out


@given(st.lists(record, max_size=40), st.randoms())
@settings(max_examples=300, deadline=None)
def test_the_winners_are_the_oracles_last_records(drawn: list, rnd) -> None:  # type: ignore[type-arg]
    records = _records(drawn)
    rnd.shuffle(records)  # the fold may see records in any order: a local relation keeps none
    decoded = [
        Decoded((int(r.key),) if r.key is not None else (None,), r.topic, r.partition, r.offset, r.timestamp,
                r.key is None, False, r.value is None, False, len(r.key or b"") + len(r.value or b""))
        for r in records
    ]  # fmt: skip
    result = fold_here(decoded)
    live = {k[0]: records[w.index].value for k, w in result.winners.items() if not w.tombstone}
    assert live == fold(records, int, lambda v: v)
    assert result.stats["records"] == len(records)
    assert result.stats["null_keys"] == sum(r.key is None for r in records)
    assert result.stats["tombs"] == sum(r.value is None for r in records)
    assert result.stats["bytes"] == sum(len(r.key or b"") + len(r.value or b"") for r in records)
    keyed = {(r.key, r.topic, r.partition) for r in records if r.key is not None}
    assert result.stats["keys"] == len({k for k, _, _ in keyed})
    spread = {k for k, _, _ in keyed if sum(1 for k2, _, _ in keyed if k2 == k) > 1}
    assert result.stats["multi"] == len(spread)
    for w in result.winners.values():  # a delete carries the newest timestamp of its partition
        mine = records[w.index]
        same = [
            r.timestamp
            for r in records
            if (r.key, r.topic, r.partition) == (mine.key, mine.topic, mine.partition)
        ]
        assert w.newest == max(same)


def test_undecodable_keys_take_no_part_and_are_counted() -> None:
    good = Decoded((1,), "t", 0, 0, 10, False, False, False, False, 2)
    bad = Decoded((None,), "t", 0, 1, 11, False, True, False, False, 2)
    result = fold_here([good, bad])
    assert list(result.winners) == [(1,)] and result.winners[(1,)].index == 0
    assert result.stats["key_errors"] == 1
    assert fold_here([Decoded((1,), "t", 0, 0, 1, False, False, False, True, 1)]).bad_winners == 1


def test_only_keys_that_compare_in_python_as_in_spark_are_folded_here() -> None:
    assert folds_here(["bigint", "string", "decimal(12,2)", "date", "binary", "varchar(5)"])
    for t in ("double", "float", "timestamp", "timestamp_ntz", "struct<a:int>", "array<int>"):
        assert not folds_here(["bigint", t]), t
