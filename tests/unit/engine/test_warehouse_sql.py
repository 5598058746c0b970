"""The SQL the warehouse targets run, as text (no Spark, no database): Delta's and Iceberg's MERGE,
PostgreSQL's column types, stage table names and advisory lock keys."""

from __future__ import annotations

import pytest

from upsert_kafka_ops.engine.postgres import pg_lock_key, pg_type, stage_name
from upsert_kafka_ops.engine.warehouse import merge_sql, sql_string, target_columns
from upsert_kafka_ops.spec.table import UpsertKafkaTable
from upsert_kafka_ops.spec.types import parse_type

TABLE = UpsertKafkaTable.from_flink_ddl(
    "CREATE TABLE t (region STRING, `user id` BIGINT, score DOUBLE, PRIMARY KEY (region, `user id`) NOT ENFORCED) "
    "WITH ('connector' = 'upsert-kafka', 'topic' = 't', 'key.format' = 'json', 'value.format' = 'json')"
)


def test_the_merge_deletes_updates_and_inserts_by_the_whole_primary_key() -> None:
    sql = merge_sql("delta.`/t`", "changes", TABLE)
    assert sql.startswith("MERGE INTO delta.`/t` AS t USING changes AS s ON ")
    assert " ON t.`region` = s.`region` AND t.`user id` = s.`user id` " in sql
    clauses = sql.split(" WHEN ")[1:]
    assert clauses == [
        "MATCHED AND s.op = '-D' THEN DELETE",
        "MATCHED AND s.op <> '-D' THEN UPDATE SET t.`region` = s.`region`, t.`user id` = s.`user id`, "
        "t.`score` = s.`score`",
        "NOT MATCHED AND s.op <> '-D' THEN INSERT (`region`, `user id`, `score`) "
        "VALUES (s.`region`, s.`user id`, s.`score`)",
    ]


def test_a_history_merge_closes_a_version_by_setting_only_its_closing_columns() -> None:
    sql = merge_sql("h", "v", TABLE, close_only=("valid_to", "is_current"))
    clauses = sql.split(" WHEN ")[1:]
    assert clauses[0] == "MATCHED AND s.op = '-D' THEN DELETE"
    assert (
        clauses[1]
        == "MATCHED AND s.op = 'close' THEN UPDATE SET t.`valid_to` = s.`valid_to`, t.`is_current` = s.`is_current`"
    )
    assert clauses[2].startswith("MATCHED AND s.op NOT IN ('-D', 'close') THEN UPDATE SET ")
    assert clauses[3].startswith("NOT MATCHED AND s.op NOT IN ('-D', 'close') THEN INSERT ")


def test_columns_keep_the_declared_order_and_a_string_literal_escapes_quotes_and_backslashes() -> None:
    assert [n for n, _ in target_columns(TABLE)] == ["region", "user id", "score"]
    assert sql_string("it's a \\ path") == "'it\\'s a \\\\ path'"


@pytest.mark.parametrize(
    ("flink", "postgres"),
    [
        ("STRING", "text"),
        ("VARCHAR(20)", "varchar(20)"),
        ("DECIMAL(10, 2)", "numeric(10,2)"),
        ("TIMESTAMP(9)", "timestamp(6)"),
        ("TIMESTAMP_LTZ(3)", "timestamptz(3)"),
        ("ARRAY<INT>", "jsonb"),
        ("ROW<a INT>", "jsonb"),
        ("BYTES", "bytea"),
    ],
)
def test_flink_types_map_to_postgres_columns(flink: str, postgres: str) -> None:
    assert pg_type(parse_type(flink)) == postgres


def test_a_job_has_one_stage_table_beside_its_target_so_a_killed_runs_stage_is_reused() -> None:
    assert stage_name("shop.users", "users-to-pg") == "shop._uko_stage_users_to_pg"
    assert stage_name("users", "Users.Daily") == "public._uko_stage_users_daily"
    assert stage_name("s.t", "x" * 100) == "s._uko_stage_" + "x" * 40
    assert stage_name("s.t", "a-b") == stage_name("s.t", "a-b") != stage_name("s.t", "a-c")


def test_the_advisory_lock_key_is_stable_per_target_and_fits_a_signed_bigint() -> None:
    key = pg_lock_key("postgres://db:5432/shop/public.users")
    assert key == pg_lock_key("postgres://db:5432/shop/public.users")
    assert 0 <= key < 2**63
    assert key != pg_lock_key("postgres://db:5432/shop/public.orders")
