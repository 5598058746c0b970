"""Provider metadata read by Airflow's ProvidersManager (``apache_airflow_provider`` entry point).

No Airflow import here: discovery reads this without loading the hooks.
"""

from __future__ import annotations

from typing import Any

INTEGRATION = "Upsert Kafka"


def get_provider_info() -> dict[str, Any]:
    from importlib.metadata import version

    def modules(*names: str) -> list[dict[str, Any]]:
        return [
            {
                "integration-name": INTEGRATION,
                "python-modules": [f"upsert_kafka_ops.airflow.{n}" for n in names],
            }
        ]

    return {
        # must equal the canonical distribution name, or Airflow's provider discovery fails for all
        "package-name": "upsert-kafka-ops",
        "name": "Upsert Kafka Ops",
        "description": "Flink's upsert-kafka semantics on Apache Spark: jobs that materialize compacted topics, "
        "write upsert topics and backfill, with sensors on new data and consumer lag.",
        "versions": [version("upsert-kafka-ops")],
        "integrations": [
            {
                "integration-name": INTEGRATION,
                "external-doc-url": "https://nightlies.apache.org/flink/flink-docs-stable/docs/connectors/table/upsert-kafka/",
                "tags": ["software"],
            }
        ],
        "hooks": modules("hooks"),
        "operators": modules("operators"),
        "sensors": modules("sensors"),
        "triggers": modules("triggers"),
        # the webserver deserializes the operators' links through this list
        "extra-links": ["upsert_kafka_ops.airflow.operators.SparkHistoryLink"],
        # Kafka clusters use the `kafka` connection type of the Kafka provider (installed with the
        # [airflow] extra);
        # this provider adds only the Spark runtime connection.
        "connection-types": [
            {
                "connection-type": "upsert_kafka_spark",
                "hook-class-name": "upsert_kafka_ops.airflow.hooks.SparkRuntimeHook",
                "hook-name": "Upsert Kafka: Spark runtime",
                "ui-field-behaviour": {
                    "hidden-fields": ["schema", "login", "password", "port"],
                    "relabeling": {"host": "Spark master (local[*], spark://h:7077, yarn, k8s://...)"},
                    "placeholders": {
                        "host": "spark://spark-master:7077",
                        "extra": '{"runtime": "spark-submit", "deploy_mode": "client", "conf": {"spark.executor.memory": "2g"}}',
                    },
                },
            }
        ],
    }
