"""What behaves differently on the supported Spark lines (:mod:`upsert_kafka_ops.spark_lines` says
which releases they are), in one place: each function gives the rest of the package one behaviour on
Spark 3.5, 4.0 and 4.1, so no other module asks which Spark runs. pyspark is imported inside the
functions, as everywhere below the engine.

- **ANSI mode** is on by default from Spark 4.0 and off on 3.5. The engine's expressions do not
  depend on it: a cast that may fail is :func:`try_cast` (``try_cast`` from 4.0; on 3.5, where a
  Column has no ``try_cast``, a plain cast under ANSI off, which the sessions this package builds on
  3.5 set: :func:`session_conf`).
- **Functions missing on 3.5**: ``make_valid_utf8`` (:func:`valid_utf8`), ``timestamp_diff`` and
  ``timestamp_add`` (:func:`ntz_millis`, :func:`ntz_from_millis`: the same values from interval
  arithmetic).
- **Spark Connect** with a token needs Spark 4.0 (``spark.connect.authenticate.token``; 3.5's server
  has no authentication and its client no ``DefaultChannelBuilder``): :func:`require_connect`.
- **An Iceberg commit's snapshot properties**: Iceberg's Spark 4 runtimes read them from the session
  (``spark.sql.iceberg.snapshot-property.*``); its 3.5 runtime only from Java's
  ``CommitMetadata.withCommitProperties`` around the write: :func:`iceberg_commit`.
- **A Kafka stream restarted on an uncommitted batch** fails on Spark 4.1.0 and 4.1.1 after the batch
  is written and committed, while reporting its progress (SPARK-55271: the Kafka source's metrics
  before it knew the latest offsets): :func:`is_replayed_batch_progress_bug` recognises it, and the
  streaming run starts the query once more.
- **A streaming query's progress**: 3.5 gives dicts parsed from the JVM's JSON; 4.0 and 4.1 give
  ``StreamingQueryProgress`` objects, and 4.1's keep a source's offsets as the Python ``str()`` of a
  dict, which is not JSON: :func:`progress_documents` reads the progress's own JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column

#: midnight of 1970-01-01 as a TIMESTAMP_NTZ literal
EPOCH_NTZ = "TIMESTAMP_NTZ'1970-01-01 00:00:00'"


def _spark4() -> bool:
    import pyspark

    return int(str(pyspark.__version__).split(".", 1)[0]) >= 4


def require_connect(field: str) -> None:
    """A :class:`SpecError` on ``field`` when the installed Spark cannot run this package's Spark Connect
    runtime (a server that requires a token, a client that sends one): Spark 3.5."""
    if not _spark4():
        import pyspark

        from upsert_kafka_ops.errors import SpecError

        raise SpecError(
            field,
            f"the Spark Connect runtime needs Spark 4.0 or later (its token authentication); this is "
            f"Spark {pyspark.__version__}.",
            "run the job in the local or the spark-submit runtime on Spark 3.5, or move to Spark 4.1.",
        )


def session_conf(spark_version: str) -> dict[str, str]:
    """Settings a session this package builds needs on ``spark_version``: on 3.5, ANSI mode off
    stated explicitly (the casts of :func:`try_cast` rely on it there)."""
    return {"spark.sql.ansi.enabled": "false"} if spark_version.startswith("3.") else {}


def try_cast(c: Column, to: Any) -> Column:
    """``c`` cast to ``to``, NULL where it does not convert (never an error, ANSI mode or not)."""
    return c.try_cast(to) if _spark4() else c.cast(to)


def valid_utf8(data: Column) -> Column:
    """Bytes as text, each malformed UTF-8 sequence replaced by U+FFFD."""
    from pyspark.sql import functions as F

    if _spark4():
        return F.make_valid_utf8(data.cast("string"))
    return F.decode(data, "UTF-8")  # 3.5 decodes with Java's replacing decoder


def ntz_millis(c: Column) -> Column:
    """A TIMESTAMP_NTZ as milliseconds since 1970-01-01 00:00 (truncated toward zero), whatever the
    session's time zone."""
    from pyspark.sql import functions as F

    if _spark4():
        return F.timestamp_diff("MILLISECOND", F.expr(EPOCH_NTZ), c)
    span = c - F.expr(EPOCH_NTZ)  # a day-time interval
    whole = (
        F.extract(F.lit("DAY"), span).cast("long") * 86_400_000
        + F.extract(F.lit("HOUR"), span).cast("long") * 3_600_000
        + F.extract(F.lit("MINUTE"), span).cast("long") * 60_000
    )
    return whole + (F.extract(F.lit("SECOND"), span) * 1000).cast("long")


def ntz_from_millis(ms: Column) -> Column:
    """Milliseconds since 1970-01-01 00:00 as a TIMESTAMP_NTZ, whatever the session's time zone."""
    from pyspark.sql import functions as F

    if _spark4():
        return F.timestamp_add("MILLISECOND", ms, F.expr(EPOCH_NTZ))
    days = F.floor(ms / 86_400_000)
    seconds = ((ms - days * 86_400_000) / 1000).cast("decimal(18,6)")
    return F.expr(EPOCH_NTZ) + F.make_dt_interval(days.cast("int"), F.lit(0), F.lit(0), seconds)


def iceberg_session_properties() -> bool:
    """Whether Iceberg's runtime for this Spark reads a commit's snapshot properties from the session's
    ``spark.sql.iceberg.snapshot-property.*`` confs (Spark 4; on 3.5 use :func:`iceberg_commit`)."""
    return _spark4()


def iceberg_commit(spark: Any, properties: dict[str, str], write: Callable[[], None]) -> None:
    """Run ``write`` (one Iceberg commit) with ``properties`` in its snapshot summary through
    ``CommitMetadata.withCommitProperties``: the JVM calls ``write`` back on the thread that holds
    them (pyspark's pinned threads), as Iceberg's 3.5 runtime needs. A classic session only."""
    from pyspark.java_gateway import ensure_callback_server_started

    sc = spark.sparkContext
    ensure_callback_server_started(sc._gateway)  # type: ignore[no-untyped-call]
    failures: list[BaseException] = []

    class _Write:
        def call(self) -> None:
            try:
                write()
            except BaseException as exc:  # re-raised below with its Python type and traceback
                failures.append(exc)
                raise

        class Java:
            implements = ["java.util.concurrent.Callable"]  # noqa: RUF012 (py4j reads this list)

    jvm = sc._jvm
    props = jvm.java.util.HashMap()
    for key, value in properties.items():
        props.put(key, value)
    try:
        jvm.org.apache.iceberg.spark.CommitMetadata.withCommitProperties(
            props, _Write(), jvm.java.lang.RuntimeException().getClass()
        )
    except Exception:
        if failures:
            raise failures[0] from None
        raise


def is_replayed_batch_progress_bug(exc: BaseException) -> bool:
    """Whether ``exc`` is SPARK-55271 (Spark 4.1.0-4.1.1): a query that replayed its uncommitted batch
    after a restart, wrote and committed it, then failed reporting the Kafka source's metrics."""
    text = str(exc)
    return "scala.Option.get()" in text and "IterableOps.map" in text


def progress_documents(progress: Iterable[Any]) -> list[dict[str, Any]]:
    """A streaming query's ``recentProgress`` as the JSON documents Spark reports (a source's
    ``startOffset`` and ``endOffset`` as JSON values, never a Python ``str()`` of one)."""
    out: list[dict[str, Any]] = []
    for p in progress:
        if not p:
            continue
        text = getattr(p, "json", None)  # 4.x: the progress's JSON; 3.5: a dict already parsed from it
        out.append(json.loads(text) if isinstance(text, str) else dict(p))
    return out
