"""OpenLineage: dataset names for Kafka topics and tables (OpenLineage's naming conventions), run
events as plain dicts, and the transports that send them.

Dataset names come from ``jobs.datasets`` (OpenLineage's naming conventions).

Run events (:func:`run_event`, :class:`RunLineage`) are emitted only by the CLI ``run``/``backfill``
commands and the spark-submit driver, to the transport the environment configures
(:func:`transport_from_env`: ``OPENLINEAGE_URL`` or ``UKO_OPENLINEAGE_FILE``; none: no events). The
library's ``run_job`` emits nothing, so inside Airflow the operator's facets are the only lineage.
Stdlib only: no openlineage-python.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from upsert_kafka_ops.errors import UpsertKafkaOpsError
from upsert_kafka_ops.jobs.datasets import Dataset, job_datasets

if TYPE_CHECKING:
    from upsert_kafka_ops.pipeline import Pipeline


# -- run events ------------------------------------------------------------------------------------
#: The ``producer`` of every event: which code emitted it (a URI, per the OpenLineage spec).
PRODUCER = "https://pypi.org/project/upsert-kafka-ops/"
#: The core spec's RunEvent schema (the events are plain dicts, no openlineage-python needed).
RUN_EVENT_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
_JOB_TYPE_SCHEMA = "https://openlineage.io/spec/facets/2-0-3/JobTypeJobFacet.json#/$defs/JobTypeJobFacet"
_ERROR_SCHEMA = (
    "https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet"
)
_OUTPUT_STATS_SCHEMA = (
    "https://openlineage.io/spec/facets/1-0-2/OutputStatisticsOutputDatasetFacet.json"
    "#/$defs/OutputStatisticsOutputDatasetFacet"
)
#: The job namespace when ``OPENLINEAGE_NAMESPACE`` is not set.
DEFAULT_NAMESPACE = "upsert-kafka-ops"
EventType = Literal["START", "COMPLETE", "FAIL", "ABORT"]
_log = logging.getLogger("upsert_kafka_ops.lineage")


def new_run_id() -> str:
    """A UUIDv7 (time-ordered, as the spec recommends for ``runId``): 48 bits of Unix milliseconds,
    the version and variant bits, 74 random bits."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & (2**48 - 1)) << 80 | 0x7 << 76 | (rand >> 68 & 0xFFF) << 64 | 0b10 << 62
    return str(uuid.UUID(int=value | (rand & (2**62 - 1))))


def _facet(schema: str, **fields: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": schema, **fields}


def run_event(
    event_type: EventType,
    *,
    run_id: str,
    job_name: str,
    namespace: str = DEFAULT_NAMESPACE,
    inputs: Sequence[Dataset] = (),
    outputs: Sequence[Dataset] = (),
    event_time: dt.datetime | None = None,
    error: str | None = None,
    output_rows: Mapping[Dataset, int] | None = None,
    streaming: bool = False,
) -> dict[str, Any]:
    """One OpenLineage ``RunEvent`` as a plain dict (JSON-ready).

    :param run_id: the same UUID for the START and the COMPLETE or FAIL of one run.
    :param error: the error message of a FAIL (the ``errorMessage`` run facet).
    :param output_rows: rows written per output dataset (the ``outputStatistics`` facet).
    :param streaming: the job's ``processingType`` (``STREAMING`` or ``BATCH``).
    """
    when = event_time or dt.datetime.now(dt.timezone.utc)
    if when.tzinfo is None:
        raise ValueError("event_time must be timezone-aware")
    run: dict[str, Any] = {"runId": str(uuid.UUID(run_id)), "facets": {}}
    if error is not None:
        run["facets"]["errorMessage"] = _facet(_ERROR_SCHEMA, message=error, programmingLanguage="python")
    rows = output_rows or {}

    def output(d: Dataset) -> dict[str, Any]:
        out: dict[str, Any] = d.to_dict()
        if d in rows:
            out["outputFacets"] = {"outputStatistics": _facet(_OUTPUT_STATS_SCHEMA, rowCount=int(rows[d]))}
        return out

    return {
        "eventType": event_type,
        "eventTime": when.astimezone(dt.timezone.utc)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z"),
        "run": run,
        "job": {
            "namespace": namespace,
            "name": job_name,
            "facets": {
                "jobType": _facet(
                    _JOB_TYPE_SCHEMA,
                    processingType="STREAMING" if streaming else "BATCH",
                    integration="UPSERT_KAFKA_OPS",
                    jobType="JOB",
                )
            },
        },
        "inputs": [d.to_dict() for d in inputs],
        "outputs": [output(d) for d in outputs],
        "producer": PRODUCER,
        "schemaURL": RUN_EVENT_SCHEMA,
    }


# -- transports ------------------------------------------------------------------------------------
class Transport(Protocol):
    """Where events go. ``emit`` must not raise: lineage never fails a job."""

    def emit(self, event: Mapping[str, Any]) -> None: ...


@dataclass(frozen=True)
class HttpTransport:
    """POST each event as JSON to ``url`` + ``endpoint`` (Marquez and OpenLineage's HTTP API), with a
    bounded timeout; failures are logged as warnings."""

    url: str
    endpoint: str = "api/v1/lineage"
    timeout_s: float = 5.0
    api_key: str | None = field(default=None, repr=False)

    @property
    def target(self) -> str:
        return self.url.rstrip("/") + "/" + self.endpoint.lstrip("/")

    def emit(self, event: Mapping[str, Any]) -> None:
        import urllib.error
        import urllib.request

        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        body = json.dumps(event, sort_keys=True).encode()
        request = urllib.request.Request(self.target, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                response.read()
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", None) or exc
            _log.warning(
                "OpenLineage %s event not sent to %s: %s", event.get("eventType"), self.target, reason
            )


@dataclass(frozen=True)
class FileTransport:
    """Append each event as one JSON line to ``path`` (one ``write`` per line, ``O_APPEND``)."""

    path: Path

    def emit(self, event: Mapping[str, Any]) -> None:
        line = (json.dumps(event, sort_keys=True, separators=(",", ":")) + "\n").encode()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
        except OSError as exc:
            _log.warning("OpenLineage %s event not written to %s: %s", event.get("eventType"), self.path, exc)


@dataclass(frozen=True)
class Transports:
    """Several transports (``OPENLINEAGE_URL`` and ``UKO_OPENLINEAGE_FILE`` both set)."""

    items: tuple[Transport, ...]

    def emit(self, event: Mapping[str, Any]) -> None:
        for t in self.items:
            t.emit(event)


def transport_from_env(env: Mapping[str, str] | None = None) -> Transport | None:
    """The configured transport, or ``None`` (no events):

    - ``OPENLINEAGE_URL``: HTTP POST to ``$OPENLINEAGE_URL/api/v1/lineage`` (``OPENLINEAGE_ENDPOINT``
      changes the path, ``OPENLINEAGE_API_KEY`` adds a bearer token, ``UKO_OPENLINEAGE_TIMEOUT`` the
      timeout in seconds, default 5);
    - ``UKO_OPENLINEAGE_FILE``: one JSON line per event appended to that file;
    - ``OPENLINEAGE_DISABLED=true`` turns both off.
    """
    e = os.environ if env is None else env
    if e.get("OPENLINEAGE_DISABLED", "").strip().lower() in ("1", "true", "yes"):
        return None
    items: list[Transport] = []
    url = e.get("OPENLINEAGE_URL", "").strip()
    if url:
        try:
            timeout = float(e.get("UKO_OPENLINEAGE_TIMEOUT", "5") or 5)
        except ValueError:
            timeout = 5.0
        items.append(
            HttpTransport(
                url,
                e.get("OPENLINEAGE_ENDPOINT") or "api/v1/lineage",
                max(0.1, timeout),
                e.get("OPENLINEAGE_API_KEY") or None,
            )
        )
    file = e.get("UKO_OPENLINEAGE_FILE", "").strip()
    if file:
        items.append(FileTransport(Path(file)))
    if not items:
        return None
    return items[0] if len(items) == 1 else Transports(tuple(items))


# -- one run ---------------------------------------------------------------------------------------
class RunLineage:
    """START, then COMPLETE or FAIL, of one job run, sent to a transport. Used by the CLI ``run`` and
    ``backfill`` commands and the spark-submit driver only: the library's ``run_job`` emits nothing,
    so inside Airflow or Dagster the orchestrator's own lineage is the only one.

    Building the datasets never raises: a job whose datasets cannot be named (e.g. a bootstrap
    server that is not host:port) is reported without them and a warning is logged.
    """

    def __init__(
        self, transport: Transport, pipeline: Pipeline, job: str, *, namespace: str | None = None
    ) -> None:
        self.transport = transport
        self.job = job
        self.namespace = namespace or os.environ.get("OPENLINEAGE_NAMESPACE") or DEFAULT_NAMESPACE
        self.run_id = new_run_id()
        try:
            self.inputs, self.outputs = job_datasets(pipeline, job)
        except UpsertKafkaOpsError as exc:
            _log.warning("OpenLineage datasets of job %s not named: %s", job, exc)
            self.inputs, self.outputs = [], []

    @classmethod
    def from_env(
        cls, pipeline: Pipeline, job: str, env: Mapping[str, str] | None = None
    ) -> RunLineage | None:
        """A run's lineage when a transport is configured (:func:`transport_from_env`), else None."""
        transport = transport_from_env(env)
        if transport is None:
            return None
        e = os.environ if env is None else env
        return cls(transport, pipeline, job, namespace=e.get("OPENLINEAGE_NAMESPACE") or None)

    def _send(self, event_type: EventType, **kw: Any) -> None:
        try:
            event = run_event(
                event_type,
                run_id=self.run_id,
                job_name=self.job,
                namespace=self.namespace,
                inputs=self.inputs,
                outputs=self.outputs,
                **kw,
            )
            self.transport.emit(event)
        except Exception as exc:  # lineage never fails a job
            _log.warning("OpenLineage %s event of job %s not sent: %s", event_type, self.job, exc)

    def start(self) -> None:
        self._send("START")

    def complete(self, result: Mapping[str, Any] | None = None) -> None:
        """COMPLETE; with the run result, the rows written go into ``outputStatistics``."""
        rows: dict[Dataset, int] = {}
        if result is not None and len(self.outputs) == 1:
            keys = ("rows_upserted", "rows_deleted", "records_written", "tombstones_written")
            rows[self.outputs[0]] = sum(int(result.get(k, 0) or 0) for k in keys)
        self._send("COMPLETE", output_rows=rows)

    def fail(self, error: str) -> None:
        self._send("FAIL", error=error)


def driver_lineage(spec: Mapping[str, Any], env: Mapping[str, str] | None = None) -> RunLineage | None:
    """The spark-submit driver's lineage for a job spec (``{"pipeline": ..., "job": ...}``), or None:
    no transport configured, or inside an Airflow task (``AIRFLOW_CTX_DAG_ID`` is exported by the
    task runner and inherited by spark-submit), where the operator's own facets are the lineage.
    Never raises."""
    e = os.environ if env is None else env
    if e.get("AIRFLOW_CTX_DAG_ID") or transport_from_env(e) is None:
        return None
    try:
        from upsert_kafka_ops.pipeline import Pipeline

        pipeline = Pipeline.model_validate(spec["pipeline"])
        job = spec.get("job") or pipeline.jobs[0].name
        return RunLineage.from_env(pipeline, str(job), e)
    except Exception as exc:  # a bad spec fails in the job runner, with its own message
        _log.warning("OpenLineage events not sent: %s", exc)
        return None
