"""Helpers for the Airflow tests: what dag.test() left in the metadata DB (the demo's oracles are
in tests/demo_support.py)."""

from __future__ import annotations

from typing import Any


def xcoms(dag_id: str, run_id: str) -> dict[str, Any]:
    """task_id -> its return value, read from the metadata DB."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.query(XComModel).filter_by(dag_id=dag_id, run_id=run_id, key="return_value").all()
        return {r.task_id: XComModel.deserialize_value(r) for r in rows}


def task_states(dagrun: Any) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in dagrun.get_task_instances()}
