-- METADATA columns: every key Kafka records carry, readable and (where Flink allows) writable.

-- expect: kafka name=audited_events
CREATE TABLE audited_events (
  event_id STRING,
  body STRING,
  src_topic STRING METADATA FROM 'topic' VIRTUAL,
  src_partition INT METADATA FROM 'partition' VIRTUAL,
  `offset` BIGINT METADATA VIRTUAL,
  leader_epoch INT METADATA FROM 'leader-epoch' VIRTUAL,
  ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp',
  ts_type STRING METADATA FROM 'timestamp-type' VIRTUAL,
  headers MAP<STRING, BYTES> METADATA
) WITH (
  'connector' = 'kafka',
  'topic' = 'audited_events',
  'format' = 'json'
);

-- Metadata next to a primary key: the key stays on physical columns.
-- expect: upsert-kafka primary_key=id
CREATE TABLE users_with_metadata (
  id BIGINT,
  name STRING,
  updated_at TIMESTAMP_LTZ(3) METADATA FROM 'timestamp',
  `partition` INT METADATA VIRTUAL,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'users_with_metadata',
  'key.format' = 'json',
  'value.format' = 'json'
);

-- Several topics read as one table, each row telling its topic.
-- expect: kafka topic=orders_eu,orders_us
CREATE TABLE all_orders (
  order_id STRING,
  amount DECIMAL(10, 2),
  src STRING METADATA FROM 'topic' VIRTUAL
) WITH (
  'connector' = 'kafka',
  'topic' = 'orders_eu;orders_us',
  'format' = 'json'
);

-- expect: upsert-kafka topic_pattern=tenant-[a-z]+-users
CREATE TABLE tenant_users (
  id BIGINT,
  name STRING,
  src STRING METADATA FROM 'topic' VIRTUAL,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic-pattern' = 'tenant-[a-z]+-users',
  'key.format' = 'json',
  'value.format' = 'json'
);

-- expect: spec-error columns.src.metadata: unknown metadata key 'source'.
CREATE TABLE unknown_metadata (
  id BIGINT,
  src STRING METADATA FROM 'source' VIRTUAL
) WITH (
  'connector' = 'kafka',
  'topic' = 'unknown_metadata',
  'format' = 'json'
);

-- expect: ddl-error PRIMARY KEY on a METADATA column at 4:16
CREATE TABLE keyed_by_offset (
  body STRING,
  `offset` BIGINT METADATA VIRTUAL,
  PRIMARY KEY (`offset`) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'keyed_by_offset',
  'key.format' = 'json',
  'value.format' = 'json'
);

-- expect: spec-error topic: Option 'topic' and 'topic-pattern' shouldn't be set together.
CREATE TABLE topic_and_pattern (
  id BIGINT,
  v STRING
) WITH (
  'connector' = 'kafka',
  'topic' = 'a',
  'topic-pattern' = 'a.*',
  'format' = 'json'
);

-- expect: spec-error topic: Either 'topic' or 'topic-pattern' must be set.
CREATE TABLE no_topic (
  id BIGINT,
  v STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'key.format' = 'json',
  'value.format' = 'json'
);
