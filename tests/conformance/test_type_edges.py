"""The type-edge generator against real Flink: for each text format, a table with a column of every
type it holds (parameters drawn at random), one record per edge value (the other columns plain),
read by Flink and by the engine with ``ignore-parse-errors``, so every record's fate is compared on
its own: the same row, or dropped by both. A deliberate difference (docs/semantics.md) is asserted
as that difference by :func:`expected`; anything else fails, naming the value and its column type.

Seeds: ``UKO_CONFORMANCE_SEED`` (default 1); a failure prints its seed.
"""

from __future__ import annotations

import os
import random
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Producer
from tests.conformance import edges, flink
from tests.conformance.values import canon, time_text, timestamp_text

from upsert_kafka_ops import UpsertKafkaTable, materialize
from upsert_kafka_ops.local import LocalKafka

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SEED = int(os.environ.get("UKO_CONFORMANCE_SEED", "1"))
FORMATS = ("json", "csv")


@dataclass
class Topic:
    """A table of edge values: ``tried[id]`` says which value the record of that key holds."""

    fmt: str
    name: str
    types: list[str]
    tried: dict[int, tuple[str, str, edges.Sample]] = field(default_factory=dict)
    records: list[tuple[bytes, bytes]] = field(default_factory=list)

    def ddl(self, topic: str, bootstrap: str) -> str:
        columns = ", ".join(f"`c{i}` {t}" for i, t in enumerate(self.types))
        options = {
            "connector": "upsert-kafka", "topic": topic, "properties.bootstrap.servers": bootstrap,
            "key.format": self.fmt, "value.format": self.fmt, "value.fields-include": "EXCEPT_KEY",
            f"value.{self.fmt}.ignore-parse-errors": "true", "scan.bounded.mode": "latest-offset",
        }  # fmt: skip
        with_ = ", ".join(f"'{k}' = '{v}'" for k, v in options.items())
        return f"CREATE TABLE `{self.name}` (`id` BIGINT, {columns}, PRIMARY KEY (`id`) NOT ENFORCED) WITH ({with_})"


def _topic(fmt: str, rng: random.Random) -> Topic:
    types = edges.column_types(rng, fmt)
    topic = Topic(fmt, f"edges_{fmt}", types)
    plain = [edges.plain(t, rng) for t in types]
    next_id = 1
    for i, t in enumerate(types):
        for sample in edges.samples(t, rng):
            cell = sample.json if fmt == "json" else sample.csv
            if cell is None:
                continue
            cells = [cell if j == i else getattr(plain[j], fmt) for j in range(len(types))]
            if fmt == "json":
                key = f'{{"id":{next_id}}}'
                value = "{" + ",".join(f'"c{j}":{c}' for j, c in enumerate(cells)) + "}"
            else:
                key, value = str(next_id), ",".join(c or "" for c in cells)
            topic.records.append((key.encode(), value.encode()))
            topic.tried[next_id] = (f"c{i}", t, sample)
            next_id += 1
    return topic


@pytest.fixture(scope="module")
def runs(
    kafka: LocalKafka, flink_jars: list[Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    rng = random.Random(SEED)
    topics, cases = {}, []
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for fmt in FORMATS:
        topic = _topic(fmt, rng)
        name = f"edges-{fmt}-{uuid.uuid4().hex[:8]}"
        kafka.create_topic(name, partitions=2, config={"cleanup.policy": "compact"})
        for key, value in topic.records:
            producer.produce(name, key=key, value=value)
        topics[fmt] = (topic, topic.ddl(name, kafka.bootstrap_servers))
        cases.append(flink.Case(fmt, topic.name, topics[fmt][1]))
    assert producer.flush(30) == 0
    log = tmp_path_factory.mktemp("flink") / "flink.log"
    return {"topics": topics, "flink": flink.run(cases, flink_jars, log)}


def _engine_cell(value: Any, sql_type: str) -> Any:
    if value is None:
        return None
    if sql_type.startswith("TIME("):
        return time_text(value)  # TIME is text here (Spark 4.0 has no TIME type)
    if sql_type == "DATE":
        return f"date:{value}"  # dates and timestamps are collected as text: Python's end at year 9999
    if sql_type.startswith("TIMESTAMP"):
        return timestamp_text(value)
    return canon(value)


def _micros(flink_cell: Any, sql_type: str) -> Any:
    """Spark's timestamps stop at microseconds (docs/semantics.md, known gaps)."""
    if sql_type.startswith("TIMESTAMP") and isinstance(flink_cell, str):
        return flink_cell[: -len("000")] + "000"
    return flink_cell


# docs/semantics.md, "Deliberate differences", as the engine's cell for the value tried:
# - a JSON number read into a STRING column: Spark's JSON reader gives the number's double text
SPARK_NUMBER_TEXT = {"decimal-number": "1.5", "exponent-number": "100.0"}
# - a JSON string holding a decimal with spaces around it (" 1.5 "): Flink trims, here NULL
# - with ignore-parse-errors, a JSON value of the wrong shape (an object for a number, an array of
#   arrays for ARRAY<INT>, an array for a ROW): Flink 2.2's parser loses its place in the record and
#   reads the fields after it as NULL (or shifted); here only that field is NULL (BOOLEAN: false)
WRONG_SHAPE = {("object", "TINYINT"): None, ("object", "SMALLINT"): None, ("object", "INT"): None,
               ("object", "BIGINT"): None, ("object", "BOOLEAN"): False,
               ("nested", "ARRAY<INT>"): [None], ("not-object", "ROW<`a` INT, `b` STRING>"): None}  # fmt: skip


def expected(
    topic: Topic, record_id: int, flink_rows: dict[int, list[Any]], types: list[str]
) -> list[Any] | None:
    """The engine's row for a record: Flink's, where docs/semantics.md documents a difference as it
    documents it."""
    column, sql_type, sample = topic.tried[record_id]
    index = int(column[1:]) + 1
    if topic.fmt == "json" and (sample.tag, sql_type) in WRONG_SHAPE:
        # the record with this column's plain value holds every other column's plain value
        plain_id = next(i for i, (c, _, s) in topic.tried.items() if c == column and s.tag == "plain")
        row = list(flink_rows[plain_id])
        row[0], row[index] = record_id, WRONG_SHAPE[(sample.tag, sql_type)]
    elif record_id in flink_rows:
        row = list(flink_rows[record_id])
        if (
            topic.fmt == "json"
            and sql_type.startswith(("STRING", "VARCHAR"))
            and sample.tag in SPARK_NUMBER_TEXT
        ):
            row[index] = SPARK_NUMBER_TEXT[sample.tag]
    else:
        return None
    return [_micros(c, t) for c, t in zip(row, types, strict=True)]


def _diff(flink_row: list[Any] | None, engine_row: list[Any] | None) -> str:
    if flink_row is None or engine_row is None:
        return f"Flink {flink_row or 'dropped'}, engine {engine_row or 'dropped'}"
    cells = [(i, f, e) for i, (f, e) in enumerate(zip(flink_row, engine_row, strict=True)) if f != e]
    return "; ".join(f"column {i}: Flink {f!r}, engine {e!r}" for i, f, e in cells)


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_edge_value_reads_as_flink_reads_it(
    runs: dict[str, Any], spark: SparkSession, fmt: str
) -> None:
    topic, ddl = runs["topics"][fmt]
    outcome: flink.Outcome = runs["flink"][fmt]
    assert outcome.error is None, f"seed {SEED}: Flink failed the read: {outcome.error}"
    types = ["BIGINT", *topic.types]
    want = {int(row[0]): row for row in outcome.table(["id"]).values()}
    df = materialize(spark, UpsertKafkaTable.from_flink_ddl(ddl)).df
    rows = df.select(
        *[
            df[c].cast("string") if t.startswith(("DATE", "TIMESTAMP")) else df[c]
            for c, t in zip(df.columns, types, strict=True)
        ]
    ).collect()
    got = {int(r[0]): [_engine_cell(v, t) for v, t in zip(r, types, strict=True)] for r in rows}
    differences = []
    for record_id, (column, sql_type, sample) in sorted(topic.tried.items()):
        flink_row = expected(topic, record_id, want, types)
        engine_row = got.get(record_id)
        if flink_row != engine_row:
            differences.append(
                f"{column} {sql_type} {sample.tag} {getattr(sample, fmt)!r}: " + _diff(flink_row, engine_row)
            )
    assert len(topic.tried) > 100  # the topic holds what it should
    assert not differences, (
        f"seed {SEED}, {fmt}, {len(differences)} of {len(topic.tried)} values differ:\n"
        + "\n".join(differences)
    )
