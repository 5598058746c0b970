"""Building the SparkSession: jars from the local cache, Delta enabled, sized to the machine.

pyspark is imported inside the functions, so importing this module needs no JVM.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from upsert_kafka_ops import jars
from upsert_kafka_ops.errors import ToolchainError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def spark_conf(
    master: str = "local[*]",
    *,
    app_name: str = "upsert-kafka-ops",
    jars_dir: Path | None = None,
    ui: bool = False,
    shuffle_partitions: int | None = None,
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    """The Spark configuration the project runs with, as plain strings (no Spark needed).

    :param master: ``local[*]`` by default; ``spark://host:port``, ``yarn``, ``k8s://...`` work too.
    :param jars_dir: jar cache holding the fetched ``spark`` group.
    :param ui: start the Spark UI (off by default: tests and batch jobs do not need it).
    :param shuffle_partitions: defaults to twice the cores of the machine (local masters), which
        suits the topic sizes a single machine handles; set it for a cluster.
    :param extra: more settings, applied last.
    """
    cores = os.cpu_count() or 2
    local = master.startswith("local")
    # local mode: the driver is the only JVM; give it a quarter of the machine (Spark's default is 1g)
    memory_gb = max(1, (os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")) // 4 // 2**30)
    log4j = resources.files("upsert_kafka_ops") / "resources" / "spark-log4j2.properties"
    java_opts = f"-Dlog4j2.configurationFile={log4j}"
    conf = {
        "spark.master": master,
        "spark.app.name": app_name,
        "spark.jars": ",".join(str(p) for p in jars.jar_paths("spark", jars_dir)),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.shuffle.partitions": str(shuffle_partitions or max(2, 2 * cores)),
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "true" if ui else "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": java_opts,
        "spark.executor.extraJavaOptions": java_opts,
        "spark.driver.host": "127.0.0.1" if local else "",
        "spark.driver.bindAddress": "127.0.0.1" if local else "",
        "spark.driver.memory": f"{min(memory_gb, 8)}g" if local else "",
    }
    conf = {k: v for k, v in conf.items() if v != ""}
    conf.update(extra or {})
    return conf


def check_pyspark_version() -> str:
    """The installed pyspark version; raises when it differs from the jars' Spark version."""
    import pyspark

    version = str(pyspark.__version__)
    if version != jars.SPARK_VERSION:
        raise ToolchainError(
            f"pyspark {version} is installed but the connector jars are built for Spark "
            f"{jars.SPARK_VERSION}; install pyspark=={jars.SPARK_VERSION} (see constraints.txt)."
        )
    return version


def existing_session() -> SparkSession | None:
    """The SparkSession this thread should use when the caller gave none: the thread's active one,
    else the one another thread of this process created (e.g. an Airflow task run in-process next
    to a test's session). The caller did not create it, so it must never stop it."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if SparkContext._active_spark_context is not None:
        return SparkSession.builder.getOrCreate()
    return None


@contextmanager
def session_for(
    job: str, master: str = "local[*]", conf: dict[str, str] | None = None
) -> Iterator[SparkSession]:
    """The session a run of ``job`` uses: :func:`existing_session`, else one built for the run
    (``master``, ``conf``) and stopped when the run ends. A session it did not build is never stopped."""
    spark = existing_session()
    own = None
    if spark is None:
        spark = own = build_spark_session(master, app_name=f"upsert-kafka-ops:{job}", extra=conf)
    try:
        yield spark
    finally:
        if own is not None:
            own.stop()


def build_spark_session(master: str = "local[*]", **kwargs: Any) -> SparkSession:
    """Create (or return the active) SparkSession with :func:`spark_conf`.

    Keyword arguments go to :func:`spark_conf`. Runs need no network: the jars come from the
    local cache (``upsert-kafka-ops jars fetch``).
    """
    check_pyspark_version()
    from pyspark.sql import SparkSession

    if master.startswith("local"):
        # keep the driver on loopback instead of the first network interface
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    builder = SparkSession.builder
    for key, value in spark_conf(master, **kwargs).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session
