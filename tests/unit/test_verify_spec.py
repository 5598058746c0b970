"""verify's refusals and its report, without Spark: which jobs it takes, and what a user reads."""

from __future__ import annotations

from typing import Any

import pytest

from upsert_kafka_ops.cli import build_parser
from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.jobs import Pipeline
from upsert_kafka_ops.jobs.verify import KINDS, Verification, refusal, verify_job

DDL = (
    "CREATE TABLE users (id BIGINT, name STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ("
    "'connector' = 'upsert-kafka', 'topic' = 'users', 'key.format' = 'json', 'value.format' = 'json')"
)
SOURCE = {"connection": "main", "table": {"ddl": DDL}}


def _pipeline(target: dict[str, Any], kind: str = "materialize") -> Pipeline:
    job = {"name": "j", "kind": kind, "source": SOURCE, "target": target}
    return Pipeline.model_validate({"connections": {"main": {"bootstrap_servers": "b:9092"}}, "jobs": [job]})


@pytest.mark.parametrize(
    ("target", "kind", "field", "says"),
    [
        (
            {"kind": "topic", "connection": "main", "table": {"ddl": DDL.replace("'users'", "'copy'")}},
            "backfill",
            "--job",
            "writes a topic",
        ),
        (
            {"kind": "delta", "path": "/tmp/s", "as_of_column": "as_of"},
            "backfill",
            "jobs.j.target.as_of_column",
            "keeps snapshots",
        ),
    ],
)
def test_only_latest_state_warehouse_tables_are_verified(
    target: dict[str, Any], kind: str, field: str, says: str
) -> None:
    with pytest.raises(SpecError) as caught:
        verify_job(None, _pipeline(target, kind), "j")  # type: ignore[arg-type]  # refused before Spark
    assert caught.value.field == field and says in caught.value.message and caught.value.fix
    # the same reason keeps the Dagster check off such a job's output
    assert str(refusal(_pipeline(target, kind).job("j"))) == str(caught.value)


def test_a_latest_state_table_has_nothing_to_refuse() -> None:
    assert refusal(_pipeline({"kind": "delta", "path": "/tmp/t"}).job("j")) is None


def _outcome(**differences: int) -> Verification:
    keys = {k: [{"id": i} for i in range(min(n, 2))] for k, n in differences.items() if n}
    return Verification(
        job="j", target="delta:/t", run=4, offsets={"users": {"0": 10}}, table_rows=9, topic_rows=10,
        differences={k: differences.get(k, 0) for k in KINDS}, keys=keys,
        changed_columns=[["name"]] * len(keys.get("changed", [])),
    )  # fmt: skip


def test_the_summary_names_each_difference_its_keys_and_how_many_more() -> None:
    assert _outcome().ok and _outcome().summary().endswith("in the topic up to the stored offsets: equal.")
    bad = _outcome(missing=1, changed=5)
    assert not bad.ok and bad.to_dict()["ok"] is False
    lines = bad.summary().splitlines()
    assert lines[0].startswith("delta:/t (job j, run 4): 9 row(s) in the table, 10 live key(s)")
    assert lines[0].endswith("DIFFERENT.")
    assert lines[1] == "  1 key(s) the topic holds are missing from the table: {id=0}"
    assert lines[2] == (
        "  5 key(s) whose row differs from the topic's latest value: {id=0} (name); {id=1} (name), and 3 more"
    )
    assert len(lines) == 3  # kinds with no difference are not mentioned


def test_the_cli_takes_verify_with_its_options() -> None:
    args = build_parser().parse_args(["verify", "p.yaml", "--job", "users", "--show", "3", "--json"])
    assert (args.job, args.show, args.json, args.handler.__name__) == ("users", 3, True, "verify")
