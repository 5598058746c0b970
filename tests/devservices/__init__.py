"""Services only the test suites start, on 127.0.0.1: a real MIT KDC (the broker's Kerberos
listener), a Spark standalone cluster, a Spark History Server, a one-node YARN, Prometheus with a
Pushgateway, and an S3 server (MinIO).

They are not part of the package users install: what users run themselves (the broker, PostgreSQL,
the Schema Registry, the Spark Connect server) stays in :mod:`upsert_kafka_ops.local`, whose process
helpers these use too. Import them as ``from tests.devservices import LocalS3`` (the repository's
root is on pytest's ``pythonpath``)."""

from __future__ import annotations

from tests.devservices.kdc import LocalKdc
from tests.devservices.prometheus import LocalPrometheus, LocalPushgateway
from tests.devservices.s3 import LocalS3
from tests.devservices.spark_cluster import LocalSparkCluster
from tests.devservices.spark_history import LocalSparkHistory
from tests.devservices.yarn import LocalYarn

__all__ = [
    "LocalKdc",
    "LocalPrometheus",
    "LocalPushgateway",
    "LocalS3",
    "LocalSparkCluster",
    "LocalSparkHistory",
    "LocalYarn",
]
