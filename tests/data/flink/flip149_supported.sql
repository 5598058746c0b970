-- FLIP-149's statements that run here: the Debezium changelog into the users table, and the
-- regional sum over the 5-minute upsert table (the enrichment and the window are in flip149.sql).
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
CREATE TABLE users (
  user_id BIGINT,
  user_name STRING,
  region STRING,
  PRIMARY KEY (user_id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'users',
  'properties.bootstrap.servers' = 'broker:9092',
  'key.format' = 'csv',
  'value.format' = 'avro'
);
CREATE TABLE pageviews_per_region_5min (
  window_start STRING,
  region STRING,
  view_count BIGINT,
  PRIMARY KEY (window_start, region) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'pageviews_per_region_5min',
  'properties.bootstrap.servers' = 'broker:9092',
  'key.format' = 'csv',
  'value.format' = 'avro'
);
CREATE TABLE pageviews_per_region (
  region STRING,
  view_count BIGINT,
  PRIMARY KEY (region) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'pageviews_per_region',
  'properties.bootstrap.servers' = 'broker:9092',
  'key.format' = 'csv',
  'value.format' = 'avro'
);
INSERT INTO users SELECT * FROM dbz_users;
INSERT INTO pageviews_per_region
SELECT
  region,
  SUM(view_count)
FROM pageviews_per_region_5min
GROUP BY region;
