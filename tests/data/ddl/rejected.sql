-- Statements with no batch meaning here, or malformed: each error names the construct and where
-- it starts (line and column inside the statement).

-- expect: ddl-error PARTITIONED BY at 5:1
CREATE TABLE partitioned (
  id BIGINT,
  day STRING
)
PARTITIONED BY (day)
WITH ('connector' = 'kafka', 'topic' = 'p', 'format' = 'json');

-- expect: ddl-error LIKE at 4:1
CREATE TABLE derived (
  extra STRING
) WITH ('connector' = 'kafka', 'topic' = 'd', 'format' = 'json')
LIKE base_table (EXCLUDING OPTIONS);

-- expect: ddl-error CTAS at 2:1
CREATE TABLE copy_of_users WITH ('connector' = 'upsert-kafka', 'topic' = 'copy')
AS SELECT * FROM users;

-- expect: ddl-error missing WITH clause at 4:2
CREATE TABLE catalog_only (
  id BIGINT,
  v STRING
);

-- expect: ddl-error duplicate option at 5:3
CREATE TABLE twice (
  id BIGINT
) WITH (
  'connector' = 'kafka',
  'connector' = 'upsert-kafka'
);

-- expect: ddl-error duplicate column at 3:3
CREATE TABLE same_name (
  id BIGINT,
  `id` STRING
) WITH ('connector' = 'kafka', 'topic' = 's', 'format' = 'json');

-- expect: ddl-error data type at 3:10
CREATE TABLE interval_column (
  id BIGINT,
  waited INTERVAL DAY TO SECOND
) WITH ('connector' = 'kafka', 'topic' = 'i', 'format' = 'json');

-- A placeholder copied from a documentation template.
-- expect: ddl-error syntax error at 4:3
CREATE TABLE template (
  id BIGINT,
  v STRING,
  ...
) WITH ('connector' = 'kafka', 'topic' = 't', 'format' = 'json');

-- expect: spec-error connector.version: Unsupported options found for 'upsert-kafka'.
CREATE TABLE not_kafka (
  id BIGINT,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'x',
  'key.format' = 'json',
  'value.format' = 'json',
  'connector.version' = 'universal'
);
