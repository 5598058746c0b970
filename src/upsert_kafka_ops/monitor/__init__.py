"""Watching a pipeline's jobs from outside: the lag exporter that Prometheus scrapes
(:mod:`upsert_kafka_ops.monitor.exporter`), with the alert rules and the dashboard built for it."""
