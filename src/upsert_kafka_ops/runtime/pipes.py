"""A job run's numbers as orchestrator metadata, and their report through Dagster Pipes.

:func:`result_metadata` is the one mapping from a run result (``JobResult.to_dict()``) to metadata
entries; the Dagster assets use it for runs in their own process, and the Spark driver reports the
same entries through Dagster Pipes when Dagster launched it (:func:`driver_pipes`). Nothing here
imports Dagster: the driver imports the small ``dagster-pipes`` package only when the environment
says it runs under Pipes (``DAGSTER_PIPES_CONTEXT``), and runs unchanged anywhere else.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any

from upsert_kafka_ops.errors import ToolchainError

#: Set by Dagster's Pipes context injector in the environment of the process it launches.
PIPES_CONTEXT_ENV = "DAGSTER_PIPES_CONTEXT"


def result_metadata(result: Mapping[str, Any], job: str) -> dict[str, Any]:
    """Metadata entries (plain ints, floats, strings, and dicts for JSON) of one run result."""
    read = result.get("read") or {}
    meta: dict[str, Any] = {
        "upsert_kafka/job": job,
        "upsert_kafka/records_read": int(result["records_read"]),
        "upsert_kafka/rows_upserted": int(result["rows_upserted"]),
        "upsert_kafka/rows_deleted": int(result["rows_deleted"]),
        "upsert_kafka/records_written": int(result["records_written"]),
        "upsert_kafka/tombstones_written": int(result["tombstones_written"]),
        "upsert_kafka/tombstones_in": int(read.get("tombstones_in", 0)),
        "upsert_kafka/distinct_keys": int(read.get("distinct_keys", 0)),
        "upsert_kafka/keys_in_several_partitions": int(read.get("keys_in_several_partitions", 0)),
        "upsert_kafka/duration_s": float(result["duration_s"]),
        "upsert_kafka/mode": str(result["mode"]),
        "upsert_kafka/execution": str(result["execution"]),
    }
    # entries a run may not have (a publish job reads no topic; most runs need no reason): left out,
    # not shown as None or an empty string
    for name in ("start_offsets", "end_offsets"):
        if result.get(name):
            meta[f"upsert_kafka/{name}"] = dict(result[name])
    if result.get("reason"):
        meta["upsert_kafka/reason"] = str(result["reason"])
    if result.get("spark_app_id"):
        meta["upsert_kafka/spark_app_id"] = str(result["spark_app_id"])
    return meta


def pipes_requested(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this process was launched by Dagster Pipes."""
    return PIPES_CONTEXT_ENV in (os.environ if environ is None else environ)


@contextlib.contextmanager
def driver_pipes() -> Iterator[Any]:
    """The Pipes context when Dagster launched this process, else ``None``.

    :raises ToolchainError: when Dagster launched it but ``dagster-pipes`` is not installed (the run
        would otherwise succeed with no metadata reaching Dagster).
    """
    if not pipes_requested():
        yield None
        return
    try:
        from dagster_pipes import open_dagster_pipes
    except ImportError:
        raise ToolchainError(
            f"{PIPES_CONTEXT_ENV} is set (Dagster launched this driver through Pipes) but the "
            "dagster-pipes package is not installed in the driver's Python. Install it "
            "(pip install dagster-pipes) in the driver's image or environment."
        ) from None
    with open_dagster_pipes() as pipes:
        yield pipes


def report_result(pipes: Any, result: Mapping[str, Any]) -> None:
    """One materialization per asset of the Pipes step, with :func:`result_metadata`."""
    job = str(result.get("job") or pipes.get_extra("job"))
    meta = result_metadata(result, job)
    typed = {k: {"raw_value": v, "type": "json"} if isinstance(v, dict) else v for k, v in meta.items()}
    for key in pipes.asset_keys if pipes.is_asset_step else []:
        pipes.report_asset_materialization(metadata=typed, asset_key=key)
    pipes.log.info(
        f"upsert-kafka driver: job {job!r} read {meta['upsert_kafka/records_read']} records, upserted "
        f"{meta['upsert_kafka/rows_upserted']}, deleted {meta['upsert_kafka/rows_deleted']}, wrote "
        f"{meta['upsert_kafka/records_written']} ({meta['upsert_kafka/mode']}, "
        f"{meta['upsert_kafka/duration_s']:.1f} s)"
    )
