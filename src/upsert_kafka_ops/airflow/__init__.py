"""Airflow 3 provider: a hook on Airflow's ``kafka`` connections, operators that run pipeline jobs,
deferrable sensors on new data and consumer lag, and a DAG factory over pipeline files.

Registered through the ``apache_airflow_provider`` entry point
(:func:`upsert_kafka_ops.airflow.get_provider_info.get_provider_info`). This package is the only
one that imports Airflow; it translates Airflow's context and connections and calls the core
(:mod:`upsert_kafka_ops.runtime`, :mod:`upsert_kafka_ops.jobs.gates`).
"""
