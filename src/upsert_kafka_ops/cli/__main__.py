"""``python -m upsert_kafka_ops.cli ...``: the same as ``upsert-kafka-ops ...``."""

import sys

from upsert_kafka_ops.cli import main

sys.exit(main())
