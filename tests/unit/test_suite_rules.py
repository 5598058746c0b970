"""The suite's own rules (tests/conftest.py), checked by running small suites in a subprocess."""

from __future__ import annotations

from pathlib import Path

import pytest

CONFTEST = (Path(__file__).parents[1] / "conftest.py").read_text()


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    monkeypatch.delenv("UKO_LANE", raising=False)  # a lane's run selects tests; these runs are whole suites
    return pytester


def test_a_skipped_test_fails_the_run(suite: pytest.Pytester) -> None:
    suite.makepyfile(
        """
        import pytest
        def test_ok(): assert True
        def test_skip(): pytest.skip("no broker")
        """
    )
    result = suite.runpytest_subprocess()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*not allowed in this suite*no broker*"])
    assert result.ret != 0


def test_skipif_and_xfail_fail_the_run(suite: pytest.Pytester) -> None:
    suite.makepyfile(
        """
        import pytest
        @pytest.mark.skipif(True, reason="java missing")
        def test_a(): pass
        @pytest.mark.xfail(reason="flaky")
        def test_b(): assert False
        @pytest.mark.xfail(reason="passes anyway")
        def test_c(): assert True
        """
    )
    result = suite.runpytest_subprocess()
    # skipif fires during setup (an error); both xfail outcomes become failures
    result.assert_outcomes(failed=2, errors=1)
    assert result.ret != 0


def test_a_skipped_module_fails_the_run(suite: pytest.Pytester) -> None:
    suite.makepyfile(
        """
        import pytest
        pytest.importorskip("a_module_that_does_not_exist_here")
        def test_never(): pass
        """
    )
    result = suite.runpytest_subprocess()
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*not allowed in this suite*"])


def test_deselecting_tests_fails_the_run(suite: pytest.Pytester) -> None:
    suite.makepyfile(
        """
        def test_one(): pass
        def test_two(): pass
        """
    )
    result = suite.runpytest_subprocess("-k", "one")
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(["*only 1 of 2 collected tests ran*"])
    assert result.ret != 0


def test_a_lines_lane_runs_every_test_it_selects(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite.makepyfile(
        """
        import pytest
        @pytest.mark.lines
        def test_one(): pass
        def test_two(): pass
        """
    )
    monkeypatch.setenv("UKO_LANE", "spark-3.5-py3.11")
    result = suite.runpytest_subprocess("-m", "lines", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, deselected=1)
    assert result.ret == 0


def test_a_full_green_run_passes(suite: pytest.Pytester) -> None:
    suite.makepyfile("def test_one(): assert 1 + 1 == 2")
    result = suite.runpytest_subprocess()
    result.assert_outcomes(passed=1)
    assert result.ret == 0
