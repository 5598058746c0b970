"""The runtimes that run a job in this process (:class:`LocalRuntime`, :class:`ConnectRuntime`) and
what every runtime answers about itself (:class:`RuntimeModel`), so that no caller asks which runtime
it holds. :class:`~upsert_kafka_ops.runtime.submit.SparkSubmitRuntime` is the third; the union of
the three and the one factory that picks among them are in :mod:`upsert_kafka_ops.runtime.factory`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator
from typing_extensions import Self  # typing.Self from Python 3.11

from upsert_kafka_ops.engine.connect import CA_CERT_ENV, TOKEN_ENV
from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.spec.base import SpecModel
from upsert_kafka_ops.spec.connection import SecretRef


class RuntimeModel(SpecModel):
    """The base of the runtimes: what a caller may ask a runtime whatever its kind. A behaviour that
    depends on the kind is a property or method here (overridden by the kind it differs for), not a
    test of the runtime's class in the caller."""

    @property
    def launches_driver(self) -> bool:
        """Whether the run's driver is a process of its own (spark-submit): it then needs a work
        folder for its job file and output, gets the job's secrets through its environment
        (:meth:`with_driver_env`) and can report through Dagster Pipes. False: the run is in this
        process."""
        return False

    @property
    def can_defer(self) -> bool:
        """Whether a run can be submitted and left running, to be followed from outside and finished
        later (:func:`~upsert_kafka_ops.runtime.execute.submit_job`): a cluster that runs the driver,
        YARN in cluster deploy mode."""
        return False

    def with_driver_env(self, env: Mapping[str, str]) -> Self:
        """This runtime with ``env`` added to its driver's environment, where the driver is a process
        of its own (:attr:`launches_driver`); a run in this process has no environment of its own, so
        it is returned unchanged."""
        return self


class LocalRuntime(RuntimeModel):
    """Run in this process with local (or given-master) Spark."""

    kind: Literal["local"] = Field(default="local", description="Runtime kind.")
    master: str = Field(
        default="local[*]", description="Master of a SparkSession built for the run (when none is active)."
    )
    conf: dict[str, str] = Field(
        default_factory=dict, description="Extra Spark configuration for a session built for the run."
    )


class ConnectRuntime(RuntimeModel):
    """Run in this process against a Spark Connect server: its driver is already warm, so a small
    run costs its queries and not a JVM's start. The server needs the project's jars and Delta
    (``upsert_kafka_ops.local.LocalSparkConnect`` starts one; the Helm chart deploys one); this
    process needs the ``connect`` extra (the Spark Connect client).

    The token and the CA bundle are secret references, resolved when the session opens; without
    them, ``SPARK_CONNECT_AUTHENTICATE_TOKEN`` (pyspark's variable) and ``UKO_SPARK_CONNECT_CA_CERT``
    (a PEM file's path) are read, which is what the chart's orchestrator overlays set. The token
    goes over TLS, or to a loopback address only (:mod:`upsert_kafka_ops.engine.connect`)."""

    kind: Literal["connect"] = Field(default="connect", description="Runtime kind.")
    remote: str = Field(
        description="The server: sc://host:port, optionally with Spark Connect parameters "
        "(sc://host:port/;use_ssl=true;user_id=etl); the token goes in 'token', never here.",
        pattern=r"^sc://[^/;]+",
    )
    token: SecretRef | None = Field(
        default=None,
        description="The server's bearer token, as a reference ({env: VAR} or {file: PATH}); "
        f"default: the {TOKEN_ENV} variable when set.",
    )
    ca_cert: SecretRef | None = Field(
        default=None,
        description="The CA bundle (PEM) that verifies the server's TLS certificate, as a reference "
        f"({{file: PATH}} or {{env: VAR}}); turns TLS on. Default, with use_ssl=true: the file {CA_CERT_ENV} "
        "names when set, else the system's CAs.",
    )
    conf: dict[str, str] = Field(
        default_factory=dict, description="Spark SQL settings for the run's session (runtime settings only)."
    )

    @field_validator("remote")
    @classmethod
    def _no_token_in_url(cls, value: str) -> str:
        if re.search(r";\s*token\s*=", value, re.IGNORECASE):
            raise SpecError(
                "remote",
                "holds a token; a secret never goes into a URL.",
                "give it as token: {env: VAR} (or {file: PATH}).",
            )
        return value

    def resolved_token(self) -> str | None:
        """The token's value: ``token``, else ``SPARK_CONNECT_AUTHENTICATE_TOKEN``, else None."""
        if self.token is not None:
            return self.token.resolve()
        return os.environ.get(TOKEN_ENV) or None

    def resolved_ca_cert(self) -> bytes | None:
        """The CA bundle's PEM: ``ca_cert``, else (with ``use_ssl=true`` in ``remote``: the variable
        verifies, it does not turn TLS on) the file ``UKO_SPARK_CONNECT_CA_CERT`` names."""
        if self.ca_cert is not None:
            return self.ca_cert.resolve().encode()
        path = os.environ.get(CA_CERT_ENV)
        if not path or not re.search(r";\s*use_ssl\s*=\s*true", self.remote, re.IGNORECASE):
            return None
        try:
            return Path(path).read_bytes()
        except OSError as exc:
            raise SpecError(
                CA_CERT_ENV,
                f"names {path}, which cannot be read ({exc.strerror}).",
                "mount the CA bundle there, or unset the variable.",
            ) from None
