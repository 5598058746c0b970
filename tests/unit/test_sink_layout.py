"""What a run records of its sink topic's partitions, and what the pipeline file says about a change
(the check itself runs against the real broker: tests/integration/test_topology.py)."""

from __future__ import annotations

import pytest

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.jobs import Pipeline
from upsert_kafka_ops.jobs.sink_layout import KEY, record, recorded


def test_the_record_reads_back_and_other_metadata_records_nothing() -> None:
    assert recorded(record({"users": 4})) == {"users": 4}
    assert record({}) == "" and recorded("") == {}
    assert recorded("written by another tool") == {} and recorded('{"other": 1}') == {}
    assert recorded({"version": 3, KEY: {"users": 2, "bad": "x"}}) == {"users": 2}  # a state file
    assert len(record({f"topic-{i:03d}": 10_000 for i in range(20)})) < 4096  # Kafka's metadata limit


def _pipeline(**sink: object) -> Pipeline:
    table = {"name": "t", "columns": [{"name": "id", "type": "INT"}], "primary_key": ["id"],
             "options": {"connector": "upsert-kafka", "topic": "out", "key.format": "json", "value.format": "json"}}  # fmt: skip
    src = {**table, "options": {**table["options"], "topic": "in"}}
    job = {"name": "copy", "kind": "topic-to-topic", "query": "SELECT * FROM s",
           "sources": {"s": {"connection": "main", "table": src}}, "sink": {"connection": "main", "table": table, **sink}}  # fmt: skip
    return Pipeline.model_validate({"connections": {"main": {"bootstrap_servers": "k:9092"}}, "jobs": [job]})


def test_a_sink_refuses_a_partition_change_unless_it_says_write() -> None:
    assert _pipeline().jobs[0].sink.on_partitions_changed == "fail"  # type: ignore[union-attr]
    assert _pipeline(on_partitions_changed="write").jobs[0].sink.on_partitions_changed == "write"  # type: ignore[union-attr]
    with pytest.raises(SpecError) as err:
        _pipeline(on_partitions_changed="ignore")
    assert "on_partitions_changed" in str(err.value)
