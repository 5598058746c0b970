-- The tables of FLIP-149's examples, as a Flink user writes them: a Debezium changelog, the
-- upsert table it feeds, page views and two aggregates keyed by region (one per window).

-- expect: kafka name=dbz_users value_format=debezium-json topic=dbz_users
CREATE TABLE dbz_users (
  user_id BIGINT,
  user_name STRING,
  region STRING
) WITH (
  'connector' = 'kafka',
  'topic' = 'dbz_users',
  'properties.bootstrap.servers' = 'broker:9092',
  'scan.startup.mode' = 'earliest-offset',
  'format' = 'debezium-json'
);

-- expect: upsert-kafka name=users primary_key=user_id key_format=csv value_format=avro
CREATE TABLE users (
  user_id BIGINT,
  user_name STRING,
  user_level STRING,
  region STRING,
  PRIMARY KEY (user_id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'users',
  'properties.bootstrap.servers' = 'broker:9092',
  'key.format' = 'csv',
  'value.format' = 'avro'
);

-- Processing time is a computed column: no batch meaning here.
-- expect: ddl-error computed column at 5:3
CREATE TABLE pageviews (
  user_id BIGINT,
  page_id BIGINT,
  viewtime TIMESTAMP,
  proctime AS PROCTIME()
) WITH (
  'connector' = 'kafka',
  'topic' = 'pageviews',
  'format' = 'json'
);

-- The same source with an event-time watermark.
-- expect: ddl-error WATERMARK at 5:3
CREATE TABLE pageviews_et (
  user_id BIGINT,
  page_id BIGINT,
  viewtime TIMESTAMP(3),
  WATERMARK FOR viewtime AS viewtime - INTERVAL '2' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'pageviews',
  'format' = 'json'
);

-- The source as this project reads it: physical columns only.
-- expect: kafka name=pageviews value_format=json
CREATE TABLE pageviews (
  user_id BIGINT,
  page_id BIGINT,
  viewtime TIMESTAMP(3)
) WITH (
  'connector' = 'kafka',
  'topic' = 'pageviews',
  'properties.bootstrap.servers' = 'broker:9092',
  'format' = 'json'
);

-- expect: upsert-kafka name=pageviews_per_region primary_key=user_region key_format=json
CREATE TABLE pageviews_per_region (
  user_region STRING,
  pv BIGINT,
  uv BIGINT,
  PRIMARY KEY (user_region) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'pageviews_per_region',
  'properties.bootstrap.servers' = 'broker:9092',
  'key.format' = 'json',
  'value.format' = 'json'
);

-- A windowed aggregate: the window start is part of the key.
-- expect: upsert-kafka name=pageviews_per_region_5min primary_key=window_start,region
CREATE TABLE pageviews_per_region_5min (
  window_start TIMESTAMP(3),
  region STRING,
  view_count BIGINT,
  PRIMARY KEY (window_start, region) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'pageviews_per_region_5min',
  'properties.bootstrap.servers' = 'broker:9092',
  'key.format' = 'json',
  'value.format' = 'json'
);
