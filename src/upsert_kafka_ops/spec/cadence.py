"""A job's ``schedule:``: a cron expression or a preset (``@hourly``), in UTC.

Validated once here and read by whoever runs or watches the job on a clock: the Airflow DAG factory
(the DAG's schedule), the Dagster schedules and freshness checks, and the lag evaluation (a batch
job is overdue when the run after its last one has not come). Cron arithmetic is croniter's, the
library Airflow itself schedules with.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from itertools import pairwise

from croniter import croniter

from upsert_kafka_ops.errors import SpecError

#: the presets Airflow and Dagster both understand, as the five-field expressions they stand for
PRESETS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
_TICKS = 400  # ticks looked at for the longest gap: a year of a weekday schedule, 33 years of a monthly one


def cron_expression(schedule: str) -> str:
    """The five-field cron expression of ``schedule`` (a preset expanded), or a :class:`SpecError`."""
    text = " ".join(schedule.split())
    cron = PRESETS.get(text.lower(), text)
    if len(cron.split()) != 5 or not croniter.is_valid(cron):
        raise SpecError(
            "schedule",
            f"{schedule!r} is not a cron expression.",
            f"write five fields (minute hour day-of-month month day-of-week, e.g. '*/15 * * * *') or one of "
            f"{', '.join(sorted(PRESETS))}.",
        )
    return cron


def _gaps(schedule: str, start: datetime | None) -> list[timedelta]:
    it = croniter(cron_expression(schedule), start or datetime.now(timezone.utc))
    ticks = [it.get_next(datetime) for _ in range(_TICKS)]
    return [b - a for a, b in pairwise(ticks)]


def longest_gap(schedule: str, start: datetime | None = None) -> timedelta:
    """The longest time between two consecutive runs of ``schedule`` (over its next few hundred ticks
    from ``start``): a weekday schedule's weekend, a monthly one's 31 days. A freshness check that allows
    this much since the last deadline never fails a job that ran on every tick."""
    return max(_gaps(schedule, start))


def shortest_gap(schedule: str, start: datetime | None = None) -> timedelta:
    """The shortest time between two consecutive runs of ``schedule``: a weekday schedule's day."""
    return min(_gaps(schedule, start))


def next_run(schedule: str, after_ts: float) -> float:
    """When ``schedule`` next runs after ``after_ts`` (epoch seconds, timezone.utc), as epoch seconds."""
    start = datetime.fromtimestamp(after_ts, timezone.utc)
    return float(croniter(cron_expression(schedule), start).get_next(datetime).timestamp())
