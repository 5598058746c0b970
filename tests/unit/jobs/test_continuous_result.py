"""What a continuous job reports of its batches (the CLI's result of the run and ``/status``)."""

from __future__ import annotations

from upsert_kafka_ops.jobs.continuous import ContinuousResult
from upsert_kafka_ops.jobs.core import JobResult


def test_a_batch_that_rebuilt_the_target_makes_the_run_full_with_its_reason() -> None:
    result = ContinuousResult("live", "materialize", 1.0)
    before = result.to_dict()
    assert (before["mode"], before["reason"]) == ("incremental", "")
    result.add(
        JobResult("live", "materialize", mode="full", reason="the Delta table is missing", records_read=7)
    )
    result.add(JobResult("live", "materialize", mode="incremental", records_read=3))
    status = result.to_dict()
    assert (status["mode"], status["reason"]) == ("full", "the Delta table is missing")
    assert (status["batches"], status["records_read"]) == (2, 10)


def test_incremental_batches_keep_the_run_incremental() -> None:
    result = ContinuousResult("live", "materialize", 1.0)
    for read in (4, 5):
        result.add(JobResult("live", "materialize", records_read=read))
    assert (result.to_dict()["mode"], result.to_dict()["batches"]) == ("incremental", 2)
