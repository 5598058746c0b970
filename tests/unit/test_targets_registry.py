"""The warehouse targets' registry: every target kind the pipeline file accepts has one class, each
class has the whole protocol, and nothing outside the registry asks which kind a target is."""

from __future__ import annotations

import ast
import inspect
import typing
from pathlib import Path

import pytest

import upsert_kafka_ops.pipeline as pipeline_spec
from upsert_kafka_ops.errors import OldFieldWarning
from upsert_kafka_ops.jobs.targets import TARGETS, is_warehouse, previewed, read_stored_offsets, target_for
from upsert_kafka_ops.jobs.targets.base import WarehouseTable

SRC = Path(__file__).resolve().parents[2] / "src" / "upsert_kafka_ops"
TARGET_SPECS = typing.get_args(typing.get_args(pipeline_spec.WarehouseTarget)[0])


def _kind(model: type) -> str:
    (kind,) = typing.get_args(model.model_fields["kind"].annotation)
    return str(kind)


def _pipeline(target: dict[str, object], kind: str = "materialize") -> pipeline_spec.Pipeline:
    return pipeline_spec.Pipeline.model_validate(
        {
            "connections": {"main": {"bootstrap_servers": "broker:9092"}},
            "catalogs": {"lake": {"type": "hadoop", "warehouse": "/tmp/lake"}},
            "jobs": [
                {
                    "name": "users",
                    "kind": kind,
                    "source": {
                        "connection": "main",
                        "table": {
                            "name": "users",
                            "topic": "users",
                            "columns": [{"name": "id", "type": "BIGINT"}, {"name": "name", "type": "STRING"}],
                            "primary_key": ["id"],
                            "key_format": "json",
                            "value_format": "json",
                        },
                    },
                    "target": target,
                }
            ],
        }
    )


TARGET_FIELDS = {
    "delta": {"kind": "delta", "path": "/tmp/t/users"},
    "parquet": {"kind": "parquet", "path": "/tmp/t/users"},
    "postgres": {
        "kind": "postgres",
        "host": "db",
        "database": "shop",
        "user": "etl",
        "table": "public.users",
    },
    "iceberg": {"kind": "iceberg", "catalog": "lake", "table": "shop.users"},
}


def test_every_target_kind_of_the_pipeline_file_is_registered_once() -> None:
    kinds = sorted(_kind(m) for m in TARGET_SPECS)
    assert kinds == sorted(TARGETS), "a target kind without a class in jobs.targets.TARGETS, or the reverse"
    assert sorted(TARGET_FIELDS) == kinds, "this test names a pipeline for every kind"


@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_each_target_class_has_the_whole_protocol(kind: str) -> None:
    cls = TARGETS[kind]
    wanted = {n for n in vars(WarehouseTable) if not n.startswith("_")} | set(WarehouseTable.__annotations__)
    missing = sorted(n for n in wanted if not hasattr(cls, n))
    assert not missing, f"{cls.__name__} lacks {missing}"
    for name in wanted:
        proto = getattr(WarehouseTable, name, None)
        if inspect.isfunction(proto):
            ours = inspect.signature(getattr(cls, name)).parameters
            assert list(ours) == list(inspect.signature(proto).parameters), f"{cls.__name__}.{name}"


@pytest.mark.parametrize("kind", sorted(TARGET_FIELDS))
def test_a_spec_is_bound_to_its_class_and_named_for_lineage(kind: str) -> None:
    pipeline = _pipeline(TARGET_FIELDS[kind])
    spec = pipeline.job("users").target
    table = target_for(spec, pipeline)
    assert type(table) is TARGETS[kind]
    assert is_warehouse(spec)
    assert table.uri == spec.uri
    assert table.lineage_uri.startswith(
        {
            "delta": "file:///",
            "parquet": "file:///",
            "postgres": "postgres://db:5432/shop.public.users",
            "iceberg": "file:///tmp/lake/shop/users",
        }[kind]
    )
    assert previewed(spec) is (kind in ("delta", "iceberg"))
    assert table.full_only is (kind == "parquet")


def test_topic_targets_are_not_warehouse_tables_and_keep_no_offsets() -> None:
    pipeline = _pipeline(
        {
            "kind": "upsert-kafka",
            "connection": "main",
            "table": {
                "name": "out",
                "topic": "out",
                "columns": [{"name": "id", "type": "BIGINT"}],
                "primary_key": ["id"],
                "key_format": "json",
                "value_format": "json",
            },
        },
        "backfill",
    )
    sink = pipeline.job("users").target
    assert not is_warehouse(sink) and not previewed(sink)
    assert read_stored_offsets(pipeline.job("users"), pipeline) is None
    with pytest.raises(TypeError, match="not a warehouse target kind"):
        target_for(sink, pipeline)


def test_an_iceberg_target_needs_its_pipeline_to_read_its_offsets() -> None:
    pipeline = _pipeline(TARGET_FIELDS["iceberg"])
    with pytest.raises(Exception, match="call read_stored_offsets\\(job, pipeline\\)"):
        read_stored_offsets(pipeline.job("users"))


def _isinstance_of_targets(path: Path) -> list[str]:
    names = {m.__name__ for m in TARGET_SPECS} | {"WarehouseTarget", "UpsertSink", "KafkaSink", "SinkSpec"}
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", None) == "isinstance"
            and len(node.args) == 2
        ):
            used = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
            if used & names:
                found.append(f"{path.relative_to(SRC)}:{node.lineno}")
    return found


def test_no_module_outside_the_registry_asks_which_kind_a_target_is() -> None:
    allowed = SRC / "jobs" / "targets"
    found = [
        hit
        for path in sorted(SRC.rglob("*.py"))
        if allowed not in path.parents
        for hit in _isinstance_of_targets(path)
    ]
    assert found == [], "dispatch on a target through jobs.targets (target_for), not isinstance"


def test_a_topic_sinks_old_kind_still_reads_with_a_warning_and_is_written_back_under_its_new_name() -> None:
    table = {
        "name": "out",
        "topic": "out",
        "columns": [{"name": "id", "type": "BIGINT"}],
        "primary_key": ["id"],
        "key_format": "json",
        "value_format": "json",
    }
    with pytest.warns(OldFieldWarning, match="kind: topic is the old name .* write kind: upsert-kafka"):
        old = _pipeline({"kind": "topic", "connection": "main", "table": table}, "backfill")
    new = _pipeline({"kind": "upsert-kafka", "connection": "main", "table": table}, "backfill")
    assert old == new and old.job("users").target.kind == "upsert-kafka"  # type: ignore[union-attr]
    assert "kind: topic\n" not in old.to_yaml()
