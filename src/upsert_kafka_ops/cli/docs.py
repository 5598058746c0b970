"""``upsert-kafka-ops docs``: generated documentation. ``docs config`` prints the configuration
reference (docs/configuration.md, from the spec models); ``docs helm-schema`` the Helm chart's
values.schema.json. Tests fail when the committed files are stale.
"""

from __future__ import annotations

import argparse
import sys
import types
import typing
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

import upsert_kafka_ops.pipeline as jobs
from upsert_kafka_ops.jobs.gates import LagCondition
from upsert_kafka_ops.pipeline.tables import PipelineTable
from upsert_kafka_ops.runtime.execute import LocalRuntime
from upsert_kafka_ops.runtime.submit import SparkSubmitRuntime
from upsert_kafka_ops.spec.connection import KafkaConnection, SecretRef
from upsert_kafka_ops.spec.history import HistorySpec
from upsert_kafka_ops.spec.iceberg import IcebergCatalog
from upsert_kafka_ops.spec.storage import S3Storage
from upsert_kafka_ops.spec.table import UPSERT_OPTIONS, Column, KafkaTable, UpsertKafkaTable

MODELS: list[type[BaseModel]] = [
    UpsertKafkaTable,
    KafkaTable,
    Column,
    KafkaConnection,
    SecretRef,
    S3Storage,
    IcebergCatalog,
    HistorySpec,
]
_FLINK_NAMES = {field: option for option, field in UPSERT_OPTIONS.items()} | {
    "topic": "topic",
    "topic_pattern": "topic-pattern",
    "properties": "properties.*",
    "format_options": "key.<format>.* / value.<format>.*",
    "sink_buffer_flush_interval_ms": "sink.buffer-flush.interval",
    "scan_bounded_mode": "scan.bounded.mode",
    "scan_bounded_specific_offsets": "scan.bounded.specific-offsets",
    "scan_bounded_timestamp_millis": "scan.bounded.timestamp-millis",
    "primary_key": "PRIMARY KEY (...) NOT ENFORCED",
}


def _name(annotation: Any) -> str:
    """A type annotation as text, with Annotated metadata (discriminators, tags) left out."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_name(a) for a in args)
    if origin is typing.Literal:
        return "Literal[" + ", ".join(repr(a) for a in args) + "]"
    if origin is not None:
        base = getattr(origin, "__name__", str(origin).replace("typing.", ""))
        return f"{base}[{', '.join(_name(a) for a in args)}]"
    if annotation is type(None):
        return "None"
    return str(getattr(annotation, "__name__", annotation)).replace("typing.", "")


def _type(annotation: Any) -> str:
    return _name(annotation).replace("|", "\\|")


def _default(field: Any) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "required"
    value = field.default_factory() if field.default_factory is not None else field.default
    return f"`{value!r}`"


def render() -> str:
    """The reference as Markdown."""
    out = [
        "# Configuration reference",
        "",
        "Generated from the spec models by `upsert-kafka-ops docs config`; do not edit by hand.",
        "Tables also accept Flink's option names through `from_options()` and `from_flink_ddl()`.",
    ]
    job_models: list[type[BaseModel]] = [
        jobs.Pipeline,
        PipelineTable,
        jobs.MaterializeJob,
        jobs.BackfillJob,
        jobs.TopicToTopicJob,
        jobs.PublishJob,
        jobs.MaintainJob,
        jobs.Trigger,
        jobs.UpsertSource,
        jobs.KafkaSource,
        jobs.UpsertSink,
        jobs.KafkaSink,
        jobs.DeltaTarget,
        jobs.PostgresTarget,
        jobs.ParquetTarget,
        jobs.IcebergTarget,
        jobs.DeltaFeedSource,
        jobs.QuerySource,
        jobs.Folder,
        LocalRuntime,
        SparkSubmitRuntime,
        LagCondition,
    ]
    for model in MODELS + job_models:
        out += ["", f"## {model.__name__}", "", (model.__doc__ or "").strip().splitlines()[0], ""]
        flink = model in (UpsertKafkaTable, KafkaTable)
        header = (
            "| field | Flink option | type | default | description |"
            if flink
            else "| field | type | default | description |"
        )
        out += [header, "|" + "---|" * (5 if flink else 4)]
        for name, field in model.model_fields.items():
            cells = [f"`{name}`"]
            if flink:
                cells.append(f"`{_FLINK_NAMES[name]}`" if name in _FLINK_NAMES else "")
            cells += [_type(field.annotation), _default(field), (field.description or "").replace("|", "\\|")]
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def register(sub: Any) -> None:
    """Add ``docs``."""
    pdoc = sub.add_parser("docs", help="generated documentation")
    pdoc.add_argument(
        "what",
        choices=["config", "options", "helm-schema"],
        help="config: the configuration reference (Markdown); options: what each Flink option does here "
        "(Markdown); helm-schema: the chart's values.schema.json",
    )
    pdoc.set_defaults(handler=_command)


def _command(args: argparse.Namespace) -> int:
    if args.what == "helm-schema":
        from upsert_kafka_ops.deploy.helm_values import values_schema_json

        sys.stdout.write(values_schema_json())
    elif args.what == "options":
        from upsert_kafka_ops.spec.options import render as render_options

        sys.stdout.write(render_options())
    else:
        sys.stdout.write(render())
    return 0
