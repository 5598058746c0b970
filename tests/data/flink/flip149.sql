-- FLIP-149's enrichment and window statements as the FLIP writes them: a processing-time column, a
-- temporal join on it and a group window, none of which a pipeline here runs.
CREATE TABLE pageviews (
  user_id BIGINT,
  page_id BIGINT,
  viewtime TIMESTAMP,
  proctime AS PROCTIME()
) WITH (
  'connector' = 'kafka',
  'topic' = 'pageviews',
  'properties.bootstrap.servers' = 'broker:9092',
  'format' = 'json'
);
INSERT INTO pageviews_enriched
SELECT *
FROM pageviews AS p
LEFT JOIN users FOR SYSTEM_TIME AS OF p.proctime AS u
ON p.user_id = u.user_id;
INSERT INTO pageviews_per_region_5min
SELECT
  TUMBLE_START(viewtime, INTERVAL '5' MINUTE),
  region,
  COUNT(*)
FROM pageviews_enriched
GROUP BY region, TUMBLE(viewtime, INTERVAL '5' MINUTE);
