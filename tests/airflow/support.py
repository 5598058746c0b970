"""Helpers for the Airflow tests: what dag.test() left in the metadata DB (the demo's oracles are
in tests/demo_support.py)."""

from __future__ import annotations

from typing import Any


def xcoms(dag_id: str, run_id: str, key: str = "return_value") -> dict[str, Any]:
    """task_id -> its XCom ``key`` (the return value by default), read from the metadata DB."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.query(XComModel).filter_by(dag_id=dag_id, run_id=run_id, key=key).all()
        return {r.task_id: XComModel.deserialize_value(r) for r in rows}


def rendered_fields(dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
    """The task's fields as the task view's Rendered Templates show them (the metadata DB's RTIF)."""
    from airflow.models.renderedtifields import RenderedTaskInstanceFields as RTIF
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.query(RTIF).filter_by(dag_id=dag_id, run_id=run_id, task_id=task_id).one()
        return dict(row.rendered_fields)


def stored_text(dag_id: str, run_id: str) -> str:
    """Every XCom (any key) and every task's rendered template fields of a run, as one text: what the
    UI and the API show of it beside the logs."""
    import json

    from airflow.models.renderedtifields import RenderedTaskInstanceFields as RTIF
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        found = [
            XComModel.deserialize_value(r)
            for r in session.query(XComModel).filter_by(dag_id=dag_id, run_id=run_id)
        ]
        found += [r.rendered_fields for r in session.query(RTIF).filter_by(dag_id=dag_id, run_id=run_id)]
    return json.dumps(found, default=str)


def task_states(dagrun: Any) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in dagrun.get_task_instances()}
