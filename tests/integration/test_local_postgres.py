"""The local PostgreSQL: password auth over TCP, the server's user, stop, the detached mode used by
the CLI, finding the binaries, and the PostgreSQL JDBC driver from Spark."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import tempfile
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import pytest

from upsert_kafka_ops.errors import LocalServiceError
from upsert_kafka_ops.local import LocalPostgres
from upsert_kafka_ops.local import postgres as pg_module

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture
def server_dir() -> Iterator[Path]:
    """A folder for a server of the test's own. Not pytest's tmp_path: as root the server runs as
    another user, who cannot enter /tmp/pytest-of-root (mode 0700)."""
    d = Path(tempfile.mkdtemp(prefix="uko-pg-test-"))
    yield d
    pg_module.stop_detached(d)  # a test that failed half-way leaves no server behind
    shutil.rmtree(d, ignore_errors=True)


def _expected_server_uid() -> int:
    return pwd.getpwnam(pg_module.SERVICE_USER).pw_uid if os.geteuid() == 0 else os.geteuid()


def _process_uid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no Uid line for pid {pid}")


def test_accepts_the_password_over_tcp(postgres: LocalPostgres) -> None:
    with psycopg.connect(postgres.conninfo, connect_timeout=10) as conn:
        row = conn.execute(
            "SELECT current_user, current_database(), host(inet_server_addr()), inet_server_port()"
        ).fetchone()
    # inet_server_addr() is NULL over a unix socket: this was TCP
    assert row == (postgres.user, postgres.database, "127.0.0.1", postgres.port)


def test_tcp_logins_use_scram(postgres: LocalPostgres) -> None:
    with psycopg.connect(postgres.conninfo, connect_timeout=10) as conn:
        rules = conn.execute(
            "SELECT type, address, auth_method, error FROM pg_hba_file_rules ORDER BY line_number"
        ).fetchall()
        stored = conn.execute("SELECT rolpassword FROM pg_authid WHERE rolname = current_user").fetchone()
    assert rules == [("local", None, "trust", None), ("host", "127.0.0.1", "scram-sha-256", None)]
    assert stored is not None and stored[0].startswith("SCRAM-SHA-256$")


def test_rejects_a_wrong_password(postgres: LocalPostgres) -> None:
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(
            host=postgres.host,
            port=postgres.port,
            dbname=postgres.database,
            user=postgres.user,
            password="not-" + postgres.password,
            connect_timeout=10,
        )


def test_repr_hides_the_password(postgres: LocalPostgres) -> None:
    text = repr(postgres)
    assert f"port={postgres.port}" in text and "running=True" in text
    for shown in (text, str(postgres), postgres.jdbc_url):
        assert postgres.password not in shown
    assert postgres.jdbc_url == f"jdbc:postgresql://127.0.0.1:{postgres.port}/{postgres.database}"
    # only the connection settings carry it
    assert f"password={postgres.password}" in postgres.conninfo
    assert postgres.jdbc_properties()["password"] == postgres.password


def test_the_server_never_runs_as_root(postgres: LocalPostgres) -> None:
    assert postgres.pid is not None and postgres.dir is not None
    uid = _process_uid(postgres.pid)
    assert uid == _expected_server_uid() != 0
    assert postgres.data_dir.stat().st_uid == uid
    assert postgres.run_as == pwd.getpwuid(uid).pw_name
    # the socket is in the data folder, not /var/run/postgresql
    assert (postgres.data_dir / f".s.PGSQL.{postgres.port}").is_socket()


def test_create_database(postgres: LocalPostgres) -> None:
    name = f"db_{uuid.uuid4().hex[:8]}"
    postgres.create_database(name)
    with psycopg.connect(postgres.conninfo, dbname=name, connect_timeout=10) as conn:
        assert conn.execute("SELECT current_database()").fetchone() == (name,)


def test_stop_is_idempotent_and_a_restart_keeps_the_cluster(server_dir: Path) -> None:
    server = LocalPostgres(server_dir)
    server.stop()  # never started: nothing to do
    with server:
        port, password = server.port, server.password
        with psycopg.connect(server.conninfo, connect_timeout=10) as conn:
            conn.execute("CREATE TABLE kept (id int PRIMARY KEY)")
            conn.execute("INSERT INTO kept VALUES (7)")
    server.stop()  # already stopped by the with block
    assert not server.running and server.pid is None
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(host="127.0.0.1", port=port, user=server.user, password=password, connect_timeout=5)

    # the same folder again: no second initdb, same password, same rows
    with LocalPostgres(server_dir) as again:
        assert again.password == password
        with psycopg.connect(again.conninfo, connect_timeout=10) as conn:
            assert conn.execute("SELECT id FROM kept").fetchall() == [(7,)]
    assert (server_dir / "password").stat().st_mode & 0o077 == 0


def test_detached_start_status_stop(server_dir: Path) -> None:
    assert pg_module.detached_status(server_dir)["running"] is False
    server = pg_module.start_detached(server_dir)
    status = pg_module.detached_status(server_dir)
    assert status["running"] is True
    assert status["port"] == server.port and status["pid"] == server.pid
    assert status["dir"] == str(server_dir.resolve()) and status["user"] == server.user
    assert status["jdbc_url"] == server.jdbc_url
    state_text = (server_dir / "state.json").read_text()
    assert server.password not in state_text and json.loads(state_text)["port"] == server.port

    # a client of the detached server: the password comes from the password file
    password = Path(status["password_file"]).read_text().strip()
    with psycopg.connect(
        host=status["host"], port=status["port"], user=status["user"], dbname=status["database"],
        password=password, connect_timeout=10,
    ) as conn:  # fmt: skip
        assert conn.execute("SELECT 1").fetchone() == (1,)

    with pytest.raises(LocalServiceError, match="already running"):
        pg_module.start_detached(server_dir)

    assert pg_module.stop_detached(server_dir) is True
    assert pg_module.detached_status(server_dir)["running"] is False
    assert not (server_dir / "state.json").exists()
    assert pg_module.stop_detached(server_dir) is False


def test_a_failed_start_shows_the_server_log(server_dir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = LocalPostgres(server_dir, port=port)
        with pytest.raises(LocalServiceError, match=r"(?s)did not start.*postgresql\.log.*could not bind"):
            server.start()
    assert not server.running
    assert pg_module.detached_status(server_dir)["running"] is False  # nothing left behind


def test_missing_binaries_say_how_to_install(tmp_path: Path) -> None:
    with pytest.raises(LocalServiceError, match=r"apt-get install -y postgresql.*make toolchain"):
        pg_module.find_binaries(pg_config=str(tmp_path / "pg_config"), roots=(tmp_path,), path=str(tmp_path))


def test_the_highest_installed_version_is_used(tmp_path: Path) -> None:
    for version, programs in {"9.6": ("initdb", "pg_ctl"), "15": ("initdb", "pg_ctl"),
                              "16": ("initdb", "pg_ctl"), "17": ("initdb",)}.items():  # fmt: skip
        bindir = tmp_path / version / "bin"
        bindir.mkdir(parents=True)
        for name in programs:
            (bindir / name).write_text("#!/bin/sh\n")
            (bindir / name).chmod(0o755)
    empty = tmp_path / "empty"
    empty.mkdir()
    found = pg_module.find_binaries(pg_config=str(empty / "pg_config"), roots=(tmp_path,), path=str(empty))
    # 17 lacks pg_ctl; 16 beats 9.6 as a number
    assert found.bindir == tmp_path / "16" / "bin"


def test_spark_writes_through_the_postgresql_jdbc_driver(
    spark: SparkSession, postgres: LocalPostgres
) -> None:
    from pyspark.sql.types import BooleanType, DecimalType, LongType, StringType, StructField, StructType

    table = f"users_{uuid.uuid4().hex[:8]}"
    rows = [
        (1, "Bob", "Beijing", Decimal("10.50"), True),
        (2, "Alice", "Hangzhou", Decimal("0.00"), False),
        (3, "Greg", None, Decimal("-3.25"), None),
    ]
    schema = StructType(
        [
            StructField("id", LongType(), False),
            StructField("name", StringType(), False),
            StructField("region", StringType(), True),
            StructField("balance", DecimalType(10, 2), True),
            StructField("active", BooleanType(), True),
        ]
    )
    df = spark.createDataFrame(rows, schema)
    df.write.jdbc(postgres.jdbc_url, table, mode="overwrite", properties=postgres.jdbc_properties())

    with psycopg.connect(postgres.conninfo, connect_timeout=10) as conn:
        back = conn.execute(f'SELECT id, name, region, balance, active FROM "{table}" ORDER BY id').fetchall()
        types = dict(
            conn.execute(
                "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = %s",
                (table,),
            ).fetchall()
        )
    assert back == rows
    assert types == {
        "id": "bigint",
        "name": "text",
        "region": "text",
        "balance": "numeric",
        "active": "boolean",
    }
