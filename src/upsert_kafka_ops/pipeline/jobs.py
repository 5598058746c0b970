"""The job kinds of a pipeline file: materialize, backfill, topic-to-topic, publish and maintain."""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal, cast

from pydantic import Field, field_validator, model_validator

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.pipeline.bounds import OffsetsUntil, Until, check_until, parse_until
from upsert_kafka_ops.pipeline.folders import Folder, old_folder
from upsert_kafka_ops.pipeline.sources import DeltaFeedSource, KafkaSource, QuerySource, Source, UpsertSource
from upsert_kafka_ops.pipeline.targets import AnyTarget, Sink, UpsertSink, WarehouseTarget
from upsert_kafka_ops.spec.base import SpecModel
from upsert_kafka_ops.spec.cadence import cron_expression
from upsert_kafka_ops.spec.history import HistorySpec
from upsert_kafka_ops.spec.table import ReadEnd, UpsertKafkaTable, parse_duration_ms

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,99}$")
_VIEW = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Trigger(SpecModel):
    """How a job's runs start: each by a scheduler (the default), or one after another until the
    process is stopped (continuous)."""

    continuous: bool = Field(
        default=False,
        description="Run until stopped (SIGTERM or Ctrl-C finish the current batch first), one batch after "
        "another, each an incremental run committed with its end offsets (a topic-to-topic job: its "
        "streaming query over its checkpoint on a processing-time trigger of the interval; a publish job: "
        "the Delta versions since the last). Only `upsert-kafka-ops run` runs "
        "continuously; `--once`, the Airflow operators and Dagster's assets run one batch. See "
        "docs/streaming.md.",
    )
    interval: str = Field(
        default="2s",
        description="The least time between the starts of two batches ('500ms', '2s', '1min'); a batch that "
        "takes longer is followed at once. A batch with nothing new to read is skipped.",
    )
    retries: int = Field(
        default=5,
        ge=0,
        description="Failed batches in a row that are tried again (after 1 s, then twice as long each time, at "
        "most a minute) before the process exits with the error; a failed batch commits nothing, so trying "
        "it again is always safe (a broker or the target briefly away, a maintenance holding the lock). A failure "
        "no pause mends (an invalid spec, a target schema that does not fit, a record that cannot be decoded, a "
        "sink topic whose partitions changed) ends the process at the first.",
    )

    @field_validator("interval")
    @classmethod
    def _check_interval(cls, value: str) -> str:
        ms = parse_duration_ms(value, "")
        if not 100 <= ms <= 3_600_000:
            raise SpecError("", f"{value!r} is outside 100ms to 1h.", "write e.g. '2s'.")
        return value

    @property
    def interval_s(self) -> float:
        """:attr:`interval` in seconds."""
        return parse_duration_ms(self.interval, "interval") / 1000


#: why a job kind does not run continuously (the kinds missing here do)
_BOUNDED = {
    "backfill": "a backfill ends at its 'until' bound",
    "maintain": "a maintain job compacts a table and ends",
}


class JobSpec(SpecModel):
    #: the job reads Kafka topics, so it has a consumer group and a lag (a publish job reads a table's
    #: change feed, a maintain job no data)
    reads_topics: ClassVar[bool] = True

    name: str = Field(description="Job name: letters, digits, '_', '.', '-'; unique in the pipeline.")
    description: str = Field(default="", description="Free text shown by the orchestrators.")
    schedule: str | None = Field(
        default=None,
        description="When the orchestrators run the job, in UTC: a cron expression ('*/15 * * * *') or @hourly, "
        "@daily, @weekly, @monthly, @yearly. Dagster gets a schedule and freshness checks from it, Airflow's "
        "pipeline DAG its schedule.",
    )
    trigger: Trigger | None = Field(
        default=None,
        description="continuous: true runs the job until stopped, a batch every 'interval' (materialize, "
        "streaming topic-to-topic and Delta change-feed publish jobs); "
        "default: one bounded run each time it is started.",
    )

    @model_validator(mode="after")
    def _check_name(self) -> JobSpec:
        if not _NAME.match(self.name):
            raise SpecError("name", f"{self.name!r} is not a valid job name.", "use [A-Za-z][A-Za-z0-9_.-]*.")
        return self

    @model_validator(mode="after")
    def _check_trigger(self) -> JobSpec:
        if not self.continuous:
            return self
        kind = str(getattr(self, "kind", ""))
        if kind in _BOUNDED:
            raise SpecError(
                "trigger.continuous",
                f"{_BOUNDED[kind]}; continuous runs are for materialize, topic-to-topic and publish jobs.",
                "drop trigger, and give the job a schedule.",
            )
        if self.schedule is not None:
            raise SpecError(
                "schedule",
                "a continuous job is not started on a schedule: it runs until it is stopped.",
                "drop schedule, or drop trigger.continuous to run the job on the schedule.",
            )
        if getattr(self, "execution", "auto") == "snapshot":
            raise SpecError(
                "execution",
                "a snapshot recomputes the whole query in every run: run continuously, every batch would "
                "rewrite every key.",
                "use execution: auto or streaming (a query Spark runs incrementally), or give the job a "
                "schedule instead of the trigger.",
            )
        if getattr(self, "mode", "incremental") == "full":
            raise SpecError(
                "mode",
                "a continuous job continues from its stored offsets batch after batch (its first batch builds "
                "the table when there are none).",
                "drop mode: full; to rebuild the table once, run the job with --mode full --once.",
            )
        return self

    @property
    def continuous(self) -> bool:
        """Whether ``upsert-kafka-ops run`` runs the job until it is stopped (``trigger.continuous``)."""
        return self.trigger is not None and self.trigger.continuous

    @field_validator("schedule")
    @classmethod
    def _check_schedule(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                cron_expression(value)
            except SpecError as e:  # the path in the file is the field's: jobs.N.schedule
                raise SpecError("", e.message, e.fix) from None
        return value

    @property
    def consumer_group(self) -> str:
        """The consumer group the job's processed offsets are committed to (monitoring only)."""
        return f"upsert-kafka-ops.{self.name}"

    def connections_used(self) -> list[str]:
        raise NotImplementedError


class MaterializeJob(JobSpec):
    """Topic -> warehouse: fold the upsert topic into the latest row per key in the target."""

    kind: Literal["materialize"] = Field(description="Job kind.")
    source: Source = Field(
        description="The upsert-kafka source, or a CDC source (kind: kafka, a debezium-json, canal-json or "
        "maxwell-json table, with its key)."
    )
    target: WarehouseTarget = Field(description="Delta, PostgreSQL, Parquet or Iceberg target.")
    mode: Literal["incremental", "full"] = Field(
        default="incremental",
        description="incremental: continue from the stored offsets; full: rebuild from the earliest offset.",
    )
    on_reset: Literal["fail", "rebuild"] = Field(
        default="fail",
        description="When the stored offsets cannot be continued (the topic was deleted and created again, "
        "lost partitions, or was truncated past them): fail before any write, naming the fix (a person "
        "decides), or rebuild the target from the earliest offset and say why.",
    )
    strict: bool = Field(default=False, description="Fail when a key is found in more than one partition.")
    validation: Literal["winners", "full"] = Field(
        default="winners",
        description="Decode only winning values, or every value (fail on the first bad one).",
    )
    history: HistorySpec | None = Field(
        default=None,
        description="scd2: keep every version of a key (valid_from, valid_to, is_current) instead of the "
        "latest row; see docs/history.md.",
    )

    @model_validator(mode="after")
    def _source(self) -> MaterializeJob:
        check_folded_source(self.source)
        return self

    @model_validator(mode="after")
    def _history(self) -> MaterializeJob:
        if self.history is None:
            return self
        if not isinstance(self.source, UpsertSource):
            raise SpecError(
                "history",
                "a history table is built from an upsert-kafka source.",
                "read the topic as an upsert-kafka table, or drop history.",
            )
        if self.target.full_only:
            raise SpecError(
                "history",
                "a Parquet target is rewritten whole on every run; a history table is updated in place.",
                "write the history to Delta, PostgreSQL or Iceberg.",
            )
        self.history.check(self.source.table)
        return self

    @model_validator(mode="after")
    def _latest_state_target(self) -> MaterializeJob:
        if self.target.snapshot_column:
            raise SpecError(
                "target.as_of_column",
                "a materialize job keeps the latest state; a snapshot table is written by backfills.",
                "use kind: backfill for a snapshot table, or drop as_of_column.",
            )
        return self

    def connections_used(self) -> list[str]:
        return [self.source.connection]


class BackfillJob(JobSpec):
    """Bounded earliest -> end read that rebuilds a target idempotently."""

    #: a backfill reads as a materialize job does by default, and writes no history table
    strict: ClassVar[bool] = False
    validation: ClassVar[Literal["winners", "full"]] = "winners"
    history: ClassVar[None] = None

    kind: Literal["backfill"] = Field(description="Job kind.")
    source: Source = Field(
        description="The upsert-kafka source, or a CDC source with its key (warehouse targets)."
    )
    target: AnyTarget = Field(description="Delta, PostgreSQL, Parquet, Iceberg or an upsert topic.")
    until: Until = Field(
        default="latest",
        description="End of the read: 'latest' (fixed at start), {'timestamp_ms': N}, "
        "{'offsets': {topic: {partition: offset}}}.",
    )
    rewind: bool = Field(
        default=False,
        description="Allow an end older than the target's stored offsets (the target goes back in time).",
    )

    @field_validator("until", mode="before")
    @classmethod
    def _until_shape(cls, value: object) -> object:
        return check_until(value)

    @model_validator(mode="after")
    def _check_until(self) -> BackfillJob:
        check_folded_source(self.source)
        if isinstance(self.source, KafkaSource) and self.target.is_topic:
            raise SpecError(
                "target",
                "a CDC source is backfilled into warehouse targets only (for now).",
                "use a topic-to-topic job to turn a CDC topic into an upsert topic.",
            )
        as_of = self.target.snapshot_column
        if as_of and as_of in {c.name for c in self.source.table.columns}:
            raise SpecError(
                "target.as_of_column",
                f"{as_of!r} is also a column of the table {self.source.table.name!r}.",
                "choose a name the table does not use, e.g. as_of.",
            )
        return self

    @property
    def snapshot(self) -> bool:
        """Whether the target is a snapshot table (one snapshot per end, see DeltaTarget.as_of_column)."""
        return bool(self.target.snapshot_column)

    def until_bound(self) -> ReadEnd:
        """The end as the engine reads it (offsets by topic and partition)."""
        if isinstance(self.until, dict) and "offsets" in self.until:
            return dict(cast(OffsetsUntil, self.until)["offsets"])
        return self.until

    def connections_used(self) -> list[str]:
        return [self.source.connection, *self.target.connections_used()]


def history_start_error(name: str, source: UpsertSource | KafkaSource, why: str) -> SpecError | None:
    """The error for a source whose ``scan.startup.mode`` would cut the history a job reads whole."""
    if not isinstance(source, KafkaSource) or source.table.startup_mode == "earliest-offset":
        return None
    return SpecError(
        f"{name}.table.scan.startup.mode",
        f"'{source.table.startup_mode}': {why}, so a start other than the earliest offset would leave out "
        "part of the table and then write that partial result over the whole one.",
        "remove it (or set 'earliest-offset'); a start applies to streaming topic-to-topic jobs and engine reads.",
    )


def check_folded_source(source: UpsertSource | KafkaSource) -> None:
    """A warehouse job folds its source per key: an upsert table, or a CDC table with ``key``."""
    if not isinstance(source, KafkaSource):
        return
    error = history_start_error("source", source, "a warehouse job folds its source from the earliest offset")
    if error is not None:
        raise error
    from upsert_kafka_ops.formats.cdc_json import is_cdc

    if not is_cdc(source.table.value_format):
        raise SpecError(
            "source",
            f"{source.table.name!r} is an append-only {source.table.value_format} table: "
            "it has no key to keep the latest row of.",
            "read an upsert-kafka table, or a CDC table (debezium-json, canal-json, maxwell-json).",
        )
    if not source.key:
        raise SpecError(
            "source.key",
            f"the CDC table {source.table.name!r} needs the key of its rows here.",
            "add key: [<primary key columns>] to the source.",
        )
    source.upsert_view()


def source_table(source: UpsertSource | KafkaSource) -> UpsertKafkaTable:
    """The upsert table a warehouse job's source stands for (a CDC source: its upsert view)."""
    return source.upsert_view() if isinstance(source, KafkaSource) else source.table


def target_table(job: MaterializeJob | BackfillJob) -> UpsertKafkaTable:
    """The table a warehouse job's target holds: its source's, or with ``history`` the history table
    (every version, with its validity and bookkeeping columns)."""
    table = source_table(job.source)
    return job.history.table(table) if job.history is not None else table


def as_backfill(
    job: AnyJob,
    until: object = None,
    rewind: bool | None = None,
) -> BackfillJob:
    """The bounded backfill of a materialize job (or a backfill job with a new end): reads from the
    earliest offset to ``until`` (see :func:`parse_until`; default: the job's own end, else latest)
    and rebuilds the target. ``rewind`` allows an end older than the target's stored offsets."""
    if isinstance(job, MaterializeJob):
        return BackfillJob(
            name=job.name,
            description=job.description,
            kind="backfill",
            source=job.source,
            target=job.target,
            until=parse_until(until),
            rewind=bool(rewind),
        )
    if isinstance(job, BackfillJob):
        return BackfillJob.model_validate(
            {
                **job.model_dump(),
                "until": parse_until(until) if until is not None else job.until,
                "rewind": job.rewind if rewind is None else rewind,
            }
        )
    raise SpecError("job", f"{job.name!r} is a {job.kind} job.", "backfill a materialize or backfill job.")


class TopicToTopicJob(JobSpec):
    """Kafka sources registered as temporary views, a Spark SQL query, an upsert-kafka sink."""

    kind: Literal["topic-to-topic"] = Field(description="Job kind.")
    sources: dict[str, Source] = Field(
        description="View name -> source; the query refers to the views by these names."
    )
    sql: str | None = Field(
        default=None,
        description="Flink's INSERT INTO sink SELECT ... over tables of the pipeline's 'tables', instead of "
        "'query', 'sources' and 'sink' (the SELECT is translated to Spark SQL; columns go by position).",
    )
    query: str = Field(description="Spark SQL SELECT whose columns are the sink table's columns, in order.")
    sink: Sink = Field(
        description="The sink: an upsert-kafka table (kind: upsert-kafka, the default), or a plain kafka table "
        "(kind: kafka) for an append-only query, written by the streaming path."
    )
    execution: Literal["auto", "streaming", "snapshot"] = Field(
        default="auto",
        description="auto: Structured Streaming (AvailableNow) when the query can run incrementally "
        "and exactly, else a bounded recompute written with write_snapshot.",
    )
    checkpoint: Folder | None = Field(
        default=None,
        description="Streaming checkpoint folder (required for the streaming path): {path, storage}. "
        "Formerly checkpoint_location and checkpoint_storage, which still read.",
    )

    @model_validator(mode="before")
    @classmethod
    def _old_checkpoint_fields(cls, data: Any) -> Any:
        return old_folder(data, "checkpoint", "checkpoint_location", "checkpoint_storage")

    @model_validator(mode="after")
    def _check_views(self) -> TopicToTopicJob:
        if not self.sources:
            raise SpecError("sources", "needs at least one source.")
        for view in self.sources:
            if not _VIEW.match(view):
                raise SpecError(
                    f"sources.{view}", "is not a valid SQL view name.", "use [A-Za-z_][A-Za-z0-9_]*."
                )
        return self

    def connections_used(self) -> list[str]:
        return [s.connection for s in self.sources.values()] + [self.sink.connection]


class PublishJob(JobSpec):
    """Table -> topic: a Delta table's changes (Change Data Feed) or a query's full snapshot."""

    reads_topics: ClassVar[bool] = False

    kind: Literal["publish"] = Field(description="Job kind.")
    source: Annotated[DeltaFeedSource | QuerySource, Field(discriminator="kind")] = Field(
        description="delta-cdf: publish the changes since the stored version; query: publish a snapshot."
    )
    sink: UpsertSink = Field(description="The upsert-kafka sink.")
    state: Folder | None = Field(
        default=None,
        description="Folder for the last published Delta version (delta-cdf; default: next to the table, on "
        "its store): {path, storage}. Formerly state_path and state_storage, which still read.",
    )

    @model_validator(mode="before")
    @classmethod
    def _old_state_fields(cls, data: Any) -> Any:
        return old_folder(data, "state", "state_path", "state_storage")

    @model_validator(mode="after")
    def _check_continuous_source(self) -> PublishJob:
        if self.continuous and isinstance(self.source, QuerySource):
            raise SpecError(
                "source",
                "a publish of a query sends its whole result in every run: run continuously, every batch would "
                "send every row again.",
                "publish a Delta table's change feed (source: {kind: delta-cdf, ...}), or give the job a schedule "
                "instead of the trigger.",
            )
        return self

    def connections_used(self) -> list[str]:
        return [self.sink.connection]


class MaintainJob(JobSpec):
    """Compaction and cleanup of a warehouse target, under its run lock (never beside a write).

    Incremental runs leave small files, position deletes or dead rows; this job, on a schedule of its
    own, keeps the table as fast to read and write as it was when it was new."""

    reads_topics: ClassVar[bool] = False

    kind: Literal["maintain"] = Field(description="Job kind.")
    job: str | None = Field(
        default=None,
        description="The materialize or backfill job whose target this job maintains (a history table "
        "too). Its target is copied here when the file is read.",
    )
    target: WarehouseTarget = Field(
        description="The Delta, Iceberg or PostgreSQL table to maintain (give 'job' instead to name the "
        "job that writes it)."
    )
    compact: bool = Field(
        default=True,
        description="Delta: OPTIMIZE (small files into large ones); Iceberg: rewrite_data_files and "
        "rewrite_position_delete_files; PostgreSQL: VACUUM (ANALYZE).",
    )
    expire: bool = Field(
        default=True,
        description="Delta: VACUUM (delete the files no version of the last retain_hours needs); Iceberg: "
        "expire the snapshots older than retain_hours (never the one holding the stored offsets) and "
        "delete their files. PostgreSQL: nothing more (VACUUM reclaims dead rows).",
    )
    retain_hours: float = Field(
        default=168,
        ge=0,
        description="How long replaced files stay readable for time travel and for readers still on an "
        "old version (Delta's default is 168, 7 days; below it VACUUM's own check is lifted for this job).",
    )
    cluster: bool = Field(
        default=False,
        description="Delta: sort the table by its primary key into files of about cluster_file_mb "
        "(OPTIMIZE ... ZORDER BY the key, in place of compact's OPTIMIZE) and set its delta.targetFileSize "
        "to that size, so that a small run rewrites the few small files holding its keys rather than "
        "every large one. For large tables whose runs change few keys; it rewrites the whole table.",
    )
    cluster_file_mb: float = Field(
        default=2,
        gt=0,
        description="The size of the files cluster writes, in megabytes: the smaller, the less a small "
        "run rewrites, and the more files a reader of the whole table opens.",
    )

    @model_validator(mode="after")
    def _target(self) -> MaintainJob:
        if self.target.full_only:
            raise SpecError(
                "target",
                "a Parquet target is rewritten whole by every run: it has no old files or versions to clean.",
                "maintain a Delta, Iceberg or PostgreSQL target, or drop this job.",
            )
        if self.cluster and not self.target.clusters_by_key:
            raise SpecError(
                "cluster",
                "only a Delta table is clustered by this job: a small run rewrites each of its files that "
                "holds a changed key, which clustering keeps few and small.",
                "drop cluster, or maintain a Delta table.",
            )
        if not (self.compact or self.expire or self.cluster):
            raise SpecError(
                "compact", "compact, expire and cluster are off: the job would do nothing.", "turn one on."
            )
        if not (self.compact or self.target.keeps_versions):
            raise SpecError(
                "compact",
                "a PostgreSQL table's maintenance is VACUUM (ANALYZE), which compact runs; expire has "
                "nothing to do there, so the job would do nothing.",
                "leave compact on.",
            )
        return self

    def connections_used(self) -> list[str]:
        return self.target.connections_used()


def maintained_targets(data: Any) -> Any:
    """A pipeline file's data with each maintain job's ``job`` resolved: the named job's ``target``
    copied into it (before validation, as tables named by sources are)."""
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        return data
    jobs = data["jobs"]
    by_name = {j.get("name"): j for j in jobs if isinstance(j, dict)}
    resolved = []
    for i, job in enumerate(jobs):
        if not isinstance(job, dict) or job.get("kind") != "maintain" or job.get("job") is None:
            resolved.append(job)
            continue
        name = job["job"]
        named = by_name.get(name)
        if named is None or named.get("kind") == "maintain":
            writers = [
                str(j.get("name"))
                for j in jobs
                if isinstance(j, dict) and j.get("kind") in ("materialize", "backfill")
            ]
            raise SpecError(
                f"jobs.{i}.job",
                f"{name!r} is not a materialize or backfill job of the pipeline.",
                f"name the job that writes the table ({', '.join(writers) or 'none here'}), or give target.",
            )
        target = named.get("target")
        if named.get("kind") not in ("materialize", "backfill") or not isinstance(target, dict):
            raise SpecError(
                f"jobs.{i}.job",
                f"{name!r} is a {named.get('kind')} job: it writes no warehouse table to maintain.",
                "name a materialize or backfill job.",
            )
        if "target" in job and job["target"] != target:
            raise SpecError(
                f"jobs.{i}.target",
                f"the job names {name!r} and a target of its own.",
                "give one of job and target.",
            )
        resolved.append({**job, "target": target})
    return {**data, "jobs": resolved}


#: the jobs that write a warehouse table or fill a topic from a bounded read
WarehouseJob = MaterializeJob | BackfillJob

#: any job of a pipeline file (the type; ``Job`` is the same union as pydantic reads it, by ``kind``)
AnyJob = MaterializeJob | BackfillJob | TopicToTopicJob | PublishJob | MaintainJob
Job = Annotated[AnyJob, Field(discriminator="kind")]
