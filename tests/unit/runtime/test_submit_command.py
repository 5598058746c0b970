"""What a spark-submit run is given and what it says (no process started): its command line, and
its output with the driver's secrets masked. The run mode a surface passes on."""

from __future__ import annotations

from pathlib import Path

import pytest

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.runtime import driver
from upsert_kafka_ops.runtime.execute import as_mode
from upsert_kafka_ops.runtime.submit import SparkSubmitRuntime, default_spark_submit, submit_command

SECRET = "s3cr3t-kafka-password"


def _runtime(**fields: object) -> SparkSubmitRuntime:
    base = {
        "master": "spark://m:7077",
        "jars": ["/j/a.jar", "/j/b.jar"],
        "project_conf": False,
        "env": {"KAFKA_PASSWORD": SECRET},
    }
    return SparkSubmitRuntime.model_validate({**base, **fields})


def test_a_client_mode_command_runs_the_driver_on_the_job_file_with_jars_and_settings() -> None:
    runtime = _runtime(conf={"spark.executor.memory": "2g"}, py_files=["/p/deps.zip"])
    cmd = submit_command(runtime, Path("/w/job.json"))
    assert cmd[:5] == [default_spark_submit(), "--master", "spark://m:7077", "--deploy-mode", "client"]
    assert cmd[cmd.index("--jars") + 1] == "/j/a.jar,/j/b.jar"
    assert cmd[cmd.index("--py-files") + 1] == "/p/deps.zip"
    assert cmd[cmd.index("--conf") + 1] == "spark.executor.memory=2g"
    assert cmd[-2:] == [str(Path(driver.__file__).resolve()), "/w/job.json"]
    assert "--files" not in cmd and "--properties-file" not in cmd


def test_a_cluster_mode_command_ships_the_job_file_and_the_driver_environment_by_file() -> None:
    runtime = _runtime(master="yarn", deploy_mode="cluster", result_uri="/shared/r/out.json")
    cmd = submit_command(runtime, Path("/w/job.json"), properties_file=Path("/w/env.properties"))
    assert cmd[cmd.index("--files") + 1] == "/w/job.json"
    assert cmd[cmd.index("--properties-file") + 1] == "/w/env.properties" and "--load-spark-defaults" in cmd
    assert cmd[cmd.index("--result-uri") - 1] == "job.json"  # the shipped file, in the driver's folder
    assert cmd[-2:] == ["--result-uri", "/shared/r/out.json"]


def test_no_secret_value_is_on_the_command_line_and_output_masks_every_long_enough_one() -> None:
    runtime = _runtime(env={"KAFKA_PASSWORD": SECRET, "SHORT": "abc", "TOKEN": SECRET + "-longer"})
    assert not any(SECRET in part for part in submit_command(runtime, Path("/w/job.json")))
    said = f"login failed for {SECRET}-longer and {SECRET}; abc stays"
    assert runtime.redact(said) == "login failed for *** and ***; abc stays"


@pytest.mark.parametrize(
    ("given", "mode"), [(None, None), ("", None), ("incremental", "incremental"), ("full", "full")]
)
def test_a_run_mode_is_incremental_full_or_the_jobs_own(given: str | None, mode: str | None) -> None:
    assert as_mode(given) == mode


def test_another_run_mode_is_refused_naming_the_field_and_the_two_modes() -> None:
    with pytest.raises(SpecError, match=r"'rebuild' is not a mode.*use 'incremental' or 'full'") as caught:
        as_mode("rebuild", "--mode")
    assert caught.value.field == "--mode"
