"""The order of a pipeline's jobs: a job runs after the jobs that write what it reads (a topic on the
same cluster, or a table). Used by the Airflow DAG factory and the Dagster asset graph."""

from __future__ import annotations

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.pipeline import Pipeline


def upstream_jobs(pipeline: Pipeline) -> dict[str, list[str]]:
    """For each job (in file order), the jobs whose outputs it reads.

    :raises SpecError: when the jobs read each other in a cycle.
    """
    from upsert_kafka_ops.jobs.datasets import job_datasets

    io = {j.name: job_datasets(pipeline, j.name) for j in pipeline.jobs}
    writers: dict[tuple[str, str], list[str]] = {}
    for name, (_, outputs) in io.items():
        for d in outputs:
            writers.setdefault((d.namespace, d.name), []).append(name)
    graph = {
        name: sorted({w for d in inputs for w in writers.get((d.namespace, d.name), []) if w != name})
        for name, (inputs, _) in io.items()
    }
    _check_acyclic(graph)
    return graph


def _check_acyclic(graph: dict[str, list[str]]) -> None:
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        if state.get(node) == 2:
            return
        if state.get(node) == 1:
            cycle = [*path[path.index(node) :], node]
            raise SpecError(
                "jobs",
                f"the jobs read each other in a cycle: {' -> '.join(cycle)}.",
                "split the pipeline, or let one job read a different topic.",
            )
        state[node] = 1
        for up in graph[node]:
            visit(up, [*path, node])
        state[node] = 2

    for node in graph:
        visit(node, [])
