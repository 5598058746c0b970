"""Burrow's status rules, the window and its JSON, without a broker.

The table is Burrow's own (``core/internal/evaluator/caching_test.go`` in the Burrow repository):
timestamps there are milliseconds, ``now`` seconds.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from upsert_kafka_ops.kafka.admin import TopicInfo
from upsert_kafka_ops.kafka.evaluation import (
    EvaluationConfig,
    LagWindow,
    Sample,
    Schedule,
    check,
    evaluate,
    evaluate_partition,
)
from upsert_kafka_ops.kafka.lag import LagReport, PartitionLag


def _window(offsets: list[int], lags: list[int | None], ts_ms: list[int]) -> list[Sample]:
    return [Sample(o, lag, t / 1000) for o, lag, t in zip(offsets, lags, ts_ms, strict=True)]


_TS = [100_000, 200_000, 300_000, 400_000, 500_000]
_RISING = _window([1000, 2000, 3000, 4000, 5000], [0, 50, 100, 150, 200], _TS)
_ALWAYS = _window([1000, 2000, 3000, 4000, 5000], [50, 100, 150, 200, 250], _TS)
_STILL = _window([1000] * 5, [100, 150, 200, 250, 300], _TS)
_BIG = list(range(792748079, 792748094))
_BIG_TS = [1512224618356, 1512224619362, 1512224620366, 1512224621367, 1512224622370, 1512224623373,
           1512224624378, 1512224625379, 1512224626383, 1512224627383, 1512224628383, 1512224629388,
           1512224630391, 1512224631394, 1512224632397]  # fmt: skip
_WITH_NILS = _window(
    [1000, 1500, 2000, 2500, 3000, 3500, 4000, 4500, 5000, 5500],
    [0, None, 50, None, 100, None, 150, None, 200, None],
    [100_000, 150_000, 200_000, 250_000, 300_000, 350_000, 400_000, 450_000, 500_000, 550_000],
)

# (Burrow test number, samples, broker offsets, current lag, now, allowed lag, expected status)
BURROW = [
    (0, _RISING, [5200], 200, 600, 0, "OK"),
    (1, _RISING, [5200], 200, 900, 0, "OK"),
    (2, _RISING, [5200], 200, 1000, 0, "STOP"),
    (3, _ALWAYS, [5250], 250, 1000, 0, "STOP"),
    (4, _window([1000] * 5, [0, 50, 100, 150, 200], _TS), [1200], 200, 600, 0, "OK"),
    (5, _STILL, [1300], 300, 600, 0, "STALL"),
    (6, _window([1000] * 5, [100] * 5, _TS), [1100], 100, 600, 0, "STALL"),
    (7, _window([1000, 2000, 3000, 2000, 4000], [100, 150, 200, 1250, 300], _TS), [4300], 300, 600, 0, "OK"),
    (8, _ALWAYS, [5250], 0, 1000, 0, "OK"),
    (9, _window(_BIG, [0] * 15, _BIG_TS), [792749024, 792749000, 792748800, 792748600, 792748500], 931,
     1512224650, 0, "STOP"),
    (10, _window(_BIG, [0] * 15, _BIG_TS), [792748094, 792748093, 792748093, 792748093], 1, 1512224650, 0, "OK"),
    (11, _WITH_NILS, [5700], 200, 600, 0, "OK"),
    (12, _window([1000, 2000, 2000], [2, 1, 1], [100_000, 200_000, 300_000]), [2001], 1, 550, 1, "OK"),
    (13, _STILL, [1300], 300, 600, 99, "STALL"),
    (15, _window([1000, 2000, 3000, 2000, 2500], [100, 150, 200, 1250, 300], _TS), [4300], 300, 600, 0, "REWIND"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("number", "samples", "brokers", "current", "now", "allowed", "expected"),
    BURROW,
    ids=[f"burrow-{row[0]}" for row in BURROW],
)
def test_burrow_example_windows(
    number: int,
    samples: list[Sample],
    brokers: list[int],
    current: int,
    now: float,
    allowed: int,
    expected: str,
) -> None:
    verdict = evaluate_partition(samples, brokers, current, now, allowed_lag=allowed)
    assert verdict.status == expected, (number, verdict.reason)
    assert verdict.complete == 1.0


def test_incomplete_window_is_still_judged_and_counts_as_incomplete() -> None:
    # Burrow's SingleRequest_Incomplete: half a window, stopped -> STOP, complete 0.5
    samples = _window([1000, 1400], [100, 200], [100_000, 200_000])
    verdict = evaluate_partition(samples, [1600], 200, 1000, intervals=4)
    assert (verdict.status, verdict.complete) == ("STOP", 0.5)
    assert evaluate_partition(samples, [1600], 200, 1000, intervals=4, minimum_complete=0.75).status == "OK"


def test_one_sample_is_not_enough_for_stall_or_warn() -> None:
    # Deviation 2: Burrow finds STALL vacuously true for a single commit.
    one = [Sample(1000, 300, 500.0)]
    assert evaluate_partition(one, [1300], 300, 500.0).status == "OK"
    assert evaluate_partition(one, [1300], 300, 501.0).status == "STOP"  # as Burrow: no commit since


def test_schedule_mode_between_runs_and_overdue() -> None:
    hourly = Schedule(interval_s=3600, grace_s=600)
    runs = _window([100, 200, 300], [0, 0, 0], [0, 3_600_000, 7_200_000])
    # Burrow would say STOP 3601 s after the last run of a 2-hour window... only after 2 h; and the
    # lag grows while no run is due. With the schedule, the next run is due at 7200 + 4200.
    between = evaluate_partition(runs, [350], 50, 7200 + 3000, schedule=hourly)
    assert between.status == "OK" and "between scheduled runs" in between.reason
    overdue = evaluate_partition(runs, [350], 50, 7200 + 4300, schedule=hourly)
    assert overdue.status == "STOP" and "overdue" in overdue.reason
    # without the schedule, Burrow's STOP rule fires as soon as now - last > last - first
    assert evaluate_partition(runs, [350], 50, 7200 + 7300).status == "STOP"
    # a run that did not end caught up is judged by Burrow's other rules
    behind = _window([100, 200, 300], [50, 60, 70], [0, 3_600_000, 7_200_000])
    assert evaluate_partition(behind, [400], 100, 7200 + 3000, schedule=hourly).status == "WARN"


def test_a_cron_schedule_is_due_at_its_next_tick_after_the_last_run() -> None:
    # a weekday 09:00 job whose last run was Friday 2026-01-02 09:05 UTC: due Monday 09:00 (+ grace)
    friday = 1767344700.0  # 2026-01-02T09:05:00Z
    monday_9 = 1767603600.0  # 2026-01-05T09:00:00Z
    weekdays = Schedule(cron="0 9 * * 1-5", grace_s=900)
    assert weekdays.due(friday) == monday_9 + 900
    runs = [Sample(100, 0, friday - 86400), Sample(200, 0, friday)]
    weekend = evaluate_partition(runs, [260], 60, friday + 2 * 86400, schedule=weekdays)
    assert weekend.status == "OK" and "between scheduled runs" in weekend.reason  # an interval would page
    late = evaluate_partition(runs, [260], 60, monday_9 + 1000, schedule=weekdays)
    assert late.status == "STOP" and "overdue by 100s" in late.reason


def test_a_pipeline_job_is_judged_on_its_own_schedule() -> None:
    from upsert_kafka_ops.jobs import Pipeline
    from upsert_kafka_ops.jobs.lag_monitor import job_evaluation

    ddl = ("CREATE TABLE t (id BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', "
           "'topic' = 't', 'key.format' = 'json', 'value.format' = 'json')")  # fmt: skip
    job = {"kind": "materialize", "source": {"connection": "c", "table": {"ddl": ddl}},
           "target": {"kind": "delta", "path": "/tmp/t"}}  # fmt: skip
    pipe = Pipeline.model_validate({"connections": {"c": {"bootstrap_servers": "b:9092"}}, "jobs": [
        {"name": "hourly", "schedule": "@hourly", **job}, {"name": "streamed", **job}]})  # fmt: skip
    process = EvaluationConfig(schedule=Schedule(interval_s=300, grace_s=60), schedule_grace_s=60)
    hourly = job_evaluation(process, pipe.job("hourly"))
    assert hourly.schedule == Schedule(cron="0 * * * *", grace_s=60)  # its own cadence, the process's grace
    assert job_evaluation(process, pipe.job("streamed")) is process  # no schedule of its own
    assert job_evaluation(EvaluationConfig(), pipe.job("hourly")).schedule == Schedule(cron="0 * * * *")


# -- the window ----------------------------------------------------------------------------------------
def _report(
    observed_at: float,
    committed: int | None,
    end: int,
    *,
    owner: str | None = None,
    earliest: int = 0,
    topic_id: str = "id-1",
) -> LagReport:
    lag = max(0, end - (earliest if committed is None else committed))
    p = PartitionLag(
        topic="t", partition=0, committed=committed, earliest=earliest, end=end, lag=lag,
        data_loss=committed is not None and committed < earliest,
        records_lost=0 if committed is None else max(0, earliest - committed), owner=owner,
    )  # fmt: skip
    return LagReport(
        group="g",
        isolation="read_committed",
        observed_at=observed_at,
        partitions=(p,),
        topics={"t": TopicInfo("t", topic_id, 1)},
    )


def _run(steps: list[LagReport], config: EvaluationConfig | None = None) -> tuple[str, LagWindow, str]:
    window = LagWindow()
    status = None
    for report in steps:
        status, window = check(window.to_json(), report, config)  # through JSON every time
    assert status is not None
    return status.partitions[0].status, window, status.summary


def test_window_statuses_from_observations() -> None:
    ok = [_report(100 * i, 1000 * i, 1000 * i + 10 * i) for i in range(1, 6)]
    assert _run([*ok[:-1], _report(500, 5000, 5000)])[0] == "OK"
    warn = [_report(100 * i, 1000 * i, 1000 * i + 100 * i) for i in range(1, 6)]
    assert _run(warn)[0] == "WARN"
    # the same offset while an active member owns the partition: a commit of the same offset
    stall = [_report(100 * i, 1000, 1000 + 100 * i, owner="host/c1") for i in range(1, 6)]
    assert _run(stall)[0] == "STALL"
    # nobody owns it and the offset stays: no new sample, and STOP once the silence is long enough
    stop = [*warn[:3], _report(400, 3000, 4000), _report(700, 3000, 5000)]
    status, window, summary = _run(stop)
    assert status == "STOP" and len(window.partitions[("t", 0)].samples) == 3
    assert "STOP on t[0]" in summary
    rewind = [_report(100, 1000, 1100), _report(200, 2000, 2100), _report(300, 500, 2200)]
    assert _run(rewind)[0] == "REWIND"


def test_window_survives_a_json_round_trip() -> None:
    steps = [_report(100 * i, 1000 * i, 1000 * i + 100 * i) for i in range(1, 4)]
    _, window, _ = _run(steps)
    text = json.dumps(window.to_json())
    again = LagWindow.from_json(text)
    assert again == window
    assert LagWindow.from_json(again.dumps()) == window
    assert again.partitions[("t", 0)].samples[-1] == Sample(3000, 300, 300.0)
    assert again.points()[("t", 0)] == ((1100, 100.0), (2200, 200.0), (3300, 300.0))
    assert LagWindow.from_json(None) == LagWindow()
    with pytest.raises(ValueError, match="version"):
        LagWindow.from_json({**window.to_json(), "version": 99})


def test_window_is_bounded_and_min_distance_merges() -> None:
    steps = [_report(10 * i, 100 * i, 100 * i + 5) for i in range(1, 30)]
    _, window, _ = _run(steps, EvaluationConfig(intervals=5, lookup_size=4))
    w = window.partitions[("t", 0)]
    assert len(w.samples) == 5 and len(w.broker_offsets) == 5 and len(w.points) == 4
    assert w.samples[-1].offset == 2900
    merged = _run(steps[:6], EvaluationConfig(min_distance_s=25))[1].partitions[("t", 0)].samples
    # a sample less than 25 s after the previous slot replaces it and keeps the slot's time
    assert [(s.offset, s.ts) for s in merged] == [(300, 10.0), (600, 40.0)]


def test_recreated_topic_starts_a_new_window() -> None:
    steps = [_report(100 * i, 1000 * i, 1000 * i + 100 * i) for i in range(1, 4)]
    _, window, _ = _run(steps)
    status, after = check(window, _report(400, 10, 20, topic_id="id-2"))
    assert after.recreated == ("t",)
    assert after.partitions[("t", 0)].samples == (Sample(10, 10, 400.0),)
    assert status.recreated_topics == ("t",) and "recreated: t" in status.summary


def test_group_status_collapses_to_err_and_counts_complete() -> None:
    base = _report(500, 1000, 1300, owner="h/c")
    stalled = base.partitions[0]
    fine = replace(stalled, partition=1, committed=1300, lag=0, owner=None)
    nothing = replace(stalled, partition=2, committed=None, earliest=0, end=0, lag=0, owner=None)
    report = replace(base, partitions=(stalled, fine, nothing))
    window = LagWindow()
    for i in range(1, 6):
        window = window.observe(replace(report, observed_at=100.0 * i), EvaluationConfig(intervals=5))
    status = evaluate(window, replace(report, observed_at=500.0), EvaluationConfig(intervals=5))
    assert [p.status for p in status.partitions] == ["STALL", "OK", "NOTFOUND"]
    assert (status.status, status.worst) == ("ERR", "STALL")
    assert status.complete == 0.5  # t[1] saw one sample only: its offset never moved and nobody owns it
    assert status.at_least("WARN") and status.at_least("ERR") and not status.at_least("STOP")
    assert status.total_lag == 300 and status.max_lag is not None and status.max_lag.name == "t[0]"
    assert "1 without a commit" in status.summary
    assert status.to_dict()["partitions"][0]["status"] == "STALL"


def test_data_loss_is_at_least_warn_and_no_commit_is_notfound() -> None:
    lost = _report(100, 5, 30, earliest=10)
    status, _ = check(None, lost)
    assert status.partitions[0].status == "WARN" and "data loss" in status.partitions[0].reason
    assert "DATA LOSS on t[0]" in status.summary
    empty, _ = check(None, _report(100, None, 30, earliest=30))
    assert (empty.status, empty.summary) == ("NOTFOUND", "group 'g': NOTFOUND (no committed offsets)")


def test_records_that_wait_without_a_commit_are_judged_by_how_long_they_waited() -> None:
    # a consumer that never committed, with records to read (a job that never ran): no longer a
    # NOTFOUND that passes --fail-on; WARN until a full window saw no commit, then STOP
    config = EvaluationConfig(intervals=3)
    window: LagWindow | None = None
    seen = []
    for i in range(4):
        status, window = check(window, _report(100.0 + 60 * i, None, 30, earliest=10), config)
        seen.append(status.partitions[0].status)
        assert status.total_lag == 20
    assert seen == ["WARN", "WARN", "STOP", "STOP"] and status.status == "ERR"
    assert "20 records waited 180s over 3 observations and nothing was committed" in status.summary
    assert window is not None and window.partitions[("t", 0)].waiting_since == 100.0
    assert LagWindow.from_json(window.dumps()) == window  # kept across restarts
    # the first commit ends the wait: judged by Burrow's rules from there
    status, window = check(window, _report(400.0, 30, 30, earliest=10), config)
    assert status.status == "OK" and window.partitions[("t", 0)].waiting_since is None
    # a scheduled job: OK until the run due after the records were first seen is overdue
    hourly = EvaluationConfig(intervals=3, schedule=Schedule(cron="0 * * * *", grace_s=60))
    first = 3600.0 * 10 + 600  # 10:10; the 11:00 run is due, overdue after 11:01
    states = [check(w, _report(first + dt, None, 5), hourly)[0].partitions[0] for w, dt in
              ((None, 0), (None, 0))]  # fmt: skip
    assert states[0].status == "OK" and "wait for the first scheduled run" in states[0].reason
    window = None
    for dt in (0, 1800, 3000, 3120):
        status, window = check(window, _report(first + dt, None, 5), hourly)
    assert status.partitions[0].status == "STOP" and "overdue by 60s" in status.partitions[0].reason


def test_publish_jobs_have_no_lag_and_naming_one_says_so() -> None:
    from pathlib import Path

    from upsert_kafka_ops.errors import SpecError
    from upsert_kafka_ops.jobs import Pipeline
    from upsert_kafka_ops.jobs.lag import lag_jobs, pipeline_lag_names

    demo = Pipeline.load(Path(__file__).parents[2] / "pipelines" / "demo.yaml")
    assert lag_jobs(demo) == [
        "users-to-delta",
        "users-history",
        "users-live",
        "pageviews-per-region",
        "pageviews-per-page",
    ]
    assert pipeline_lag_names(demo) == pipeline_lag_names(demo, []) == lag_jobs(demo)
    assert pipeline_lag_names(demo, ["pageviews-per-page"]) == ["pageviews-per-page"]
    with pytest.raises(SpecError, match="'publish-users' is a publish job: it reads no topic") as info:
        pipeline_lag_names(demo, ["publish-users"])
    assert "users-to-delta" in (info.value.fix or "")
    with pytest.raises(SpecError):
        pipeline_lag_names(demo, ["nope"])


def test_records_that_arrive_after_a_run_that_found_nothing_wait_for_the_next_tick() -> None:
    # an hourly job's run that finds nothing new commits no new offset; records that arrive after it
    # are due at the next tick after they were first seen, not at the tick after the last commit
    hourly = EvaluationConfig(intervals=5, schedule=Schedule(cron="0 * * * *", grace_s=600))
    ten = 3600.0 * 10
    window = None
    for ts, committed, end in ((ten + 5, 50, 50), (ten + 3605, 50, 50), (ten + 4200, 50, 58)):
        status, window = check(window, _report(ts, committed, end), hourly)
    assert window is not None and window.partitions[("t", 0)].waiting_since == ten + 4200
    assert status.status == "OK"  # 11:10, not overdue: the 12:00 run takes them
    late, _ = check(window, _report(ten + 2 * 3600 + 601, 50, 58), hourly)
    assert late.partitions[0].status == "STOP" and "overdue by 1s" in late.partitions[0].reason
    # by interval: the first run after they arrived (last run + whole intervals), then its grace
    every = Schedule(interval_s=3600, grace_s=600)
    assert every.due(ten, None) == ten + 4200
    assert every.due(ten, ten + 4000) == ten + 2 * 3600 + 600


def test_a_warehouse_target_on_disk_or_s3_is_watched_through_the_offsets_it_stores() -> None:
    # the state reader reads S3 too (delta-rs, pyarrow): a target's own offsets are the authoritative ones
    from upsert_kafka_ops.jobs.lag import offsets_from
    from upsert_kafka_ops.pipeline import Pipeline

    ddl = ("CREATE TABLE t (id BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', "
           "'topic' = 't', 'key.format' = 'json', 'value.format' = 'json')")  # fmt: skip
    jobs = [{"name": name, "kind": "materialize", "source": {"connection": "c", "table": {"ddl": ddl}},
             "target": {"kind": kind, "path": path}}
            for name, kind, path in (("local", "delta", "/tmp/t"), ("file", "parquet", "file:///tmp/p"),
                                     ("s3", "delta", "s3a://bucket/t"), ("s3p", "parquet", "s3a://b/p"))]  # fmt: skip
    jobs.append({"name": "copy", "kind": "backfill", "source": jobs[0]["source"],
                 "target": {"kind": "topic", "connection": "c", "table": {"ddl": ddl.replace("'t'", "'u'")}}})  # fmt: skip
    pipe = Pipeline.model_validate({"connections": {"c": {"bootstrap_servers": "b:9092"}}, "jobs": jobs})
    assert {j.name: offsets_from(j) for j in pipe.jobs} == {
        "local": "target", "file": "target", "s3": "target", "s3p": "target", "copy": "consumer-group",
    }  # fmt: skip
