"""Prometheus text exposition (format 0.0.4) of lag, lag status and run results, written by hand.

Names follow Prometheus conventions: ``upsert_kafka_ops_`` prefix, snake_case, base units
(seconds, bytes), ``_total`` only on counters. The Flink metric each one corresponds to:

====================================================  ==================================================
metric                                                Flink (FLIP-33 / Kafka connector)
====================================================  ==================================================
``upsert_kafka_ops_consumer_lag_records``             ``pendingRecords`` (per partition, from committed
                                                      offsets rather than the reader's position)
``upsert_kafka_ops_consumer_lag_seconds``             nearest: ``currentEmitEventTimeLag`` (ms), here
                                                      the age of the record at the committed offset
``upsert_kafka_ops_consumer_committed_offset``        ``KafkaSourceReader.topic.*.partition.*.committedOffset``
``upsert_kafka_ops_partition_end_offset``             none (the Kafka consumer's ``records-lag`` base)
``upsert_kafka_ops_consumer_records_lost``            none (kafka-lag-exporter's ``messages_lost``)
``upsert_kafka_ops_run_records_in_total``             ``numRecordsIn``
``upsert_kafka_ops_run_bytes_in_total``               ``numBytesIn``
``upsert_kafka_ops_run_records_out_total``            ``numRecordsOut``
``upsert_kafka_ops_run_bytes_out_total``              ``numBytesOut``
``upsert_kafka_ops_run_parse_errors_skipped_total``   ``numRecordsInErrors``
``upsert_kafka_ops_run_duration_seconds``             none (a batch run's wall time)
``upsert_kafka_ops_continuous_batches_total``         none (a continuous job's committed batches; Flink's
                                                      ``numberOfCompletedCheckpoints`` is the nearest)
``upsert_kafka_ops_continuous_records_read_total``    ``numRecordsIn`` of a continuous job
``upsert_kafka_ops_continuous_batch_duration_seconds`` ``lastCheckpointDuration``, the nearest
``upsert_kafka_ops_continuous_latency_seconds``       nearest: ``currentFetchEventTimeLag`` (here from
                                                      the oldest record's timestamp to the commit)
``upsert_kafka_ops_continuous_last_check_timestamp_seconds`` none (when the job last looked for records)
====================================================  ==================================================
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from upsert_kafka_ops.kafka.evaluation import LagStatus
from upsert_kafka_ops.kafka.lag import LagReport

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
PREFIX = "upsert_kafka_ops_"
Kind = Literal["counter", "gauge", "untyped"]
GROUP_STATUSES = ("NOTFOUND", "OK", "WARN", "ERR")


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


class Exposition:
    """Metric families in insertion order; :meth:`render` gives the text format."""

    def __init__(self) -> None:
        self._families: dict[str, tuple[Kind, str, list[str]]] = {}

    def add(
        self, name: str, kind: Kind, help_text: str, value: float, labels: Mapping[str, Any] | None = None
    ) -> None:
        full = name if name.startswith(PREFIX) else PREFIX + name
        if kind == "counter" and not full.endswith("_total"):
            raise ValueError(f"counter {full} must end in _total")
        family = self._families.setdefault(full, (kind, help_text, []))
        if family[0] != kind:
            raise ValueError(f"{full} is already a {family[0]}")
        label_text = ",".join(f'{k}="{_escape_label(str(v))}"' for k, v in (labels or {}).items())
        family[2].append(
            f"{full}{{{label_text}}} {_format_value(value)}"
            if label_text
            else f"{full} {_format_value(value)}"
        )

    def render(self) -> str:
        lines: list[str] = []
        for name, (kind, help_text, samples) in self._families.items():
            lines.append(f"# HELP {name} {help_text.replace(chr(92), chr(92) * 2).replace(chr(10), ' ')}")
            lines.append(f"# TYPE {name} {kind}")
            lines.extend(samples)
        return "\n".join(lines) + "\n" if lines else ""


def lag_exposition(
    report: LagReport,
    status: LagStatus | None = None,
    exposition: Exposition | None = None,
    *,
    labels: Mapping[str, str] | None = None,
) -> Exposition:
    """Per-partition and per-group lag of ``report``, and ``status`` when given. A partition without a
    commit has a lag series (the records its consumer would read) and no committed offset.

    :param labels: added to every series (``pipeline`` and ``pipeline_job`` for a pipeline's jobs)."""
    exp = _Labelled(exposition or Exposition(), labels) if labels else (exposition or Exposition())
    group = report.group or ""
    for p in report.partitions:
        where = {"topic": p.topic, "partition": str(p.partition)}
        exp.add("partition_earliest_offset", "gauge", "Log start offset of the partition.", p.earliest, where)
        exp.add(
            "partition_end_offset",
            "gauge",
            "End offset: last stable offset for read_committed, else the high watermark.",
            p.end,
            {**where, "isolation": report.isolation},
        )
    for p in report.partitions:
        labels = {"group": group, "topic": p.topic, "partition": str(p.partition)}
        exp.add(
            "consumer_lag_records",
            "gauge",
            "Offsets between the committed offset (without one: the earliest) and the end offset.",
            p.lag,
            labels,
        )
        if p.time_lag_s is not None:
            exp.add(
                "consumer_lag_seconds",
                "gauge",
                "Age of the record at the committed offset (without one: the first record to read).",
                p.time_lag_s,
                labels,
            )
        if p.committed is None:
            continue
        exp.add(
            "consumer_committed_offset", "gauge", "Committed offset of the consumer.", p.committed, labels
        )
        exp.add(
            "consumer_records_lost",
            "gauge",
            "Offsets deleted before they were consumed (earliest minus committed).",
            p.records_lost,
            labels,
        )
    exp.add(
        "consumer_group_lag_records",
        "gauge",
        "Sum of the group's partition lags.",
        report.total_lag,
        {"group": group},
    )
    if report.max_time_lag_s is not None:
        exp.add(
            "consumer_group_max_lag_seconds",
            "gauge",
            "Largest time lag of the group's partitions.",
            report.max_time_lag_s,
            {"group": group},
        )
    exp.add(
        "consumer_group_observed_timestamp_seconds",
        "gauge",
        "When the offsets were read (Unix time).",
        report.observed_at,
        {"group": group},
    )
    if status is not None:
        for name in GROUP_STATUSES:
            exp.add(
                "consumer_group_status",
                "gauge",
                "Burrow's group status: 1 for the current one.",
                1.0 if status.status == name else 0.0,
                {"group": group, "status": name},
            )
        for ps in status.partitions:
            exp.add(
                "consumer_partition_status",
                "gauge",
                "Burrow's partition status (the current one only).",
                1.0,
                {
                    "group": group,
                    "topic": ps.lag.topic,
                    "partition": str(ps.lag.partition),
                    "status": ps.status,
                },
            )
        exp.add(
            "consumer_group_window_complete_ratio",
            "gauge",
            "Share of partitions with a full evaluation window.",
            status.complete,
            {"group": group},
        )
    return exp.exposition if isinstance(exp, _Labelled) else exp


class _Labelled:
    """An exposition that adds fixed labels (first) to every series."""

    def __init__(self, exposition: Exposition, labels: Mapping[str, str]) -> None:
        self.exposition = exposition
        self.labels = dict(labels)

    def add(
        self, name: str, kind: Kind, help_text: str, value: float, labels: Mapping[str, Any] | None = None
    ) -> None:
        self.exposition.add(name, kind, help_text, value, {**self.labels, **(labels or {})})


_RUN_COUNTERS = (
    ("records_in", "Records read (Flink numRecordsIn)."),
    ("bytes_in", "Bytes of keys and values read (Flink numBytesIn)."),
    ("tombstones_in", "Tombstones read."),
    ("null_keys_dropped", "Records dropped for a null key."),
    ("parse_errors_skipped", "Records skipped for a parse error (Flink numRecordsInErrors)."),
    ("records_out", "Records written (Flink numRecordsOut)."),
    ("tombstones_out", "Tombstones written."),
    ("bytes_out", "Bytes of keys and values written (Flink numBytesOut)."),
)


_JOB_COUNTERS = (
    ("rows_upserted", "Rows inserted or updated in the target table."),
    ("rows_deleted", "Rows deleted from the target table (tombstones folded into deletes)."),
)


def _job_figures(job: Mapping[str, Any]) -> dict[str, Any]:
    """A ``JobResult`` dict in a ``RunResult``'s terms: its read figures, its writes, its offsets."""
    read, write = job.get("read") or {}, job.get("write") or {}
    return {
        **{
            k: v
            for k, v in read.items()
            if k in dict(_RUN_COUNTERS) or k in ("distinct_keys", "keys_in_several_partitions")
        },
        "operation": job.get("kind", ""),
        "records_in": job.get("records_read", 0),
        "records_out": job.get("records_written", 0),
        "tombstones_out": job.get("tombstones_written", 0),
        "bytes_out": write.get("bytes_out", read.get("bytes_out", 0)),
        "rows_upserted": job.get("rows_upserted", 0),
        "rows_deleted": job.get("rows_deleted", 0),
        "duration_s": job.get("duration_s", 0.0),
        "start_offsets": job.get("start_offsets") or {},
        "end_offsets": job.get("end_offsets") or {},
    }


def run_result_exposition(
    result: Any, job: str, exposition: Exposition | None = None, *, pipeline: str | None = None
) -> Exposition:
    """A run result (``engine.results.RunResult``, a ``jobs.JobResult``, or their ``to_dict()``) as
    counters of that run (they start at 0 with each run, as Flink's counters do with each job start)
    and gauges. A job's result is read as its source's read figures plus what it wrote."""
    data: Mapping[str, Any] = result.to_dict() if hasattr(result, "to_dict") else result
    if "kind" in data and "operation" not in data:  # a JobResult
        data = _job_figures(data)
    exp = exposition or Exposition()
    labels = {"pipeline_job": job, "operation": str(data.get("operation", ""))}
    if pipeline is not None:
        labels = {"pipeline": pipeline, **labels}
    for key, help_text in _RUN_COUNTERS:
        exp.add(f"run_{key}_total", "counter", help_text, float(data.get(key, 0) or 0), labels)
    for key, help_text in _JOB_COUNTERS:
        if key in data:
            exp.add(f"run_{key}_total", "counter", help_text, float(data[key] or 0), labels)
    exp.add(
        "run_distinct_keys",
        "gauge",
        "Distinct keys seen by the run.",
        float(data.get("distinct_keys", 0) or 0),
        labels,
    )
    exp.add(
        "run_keys_in_several_partitions",
        "gauge",
        "Keys found in more than one partition.",
        float(data.get("keys_in_several_partitions", 0) or 0),
        labels,
    )
    exp.add(
        "run_duration_seconds",
        "gauge",
        "Wall time of the run.",
        float(data.get("duration_s", 0.0) or 0.0),
        labels,
    )
    for which in ("start", "end"):
        for topic, partitions in sorted((data.get(f"{which}_offsets") or {}).items()):
            for partition, offset in sorted(partitions.items(), key=lambda kv: int(kv[0])):
                exp.add(
                    f"run_{which}_offset",
                    "gauge",
                    f"The run's {which} offset (exclusive end).",
                    float(offset),
                    {**labels, "topic": topic, "partition": str(partition)},
                )
    return exp


def continuous_exposition(jobs: list[Mapping[str, Any]], pipeline: str | None) -> Exposition:
    """Continuous jobs while they run (``jobs.continuous.ContinuousResult.to_dict()`` each): their
    batches and records since the process started, the last batch's time and figures, and when each
    last looked for new records, which an alert compares with its interval."""
    exp = Exposition()
    for job in jobs:
        labels = (
            {"pipeline": pipeline, "pipeline_job": job["job"]} if pipeline else {"pipeline_job": job["job"]}
        )
        exp.add("continuous_up", "gauge", "1 while the continuous job's process runs.", 1.0, labels)
        exp.add(
            "continuous_interval_seconds",
            "gauge",
            "The job's trigger interval.",
            float(job["interval_s"]),
            labels,
        )
        for key, help_text in (
            ("batches", "Batches committed since the process started."),
            (
                "idle_checks",
                "Looks at the topic that found nothing new (no batch) since the process started.",
            ),
            ("records_read", "Records read by the batches since the process started."),
            ("records_written", "Records written to a sink topic by the batches since the process started."),
            ("rows_upserted", "Rows upserted by the batches since the process started."),
            ("rows_deleted", "Rows deleted by the batches since the process started."),
            ("failures", "Batches that failed (and were tried again) since the process started."),
        ):
            exp.add(f"continuous_{key}_total", "counter", help_text, float(job[key]), labels)
        exp.add(
            "continuous_failing_batches",
            "gauge",
            "Batches failed in a row now (0 once one commits or finds nothing new).",
            float(job.get("failing", 0)),
            labels,
        )
        if job.get("last_batch_s") is not None:
            exp.add(
                "continuous_batch_duration_seconds",
                "gauge",
                "Wall time of the last batch.",
                float(job["last_batch_s"]),
                labels,
            )
        if job.get("last_latency_s") is not None:
            exp.add(
                "continuous_latency_seconds",
                "gauge",
                "End-to-end latency of the last batch: from the Kafka timestamp of the oldest record it "
                "read until its commit.",
                float(job["last_latency_s"]),
                labels,
            )
        for key, help_text in (
            ("last_batch_at", "When the last batch committed (Unix time)."),
            (
                "last_check_at",
                "When the job last looked for new records, with a batch or without (Unix time).",
            ),
        ):
            if job.get(key) is not None:
                name = key.removesuffix("_at")
                exp.add(f"continuous_{name}_timestamp_seconds", "gauge", help_text, float(job[key]), labels)
    return exp
