"""Suite-wide rules: nothing may hide work.

- A skipped or xfailed test (or a skipped module) is turned into a failure: the suite starts the
  real components it needs, so a skip can only mean something is missing.
- A run fails when fewer tests ran than were collected (deselection, ``-x``; a Spark line's lane,
  ``UKO_LANE``, deselects all but the tests marked ``lines``), unless
  ``UKO_ALLOW_PARTIAL_RUN=1`` is set for a developer's focused run.
- ``AIRFLOW_HOME`` points at a temporary folder before anything can import airflow.
- The JVMs the suite starts run with the C1 compiler only and room for its code (``JDK_JAVA_OPTIONS``;
  see below).
- MinIO, Prometheus, nginx and helm are found in the checkout's ``.tools/bin`` when no variable names them.
- With ``UKO_TEST_COSTS`` set, each pytest process records where its time goes (``tests/costs.py``).
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import sys
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

if "AIRFLOW_HOME" not in os.environ:  # a pytest process's own (xdist workers inherit their parent's)
    os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix="uko-airflow-home-")
    atexit.register(shutil.rmtree, os.environ["AIRFLOW_HOME"], ignore_errors=True)
# Every JVM the suite starts (brokers, Spark drivers and executors, CLI runs, Maven, the registry, the
# PyFlink process) compiles with C1 only: most of a test run's code is generated per query and runs once,
# so C2 would spend the CPU compiling. C1 alone gives the same results with far less CPU (measured on
# the fault and Delta job tests: 352 -> 214 CPU seconds, 249 -> 211 s; both tiers in the long-lived
# sessions measured worse too: tests/jvm.py), which matters when the suites run side by side on 2
# cores. The java launcher reads this variable.
# With C1 alone HotSpot reserves 48 MB for compiled code (240 MB with both tiers), and a warm Spark
# session fills it: the sweeper then throws compiled methods away and C1 compiles them again, run after
# run. With room for them (a warm session keeps about 64 MB), 30 incremental Delta runs in one session:
# 2.52 -> 1.86 JVM CPU s a run, the sweeper's and C1's threads from 0.50 s a run to under 0.06.
os.environ.setdefault("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m")
# The tools make test builds into the checkout (MinIO, Prometheus, nginx, helm): found there when a developer runs
# one test file with .venv/bin/pytest, as make sets them for the suites (CONTRIBUTING.md)
_TOOLS = Path(__file__).resolve().parents[1] / ".tools" / "bin"
for _var, _path in (("UKO_MINIO", _TOOLS / "minio"), ("UKO_PROMETHEUS_BIN", _TOOLS), ("UKO_NGINX", _TOOLS / "nginx"),
                    ("UKO_HELM", _TOOLS / "helm")):  # fmt: skip
    if _path.exists():
        os.environ.setdefault(_var, str(_path))

# the real components the suites share (tests/services.py); the suite-rule tests run this conftest in a
# folder of their own, without it
pytest_plugins = [
    "pytester",
    *(["tests.services"] if Path(__file__).with_name("services.py").is_file() else []),
]


def pytest_configure(config: pytest.Config) -> None:
    """The cost table's recorder (``tests/costs.py``), when ``UKO_TEST_COSTS`` names its folder. Loaded
    from its file: the suite-rule tests run this conftest in a folder of their own, without it."""
    plugin = Path(__file__).with_name("costs.py")
    if os.environ.get("UKO_TEST_COSTS") and plugin.is_file() and not config.getoption("collectonly"):
        spec = importlib.util.spec_from_file_location("uko_test_costs", plugin)
        assert spec is not None and spec.loader is not None
        module = sys.modules["uko_test_costs"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        config.pluginmanager.register(module.CostPlugin(Path(os.environ["UKO_TEST_COSTS"])), "uko-test-costs")


_NO_SKIP = "Skipped and xfailed tests are not allowed in this suite (it must fail loudly instead)"


def _reason(longrepr: Any) -> str:
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    rep = outcome.get_result()
    if rep.skipped or hasattr(rep, "wasxfail"):
        why = getattr(rep, "wasxfail", "") or _reason(rep.longrepr)
        rep.outcome = "failed"
        rep.longrepr = f"{_NO_SKIP}: {item.nodeid}: {why}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, None]:
    outcome = yield
    rep = outcome.get_result()
    if rep.skipped:
        rep.outcome = "failed"
        rep.longrepr = f"{_NO_SKIP}: {collector.nodeid}: {_reason(rep.longrepr)}"


_ran: set[str] = set()
_deselected: list[str] = []


def pytest_deselected(items: list[pytest.Item]) -> None:
    _deselected.extend(i.nodeid for i in items)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call":
        _ran.add(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if session.config.getoption("collectonly") or os.environ.get("UKO_ALLOW_PARTIAL_RUN") == "1":
        return
    # a Spark line's lane (scripts/lanes.sh) selects the tests marked `lines`: every one it selected runs
    collected = session.testscollected + (0 if os.environ.get("UKO_LANE") else len(_deselected))
    if len(_ran) < collected:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = (
            f"only {len(_ran)} of {collected} collected tests ran "
            f"({len(_deselected)} deselected); the whole suite must run"
        )
        if reporter is not None:
            reporter.write_line(f"ERROR: {message}", red=True, bold=True)
        if session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
