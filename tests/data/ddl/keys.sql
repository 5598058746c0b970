-- Primary keys and which columns the key and the value carry.

-- A composite key declared as a table constraint, in an order other than the columns'.
-- expect: upsert-kafka primary_key=region,user_id value_fields_include=ALL
CREATE TABLE users_by_region (
  user_id BIGINT,
  region STRING,
  name STRING,
  CONSTRAINT pk_users PRIMARY KEY (region, user_id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'users_by_region',
  'key.format' = 'json',
  'value.format' = 'json'
);

-- The key declared on its column.
-- expect: upsert-kafka primary_key=order_id
CREATE TABLE orders (
  order_id STRING PRIMARY KEY NOT ENFORCED,
  amount DECIMAL(12, 2),
  placed_at TIMESTAMP(3)
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'orders',
  'key.format' = 'raw',
  'value.format' = 'json'
);

-- Key columns only in the key, with a prefix that keeps their names apart from the value's.
-- expect: upsert-kafka primary_key=k_tenant,k_id key_fields_prefix=k_ value_fields_include=EXCEPT_KEY
CREATE TABLE accounts (
  k_tenant STRING,
  k_id BIGINT,
  id BIGINT,
  balance DECIMAL(20, 4),
  PRIMARY KEY (k_tenant, k_id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'accounts',
  'key.format' = 'json',
  'key.fields-prefix' = 'k_',
  'value.format' = 'json',
  'value.fields-include' = 'EXCEPT_KEY'
);

-- Enum option values match without regard to case, as in Flink.
-- expect: upsert-kafka primary_key=id value_fields_include=EXCEPT_KEY
CREATE TABLE lower_case_enum (
  id INT,
  v STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'lower_case_enum',
  'key.format' = 'json',
  'value.format' = 'json',
  'value.fields-include' = 'except_key'
);

-- A prefix needs EXCEPT_KEY: with ALL the value would hold the key fields under two names.
-- expect: spec-error key.fields-prefix: A key prefix is not allowed when option 'value.fields-include' is set to 'ALL'.
CREATE TABLE prefix_with_all (
  k_id BIGINT,
  v STRING,
  PRIMARY KEY (k_id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'prefix_with_all',
  'key.format' = 'json',
  'key.fields-prefix' = 'k_',
  'value.format' = 'json'
);

-- Every key column must carry the prefix.
-- expect: spec-error key.fields-prefix: field 'id' is not prefixed
CREATE TABLE prefix_missing (
  k_tenant STRING,
  id BIGINT,
  v STRING,
  PRIMARY KEY (k_tenant, id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'prefix_missing',
  'key.format' = 'json',
  'key.fields-prefix' = 'k_',
  'value.format' = 'json',
  'value.fields-include' = 'EXCEPT_KEY'
);

-- expect: spec-error primary_key: 'upsert-kafka' tables require to define a PRIMARY KEY constraint.
CREATE TABLE no_key (
  id BIGINT,
  v STRING
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'no_key',
  'key.format' = 'json',
  'value.format' = 'json'
);

-- expect: ddl-error unknown PRIMARY KEY column at 4:20
CREATE TABLE wrong_key (
  id BIGINT,
  v STRING,
  PRIMARY KEY (id, vv) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'wrong_key',
  'key.format' = 'json',
  'value.format' = 'json'
);

-- expect: ddl-error PRIMARY KEY without NOT ENFORCED at 4:3
CREATE TABLE enforced_key (
  id BIGINT,
  v STRING,
  PRIMARY KEY (id)
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'enforced_key',
  'key.format' = 'json',
  'value.format' = 'json'
);

-- A plain Kafka table reads part of its columns from the key.
-- expect: kafka key_format=json key_fields=k_user,k_region key_fields_prefix=k_ value_fields_include=EXCEPT_KEY
CREATE TABLE clicks (
  k_user BIGINT,
  k_region STRING,
  url STRING,
  clicked_at TIMESTAMP(3)
) WITH (
  'connector' = 'kafka',
  'topic' = 'clicks',
  'key.format' = 'json',
  'key.fields' = 'k_user;k_region',
  'key.fields-prefix' = 'k_',
  'value.format' = 'json',
  'value.fields-include' = 'EXCEPT_KEY'
);

-- expect: spec-error primary_key: a plain 'kafka' table has no PRIMARY KEY.
CREATE TABLE kafka_with_key (
  id BIGINT,
  v STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'kafka',
  'topic' = 'kafka_with_key',
  'format' = 'json'
);

-- expect: spec-error key.fields: can only be declared if a key format is defined
CREATE TABLE key_fields_without_format (
  id BIGINT,
  v STRING
) WITH (
  'connector' = 'kafka',
  'topic' = 'key_fields_without_format',
  'key.fields' = 'id',
  'format' = 'json'
);

-- expect: spec-error key.fields: is required when 'key.format' is set.
CREATE TABLE key_format_without_fields (
  id BIGINT,
  v STRING
) WITH (
  'connector' = 'kafka',
  'topic' = 'key_format_without_fields',
  'key.format' = 'json',
  'format' = 'json'
);
