"""The object-storage suite: a real S3 server (MinIO, ``make minio``; never skipped), the broker,
PostgreSQL (an Iceberg JDBC catalog's database) and the SparkSession with Spark's S3A connector and
Iceberg's runtime (the ``s3`` and ``iceberg`` jar groups), all from ``tests/services.py``: in
``make test`` the suite runs after the Dagster suite in its pytest process, on the same ones."""
