"""Whether an incremental run may continue a target's stored offsets, decided from facts the run
reads (topic ids, a partition's log start and end, the target's columns): no broker needed here."""

from __future__ import annotations

from upsert_kafka_ops.jobs.continuity import missing_columns, reset_problem
from upsert_kafka_ops.jobs.state import StoredState
from upsert_kafka_ops.spec.table import UpsertKafkaTable

STORED = StoredState(job="j", run=3, offsets={("t", 0): 10, ("t", 1): 5}, extra={"topic_ids": {"t": "AAA"}})
IDS = {"t": "AAA"}
START = {("t", 0): 0, ("t", 1): 0}
END = {("t", 0): 12, ("t", 1): 5}


def test_offsets_the_topic_still_holds_continue() -> None:
    assert reset_problem(STORED, IDS, START, END) == ""
    assert reset_problem(StoredState(job="j", run=1, offsets={("t", 0): 10}), {"t": "BBB"}, START, END) == ""


def test_a_topic_created_again_is_told_by_its_new_id() -> None:
    why = reset_problem(STORED, {"t": "BBB"}, START, END)
    assert why.startswith("topic t was deleted and created again (topic id AAA is now BBB)")


def test_a_partition_gone_an_offset_past_the_end_or_below_the_log_start_cannot_continue() -> None:
    assert "name t[1], which the topic no longer has" in reset_problem(STORED, IDS, START, {("t", 0): 12})
    assert "stored offset 10 of t[0] is beyond its end offset 9" in reset_problem(
        STORED, IDS, START, {**END, ("t", 0): 9}
    )
    assert "stored offset 5 of t[1] is below its log start offset 7" in reset_problem(
        STORED, IDS, {**START, ("t", 1): 7}, {**END, ("t", 1): 9}
    )


def test_a_column_added_to_the_spec_rebuilds_the_target_and_names_the_column() -> None:
    table = UpsertKafkaTable.from_flink_ddl(
        "CREATE TABLE t (id BIGINT, name STRING, region STRING, PRIMARY KEY (id) NOT ENFORCED) "
        "WITH ('connector' = 'upsert-kafka', 'topic' = 't', 'key.format' = 'json', 'value.format' = 'json')"
    )
    assert missing_columns(table, {"id", "name", "region", "extra"}) == ""
    why = missing_columns(table, {"id"})
    assert why.startswith("column(s) name, region added to the spec")
    assert why.endswith("so the target is rebuilt from the earliest offset")
