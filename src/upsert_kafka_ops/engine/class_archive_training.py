"""The class archive's training session (see :mod:`~upsert_kafka_ops.engine.class_archive`), run by
``python -m upsert_kafka_ops.engine.class_archive_training OUT`` in a process of its own."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path


def train(out: Path) -> None:
    """The training session: what a run loads (session start, the Kafka source, the formats' codecs,
    aggregation, joins, windows, Delta and Parquet), then a clean JVM exit that writes ``out``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from upsert_kafka_ops.engine.delta import delta_last_commit, delta_ref
    from upsert_kafka_ops.engine.session import build_spark_session, spark_conf
    from upsert_kafka_ops.spec.table import UpsertKafkaTable

    options = f"{spark_conf()['spark.driver.extraJavaOptions']} -XX:ArchiveClassesAtExit={out}"
    spark = build_spark_session(
        app_name="upsert-kafka-ops-class-archive", extra={"spark.driver.extraJavaOptions": options}
    )
    gateway = spark.sparkContext._gateway
    assert gateway is not None
    with tempfile.TemporaryDirectory(prefix="uko-cds-train-") as tmp:
        kafka = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", "127.0.0.1:9")
            .option("assign", '{"t":[0]}')
            .load()
        )
        columns = [
            {"name": "id", "type": "BIGINT"},
            {"name": "v", "type": "STRING"},
            {"name": "d", "type": "DECIMAL(12, 2)"},
            {"name": "ts", "type": "TIMESTAMP(3)"},
        ]
        raw = (
            spark.range(2000)
            .selectExpr(
                "'t' AS topic",
                "CAST(id % 2 AS INT) AS partition",
                "id AS offset",
                "timestamp_millis(id) AS timestamp",
                "0 AS timestampType",
                "CAST(to_json(named_struct('id', id % 100)) AS BINARY) AS key",
                "CAST(to_json(named_struct('id', id % 100, 'v', CAST(id AS STRING), 'd', id / 100, "
                "'ts', '2026-01-01 00:00:00.123')) AS BINARY) AS value",
            )
            .unionByName(kafka.where("false").drop("headers"), allowMissingColumns=True)
        )
        for fmt in ("json", "csv", "avro"):
            table = UpsertKafkaTable.from_options(
                {"connector": "upsert-kafka", "topic": "t", "key.format": fmt, "value.format": fmt},
                columns=columns,
                primary_key=["id"],
            )
            kd, vd = table.key_codec().decode(F.col("key")), table.value_codec().decode(F.col("value"))
            raw.select(kd.value.alias("k"), vd.value.alias("v"), vd.error).collect()
        per_key = raw.groupBy("key", "topic", "partition").agg(
            F.max_by(F.struct(*raw.columns), "offset").alias("rec"), F.count(F.lit(1)).alias("n")
        )
        w = Window.partitionBy("key").orderBy(F.col("offset").desc())
        ranked = raw.withColumn("rn", F.row_number().over(w)).where("rn = 1")
        per_key.join(F.broadcast(ranked), "key").select("key", "n").collect()
        delta, parquet = f"{tmp}/delta", f"{tmp}/parquet"
        per_key.select("key", "n").write.format("delta").save(delta)
        spark.conf.set("spark.databricks.delta.write.txnAppId", "train")
        spark.conf.set("spark.databricks.delta.write.txnVersion", "1")
        per_key.select("key", "n").createOrReplaceTempView("train_changes")
        spark.sql(
            f"MERGE INTO {delta_ref(delta)} AS t USING train_changes AS s ON t.key = s.key "
            "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
        ).collect()
        delta_last_commit(spark, delta)
        spark.read.format("delta").load(delta).write.parquet(parquet)
        spark.read.parquet(parquet).count()
    spark.stop()
    assert gateway.proc is not None
    gateway.proc.stdin.close()  # the driver JVM exits on end of input, and writes the archive then
    gateway.proc.wait(timeout=300)


if __name__ == "__main__":
    train(Path(sys.argv[1]))
