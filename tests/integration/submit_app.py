"""Job functions for the spark-submit tests, run by the driver with ``--callable submit_app:NAME``.

spark-submit ships this file with ``--py-files``, so the driver imports it as ``submit_app``.
"""

from __future__ import annotations

import os
from typing import Any


def fail(spec: dict[str, Any], spark: Any) -> dict[str, Any]:
    """A job that fails with a message of its own, quoting a secret from its environment."""
    raise ValueError(f"no table named {spec['table']!r} (token {os.environ.get('UKO_TEST_TOKEN')})")
