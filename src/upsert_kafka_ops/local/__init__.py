"""Local services for development, demos and tests: a real Kafka broker, a real PostgreSQL, a real
Schema-Registry-compatible server, a real MIT KDC, a Spark standalone cluster and a Spark Connect
server, a Spark History Server, a one-node YARN, Prometheus with a Pushgateway, and an S3 server (MinIO)
on 127.0.0.1."""

from __future__ import annotations

from upsert_kafka_ops.local.kafka import LocalKafka
from upsert_kafka_ops.local.kdc import LocalKdc
from upsert_kafka_ops.local.postgres import LocalPostgres
from upsert_kafka_ops.local.process import free_port, free_ports
from upsert_kafka_ops.local.prometheus import LocalPrometheus, LocalPushgateway
from upsert_kafka_ops.local.s3 import LocalS3
from upsert_kafka_ops.local.schema_registry import LocalSchemaRegistry
from upsert_kafka_ops.local.spark_cluster import LocalSparkCluster
from upsert_kafka_ops.local.spark_connect import LocalSparkConnect
from upsert_kafka_ops.local.spark_history import LocalSparkHistory
from upsert_kafka_ops.local.yarn import LocalYarn

__all__ = [
    "LocalKafka",
    "LocalKdc",
    "LocalPostgres",
    "LocalPrometheus",
    "LocalPushgateway",
    "LocalS3",
    "LocalSchemaRegistry",
    "LocalSparkCluster",
    "LocalSparkConnect",
    "LocalSparkHistory",
    "LocalYarn",
    "free_port",
    "free_ports",
]
