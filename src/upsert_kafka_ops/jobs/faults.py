"""Test hooks at named points of a run (``$UKO_FAULT_POINT``), so the crash tests can kill a run
where it matters: after the read, after the data, in the transaction, after the commit."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from pathlib import Path

FAULT_ENV = "UKO_FAULT_POINT"
_REACHED: Counter[str] = Counter()  # how often each point was reached in this process


def fault_point(name: str) -> None:
    """Test hooks at named points of a run, driven by ``$UKO_FAULT_POINT``:

    - ``NAME``: kill this process here (SIGKILL, no cleanup);
    - ``NAME@N``: kill it the ``N``-th time it gets here (a continuous job's ``N``-th batch);
    - ``pause:NAME:FLAG``: create ``FLAG.reached`` here, then wait (up to 10 minutes) until ``FLAG``
      exists, so a test can act while a run holds its target.
    """
    spec = os.environ.get(FAULT_ENV, "")
    _REACHED[name] += 1
    if spec in (name, f"{name}@{_REACHED[name]}"):
        os.kill(os.getpid(), signal.SIGKILL)
    if spec.startswith("pause:"):
        _, point, flag = spec.split(":", 2)
        if point == name:
            Path(flag + ".reached").touch()
            deadline = time.monotonic() + 600
            while not Path(flag).exists() and time.monotonic() < deadline:
                time.sleep(0.1)
