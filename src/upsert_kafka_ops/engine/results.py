"""Run results: what a read or a write did, as a versioned JSON-serializable record (no secrets)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

#: Version of the result's JSON shape; bump it when a field changes meaning or is removed.
RESULT_VERSION = 1


@dataclass
class RunResult:
    """Metrics of one read or write. Offsets are ``{"topic": {"partition": offset}}``; ends exclusive."""

    operation: str
    topics: list[str] = field(default_factory=list)
    records_in: int = 0
    bytes_in: int = 0
    tombstones_in: int = 0
    null_keys_dropped: int = 0
    parse_errors_skipped: int = 0
    distinct_keys: int = 0
    keys_in_several_partitions: int = 0
    records_out: int = 0
    tombstones_out: int = 0
    bytes_out: int = 0
    start_offsets: dict[str, dict[str, int]] = field(default_factory=dict)
    end_offsets: dict[str, dict[str, int]] = field(default_factory=dict)
    duration_s: float = 0.0
    #: "spark" (its jobs), or "python": a small range chosen in the job's own process
    #: (engine.fold_here); empty for results that are not a fold
    folded_by: str = ""
    version: int = RESULT_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunResult:
        if data.get("version") != RESULT_VERSION:
            raise ValueError(f"run result version {data.get('version')!r} is not {RESULT_VERSION}")
        return cls(**data)
