"""What CLI commands print: the Spark log level they choose, -v anywhere, and bad levels refused."""

from __future__ import annotations

import logging

import pytest

from upsert_kafka_ops import cli
from upsert_kafka_ops.engine.session import ENV_LOG_LEVEL, log_level
from upsert_kafka_ops.errors import ToolchainError


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_LOG_LEVEL, raising=False)
    logger = logging.getLogger("upsert_kafka_ops")
    monkeypatch.setattr(logger, "handlers", list(logger.handlers))
    monkeypatch.setattr(logger, "level", logger.level)


def test_a_command_runs_spark_at_error_and_verbose_at_info(monkeypatch: pytest.MonkeyPatch) -> None:
    cli.configure_output(verbose=False)
    assert log_level() == "error"
    assert logging.getLogger("upsert_kafka_ops").level == logging.INFO
    cli.configure_output(verbose=True)
    assert log_level() == "info"
    assert logging.getLogger("upsert_kafka_ops").level == logging.DEBUG
    names = [h.get_name() for h in logging.getLogger("upsert_kafka_ops").handlers]
    assert names.count("upsert-kafka-ops-cli") == 1  # configured twice, one handler


def test_an_explicit_level_wins_over_the_quiet_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_LOG_LEVEL, "WARN")
    cli.configure_output(verbose=False)
    assert log_level() == "warn" and log_level("debug") == "debug"


def test_a_bad_level_names_the_variable_and_the_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_LOG_LEVEL, "loud")
    with pytest.raises(ToolchainError) as info:
        log_level()
    assert "'loud'" in str(info.value) and ENV_LOG_LEVEL in str(info.value)
    assert "error, warn, info, debug" in str(info.value)


@pytest.mark.parametrize(
    "argv", [["-v", "docs", "config"], ["docs", "config", "-v"], ["docs", "-v", "config"]]
)
def test_verbose_goes_before_or_after_the_command(argv: list[str]) -> None:
    assert cli.build_parser().parse_args(argv).verbose is True


def test_without_verbose_the_flag_is_false() -> None:
    assert cli.build_parser().parse_args(["docs", "config"]).verbose is False
