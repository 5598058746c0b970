"""One comparable form for a cell, whichever side read it: PyFlink's collected rows and PySpark's rows
give Python values of the same kinds, and both are turned into JSON-safe, exact text here.

Standard library only: the Flink runner imports it inside PyFlink's own virtualenv.
"""

from __future__ import annotations

import datetime
import math
from decimal import Decimal
from typing import Any


def canon(value: Any) -> Any:
    """``value`` as JSON-safe data that compares equal exactly when the values are equal (a float
    by its shortest repr, so -0.0, NaN and the infinities stay themselves; a decimal with its scale)."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return "float:NaN"
        return f"float:{value!r}"
    if isinstance(value, Decimal):
        return f"decimal:{value}"
    if isinstance(value, datetime.datetime):
        return timestamp_text(value.isoformat(sep=" ", timespec="microseconds"))
    if isinstance(value, datetime.date):
        return f"date:{value.isoformat()}"
    if isinstance(value, datetime.time):
        return time_text(value.isoformat(timespec="microseconds"))
    if isinstance(value, bytes | bytearray | memoryview):
        return f"bytes:{bytes(value).hex()}"
    if isinstance(value, dict):
        return sorted(([canon(k), canon(v)] for k, v in value.items()), key=repr)
    if isinstance(value, list | tuple) or type(value).__name__ == "Row":  # PyFlink's Row is no tuple
        return [canon(v) for v in value]
    raise TypeError(f"no comparable form for {type(value).__name__}: {value!r}")


def _nanos(fraction: str) -> str:
    return (fraction + "000000000")[:9]


def timestamp_text(text: str) -> str:
    """``YYYY-MM-DD HH:MM:SS[.f...]`` (Flink's CAST to STRING, or Python's datetime) with the
    fraction to nanoseconds: the same instant always gives the same text."""
    day, _, clock = text.replace("T", " ").partition(" ")
    whole, _, fraction = clock.partition(".")
    return f"timestamp:{day} {whole}.{_nanos(fraction)}"


def time_text(text: str) -> str:
    """``HH:MM:SS[.f...]`` with the fraction to nanoseconds."""
    whole, _, fraction = text.partition(".")
    return f"time:{whole}.{_nanos(fraction)}"
