"""A maintain job: compaction and cleanup of a warehouse target, on a schedule of its own.

Incremental runs leave a table many small files (Delta, Iceberg), position deletes (Iceberg's
merge-on-read) or dead row versions (PostgreSQL); each later run reads through more of them. The job
holds the target's run lock for its whole work, the lock every run that writes the table takes, so
maintenance never runs beside a write to the same table: a run that starts meanwhile waits for it,
as it would for another run (``lock_timeout_s``).
"""

from __future__ import annotations

import logging

from upsert_kafka_ops.jobs.core import JobResult, RunContext
from upsert_kafka_ops.jobs.targets import target_for
from upsert_kafka_ops.pipeline import MaintainJob

log = logging.getLogger("upsert_kafka_ops.jobs")


def run_maintain(ctx: RunContext, job: MaintainJob) -> JobResult:
    """Compact the target and expire what old versions left, under the target's lock."""
    table = target_for(job.target, ctx.pipeline)
    result = ctx.result(target=table.uri, mode="maintenance")
    with table.hold(ctx.spark, ctx.lock_timeout_s):
        done = table.maintain(ctx.spark, job)
    if not done:
        result.reason = "nothing to maintain: the table does not exist yet"
    result.write = done
    log.info("job %s: maintained %s: %s", job.name, table.uri, done or "no table yet")
    return result
