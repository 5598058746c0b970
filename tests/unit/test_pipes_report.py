"""The run result -> metadata mapping, and the driver's Pipes switch (no Dagster needed)."""

from __future__ import annotations

import sys

import pytest

from upsert_kafka_ops.errors import ToolchainError
from upsert_kafka_ops.runtime.pipes import PIPES_CONTEXT_ENV, driver_pipes, pipes_requested, result_metadata

RESULT = {
    "job": "users", "records_read": 7, "rows_upserted": 4, "rows_deleted": 1, "records_written": 0,
    "tombstones_written": 0, "read": {"tombstones_in": 2, "distinct_keys": 5, "keys_in_several_partitions": 0},
    "start_offsets": {"t": {"0": 0}}, "end_offsets": {"t": {"0": 7}}, "duration_s": 1.5, "mode": "full",
    "execution": "batch", "reason": "first run",
}  # fmt: skip


def test_result_metadata_maps_every_number() -> None:
    m = result_metadata(RESULT, "users")
    assert m["upsert_kafka/records_read"] == 7 and m["upsert_kafka/tombstones_in"] == 2
    assert m["upsert_kafka/distinct_keys"] == 5 and m["upsert_kafka/end_offsets"] == {"t": {"0": 7}}
    assert m["upsert_kafka/mode"] == "full" and m["upsert_kafka/job"] == "users"
    # a result without read statistics (a publish job) still maps
    bare = result_metadata({**RESULT, "read": None}, "users")
    assert bare["upsert_kafka/distinct_keys"] == 0
    # what a run does not have is left out, not shown as None or ''
    publish = result_metadata({**RESULT, "start_offsets": None, "end_offsets": None, "reason": ""}, "users")
    assert not {"upsert_kafka/start_offsets", "upsert_kafka/end_offsets", "upsert_kafka/reason"} & set(
        publish
    )
    assert m["upsert_kafka/reason"] == "first run"


def test_driver_pipes_is_off_without_dagster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PIPES_CONTEXT_ENV, raising=False)
    assert not pipes_requested()
    with driver_pipes() as pipes:
        assert pipes is None


def test_driver_pipes_without_the_package_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PIPES_CONTEXT_ENV, "e30=")
    monkeypatch.setitem(sys.modules, "dagster_pipes", None)  # import fails as if not installed
    with pytest.raises(ToolchainError, match="dagster-pipes"), driver_pipes():
        pass
