"""The supported Spark lines: version strings as platforms print them, and the refusals."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from upsert_kafka_ops import spark_lines
from upsert_kafka_ops.errors import ToolchainError

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("version", "line", "release"),
    [
        ("3.5.6-amzn-1", "3.5", "3.5.6"),  # EMR
        ("4.1.0-databricks", "4.1", "4.1.0"),
        (" 4.0.2 ", "4.0", "4.0.2"),
        ("4.2.0", "4.2", "4.2.0"),
    ],
)
def test_vendor_version_strings_are_read_by_their_release(version: str, line: str, release: str) -> None:
    assert spark_lines.line_of(version).line == line
    assert spark_lines.release(version) == release


@pytest.mark.parametrize(
    ("version", "match"),
    [
        (
            "3.4.4",
            r"Spark 3\.4\.4 is not supported \(its line is older.*3\.5 \(3\.5\.3\+.*\), 4\.0 \(4\.0\.0\+\).*4\.2 \(4\.2\.0\+, no Iceberg\)",
        ),
        ("4.3.0", r"no Delta or Iceberg release for it is published yet"),
        ("3.5.2", r"older than 3\.5\.3, the oldest Spark 3\.5 release supported.*upgrade to 3\.5\.3"),
        ("4.1.0-preview3", r"preview"),
        ("four", r"not of the form major\.minor\.patch"),
    ],
)
def test_unsupported_releases_are_refused_with_the_supported_lines(version: str, match: str) -> None:
    with pytest.raises(ToolchainError, match=match):
        spark_lines.line_of(version)


def test_a_driver_and_a_cluster_of_different_lines_are_named_both() -> None:
    spark_lines.same_line("4.1.1", "4.1.3-amzn-0")  # patch releases of a line work together
    with pytest.raises(
        ToolchainError, match=r"driver runs Spark 4\.1\.1 but the cluster runs Spark 3\.5\.6-amzn-1"
    ):
        spark_lines.same_line("4.1.1", "3.5.6-amzn-1")


def test_the_cluster_version_is_read_from_spark_submits_banner(tmp_path: Path) -> None:
    # the banner as Spark's own spark-submit --version prints it, on stderr
    fake = tmp_path / "spark-submit"
    fake.write_text(
        "#!/bin/sh\ncat >&2 <<'X'\nWelcome to\n      ____              __\n"
        "   /___/ .__/\\_,_/_/ /_/\\_\\   version 3.5.6-amzn-1\n      /_/\n\nUsing Scala version 2.12.18\nX\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    assert spark_lines.cluster_version(str(fake)) == "3.5.6-amzn-1"
    mute = tmp_path / "mute"
    mute.write_text("#!/bin/sh\necho hello\n")
    mute.chmod(mute.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(ToolchainError, match="printed no Spark version"):
        spark_lines.cluster_version(str(mute))
    with pytest.raises(ToolchainError, match="Could not run"):
        spark_lines.cluster_version(os.fspath(tmp_path / "absent"))


def test_the_installed_pyspark_is_supported_and_the_default_set_is_on_the_default_line() -> None:
    spark_lines.line_of(spark_lines.installed_version())  # a lane's pyspark too
    pins = dict(
        line.split("==") for line in (ROOT / "constraints.txt").read_text().splitlines() if "==" in line
    )
    assert spark_lines.line_of(pins["pyspark"]).line == spark_lines.DEFAULT_LINE
    assert spark_lines.delta_for(pins["pyspark"]).version == pins["delta-spark"]
    # the chart's image is built from constraints.txt by default, and says so (UKO_SPARK_VERSION)
    from upsert_kafka_ops import __version__
    from upsert_kafka_ops.deploy.helm_values import Image

    assert (Image().spark_version, Image().tag) == (pins["pyspark"], __version__)


def test_a_lines_first_patch_releases_keep_the_delta_that_runs_on_them() -> None:
    # Delta 4.1+ needs Spark 4.0.1: Databricks 17.3 LTS's 4.0.0 keeps Delta 4.0
    assert spark_lines.delta_for("4.0.0") == spark_lines.Release("delta-spark_2.13", "4.0.0")
    assert spark_lines.delta_for("4.0.2") == spark_lines.Release("delta-spark_4.0_2.13", "4.4.0")
    assert spark_lines.delta_for("4.1.1") == spark_lines.LINES["4.1"].delta


def test_a_spark_submit_runtime_refuses_a_cluster_of_another_line_before_submitting() -> None:
    from upsert_kafka_ops.runtime import SparkSubmitRuntime

    installed = spark_lines.installed_version()
    other = "3.5.6-amzn-1" if installed.startswith("4.") else "4.1.1"
    runtime = SparkSubmitRuntime(master="yarn", spark_version=other)
    with pytest.raises(
        ToolchainError, match=rf"driver runs Spark {installed} but the cluster runs Spark {other}"
    ):
        runtime.jar_list()
    # the same line in a vendor's spelling passes, and names its own jars when they are given
    same = SparkSubmitRuntime(master="yarn", spark_version=f"{installed}-vendor-1", jars=["/opt/x.jar"])
    assert same.jar_list() == ["/opt/x.jar"]


def test_the_charts_spark_version_is_the_runtimes_default_and_the_servers_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from upsert_kafka_ops.runtime import SparkSubmitRuntime

    installed = spark_lines.installed_version()
    other = "3.5.6" if installed.startswith("4.") else "4.1.1"
    monkeypatch.setenv(spark_lines.DECLARED_VERSION_ENV, other)
    # a spark-submit runtime in the chart's pods resolves for the image's Spark (no banner is read:
    # the spark-submit below does not exist) and refuses a driver of another line
    runtime = SparkSubmitRuntime(master="k8s://https://kube:443", spark_submit="/absent/spark-submit")
    with pytest.raises(
        ToolchainError, match=rf"driver runs Spark {installed} but the cluster runs Spark {other}"
    ):
        runtime.jar_list()
    with pytest.raises(
        ToolchainError, match=rf"image.sparkVersion\) names Spark {other}, but this image's pyspark"
    ):
        spark_lines.check_declared()
    # a field given wins over the variable, and the image's own line passes the server's check
    assert SparkSubmitRuntime(master="yarn", spark_version=installed).cluster_version() == installed
    monkeypatch.setenv(spark_lines.DECLARED_VERSION_ENV, f"{installed}-vendor-2")
    spark_lines.check_declared()
    monkeypatch.setenv(spark_lines.DECLARED_VERSION_ENV, "3.4.1")
    with pytest.raises(ToolchainError, match="not supported"):
        spark_lines.check_declared()
    monkeypatch.setenv(spark_lines.DECLARED_VERSION_ENV, " ")
    assert spark_lines.declared_version() is None
    spark_lines.check_declared()
