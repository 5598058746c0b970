"""The backlog rule that starts runs from a topic: its limits, its verdicts and what they say."""

from __future__ import annotations

import pytest

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.jobs.gates import Backlog, NewData, judge_backlog


def _waiting(n: int) -> NewData:
    return NewData("j", n, {"t": {"0": n}} if n else {}, {"t": {"0": 100 + n}})


def test_a_rule_needs_a_limit_and_positive_ones() -> None:
    with pytest.raises(SpecError) as caught:
        Backlog()
    assert caught.value.field == "min_records" and "max_age_s" in (caught.value.fix or "")
    with pytest.raises(ValueError, match="min_records"):
        Backlog(min_records=0)
    with pytest.raises(ValueError, match="max_age_s"):
        Backlog(max_age_s=0)


@pytest.mark.parametrize(
    ("rule", "n", "age", "due", "says"),
    [
        (
            Backlog(min_records=10),
            9,
            3600.0,
            False,
            "9 record(s) wait, the oldest 3600s old; waiting for 10",
        ),
        (Backlog(min_records=10), 10, 1.0, True, "10 record(s) wait (10 or more call for a run)"),
        (Backlog(max_age_s=60), 1, 59.0, False, "waiting for an oldest record 60s old"),
        (Backlog(max_age_s=60), 1, 60.0, True, "1 record(s) wait, the oldest 60s old (60s or older calls"),
        (Backlog(max_age_s=60), 0, None, False, "nothing waits; waiting for an oldest record 60s old"),
        (Backlog(max_age_s=60), 3, None, False, "3 record(s) wait, their age unknown; waiting for"),
        (Backlog(min_records=5, max_age_s=60), 2, 61.0, True, "the oldest 61s old"),
        (
            Backlog(min_records=5, max_age_s=60),
            2,
            10.0,
            False,
            "waiting for 5 record(s) or an oldest record 60s",
        ),
    ],
)
def test_a_run_is_due_on_either_limit(rule: Backlog, n: int, age: float | None, due: bool, says: str) -> None:
    verdict = judge_backlog(rule, _waiting(n), age)
    assert verdict.due is due and says in verdict.reason
    assert verdict.to_dict()["end_offsets"] == {"t": {"0": 100 + n}} and verdict.to_dict()["due"] is due
