"""The local driver's class archive (``upsert-kafka-ops jars fetch`` builds it; make test runs
make jars first): a run's JVM maps it, and a damaged one is removed instead of failing the run."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from upsert_kafka_ops.engine import class_archive
from upsert_kafka_ops.runtime import spark_conf

pytestmark = pytest.mark.integration

SESSION = """
import sys
from upsert_kafka_ops.runtime import build_spark_session, spark_conf
extra = dict(a.split("=", 1) for a in sys.argv[1:])
spark = build_spark_session(extra=extra)
print(spark.range(10).selectExpr("max_by(id, id)").first()[0])
"""


def _session(cwd: Path, *conf: str) -> subprocess.CompletedProcess[str]:
    """A session in a new process, in ``cwd`` (a JVM that crashes writes its report there)."""
    return subprocess.run(
        [sys.executable, "-c", SESSION, *conf], cwd=cwd, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip


def test_a_run_maps_the_class_archive_that_jars_fetch_built(jars_dir: Path, tmp_path: Path) -> None:
    conf = spark_conf(jars_dir=jars_dir)
    archive = class_archive.archive_path(conf)
    assert archive is not None and archive.is_file(), "upsert-kafka-ops jars fetch (make jars) builds it"
    log = tmp_path / "classes.log"
    options = f"{conf['spark.driver.extraJavaOptions']} -Xlog:class+load=info:file={log}"
    assert f"-XX:SharedArchiveFile={archive}" in options
    proc = _session(tmp_path, f"spark.driver.extraJavaOptions={options}")
    assert proc.returncode == 0 and proc.stdout.strip() == "9", proc.stderr[-3000:]
    lines = log.read_text().splitlines()
    mapped = [ln for ln in lines if ln.endswith("source: shared objects file (top)")]
    # the JDK's own archive is the base; "top" is ours: Spark SQL's and Delta's classes among them
    assert len(mapped) > 5000, f"{len(mapped)} of {len(lines)} classes came from {archive}"
    assert any(" io.delta.sql.DeltaSparkSessionExtension " in ln for ln in mapped)


def test_a_damaged_class_archive_is_removed_and_the_run_starts_without_it(
    jars_dir: Path, tmp_path: Path
) -> None:
    built = class_archive.archive_path(spark_conf(jars_dir=jars_dir))
    assert built is not None and built.is_file(), "upsert-kafka-ops jars fetch (make jars) builds it"
    extra = tmp_path / "extra.jar"  # another driver class path: a runtime of its own, its own archive
    with zipfile.ZipFile(extra, "w") as jar:
        jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
    conf = spark_conf(jars_dir=jars_dir, extra={"spark.driver.extraClassPath": str(extra)})
    archive = class_archive.archive_path(conf)
    assert archive is not None and not archive.exists()
    with built.open("rb") as whole:  # a truncated archive (a full disk, a copy cut short) stops the JVM
        archive.write_bytes(whole.read(65536))
    try:
        again = spark_conf(jars_dir=jars_dir, extra={"spark.driver.extraClassPath": str(extra)})
        assert class_archive.mapped(again) == archive
        proc = _session(tmp_path, f"spark.driver.extraClassPath={extra}")
        assert proc.returncode == 0 and proc.stdout.strip() == "9", proc.stderr[-3000:]
        assert f"could not map {archive}" in proc.stderr
        assert list(tmp_path.glob("hs_err_pid*.log")), "the crash report is in the working folder, as said"
        assert not archive.exists()
    finally:
        archive.unlink(missing_ok=True)


def test_a_jvm_that_cannot_start_at_all_keeps_the_class_archive(jars_dir: Path, tmp_path: Path) -> None:
    """A driver that stops before its port for another reason (here two garbage collectors chosen at
    once) fails the run, and the archive, which was not the cause, stays."""
    extra = tmp_path / "extra.jar"  # a runtime of its own, so the suite's archive is never at stake
    with zipfile.ZipFile(extra, "w") as jar:
        jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
    archive = class_archive.archive_path(
        spark_conf(jars_dir=jars_dir, extra={"spark.driver.extraClassPath": str(extra)})
    )
    assert archive is not None and not archive.exists()
    archive.write_bytes(b"an archive the failed start must leave where it is")
    try:
        options = "-XX:+UseParallelGC -XX:+UseSerialGC"
        proc = _session(
            tmp_path, f"spark.driver.extraClassPath={extra}", f"spark.driver.extraJavaOptions={options}"
        )
        assert proc.returncode != 0 and "JAVA_GATEWAY_EXITED" in proc.stderr, proc.stderr[-3000:]
        assert f"could not map {archive}" not in proc.stderr
        assert archive.exists()
    finally:
        archive.unlink(missing_ok=True)
