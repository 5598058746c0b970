"""The runtimes as one type, and the one place that picks a runtime from what a surface was given.

:data:`Runtime` is the union of :class:`~upsert_kafka_ops.runtime.models.LocalRuntime`,
:class:`~upsert_kafka_ops.runtime.submit.SparkSubmitRuntime` and
:class:`~upsert_kafka_ops.runtime.models.ConnectRuntime`, told apart by ``kind`` (``local``,
``spark-submit``, ``connect``). :func:`runtime_for` builds one: the Airflow operator and hook, the
Dagster resource and the CLI all call it, so the rule that a master string picks the kind lives
here only::

    runtime_for()                                   # LocalRuntime(master="local[*]")
    runtime_for("sc://spark-connect:15002")         # ConnectRuntime(remote=...)
    runtime_for("yarn", deploy_mode="cluster", result_uri="/shared/r.json")   # SparkSubmitRuntime
    runtime_for("spark://m:7077", kind="local")     # an explicit kind wins
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.runtime.models import ConnectRuntime, LocalRuntime
from upsert_kafka_ops.runtime.submit import SparkSubmitRuntime

RuntimeKind = Literal["local", "spark-submit", "connect"]

#: Where a job runs, told apart by its ``kind`` (a pydantic discriminated union).
Runtime = Annotated[LocalRuntime | SparkSubmitRuntime | ConnectRuntime, Field(discriminator="kind")]

#: each kind's model
RUNTIMES: dict[RuntimeKind, type[LocalRuntime] | type[SparkSubmitRuntime] | type[ConnectRuntime]] = {
    "local": LocalRuntime,
    "spark-submit": SparkSubmitRuntime,
    "connect": ConnectRuntime,
}

#: the field of each kind's model that holds the address a surface calls its master
_ADDRESS: dict[RuntimeKind, str] = {"local": "master", "spark-submit": "master", "connect": "remote"}


def runtime_kind(master: str | None = None, kind: str | None = None) -> RuntimeKind:
    """The kind of runtime for ``master``: ``kind`` when given; else ``local...`` (or no master) runs
    here, ``sc://...`` on that Spark Connect server, any other master through spark-submit.

    :raises SpecError: (field ``runtime``) when ``kind`` is not a runtime, naming the valid ones.
    """
    if kind is not None:
        for known in RUNTIMES:
            if kind == known:
                return known
        valid = [repr(k) for k in RUNTIMES]
        raise SpecError(
            "runtime", f"{kind!r} is not a runtime.", f"use {', '.join(valid[:-1])} or {valid[-1]}."
        )
    if master is None or master.startswith("local"):
        return "local"
    if master.startswith("sc://"):
        return "connect"
    return "spark-submit"


def runtime_for(
    master: str | None = None,
    *,
    kind: str | None = None,
    conf: Mapping[str, str] | None = None,
    applicable: Mapping[str, Any] | None = None,
    **fields: Any,
) -> Runtime:
    """The runtime for ``master``, of the kind :func:`runtime_kind` picks.

    :param master: the Spark master (``local[*]``, ``spark://host:7077``, ``yarn``, ``k8s://...``) or
        the Spark Connect server (``sc://host:port``, the ``remote`` of a connect runtime); default:
        the kind's own default (``local[*]`` for local).
    :param kind: ``local``, ``spark-submit`` or ``connect``: wins over what ``master`` says.
    :param conf: Spark configuration for the run (every kind has ``conf``).
    :param applicable: settings that only some kinds have (spark-submit's ``deploy_mode``, connect's
        ``token``): each goes to the runtime when its kind has that field, and is left out otherwise.
    :param fields: more fields of the kind's model; one it does not have is a :class:`SpecError`.
    :raises SpecError: for an unknown kind (field ``runtime``) or a field the model refuses.
    """
    chosen = runtime_kind(master, kind)
    model = RUNTIMES[chosen]
    data: dict[str, Any] = {k: v for k, v in (applicable or {}).items() if k in model.model_fields}
    data.update(fields)
    if master is not None:
        data[_ADDRESS[chosen]] = master
    if conf is not None:
        data["conf"] = dict(conf)
    data["kind"] = chosen
    return model.model_validate(data)
