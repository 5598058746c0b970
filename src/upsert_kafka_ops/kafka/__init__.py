"""Kafka-side helpers on confluent-kafka (admin, offsets, lag, lag evaluation). Needs no JVM.

- :mod:`~upsert_kafka_ops.kafka.admin`: :class:`KafkaAdmin`, bounded admin calls with typed errors.
- :mod:`~upsert_kafka_ops.kafka.lag`: :func:`compute_lag` (committed offsets from any source) and
  :func:`group_lag`: offset lag, data loss, time lag.
- :mod:`~upsert_kafka_ops.kafka.evaluation`: Burrow's status rules over a JSON-persistable window.
"""

from __future__ import annotations

from upsert_kafka_ops.kafka.admin import (
    GroupInfo,
    Isolation,
    KafkaAccessDeniedError,
    KafkaAdmin,
    KafkaTimeoutError,
    TopicConfig,
    TopicInfo,
    TopicNotFoundError,
    probe,
)
from upsert_kafka_ops.kafka.evaluation import (
    EvaluationConfig,
    LagStatus,
    LagWindow,
    PartitionStatus,
    Sample,
    Schedule,
    check,
    evaluate,
    evaluate_partition,
)
from upsert_kafka_ops.kafka.lag import LagReport, PartitionLag, compute_lag, estimate_time, group_lag

__all__ = [
    "EvaluationConfig",
    "GroupInfo",
    "Isolation",
    "KafkaAccessDeniedError",
    "KafkaAdmin",
    "KafkaTimeoutError",
    "LagReport",
    "LagStatus",
    "LagWindow",
    "PartitionLag",
    "PartitionStatus",
    "Sample",
    "Schedule",
    "TopicConfig",
    "TopicInfo",
    "TopicNotFoundError",
    "check",
    "compute_lag",
    "estimate_time",
    "evaluate",
    "evaluate_partition",
    "group_lag",
    "probe",
]
