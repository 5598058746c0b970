"""A pipeline's jobs' lag watched over time: each job's lag (``jobs.lag``) evaluated Burrow-style
over a window kept in memory (and in a file), with the job's own schedule as its cadence; served to
Prometheus by ``metrics.exporter.serve`` like a group's.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import replace
from typing import Any

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.jobs.lag import JobLag, pipeline_lag, pipeline_lag_names
from upsert_kafka_ops.kafka.admin import KafkaAdmin
from upsert_kafka_ops.kafka.evaluation import (
    EvaluationConfig,
    LagStatus,
    LagWindow,
    Schedule,
    check,
)
from upsert_kafka_ops.metrics.documents import jobs_lag_document, pipelines_lag_document
from upsert_kafka_ops.metrics.exporter import WatchOptions
from upsert_kafka_ops.metrics.prometheus import Exposition, lag_exposition
from upsert_kafka_ops.pipeline import AnyJob, Pipeline
from upsert_kafka_ops.spec.cadence import cron_expression

log = logging.getLogger("upsert_kafka_ops.lag")

#: Version of a pipeline's window file (each job's window inside is a LagWindow's JSON).
JOBS_WINDOW_VERSION = 1


def job_evaluation(config: EvaluationConfig, job: AnyJob) -> EvaluationConfig:
    """How one job of a pipeline is judged: ``config``, with the job's own ``schedule:`` as its cadence
    when it has one (a batch job is OK between runs and STOP once the run after its last is overdue,
    ``schedule_grace_s`` late), else the process's cadence, if any."""
    if job.schedule is None:
        return config
    schedule = Schedule(cron=cron_expression(job.schedule), grace_s=config.schedule_grace_s)
    return replace(config, schedule=schedule)


def rebuilt(last_run: int | None, job: JobLag) -> bool:
    """Whether ``job``'s target was rebuilt from the earliest offset (a full run or a backfill) since
    the stored run ``last_run`` its window last saw: the window starts over, as for a new job."""
    return last_run is not None and job.stored_run not in (None, last_run) and job.stored_mode == "full"


class PipelineLagMonitor:
    """A pipeline's jobs watched over time: one admin client per connection, one window per job (in
    memory, and in the window file as ``{"version": 1, "jobs": {name: window}}``)."""

    def __init__(
        self,
        pipeline: Pipeline,
        jobs: list[str] | None = None,
        options: WatchOptions | None = None,
        name: str | None = None,
    ) -> None:
        self.options = options or WatchOptions()
        self.pipeline = pipeline
        #: the ``pipeline`` label of every series (the pipeline's name: its file's, without the suffix)
        self.name = name or pipeline.name or "pipeline"
        # unknown names and publish jobs (no lag) fail here, naming the jobs there are
        self.names = pipeline_lag_names(pipeline, jobs)
        self.admins: dict[str, KafkaAdmin] = {}
        self.config = self.options.evaluation
        self.window_file = self.options.window_file
        self.windows: dict[str, LagWindow] = {}
        #: the stored run each job's window last saw (a rebuild after it starts the window over)
        self.runs: dict[str, int] = {}
        if self.window_file is not None and self.window_file.is_file():
            doc = json.loads(self.window_file.read_text() or "{}")
            if doc and (doc.get("version") != JOBS_WINDOW_VERSION or "jobs" not in doc):
                raise SpecError(
                    "window_file",
                    f"{str(self.window_file)!r} does not hold the windows of a pipeline's jobs.",
                    "give the pipeline its own window file.",
                )
            self.windows = {str(k): LagWindow.from_json(v) for k, v in doc.get("jobs", {}).items()}
            self.runs = {str(k): int(v) for k, v in doc.get("runs", {}).items()}
        self.lock = threading.Lock()
        self.last: tuple[float, list[tuple[JobLag, LagStatus | None]]] | None = None
        self.errors: dict[str, int] = dict.fromkeys(self.names, 0)
        self.duration_s = 0.0

    def evaluate(self, max_age: float = 0.0) -> list[tuple[JobLag, LagStatus | None]]:
        """Each job's lag and status (status None where the lag could not be read)."""
        with self.lock:
            if self.last is not None and time.monotonic() - self.last[0] < max_age:
                return self.last[1]
            started = time.monotonic()
            history = {n: self.windows[n].points() for n in self.names if n in self.windows}
            jobs = pipeline_lag(
                self.pipeline,
                self.names,
                isolation=self.options.isolation,
                fetch_records=self.options.time_lag,
                history=history,
                timeout=self.options.timeout_s,
                admins=self.admins,
            )
            out: list[tuple[JobLag, LagStatus | None]] = []
            for jl in jobs:
                if jl.report is None:
                    self.errors[jl.job] = self.errors.get(jl.job, 0) + 1
                    out.append((jl, None))
                    continue
                if rebuilt(self.runs.get(jl.job), jl):  # planned: its offsets may go back, no REWIND page
                    self.windows.pop(jl.job, None)
                if jl.stored_run is not None:
                    self.runs[jl.job] = jl.stored_run
                config = job_evaluation(self.config, self.pipeline.job(jl.job))
                status, self.windows[jl.job] = check(self.windows.get(jl.job), jl.report, config)
                out.append((jl, status))
            if self.window_file is not None:
                doc = {
                    "version": JOBS_WINDOW_VERSION,
                    "jobs": {n: w.to_json() for n, w in sorted(self.windows.items())},
                    "runs": dict(sorted(self.runs.items())),
                }
                self.window_file.write_text(json.dumps(doc, sort_keys=True, separators=(",", ":")))
            self.duration_s = time.monotonic() - started
            self.last = (time.monotonic(), out)
            return out

    def document(self, max_age: float = 0.0) -> dict[str, Any]:
        return jobs_lag_document(self.evaluate(max_age))

    def close(self) -> None:
        for admin in self.admins.values():
            admin.close()

    def labels(self, job: str) -> dict[str, str]:
        """A job's series labels: ``pipeline`` and ``pipeline_job`` (a ``job`` label would collide with
        the scrape target's own, which Prometheus keeps, renaming ours ``exported_job``)."""
        return {"pipeline": self.name, "pipeline_job": job}

    def ready(self) -> bool:
        """Whether the last evaluation read at least one job's lag."""
        return self.last is not None and any(jl.report is not None for jl, _ in self.last[1])

    def exposition(self) -> str:
        exp = Exposition()
        self.add_series(exp)
        return exp.render()

    def add_series(self, exp: Exposition) -> None:
        """Add this pipeline's series to ``exp`` (several pipelines share one exposition)."""
        jobs = self.evaluate(self.options.min_interval_s)
        for jl, status in jobs:
            if jl.report is not None:
                lag_exposition(jl.report, status, exp, labels=self.labels(jl.job))
        for jl, _ in jobs:
            exp.add(
                "lag_up",
                "gauge",
                "1 when the job's lag was read at the last evaluation, else 0.",
                0.0 if jl.report is None else 1.0,
                self.labels(jl.job),
            )
        for name in self.names:
            exp.add(
                "lag_scrape_errors_total",
                "counter",
                "Evaluations that failed.",
                self.errors.get(name, 0),
                self.labels(name),
            )
        exp.add(
            "lag_evaluation_duration_seconds",
            "gauge",
            "Time the last evaluation took.",
            self.duration_s,
            {"pipeline": self.name},
        )


class PipelinesMonitor:
    """Several pipeline files served from one port: each file's jobs labelled with its ``pipeline``
    name (the file's name without its suffix, unique across the files)."""

    def __init__(self, monitors: list[PipelineLagMonitor]) -> None:
        names = [m.name for m in monitors]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise SpecError(
                "pipeline",
                f"two pipeline files are named {twice[0]!r}: their series would mix.",
                "give each pipeline file its own name.",
            )
        self.monitors = monitors
        self.options = monitors[0].options

    @property
    def names(self) -> list[str]:
        return [f"{m.name}/{n}" for m in self.monitors for n in m.names]

    def evaluate(self, max_age: float = 0.0) -> list[tuple[str, list[tuple[JobLag, LagStatus | None]]]]:
        """Each pipeline's name with its jobs' lag and status."""
        return [(m.name, m.evaluate(max_age)) for m in self.monitors]

    def document(self, max_age: float = 0.0) -> dict[str, Any]:
        """``{"version", "kind": "pipelines-lag", "status", "pipelines": {name: jobs-lag document}}``."""
        return pipelines_lag_document({m.name: m.document(max_age) for m in self.monitors})

    def ready(self) -> bool:
        """Whether the last evaluation read at least one job's lag of every pipeline."""
        return all(m.ready() for m in self.monitors)

    def exposition(self) -> str:
        exp = Exposition()
        for m in self.monitors:
            m.add_series(exp)
        return exp.render()

    def close(self) -> None:
        for m in self.monitors:
            m.close()
