-- Where a read ends (scan.bounded.*) and where a plain source starts (scan.startup.*).

-- expect: upsert-kafka scan_bounded_mode=latest-offset
CREATE TABLE until_latest (
  id BIGINT,
  v STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'until_latest',
  'key.format' = 'json',
  'value.format' = 'json',
  'scan.bounded.mode' = 'latest-offset'
);

-- expect: upsert-kafka scan_bounded_mode=group-offsets properties.group.id=nightly
CREATE TABLE until_group (
  id BIGINT,
  v STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'until_group',
  'key.format' = 'json',
  'value.format' = 'json',
  'properties.group.id' = 'nightly',
  'scan.bounded.mode' = 'group-offsets'
);

-- expect: upsert-kafka scan_bounded_mode=timestamp scan_bounded_timestamp_millis=1767225600000
CREATE TABLE until_new_year (
  id BIGINT,
  v STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'until_new_year',
  'key.format' = 'json',
  'value.format' = 'json',
  'scan.bounded.mode' = 'timestamp',
  'scan.bounded.timestamp-millis' = '1767225600000'
);

-- expect: upsert-kafka scan_bounded_mode=specific-offsets bounded_offsets=0:42,1:300
CREATE TABLE until_offsets (
  id BIGINT,
  v STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'until_offsets',
  'key.format' = 'json',
  'value.format' = 'json',
  'scan.bounded.mode' = 'specific-offsets',
  'scan.bounded.specific-offsets' = 'partition:0,offset:42;partition:1,offset:300'
);

-- Options that steer Flink's parallel source mean nothing to a Spark run: refused, not ignored.
-- expect: spec-error scan.parallelism: Spark sizes the read from the topic's partitions
CREATE TABLE flink_source_tuning (
  id BIGINT,
  v STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'flink_source_tuning',
  'key.format' = 'json',
  'value.format' = 'json',
  'scan.parallelism' = '4',
  'scan.topic-partition-discovery.interval' = '5 min'
);

-- A plain kafka source read from a point in time up to the end offsets when the read starts.
-- expect: kafka name=from_a_time value_format=json topic=from_a_time
CREATE TABLE from_a_time (
  id BIGINT,
  v STRING
) WITH (
  'connector' = 'kafka',
  'topic' = 'from_a_time',
  'format' = 'json',
  'scan.startup.mode' = 'timestamp',
  'scan.startup.timestamp-millis' = '1767225600000',
  'scan.bounded.mode' = 'latest-offset'
);

-- expect: spec-error scan.bounded.timestamp-millis: is required in 'timestamp' bounded mode but missing.
CREATE TABLE timestamp_without_millis (
  id BIGINT,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'timestamp_without_millis',
  'key.format' = 'json',
  'value.format' = 'json',
  'scan.bounded.mode' = 'timestamp'
);

-- expect: spec-error scan.bounded.specific-offsets: should follow the format 'partition:0,offset:42;partition:1,offset:300'
CREATE TABLE malformed_offsets (
  id BIGINT,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'malformed_offsets',
  'key.format' = 'json',
  'value.format' = 'json',
  'scan.bounded.mode' = 'specific-offsets',
  'scan.bounded.specific-offsets' = '0:42,1:300'
);

-- expect: spec-error scan.bounded.specific-offsets: Currently Kafka source only supports specific offset for single topic.
CREATE TABLE offsets_of_two_topics (
  id BIGINT,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'a;b',
  'key.format' = 'json',
  'value.format' = 'json',
  'scan.bounded.mode' = 'specific-offsets',
  'scan.bounded.specific-offsets' = 'partition:0,offset:1'
);

-- expect: spec-error properties.group.id: is required in 'group-offsets' bounded mode.
CREATE TABLE group_without_id (
  id BIGINT,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'group_without_id',
  'key.format' = 'json',
  'value.format' = 'json',
  'scan.bounded.mode' = 'group-offsets'
);

-- expect: spec-error scan.topic-partition-discovery.interval: each run reads the partitions the topic has when it starts
CREATE TABLE discovering (
  id BIGINT,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'discovering',
  'key.format' = 'json',
  'value.format' = 'json',
  'scan.topic-partition-discovery.interval' = '5 min'
);

-- The connector page's group-offsets start, with where a partition without committed offsets begins.
-- expect: kafka name=from_the_group value_format=json
CREATE TABLE from_the_group (
  id BIGINT,
  v STRING
) WITH (
  'connector' = 'kafka',
  'topic' = 'from_the_group',
  'format' = 'json',
  'properties.group.id' = 'testGroup',
  'scan.startup.mode' = 'group-offsets',
  'properties.auto.offset.reset' = 'earliest'
);

-- expect: spec-error properties.group.id: is required in 'group-offsets' startup mode.
CREATE TABLE group_without_group_id (
  id BIGINT
) WITH (
  'connector' = 'kafka',
  'topic' = 'group_without_group_id',
  'format' = 'json',
  'scan.startup.mode' = 'group-offsets'
);

-- expect: spec-error scan.startup.specific-offsets: should follow the format
CREATE TABLE bad_start_offsets (
  id BIGINT
) WITH (
  'connector' = 'kafka',
  'topic' = 'bad_start_offsets',
  'format' = 'json',
  'scan.startup.mode' = 'specific-offsets',
  'scan.startup.specific-offsets' = 'partition:0;offset:42'
);
