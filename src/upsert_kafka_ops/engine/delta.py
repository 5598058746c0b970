"""Delta tables on Spark: created and evolved from the spec, written by MERGE, overwrite or a
snapshot's replace, each one commit carrying the run's state.

The commit carries ``userMetadata`` = the state and Delta's idempotent-write identifiers (txnAppId,
txnVersion), so a replayed run version is skipped by Delta itself. The session-wide confs are reset
afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from upsert_kafka_ops.engine.warehouse import (
    TargetSchemaError,
    columns_to_add,
    commit_confs,
    merge_sql,
    sql_string,
    target_columns,
)
from upsert_kafka_ops.spec.table import UpsertKafkaTable
from upsert_kafka_ops.spec.types import quote_name

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession
    from pyspark.sql.types import StructType


def _delta_commit_confs(spark: SparkSession, app_id: str, version: int, metadata: str) -> Any:
    return commit_confs(
        spark,
        {
            "spark.databricks.delta.write.txnAppId": app_id,
            "spark.databricks.delta.write.txnVersion": str(version),
            "spark.databricks.delta.commitInfo.userMetadata": metadata,
        },
    )


def delta_ref(path: str) -> str:
    """The SQL name of the Delta table at ``path`` (``delta.`path```)."""
    return "delta.`" + path.replace("`", "``") + "`"


def delta_schema(spark: SparkSession, path: str) -> StructType | None:
    """The schema of the Delta table at ``path``, or None when there is none. SQL and the DataFrame
    reader only (no ``DeltaTable`` API): it works the same in a Spark Connect session, whose server
    needs no Delta Connect plugin for it."""
    from pyspark.errors import AnalysisException

    try:
        return spark.read.format("delta").load(path).schema
    except AnalysisException:
        return None


def delta_last_commit(spark: SparkSession, path: str) -> Row | None:
    """The newest entry of the table's history (``DESCRIBE HISTORY``): version, operationMetrics, ..."""
    return spark.sql(f"DESCRIBE HISTORY {delta_ref(path)} LIMIT 1").first()


def ensure_delta_table(
    spark: SparkSession,
    path: str,
    table: UpsertKafkaTable,
    *,
    as_of_column: str | None = None,
    schema: StructType | None = None,
) -> list[str]:
    """Create the Delta table from the spec when missing; add columns the spec gained. Returns the
    names of added columns. A column whose type changed is an error (before any write).

    :param as_of_column: a snapshot table: this TIMESTAMP column leads the key and partitions it.
    :param schema: the table's schema as already read under the run's lock (else it is read here).
    """
    from pyspark.sql.types import TimestampType

    wanted = target_columns(table)
    have = schema if schema is not None else delta_schema(spark, path)
    if have is None:
        columns = [f"{quote_name(as_of_column)} TIMESTAMP NOT NULL"] if as_of_column else []
        columns += [
            f"{quote_name(name)} {t.to_spark()}{' NOT NULL' if name in table.primary_key else ''}"
            for name, t in wanted
        ]
        properties = {"upsert_kafka_ops.primary_key": ",".join(table.primary_key)}
        if as_of_column:
            properties["upsert_kafka_ops.as_of_column"] = as_of_column
        props = ", ".join(f"'{k}' = {sql_string(v)}" for k, v in properties.items())
        spark.sql(
            f"CREATE TABLE IF NOT EXISTS {delta_ref(path)} ({', '.join(columns)}) USING delta"
            + (f" PARTITIONED BY ({quote_name(as_of_column)})" if as_of_column else "")
            + f" TBLPROPERTIES ({props})"
        )
        return []
    existing = {f.name: f.dataType for f in have.fields}
    if as_of_column and existing.get(as_of_column) != TimestampType():
        raise TargetSchemaError(
            f"Delta table {path}: the snapshot column {as_of_column!r} is missing or not a TIMESTAMP (the "
            "table was not created as a snapshot table). Write the snapshots under a new path."
        )
    added = columns_to_add(
        existing,
        table,
        f"Delta table {path}",
        "Rebuild the target under a new path (mode full), or change the spec back.",
    )
    if added:
        spark.sql(f"ALTER TABLE {delta_ref(path)} ADD COLUMNS ({', '.join(added)})")
    return [a.split(" ")[0].strip("`") for a in added]


def _last_commit_metrics(spark: SparkSession, path: str) -> dict[str, str]:
    """The ``operationMetrics`` of the table's newest commit."""
    row = delta_last_commit(spark, path)
    return dict(row["operationMetrics"] or {}) if row is not None else {}


def delta_merge(
    spark: SparkSession,
    changes: DataFrame,
    path: str,
    table: UpsertKafkaTable,
    *,
    app_id: str,
    version: int,
    metadata: dict[str, Any],
    rows: int | None = None,
    close_only: Sequence[str] = (),
) -> dict[str, int]:
    """MERGE the last change per key (``op`` +U/-D) into the Delta table; one commit with the state.
    With no changes, an empty append commits the state alone.

    :param rows: the number of changes, when known (spares a Spark job that finds out).
    :param close_only: see :func:`merge_sql`."""
    import uuid

    names = [c for c, _ in target_columns(table)]
    text = json.dumps(metadata, sort_keys=True)
    src = changes.select("op", *names)
    with _delta_commit_confs(spark, app_id, version, text):
        if rows == 0 if rows is not None else src.isEmpty():
            spark.createDataFrame([], spark.read.format("delta").load(path).schema).write.format(
                "delta"
            ).mode("append").save(path)
            return {"upserted": 0, "deleted": 0}
        # SQL's MERGE (the same Delta command as the DeltaTable API, which a Spark Connect server
        # serves only with the Delta Connect plugin); its result row holds the counts
        view = f"upsert_kafka_ops_changes_{uuid.uuid4().hex[:12]}"
        src.createOrReplaceTempView(view)
        try:
            merged = spark.sql(merge_sql(delta_ref(path), view, table, close_only)).first()
        finally:
            spark.catalog.dropTempView(view)
    assert merged is not None
    return {
        "upserted": int(merged["num_updated_rows"]) + int(merged["num_inserted_rows"]),
        "deleted": int(merged["num_deleted_rows"]),
    }


def delta_overwrite(
    spark: SparkSession,
    rows: DataFrame,
    path: str,
    table: UpsertKafkaTable,
    *,
    app_id: str,
    version: int,
    metadata: dict[str, Any],
) -> dict[str, int]:
    """Replace the table's content with ``rows`` in one commit (the new version is the swap)."""
    names = [c for c, _ in target_columns(table)]
    with _delta_commit_confs(spark, app_id, version, json.dumps(metadata, sort_keys=True)):
        rows.select(*names).write.format("delta").mode("overwrite").save(path)
    return {"upserted": int(_last_commit_metrics(spark, path).get("numOutputRows", 0)), "deleted": 0}


def delta_replace_snapshot(
    spark: SparkSession,
    rows: DataFrame,
    path: str,
    table: UpsertKafkaTable,
    *,
    as_of_column: str,
    as_of_ms: int,
    app_id: str,
    version: int,
    metadata: dict[str, Any],
) -> dict[str, int]:
    """Replace the snapshot ``as_of_column = as_of_ms`` with ``rows`` in one commit (Delta
    ``replaceWhere``); the other snapshots are untouched."""
    from pyspark.sql import functions as F

    names = [c for c, _ in target_columns(table)]
    stamp = f"timestamp_millis({int(as_of_ms)})"
    out = rows.select(F.expr(stamp).alias(as_of_column), *names)
    with _delta_commit_confs(spark, app_id, version, json.dumps(metadata, sort_keys=True)):
        out.write.format("delta").mode("overwrite").option(
            "replaceWhere", f"{quote_name(as_of_column)} = {stamp}"
        ).save(path)
    m = _last_commit_metrics(spark, path)
    return {"upserted": int(m.get("numOutputRows", 0)), "deleted": 0}


#: the shortest retention Delta's VACUUM takes without lifting its check (its default, 7 days)
DELTA_RETENTION_CHECK_HOURS = 168


def delta_maintain(
    spark: SparkSession,
    path: str,
    *,
    compact: bool,
    expire: bool,
    retain_hours: float,
    cluster_file_bytes: int | None = None,
) -> dict[str, int]:
    """``OPTIMIZE`` (``compact``: small files bin-packed into large ones, deletion vectors applied)
    and ``VACUUM ... RETAIN retain_hours HOURS`` (``expire``: files no version of that window
    needs deleted). Neither carries a run's state: the state stays in the commit that wrote it.
    Returns the table's files before and after and what each command did.

    :param cluster_file_bytes: instead of compact's ``OPTIMIZE``, ``OPTIMIZE ... ZORDER BY`` the table's
        primary key into files of about this size (Delta's ``optimize.maxFileSize`` for the command),
        each holding one range of keys, and the table's ``delta.targetFileSize`` set to it (what
        delta-rs and Databricks write a MERGE's files as; Delta on Spark takes the property only with
        its arbitrary-properties check lifted, for this command)."""
    ref = delta_ref(path)

    def detail() -> Row:
        row = spark.sql(f"DESCRIBE DETAIL {ref}").first()
        assert row is not None  # DESCRIBE DETAIL has one row
        return row

    before = detail()
    done = {"files_before": int(before["numFiles"])}
    if cluster_file_bytes is not None:
        key = (before["properties"] or {}).get("upsert_kafka_ops.primary_key")
        if not key:
            raise TargetSchemaError(
                f"Delta table {path}: its properties name no primary key (upsert_kafka_ops.primary_key), "
                "so cluster cannot sort it by the key. Tables this project creates have it: drop cluster."
            )
        size = str(int(cluster_file_bytes))
        with commit_confs(spark, {"spark.databricks.delta.optimize.maxFileSize": size}):
            row = spark.sql(
                f"OPTIMIZE {ref} ZORDER BY ({', '.join(quote_name(k) for k in key.split(','))})"
            ).first()
        metrics = row["metrics"] if row is not None else None
        done["files_compacted"] = int(metrics["numFilesRemoved"]) if metrics is not None else 0
        done["files_written"] = int(metrics["numFilesAdded"]) if metrics is not None else 0
        if (before["properties"] or {}).get("delta.targetFileSize") != size:
            with commit_confs(spark, {"spark.databricks.delta.allowArbitraryProperties.enabled": "true"}):
                spark.sql(f"ALTER TABLE {ref} SET TBLPROPERTIES ('delta.targetFileSize' = '{size}')")
    elif compact:
        row = spark.sql(f"OPTIMIZE {ref}").first()
        metrics = row["metrics"] if row is not None else None
        done["files_compacted"] = int(metrics["numFilesRemoved"]) if metrics is not None else 0
        done["files_written"] = int(metrics["numFilesAdded"]) if metrics is not None else 0
    if expire:
        # below Delta's default retention its check refuses the command; the job's setting is the
        # user's decision that no reader stays on a version that old
        confs = {}
        if retain_hours < DELTA_RETENTION_CHECK_HOURS:
            confs["spark.databricks.delta.retentionDurationCheck.enabled"] = "false"
        # VACUUM lists the table's folders in as many tasks as Spark's partition discovery uses (10,000
        # unless set): 40 s of empty tasks for a small table on 2 cores. The session's shuffle
        # partitions (its scale, 2 x cores locally) list it in 3.6 s.
        listing = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
        if spark.conf.get(listing, "10000") == "10000":
            confs[listing] = str(spark.conf.get("spark.sql.shuffle.partitions", "200"))
        with commit_confs(spark, confs):
            spark.sql(f"VACUUM {ref} RETAIN {retain_hours:g} HOURS").collect()
        last = delta_last_commit(spark, path)
        metrics = last["operationMetrics"] if last is not None and last["operation"] == "VACUUM END" else None
        done["files_deleted"] = int((metrics or {}).get("numDeletedFiles", 0))
    done["files_after"] = int(detail()["numFiles"])
    return done
