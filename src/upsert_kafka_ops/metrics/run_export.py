"""Each finished run's metrics for Prometheus: a textfile-collector file and a Pushgateway push.

A batch run ends before any scrape could see it, so its numbers are handed over where Prometheus
reads them. Configured from the environment of the process that runs the job (in cluster mode the
driver's: set it through the runtime's ``env``), the same for every caller (CLI, Airflow, Dagster,
the spark-submit driver):

``UKO_METRICS_TEXTFILE_DIR``
    node_exporter's ``--collector.textfile.directory``. Two files per job, each replaced atomically
    (written beside, then renamed): ``upsert_kafka_ops-<pipeline>-<job>.prom`` holds the last
    successful run (its counters, duration, offsets and ``run_last_success_timestamp_seconds``),
    ``upsert_kafka_ops-<pipeline>-<job>.outcome.prom`` the last run's outcome (``run_success`` and
    ``run_last_finished_timestamp_seconds``), so a failed run leaves the last success's numbers.
``UKO_PUSHGATEWAY_URL``
    a Pushgateway: the same families pushed with ``prometheus_client``'s ``pushadd_to_gateway``
    (job ``upsert_kafka_ops``, grouping key ``pipeline`` and ``pipeline_job``; a failure replaces
    only the outcome families). ``UKO_PUSHGATEWAY_USERNAME`` / ``UKO_PUSHGATEWAY_PASSWORD`` add
    basic authentication; ``UKO_PUSHGATEWAY_TIMEOUT`` bounds the push (seconds, default 5).

A transport that fails (unwritable folder, unreachable gateway) is a warning on
``upsert_kafka_ops.metrics`` and never fails the run.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from upsert_kafka_ops.metrics.prometheus import Exposition, run_result_exposition

log = logging.getLogger("upsert_kafka_ops.metrics")

#: The Pushgateway ``job`` of every push (the grouping key adds ``pipeline`` and ``pipeline_job``).
PUSH_JOB = "upsert_kafka_ops"


def run_expositions(
    pipeline: str, job: str, result: Any | None, finished_at: float
) -> tuple[Exposition | None, Exposition]:
    """``(last success, outcome)``: the run's own numbers (None for a failed run) and its outcome."""
    labels = {"pipeline": pipeline, "pipeline_job": job}
    outcome = Exposition()
    outcome.add(
        "run_success",
        "gauge",
        "1 when the job's last run succeeded, 0 when it failed.",
        0.0 if result is None else 1.0,
        labels,
    )
    outcome.add(
        "run_last_finished_timestamp_seconds",
        "gauge",
        "When the job's last run ended (Unix time).",
        finished_at,
        labels,
    )
    if result is None:
        return None, outcome
    success = run_result_exposition(result, job, pipeline=pipeline)
    success.add(
        "run_last_success_timestamp_seconds",
        "gauge",
        "When the job's last successful run ended (Unix time).",
        finished_at,
        labels,
    )
    return success, outcome


def export_run(
    pipeline: str | None,
    job: str,
    result: Any | None,
    *,
    finished_at: float | None = None,
    env: Mapping[str, str] | None = None,
) -> None:
    """Hand a finished run (``result``: a ``JobResult`` or its dict; None when the run failed) to the
    transports ``env`` (default: the process environment) configures; nothing when none is."""
    env = os.environ if env is None else env
    folder, gateway = env.get("UKO_METRICS_TEXTFILE_DIR"), env.get("UKO_PUSHGATEWAY_URL")
    if not folder and not gateway:
        return
    name = pipeline or ""
    success, outcome = run_expositions(name, job, result, time.time() if finished_at is None else finished_at)
    if folder:
        try:
            write_textfiles(Path(folder), name, job, success, outcome)
        except OSError as exc:
            log.warning("job %s: run metrics not written to %s: %s", job, folder, exc.strerror or exc)
    if gateway:
        try:
            push(gateway, name, job, [e for e in (success, outcome) if e is not None], env)
        except Exception as exc:  # any transport error: a warning, never the run's failure
            log.warning("job %s: run metrics not pushed to %s: %s", job, _without_userinfo(gateway), exc)


def _file_part(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text) or "_"


def textfile_names(pipeline: str, job: str) -> tuple[str, str]:
    """The two files of a job in the textfile-collector folder: last success, outcome."""
    stem = f"upsert_kafka_ops-{_file_part(pipeline)}-{_file_part(job)}"
    return f"{stem}.prom", f"{stem}.outcome.prom"


def write_textfiles(
    folder: Path, pipeline: str, job: str, success: Exposition | None, outcome: Exposition
) -> None:
    """Replace the job's files atomically (node_exporter never reads half a file)."""
    folder.mkdir(parents=True, exist_ok=True)
    success_name, outcome_name = textfile_names(pipeline, job)
    if success is not None:
        _replace(folder / success_name, success.render())
    _replace(folder / outcome_name, outcome.render())


def _replace(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # no .prom suffix: not read
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class _Families:
    """A prometheus_client collector that yields the families of our expositions (one text format,
    written in one place: :mod:`upsert_kafka_ops.metrics.prometheus`)."""

    def __init__(self, expositions: list[Exposition]) -> None:
        self.text = "".join(e.render() for e in expositions)

    def collect(self) -> Iterator[Any]:
        from prometheus_client.parser import text_string_to_metric_families

        yield from text_string_to_metric_families(self.text)


def push(
    gateway: str, pipeline: str, job: str, expositions: list[Exposition], env: Mapping[str, str]
) -> None:
    """``pushadd_to_gateway``: replaces only the pushed families of the job's group."""
    from prometheus_client import CollectorRegistry, pushadd_to_gateway
    from prometheus_client.exposition import basic_auth_handler, default_handler

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(expositions))  # type: ignore[arg-type]
    user, password = env.get("UKO_PUSHGATEWAY_USERNAME"), env.get("UKO_PUSHGATEWAY_PASSWORD")
    handler: Callable[..., Any] = default_handler
    if user:

        def handler(url: str, method: str, timeout: float | None, headers: Any, data: bytes) -> Any:
            return basic_auth_handler(url, method, timeout, headers, data, user, password or "")

    key = {"pipeline": pipeline or "_", "pipeline_job": job}
    timeout = float(env.get("UKO_PUSHGATEWAY_TIMEOUT") or 5.0)
    pushadd_to_gateway(
        gateway, job=PUSH_JOB, registry=registry, grouping_key=key, timeout=timeout, handler=handler
    )


def _without_userinfo(url: str) -> str:
    return re.sub(r"//[^/@]*@", "//", url)
