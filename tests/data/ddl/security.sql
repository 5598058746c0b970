-- Client properties: security settings set the table's connection (over a pipeline connection's
-- defaults); the ones the connector owns are refused. Secrets are references (env:NAME, file:/path),
-- never literal: a literal JAAS line would reach the DDL, job files and logs.

-- expect: upsert-kafka properties.security.protocol=SASL_SSL properties.sasl.jaas.config=env:KAFKA_JAAS
CREATE TABLE secured_users_ref (
  id BIGINT,
  name STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'secured_users',
  'properties.bootstrap.servers' = 'broker-1:9093,broker-2:9093',
  'properties.security.protocol' = 'SASL_SSL',
  'properties.sasl.mechanism' = 'SCRAM-SHA-512',
  'properties.sasl.jaas.config' = 'env:KAFKA_JAAS',
  'properties.ssl.truststore.location' = '/etc/kafka/ca.pem',
  'properties.ssl.truststore.password' = 'file:/run/secrets/truststore-password',
  'key.format' = 'json',
  'value.format' = 'json'
);

-- expect: spec-error properties.sasl.jaas.config: holds a literal secret
CREATE TABLE secured_users (
  id BIGINT,
  name STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'secured_users',
  'properties.bootstrap.servers' = 'broker-1:9093,broker-2:9093',
  'properties.security.protocol' = 'SASL_SSL',
  'properties.sasl.mechanism' = 'SCRAM-SHA-512',
  'properties.sasl.jaas.config' = 'org.apache.kafka.common.security.scram.ScramLoginModule required username=''etl'' password=''${KAFKA_PASSWORD}'';',
  'properties.ssl.truststore.location' = '/etc/kafka/truststore.jks',
  'properties.ssl.endpoint.identification.algorithm' = 'https',
  'properties.client.id' = 'users-materializer',
  'properties.max.poll.records' = '5000',
  'key.format' = 'json',
  'value.format' = 'json'
);

-- expect: kafka properties.security.protocol=SSL
CREATE TABLE mtls_events (
  id BIGINT,
  body STRING
) WITH (
  'connector' = 'kafka',
  'topic' = 'mtls_events',
  'properties.security.protocol' = 'SSL',
  'properties.ssl.keystore.type' = 'PKCS12',
  'properties.ssl.keystore.location' = '/etc/kafka/client.p12',
  'properties.ssl.truststore.type' = 'PEM',
  'properties.ssl.truststore.location' = '/etc/kafka/ca.pem',
  'format' = 'json'
);

-- expect: spec-error properties.value.deserializer: is set by the connector itself
CREATE TABLE own_deserializer (
  id BIGINT,
  v STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'own_deserializer',
  'properties.value.deserializer' = 'org.example.MyDeserializer',
  'key.format' = 'json',
  'value.format' = 'json'
);

-- expect: spec-error properties.enable.auto.commit: is set by the connector itself
CREATE TABLE auto_commit (
  id BIGINT,
  v STRING
) WITH (
  'connector' = 'kafka',
  'topic' = 'auto_commit',
  'properties.enable.auto.commit' = 'true',
  'format' = 'json'
);

-- Sink settings.

-- expect: upsert-kafka sink_parallelism=2 sink_buffer_flush_max_rows=1000 sink_buffer_flush_interval_ms=2000
CREATE TABLE buffered_sink (
  id BIGINT,
  v STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'buffered_sink',
  'key.format' = 'json',
  'value.format' = 'json',
  'sink.parallelism' = '2',
  'sink.buffer-flush.max-rows' = '1000',
  'sink.buffer-flush.interval' = '2s',
  'sink.delivery-guarantee' = 'at-least-once'
);

-- A transactional id prefix without exactly-once would mean nothing: refused, not ignored.
-- expect: spec-error sink.transactional-id-prefix: it applies to 'exactly-once' delivery
CREATE TABLE prefix_without_transactions (
  id BIGINT,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'prefix_without_transactions',
  'key.format' = 'json',
  'value.format' = 'json',
  'sink.transactional-id-prefix' = 'users-tx'
);

-- expect: upsert-kafka sink_delivery_guarantee=none
CREATE TABLE fire_and_forget (
  id BIGINT,
  v STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'fire_and_forget',
  'key.format' = 'json',
  'value.format' = 'json',
  'sink.delivery-guarantee' = 'NONE'
);

-- expect: spec-error sink.delivery-guarantee: exactly-once is not available
CREATE TABLE exactly_once (
  id BIGINT,
  v STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'exactly_once',
  'key.format' = 'json',
  'value.format' = 'json',
  'sink.delivery-guarantee' = 'exactly-once',
  'sink.transactional-id-prefix' = 'tx'
);

-- expect: spec-error sink.buffer-flush.max-rows: must be set to be greater than zero together
CREATE TABLE half_buffered (
  id BIGINT,
  v STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'half_buffered',
  'key.format' = 'json',
  'value.format' = 'json',
  'sink.buffer-flush.max-rows' = '1000'
);

-- expect: spec-error sink.buffer-flush.interval: 'soon' is not a duration.
CREATE TABLE bad_interval (
  id BIGINT,
  v STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'bad_interval',
  'key.format' = 'json',
  'value.format' = 'json',
  'sink.buffer-flush.max-rows' = '10',
  'sink.buffer-flush.interval' = 'soon'
);

-- expect: spec-error key.format: is required.
CREATE TABLE no_key_format (
  id BIGINT,
  v STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'no_key_format',
  'value.format' = 'json'
);

-- expect: spec-error scan.startup.mode: Unsupported options found for 'upsert-kafka'.
CREATE TABLE upsert_startup_mode (
  id BIGINT,
  v STRING,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'upsert_startup_mode',
  'key.format' = 'json',
  'value.format' = 'json',
  'scan.startup.mode' = 'latest-offset'
);

-- expect: spec-error sink.transaction-naming-strategy: it applies to 'exactly-once' delivery
CREATE TABLE naming_without_transactions (
  id BIGINT,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'naming_without_transactions',
  'key.format' = 'json',
  'value.format' = 'json',
  'sink.transaction-naming-strategy' = 'POOLING'
);
