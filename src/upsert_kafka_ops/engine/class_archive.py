"""A class data sharing (CDS) archive for the local Spark driver JVM.

A run in a new process (what an orchestrated task is) starts a JVM that loads and verifies some
twenty thousand classes of Spark SQL, Delta, the Kafka source and the code generator before its first
row. A dynamic CDS archive (JDK 13 and later) holds those classes already parsed and verified; the JVM
maps it at start. Measured on 2 cores: session start, first job and a Delta table load 6.4 s without,
4.0 s with.

The archive fits one runtime: the ``java`` binary, pyspark's jars (the driver's class path) and the
jars a session adds; its file name is a digest of those. :func:`build` writes it (``upsert-kafka-ops
jars fetch`` calls it, so ``make jars``, ``make demo`` and ``make test`` do) by running a short
training session (:mod:`~upsert_kafka_ops.engine.class_archive_training`) that exits with
``-XX:ArchiveClassesAtExit``; :func:`java_options` gives a local
driver ``-XX:SharedArchiveFile`` when the archive for its runtime is there. ``-Xshare:auto`` makes a
JVM that cannot use it (another JDK build, a changed class path) start without it; a damaged file
stops the JVM, so :mod:`~upsert_kafka_ops.engine.session` starts a JVM that stopped once more without
it (:func:`unmapped`), and removes it only when that one starts (a JVM that stops for another reason,
an option it refuses, keeps it).
``$UPSERT_KAFKA_OPS_CLASS_ARCHIVE=off`` turns it off.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from upsert_kafka_ops.errors import ToolchainError

ENV_SWITCH = "UPSERT_KAFKA_OPS_CLASS_ARCHIVE"


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else None
    if found is None or not found.is_file():
        which = shutil.which("java")
        found = Path(which) if which else None
    return found.resolve() if found else None


def _stamp(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return f"{path}:missing"
    return f"{path}:{st.st_size}:{int(st.st_mtime)}"


def archive_path(conf: dict[str, str]) -> Path | None:
    """Where the archive of the runtime ``conf`` describes lives (None without a ``java``): a digest
    of the ``java`` binary, pyspark's jars folder, ``spark.jars`` and ``spark.driver.extraClassPath``,
    in a folder beside the jar cache (``class-archives``: readable wherever the jars are, e.g. in
    the project's image)."""
    import importlib.util

    from upsert_kafka_ops import jars

    java = _java()
    spec = importlib.util.find_spec("pyspark")
    if java is None or spec is None or spec.origin is None:
        return None
    spark_jars = Path(spec.origin).parent / "jars"
    parts = [_stamp(java), _stamp(spark_jars)]
    parts += [_stamp(Path(p)) for p in conf.get("spark.jars", "").split(",") if p]
    parts += [_stamp(Path(p)) for p in conf.get("spark.driver.extraClassPath", "").split(":") if p]
    digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    return jars.default_jars_dir().parent / "class-archives" / f"spark-driver-{digest}.jsa"


def enabled() -> bool:
    value = os.environ.get(ENV_SWITCH, "on").lower()
    if value not in ("on", "off"):
        raise ToolchainError(f"${ENV_SWITCH} is {value!r}: set 'on' (the default) or 'off'.")
    return value == "on"


def java_options(conf: dict[str, str]) -> str:
    """The driver JVM options that map the archive of ``conf``'s runtime, or '' when there is none
    (not built, turned off, or a master that is not local: the driver runs elsewhere)."""
    if not conf.get("spark.master", "").startswith("local") or not enabled():
        return ""
    path = archive_path(conf)
    if path is None or not path.is_file():
        return ""
    return f"-XX:SharedArchiveFile={path} -Xshare:auto"


def mapped(conf: dict[str, str]) -> Path | None:
    """The archive ``conf``'s driver options map, if any."""
    for option in conf.get("spark.driver.extraJavaOptions", "").split():
        if option.startswith("-XX:SharedArchiveFile="):
            return Path(option.split("=", 1)[1])
    return None


def unmapped(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with its driver options mapping no archive."""
    options = conf.get("spark.driver.extraJavaOptions", "").split()
    kept = [o for o in options if not o.startswith("-XX:SharedArchiveFile=") and o != "-Xshare:auto"]
    return {**conf, "spark.driver.extraJavaOptions": " ".join(kept)}


def build(conf: dict[str, str], log: bool = True) -> Path | None:
    """Write the archive of ``conf``'s runtime unless it is there (a training session in a child
    process; about 30 s on 2 cores). Returns its path, or None when turned off or without a ``java``."""
    path = archive_path(conf)
    if path is None or not enabled():
        return None
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    if log:
        print(f"class archive: training the Spark driver's class archive {path.name}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="uko-cds-", dir=path.parent) as tmp:
        partial = Path(tmp) / path.name
        proc = subprocess.run(
            [sys.executable, "-m", "upsert_kafka_ops.engine.class_archive_training", str(partial)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if proc.returncode != 0 or not partial.is_file():
            raise ToolchainError(
                f"the Spark driver's class archive could not be built (exit {proc.returncode}):\n"
                f"{proc.stderr[-3000:]}\nSet ${ENV_SWITCH}=off to run without it."
            )
        os.replace(partial, path)  # whole or not at all: a JVM that maps a partial archive stops
    prune(path)
    return path


#: archives of other runtimes (other checkouts, JDKs, jar sets) kept beside a new one
KEEP_OTHERS = 3


def prune(kept: Path) -> list[Path]:
    """Remove the archives beside ``kept`` but the KEEP_OTHERS newest (each is about 180 MB; a
    runtime whose archive went trains it again at its next ``jars fetch``). Returns those removed."""
    others = sorted(
        (p for p in kept.parent.glob("spark-driver-*.jsa") if p != kept),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for old in others[KEEP_OTHERS:]:
        old.unlink(missing_ok=True)
    return others[KEEP_OTHERS:]
