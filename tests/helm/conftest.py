"""Render the chart with the helm binary the make target builds (``.tools/bin/helm``, or ``UKO_HELM``).

A missing helm fails every test here (never a skip): ``make chart`` builds it first.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "upsert-kafka-ops"
VALUES = Path(__file__).parent / "values"
KUBE_VERSION = "1.33.0"  # a version kubernetes-validate bundles schemas for


def helm_binary() -> Path:
    helm = Path(os.environ.get("UKO_HELM") or ROOT / ".tools" / "bin" / "helm")
    if not helm.is_file():
        pytest.fail(
            f"helm not found at {helm}: run `make helm` (go install of the pinned version) or set UKO_HELM."
        )
    return helm


class HelmError(Exception):
    pass


def helm(*args: str) -> str:
    proc = subprocess.run(
        [str(helm_binary()), *args], capture_output=True, text=True, timeout=120, check=False
    )
    if proc.returncode != 0:
        raise HelmError(proc.stderr + proc.stdout)
    return proc.stdout


def render(*values: Path | str, sets: tuple[str, ...] = (), namespace: str = "uko") -> list[dict[str, Any]]:
    """``helm template`` of the chart: the objects, in order."""
    args = ["template", "r1", str(CHART), "--namespace", namespace, "--kube-version", KUBE_VERSION]
    for v in values:
        args += ["-f", str(v)]
    for s in sets:
        args += ["--set", s]
    return [d for d in yaml.safe_load_all(helm(*args)) if d]


def kinds_and_names(objects: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(o["kind"], o["metadata"]["name"]) for o in objects}
