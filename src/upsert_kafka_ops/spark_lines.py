"""The Spark lines this package runs on, and what each needs: one table, read by the jar fetcher, the
session's start-up check and the runtimes.

A *line* is Spark's ``major.minor`` (``3.5``, ``4.1``). Within a line the connector jars follow the
patch release that runs (Spark's own ``spark-sql-kafka-0-10`` and ``spark-avro`` are published per
patch); Delta and Iceberg publish one build per line, and Hadoop's release is what the line's pyspark
ships in ``pyspark/jars``. A vendor's version string (``3.5.6-amzn-1``, ``4.1.0-databricks``) is
read by its leading ``x.y.z``.

Nothing here imports pyspark: the installed release is read from the package metadata and its folder
(:func:`spark_home`) found by the import system, so the jar fetcher and the CLI work before any JVM
starts.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from upsert_kafka_ops.errors import ToolchainError


@dataclass(frozen=True)
class Release:
    """A Maven release: ``artifact`` at ``version`` (its group is the caller's)."""

    artifact: str
    version: str


@dataclass(frozen=True)
class SparkLine:
    """One supported Spark line and the releases built for it."""

    #: ``major.minor``
    line: str
    #: the oldest patch release supported (older ones lack fixes a connector below needs)
    oldest: tuple[int, int, int]
    #: Scala's binary version of the line's jars (and of every connector's suffix)
    scala: str
    #: Hadoop's release in the line's ``pyspark/jars`` (``hadoop-client-api``): hadoop-aws (S3A) and
    #: the local YARN cluster are taken at it
    hadoop: str
    #: the AWS SDK v2 release that Hadoop release's hadoop-aws was built with (its S3 modules only)
    aws_sdk: str
    #: ``io.delta``'s Spark jar for the line (matching PyPI's ``delta-spark`` of the same version)
    delta: Release
    #: an older Delta for the line's first patch releases, which the newest Delta does not run on:
    #: ``(newest patch it serves, release)``
    delta_early: tuple[tuple[int, int, int], Release] | None
    #: ``org.apache.iceberg``'s Spark runtime for the line
    iceberg: Release | None
    #: Python releases the line's pyspark supports, oldest and newest (inclusive)
    python: tuple[str, str]

    @property
    def name(self) -> str:
        return f"Spark {self.line}"


#: Each supported line, oldest first. The versions are the newest releases verified together for each
#: line (constraints files ``constraints/spark-<line>.txt``; the default line's is ``constraints.txt``).
LINES: dict[str, SparkLine] = {
    line.line: line
    for line in (
        SparkLine(
            line="3.5",
            oldest=(3, 5, 3),  # delta-spark 3.3 requires pyspark >= 3.5.3
            scala="2.12",
            hadoop="3.3.4",
            aws_sdk="",  # hadoop-aws 3.3 is built on the AWS SDK v1 bundle
            delta=Release("delta-spark_2.12", "3.3.2"),
            delta_early=None,
            iceberg=Release("iceberg-spark-runtime-3.5_2.12", "1.12.0"),
            python=("3.10", "3.11"),
        ),
        SparkLine(
            line="4.0",
            # 4.0.0 is what Databricks 17.3 LTS runs; Delta 4.1+ needs 4.0.1, so 4.0.0 keeps Delta 4.0
            oldest=(4, 0, 0),
            scala="2.13",
            hadoop="3.4.1",
            aws_sdk="2.24.5",
            delta=Release("delta-spark_4.0_2.13", "4.4.0"),
            delta_early=((4, 0, 0), Release("delta-spark_2.13", "4.0.0")),
            iceberg=Release("iceberg-spark-runtime-4.0_2.13", "1.11.0"),  # the newest built for 4.0
            python=("3.10", "3.13"),
        ),
        SparkLine(
            line="4.1",
            oldest=(4, 1, 0),
            scala="2.13",
            hadoop="3.4.2",
            aws_sdk="2.29.52",
            delta=Release("delta-spark_4.1_2.13", "4.4.0"),  # 4.1-4.2 fail on Spark 4.1.2+ (delta#6867)
            delta_early=None,
            iceberg=Release("iceberg-spark-runtime-4.1_2.13", "1.12.0"),
            python=("3.10", "3.13"),
        ),
        SparkLine(
            line="4.2",
            oldest=(4, 2, 0),
            scala="2.13",
            hadoop="3.4.2",
            aws_sdk="2.29.52",
            delta=Release("delta-spark_4.2_2.13", "4.4.0"),  # delta-spark 4.4 declares Spark <= 4.2.0
            delta_early=None,
            iceberg=None,  # no Iceberg runtime is published for 4.2 (the 4.1 jar fails on it)
            python=("3.10", "3.13"),
        ),
    )
}

#: The line the development environment, ``make demo`` and ``make test`` run (``constraints.txt``).
DEFAULT_LINE = "4.1"

#: The environment variable naming the Spark release of the cluster's image (the Helm chart sets it
#: from ``image.sparkVersion`` in the pods it configures): the spark-submit runtime's default
#: ``spark_version``, and what the chart's Spark Connect server checks its own pyspark against.
DECLARED_VERSION_ENV = "UKO_SPARK_VERSION"

_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")
_PREVIEW = re.compile(r"^\s*\d+\.\d+\.\d+-(preview|rc)", re.IGNORECASE)


def parse(version: str) -> tuple[int, int, int]:
    """``(major, minor, patch)`` of a Spark version string, vendor suffixes tolerated
    (``3.5.6-amzn-1`` -> ``(3, 5, 6)``); a :class:`ToolchainError` for anything else."""
    m = _VERSION.match(version.strip())
    if m is None:
        raise ToolchainError(
            f"Spark version {version!r} is not of the form major.minor.patch (as `spark-submit --version` "
            "prints it, e.g. 4.1.1 or 3.5.6-amzn-1). Fix: give the cluster's Spark version."
        )
    major, minor, patch = (int(g) for g in m.groups())
    return major, minor, patch


def release(version: str) -> str:
    """The upstream release a (possibly vendor) version string is built from: ``3.5.6-amzn-1`` ->
    ``3.5.6``, the version of Spark's own connector jars that match it."""
    return ".".join(map(str, parse(version)))


def supported() -> str:
    """The supported lines, for messages: ``3.5 (3.5.3+), 4.0 (4.0.2+), ..., 4.2 (4.2.0+, no Iceberg)``."""

    def one(ln: SparkLine) -> str:
        notes = [f"{'.'.join(map(str, ln.oldest))}+"]
        notes += ["no Iceberg"] if ln.iceberg is None else []
        notes += ["no s3a:// tables"] if not ln.aws_sdk else []
        return f"{ln.line} ({', '.join(notes)})"

    return ", ".join(one(ln) for ln in LINES.values())


def line_of(version: str) -> SparkLine:
    """The supported line of a Spark version; a :class:`ToolchainError` naming the supported lines
    when it has none, or when the release is older than its line's oldest supported patch."""
    v = parse(version)
    if _PREVIEW.search(version):
        raise ToolchainError(
            f"Spark {version} is a preview release; no Delta or Iceberg build targets it. "
            f"Fix: run a released Spark of a supported line: {supported()}."
        )
    line = LINES.get(f"{v[0]}.{v[1]}")
    if line is None:
        newer = v > max(ln.oldest for ln in LINES.values())
        why = (
            "no Delta or Iceberg release for it is published yet"
            if newer
            else "its line is older than the oldest this package supports"
        )
        raise ToolchainError(
            f"Spark {version} is not supported ({why}). upsert-kafka-ops runs on Spark {supported()}. "
            "Fix: run on one of those lines (the pip constraints of each are in the project's "
            "constraints/ folder)."
        )
    if v < line.oldest:
        oldest = ".".join(map(str, line.oldest))
        raise ToolchainError(
            f"Spark {version} is older than {oldest}, the oldest {line.name} release supported "
            f"(the Delta and Iceberg builds for {line.line} need it). Fix: upgrade to {oldest} or later."
        )
    return line


@functools.cache
def installed_version() -> str:
    """The installed pyspark's version (from its package metadata, read once; pyspark is not imported)."""
    for dist in ("pyspark", "pyspark-client"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    raise ToolchainError("pyspark is not installed. Fix: pip install upsert-kafka-ops (it requires pyspark).")


def spark_home() -> Path:
    """The installed pyspark's folder, which is a complete ``SPARK_HOME`` (``bin``, ``jars``): the
    spark-submit a run starts by default and the local Spark services' programs (found, not imported)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ToolchainError("pyspark is not installed; install the package (pip install -e .).")
    home = Path(spec.origin).parent
    if not (home / "bin" / "spark-class").is_file():
        raise ToolchainError(
            f"{home} has no bin/spark-class: this pyspark is not the full distribution "
            "(pyspark-client?). Install pyspark from PyPI (see constraints.txt)."
        )
    return home


def line_for(spark_version: str | None) -> SparkLine:
    """The line of ``spark_version``, or of the installed pyspark when it is None."""
    return line_of(spark_version or installed_version())


def same_line(driver: str, cluster: str) -> None:
    """Raise a :class:`ToolchainError` naming both when a driver's and a cluster's Spark differ in line
    (a job's plan and its jars are built for one line; patch releases of a line work together)."""
    if parse(driver)[:2] != parse(cluster)[:2]:
        raise ToolchainError(
            f"The driver runs Spark {driver} but the cluster runs Spark {cluster}: their lines differ "
            f"({'.'.join(map(str, parse(driver)[:2]))} against {'.'.join(map(str, parse(cluster)[:2]))}). "
            f"Fix: install the cluster's line where the driver runs (pip install 'pyspark=={release(cluster)}' "
            "with that line's constraints), or point the runtime at a cluster of the driver's line."
        )


def delta_for(version: str) -> Release:
    """Delta's Spark jar for a Spark release (the PyPI ``delta-spark`` of the same version goes with it)."""
    line, v = line_of(version), parse(version)
    if line.delta_early is not None and v <= line.delta_early[0]:
        return line.delta_early[1]
    return line.delta


def require_iceberg(line: SparkLine) -> Release:
    """The line's Iceberg runtime; a :class:`ToolchainError` naming the line when none is published."""
    if line.iceberg is None:
        with_iceberg = ", ".join(ln.line for ln in LINES.values() if ln.iceberg is not None)
        raise ToolchainError(
            f"No Apache Iceberg Spark runtime is published for {line.name}, so its Iceberg targets "
            f"cannot run. Fix: run Iceberg jobs on Spark {with_iceberg}, or use a Delta or PostgreSQL target."
        )
    return line.iceberg


_BANNER_VERSION = re.compile(r"\bversion\s+(\d+\.\d+\.\d+\S*)")


def cluster_version(spark_submit: str, *, timeout_s: float = 120.0) -> str:
    """The Spark version a cluster's ``spark-submit`` runs, from its ``--version`` banner (vendor
    strings kept as printed); a :class:`ToolchainError` when it cannot be read."""
    import subprocess

    try:
        done = subprocess.run(
            [spark_submit, "--version"], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolchainError(
            f"Could not run `{spark_submit} --version` to read the cluster's Spark version: {exc}. "
            "Fix: point spark_submit at the cluster's spark-submit, or give spark_version."
        ) from exc
    m = _BANNER_VERSION.search(done.stdout + "\n" + done.stderr)
    if m is None:
        raise ToolchainError(
            f"`{spark_submit} --version` printed no Spark version (exit {done.returncode}). "
            "Fix: point spark_submit at the cluster's spark-submit, or give spark_version."
        )
    return m.group(1)


def declared_version() -> str | None:
    """The Spark release :data:`DECLARED_VERSION_ENV` names, or None when it is unset or empty."""
    return os.environ.get(DECLARED_VERSION_ENV, "").strip() or None


def check_declared() -> None:
    """Raise a :class:`ToolchainError` naming both when :data:`DECLARED_VERSION_ENV` names a Spark line
    other than the installed pyspark's (an image built on one line, deployed as another)."""
    declared = declared_version()
    if declared is None:
        return
    installed = installed_version()
    line_of(declared)
    if parse(declared)[:2] != parse(installed)[:2]:
        raise ToolchainError(
            f"{DECLARED_VERSION_ENV} (the chart's image.sparkVersion) names Spark {declared}, but this "
            f"image's pyspark is {installed}. Fix: set image.sparkVersion to {installed}, or build the "
            "image on that line (docker build --build-arg CONSTRAINTS=constraints/<line's file>)."
        )
