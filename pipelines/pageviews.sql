-- Alibaba Cloud VVR's upsert-kafka example as a Flink SQL script: PV and UV per region from a
-- pageview topic into an upsert topic, and that topic kept as a Delta table. (The page declares
-- `viewtime TIMESTAMP`, and Flink 2.2 refuses a watermark on a TIMESTAMP(6); and without a group id
-- open-source Flink needs a start mode, as its default is the group's offsets.)
-- `upsert-kafka-ops import-flink-sql pipelines/pageviews.sql > pageviews.yaml` makes it a pipeline
-- (docs/flink-migration.md shows the result).
SET 'pipeline.name' = 'pageviews';
SET 'parallelism.default' = '2';
SET 'execution.checkpointing.dir' = 'file:///tmp/pageviews/checkpoints';

CREATE TABLE pageviews (
  user_id BIGINT,
  page_id BIGINT,
  viewtime TIMESTAMP(3),
  user_region STRING,
  WATERMARK FOR viewtime AS viewtime - INTERVAL '2' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'pageviews',
  'properties.bootstrap.servers' = 'localhost:9092',
  'scan.startup.mode' = 'earliest-offset',
  'format' = 'json'
);

CREATE TABLE pageviews_per_region (
  user_region STRING,
  pv BIGINT,
  uv BIGINT,
  PRIMARY KEY (user_region) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'pageviews_per_region',
  'properties.bootstrap.servers' = 'localhost:9092',
  'key.format' = 'avro',
  'value.format' = 'avro'
);

-- the Delta connector for Flink's table API
CREATE TABLE pageviews_per_region_lake (
  user_region STRING,
  pv BIGINT,
  uv BIGINT,
  PRIMARY KEY (user_region) NOT ENFORCED
) WITH (
  'connector' = 'delta',
  'table-path' = '/tmp/lake/pageviews_per_region'
);

INSERT INTO pageviews_per_region
SELECT user_region, COUNT(*), COUNT(DISTINCT user_id)
FROM pageviews
GROUP BY user_region;

INSERT INTO pageviews_per_region_lake SELECT * FROM pageviews_per_region;
