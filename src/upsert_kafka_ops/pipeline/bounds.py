"""A backfill's end, from what a user types: ``latest``, a time, or offsets."""

from __future__ import annotations

import json
from typing import Literal, cast

from typing_extensions import TypedDict  # pydantic reads typing.TypedDict from Python 3.12 on

from upsert_kafka_ops.errors import SpecError


class TimestampUntil(TypedDict):
    """The state as of a time: the first offset of each partition at or after it."""

    timestamp_ms: int


class OffsetsUntil(TypedDict):
    """The state up to these offsets (exclusive), per topic and partition."""

    offsets: dict[str, dict[int | str, int]]  # partitions as the file writes them


#: A backfill's end as a pipeline file writes it
Until = Literal["latest"] | TimestampUntil | OffsetsUntil


def check_until(value: object, field: str = "until") -> object:
    """``value`` if it has the shape of an end (``latest``, ``{timestamp_ms: N}`` or ``{offsets: ...}``),
    else the error that names the three forms."""
    ok = value == "latest" or (
        isinstance(value, dict) and len(value) == 1 and ("timestamp_ms" in value or "offsets" in value)
    )
    if not ok:
        raise SpecError(
            field, f"cannot use {value!r}.", "use 'latest', {timestamp_ms: N} or {offsets: {topic: {p: n}}}."
        )
    return value


def parse_until(value: object, field: str = "until") -> Until:
    """A backfill's end from what a user types: ``latest``, epoch milliseconds, an ISO-8601 time
    (``2026-11-22T10:00:00Z``; without a zone it is timezone.utc), offsets JSON, or the spec form itself."""
    if value is None or value == "latest":
        return "latest"
    if isinstance(value, dict):
        return cast(Until, check_until(value, field))
    if isinstance(value, int) and not isinstance(value, bool):
        return {"timestamp_ms": value}
    text = str(value).strip()
    if text.isdigit():
        return {"timestamp_ms": int(text)}
    if text.startswith("{"):
        try:
            offsets = json.loads(text)
        except ValueError:
            raise SpecError(
                field, f"cannot read {text!r} as offsets JSON.", 'write {"topic": {"0": 123}}.'
            ) from None
        return offsets if set(offsets) <= {"offsets", "timestamp_ms"} and offsets else {"offsets": offsets}
    from datetime import datetime, timezone

    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise SpecError(
            field,
            f"cannot read {text!r}.",
            "use latest, epoch milliseconds, an ISO-8601 time (2026-11-22T10:00:00Z) or offsets JSON.",
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return {"timestamp_ms": int(when.timestamp() * 1000)}
