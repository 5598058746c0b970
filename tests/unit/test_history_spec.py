"""``history: scd2`` as a user writes it: the shorthand, the table it implies, and each refusal
naming its field and fix."""

from __future__ import annotations

from typing import Any

import pytest

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.jobs import Pipeline
from upsert_kafka_ops.pipeline import MaterializeJob

DDL = (
    "CREATE TABLE users (id BIGINT, name STRING, region STRING, updated TIMESTAMP(3), "
    "PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'users', "
    "'key.format' = 'json', 'value.format' = 'json')"
)


def _job(history: Any, target: dict[str, Any] | None = None, ddl: str = DDL) -> MaterializeJob:
    job = {"name": "j", "kind": "materialize", "source": {"connection": "main", "table": {"ddl": ddl}},
           "target": target or {"kind": "delta", "path": "/tmp/h"}, "history": history}  # fmt: skip
    pipeline = Pipeline.model_validate(
        {"connections": {"main": {"bootstrap_servers": "b:9092"}}, "jobs": [job]}
    )
    found = pipeline.job("j")
    assert isinstance(found, MaterializeJob)
    return found


def test_the_shorthand_keeps_every_version_by_the_topics_order_with_kafka_times() -> None:
    job = _job("scd2")
    assert job.history is not None
    table = job.history.table(job.source.table)
    types = {c.name: c.type for c in table.columns}
    assert [c.name for c in table.columns][:4] == ["id", "name", "region", "updated"]
    assert (types["valid_from"], types["valid_to"], types["is_current"]) == (
        "TIMESTAMP_LTZ(3)", "TIMESTAMP_LTZ(3)", "BOOLEAN")  # fmt: skip
    assert table.primary_key == ["id", "_uko_partition", "_uko_offset"]
    assert "_uko_seen" not in types  # only a sequence needs the key's largest
    assert job.history.tracked(job.source.table) == ["name", "region", "updated"]


def test_sequence_by_gives_the_times_its_type_and_track_columns_narrow_the_change() -> None:
    job = _job({"sequence_by": "updated", "track_columns": ["region"], "valid_from": "since"})
    assert job.history is not None
    types = {c.name: c.type for c in job.history.table(job.source.table).columns}
    assert (types["since"], types["valid_to"], types["_uko_seen"]) == ("TIMESTAMP(3)",) * 3
    assert job.history.tracked(job.source.table) == ["region"]


@pytest.mark.parametrize(
    ("history", "target", "field", "says"),
    [
        ({"sequence_by": "nope"}, None, "sequence_by", "not a value column"),
        ({"sequence_by": "id"}, None, "sequence_by", "not a value column"),
        ({"sequence_by": "name"}, None, "sequence_by", "does not order versions"),
        ({"track_columns": ["id"]}, None, "track_columns", "not a value column"),
        ({"track_columns": []}, None, "track_columns", "no change would open a version"),
        ({"valid_from": "region"}, None, "history", "already a column"),
        ({"valid_from": "x", "valid_to": "x"}, None, "history", "must differ"),
        ({"kind": "scd3"}, None, "history.kind", "scd2"),
        ("scd2", {"kind": "parquet", "path": "/tmp/p"}, "history", "Delta, PostgreSQL or Iceberg"),
    ],
)
def test_a_history_that_cannot_be_kept_is_refused_with_its_field_and_fix(
    history: Any, target: dict[str, Any] | None, field: str, says: str
) -> None:
    with pytest.raises(SpecError) as err:
        _job(history, target)
    assert field in err.value.field and says in str(err.value)


def test_a_history_reads_one_topic() -> None:
    with pytest.raises(SpecError, match="reads one topic"):
        _job("scd2", ddl=DDL.replace("'topic' = 'users'", "'topic' = 'users;more'"))
