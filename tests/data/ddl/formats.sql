-- Every format, with every option it takes, as key and value formats.

-- expect: upsert-kafka key_format=json value_format=json
CREATE TABLE json_all_options (
  id BIGINT,
  attrs MAP<STRING, STRING>,
  price DECIMAL(38, 18),
  seen TIMESTAMP(3),
  note STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'json_all_options',
  'key.format' = 'json',
  'key.json.fail-on-missing-field' = 'true',
  'value.format' = 'json',
  'value.json.fail-on-missing-field' = 'false',
  'value.json.ignore-parse-errors' = 'true',
  'value.json.timestamp-format.standard' = 'ISO-8601',
  'value.json.map-null-key.mode' = 'LITERAL',
  'value.json.map-null-key.literal' = 'null-key',
  'value.json.encode.decimal-as-plain-number' = 'true',
  'value.json.encode.ignore-null-fields' = 'true',
  'value.json.decode.json-parser.enabled' = 'true'
);

-- expect: upsert-kafka key_format=csv value_format=csv
CREATE TABLE csv_quoted (
  id INT,
  tags ARRAY<STRING>,
  amount DECIMAL(10, 2),
  memo STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'csv_quoted',
  'key.format' = 'csv',
  'key.csv.field-delimiter' = '|',
  'value.format' = 'csv',
  'value.csv.field-delimiter' = ';',
  'value.csv.quote-character' = '''',
  'value.csv.allow-comments' = 'true',
  'value.csv.ignore-parse-errors' = 'true',
  'value.csv.array-element-delimiter' = ',',
  'value.csv.escape-character' = '\',
  'value.csv.null-literal' = 'n/a',
  'value.csv.write-bigdecimal-in-scientific-notation' = 'false'
);

-- expect: upsert-kafka key_format=csv value_format=csv
CREATE TABLE csv_unquoted (
  id INT,
  memo STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'csv_unquoted',
  'key.format' = 'csv',
  'value.format' = 'csv',
  'value.csv.disable-quote-character' = 'true'
);

-- raw carries one column on each side.
-- expect: upsert-kafka key_format=raw value_format=raw value_fields_include=EXCEPT_KEY
CREATE TABLE raw_pairs (
  k STRING,
  payload BYTES,
  PRIMARY KEY (k) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'raw_pairs',
  'key.format' = 'raw',
  'key.raw.charset' = 'UTF-8',
  'value.format' = 'raw',
  'value.raw.endianness' = 'big-endian',
  'value.fields-include' = 'EXCEPT_KEY'
);

-- expect: upsert-kafka key_format=avro value_format=avro
CREATE TABLE avro_rows (
  id BIGINT,
  nested ROW<a INT, b ARRAY<STRING>>,
  at TIMESTAMP(3),
  at_ltz TIMESTAMP_LTZ(3),
  d DATE,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'avro_rows',
  'key.format' = 'avro',
  'key.avro.encoding' = 'binary',
  'value.format' = 'avro',
  'value.avro.timestamp_mapping.legacy' = 'false'
);

-- expect: upsert-kafka key_format=avro-confluent value_format=avro-confluent
CREATE TABLE registry_basic_auth (
  user_id BIGINT,
  region STRING,
  score INT,
  PRIMARY KEY (user_id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'registry_basic_auth',
  'key.format' = 'avro-confluent',
  'key.avro-confluent.url' = 'https://registry:8081',
  'key.avro-confluent.subject' = 'users-key',
  'key.avro-confluent.basic-auth.credentials-source' = 'USER_INFO',
  'key.avro-confluent.basic-auth.user-info' = 'env:SR_USER_INFO',
  'key.avro-confluent.ssl.truststore.location' = '/etc/registry/trust.jks',
  'key.avro-confluent.ssl.truststore.password' = 'env:SR_TRUST_PASSWORD',
  'key.avro-confluent.ssl.keystore.location' = '/etc/registry/client.p12',
  'key.avro-confluent.ssl.keystore.password' = 'file:/run/secrets/sr-keystore',
  'value.format' = 'avro-confluent',
  'value.avro-confluent.url' = 'https://registry:8081',
  'value.avro-confluent.bearer-auth.credentials-source' = 'STATIC_TOKEN',
  'value.avro-confluent.bearer-auth.token' = 'env:SR_TOKEN',
  'value.avro-confluent.properties.timeout.ms' = '5000',
  'value.fields-include' = 'EXCEPT_KEY'
);

-- expect: kafka value_format=debezium-json
CREATE TABLE debezium_with_schema (
  id BIGINT,
  name STRING,
  price DECIMAL(10, 2)
) WITH (
  'connector' = 'kafka',
  'topic' = 'shop.public.products',
  'format' = 'debezium-json',
  'debezium-json.schema-include' = 'true',
  'debezium-json.ignore-parse-errors' = 'true',
  'debezium-json.timestamp-format.standard' = 'SQL',
  'debezium-json.map-null-key.mode' = 'DROP',
  'debezium-json.map-null-key.literal' = 'null',
  'debezium-json.encode.decimal-as-plain-number' = 'false'
);

-- expect: kafka value_format=canal-json
CREATE TABLE canal_products (
  id BIGINT,
  name STRING
) WITH (
  'connector' = 'kafka',
  'topic' = 'canal_products',
  'value.format' = 'canal-json',
  'value.canal-json.database.include' = 'shop',
  'value.canal-json.table.include' = 'products|products_[0-9]+',
  'value.canal-json.ignore-parse-errors' = 'true',
  'value.canal-json.timestamp-format.standard' = 'ISO-8601',
  'value.canal-json.map-null-key.mode' = 'FAIL',
  'value.canal-json.map-null-key.literal' = 'null',
  'value.canal-json.encode.decimal-as-plain-number' = 'true'
);

-- expect: kafka value_format=maxwell-json
CREATE TABLE maxwell_products (
  id BIGINT,
  name STRING
) WITH (
  'connector' = 'kafka',
  'topic' = 'maxwell_products',
  'format' = 'maxwell-json',
  'maxwell-json.ignore-parse-errors' = 'false',
  'maxwell-json.timestamp-format.standard' = 'SQL',
  'maxwell-json.map-null-key.mode' = 'LITERAL',
  'maxwell-json.map-null-key.literal' = 'none',
  'maxwell-json.encode.decimal-as-plain-number' = 'false'
);

-- A changelog format carries its own change kinds: upsert-kafka refuses it as the value format.
-- expect: spec-error value.format: 'upsert-kafka' connector doesn't support 'debezium-json' as value format
CREATE TABLE upsert_debezium (
  id BIGINT,
  name STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'upsert_debezium',
  'key.format' = 'json',
  'value.format' = 'debezium-json'
);

-- expect: spec-error key.format: 'canal-json' is a changelog format; a key format must be insert-only.
CREATE TABLE canal_key (
  id BIGINT,
  name STRING
) WITH (
  'connector' = 'kafka',
  'topic' = 'canal_key',
  'key.format' = 'canal-json',
  'key.fields' = 'id',
  'value.format' = 'json'
);

-- expect: spec-error value.format: the 'ogg-json' format is not supported by upsert-kafka-ops yet.
CREATE TABLE ogg (
  id BIGINT
) WITH (
  'connector' = 'kafka',
  'topic' = 'ogg',
  'format' = 'ogg-json'
);

-- expect: spec-error value.format: unknown format 'protobuf'.
CREATE TABLE proto (
  id BIGINT,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'proto',
  'key.format' = 'json',
  'value.format' = 'protobuf'
);

-- expect: spec-error value.json.ignore-errors: is not an option of the value format 'json'.
CREATE TABLE json_typo (
  id BIGINT,
  v STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'json_typo',
  'key.format' = 'json',
  'value.format' = 'json',
  'value.json.ignore-errors' = 'true'
);

-- Options of a format the table does not use are not options of this table.
-- expect: spec-error value.csv.field-delimiter: Unsupported options found for 'upsert-kafka'.
CREATE TABLE other_format_option (
  id BIGINT,
  v STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'other_format_option',
  'key.format' = 'json',
  'value.format' = 'json',
  'value.csv.field-delimiter' = ';'
);

-- expect: spec-error value.avro-confluent.url: is required for the 'avro-confluent' format.
CREATE TABLE registry_without_url (
  id BIGINT,
  v STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'registry_without_url',
  'key.format' = 'json',
  'value.format' = 'avro-confluent'
);

-- expect: spec-error value.avro-confluent.schema: is not supported
CREATE TABLE registry_with_schema (
  id BIGINT,
  v STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'registry_with_schema',
  'key.format' = 'json',
  'value.format' = 'avro-confluent',
  'value.avro-confluent.url' = 'http://registry:8081',
  'value.avro-confluent.schema' = '{"type": "record", "name": "r", "fields": []}'
);

-- A credential written into the DDL is refused, and the error never repeats it.
-- expect: spec-error value.avro-confluent.basic-auth.user-info: a literal secret is not allowed
CREATE TABLE registry_literal_secret (
  id BIGINT,
  v STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'registry_literal_secret',
  'key.format' = 'json',
  'value.format' = 'avro-confluent',
  'value.avro-confluent.url' = 'http://registry:8081',
  'value.avro-confluent.basic-auth.user-info' = 'etl:hunter2'
);

-- A control character as the CSV delimiter, written as Flink's docs write it: a Unicode literal.
-- expect: upsert-kafka value_format=csv key_format=csv
CREATE TABLE ctrl_a_delimited (
  id BIGINT,
  v STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'ctrl_a_delimited',
  'key.format' = 'csv',
  'value.format' = 'csv',
  'value.csv.field-delimiter' = U&'\0001'
);

-- expect: ddl-error Unicode literal at 9:33
CREATE TABLE bad_escape (
  id BIGINT,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'bad_escape',
  'key.format' = 'csv',
  'value.format' = 'csv',
  'value.csv.field-delimiter' = U&'\00G1'
);
