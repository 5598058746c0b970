"""A real local PostgreSQL server on 127.0.0.1, for the JDBC warehouse target and its tests.

Use it as a context manager::

    with LocalPostgres() as pg:
        psycopg.connect(pg.conninfo)
        df.write.jdbc(pg.jdbc_url, "users", mode="overwrite", properties=pg.jdbc_properties())

or from the command line (``upsert-kafka-ops local postgres start|stop|status``), which keeps the
port and the folder in ``state.json`` of the state folder (:func:`start_detached`).

The server binaries (``initdb``, ``pg_ctl``) come from the machine: Debian's ``postgresql`` package,
which ``make toolchain`` installs as root. The cluster is created once per folder, with a generated
password for its superuser; TCP connections must present it (``scram-sha-256``), as with a real
warehouse. The unix socket lives in the data folder (never ``/var/run/postgresql``) and trusts its
callers: only the server's own user and root can open that folder.

PostgreSQL refuses to run as root. As root, the server runs as the system user ``uko-postgres``
(created with ``useradd --system`` when missing) and the folder is handed to that user, so the
folder's parents must be searchable by other users: ``/tmp`` is, pytest's ``tmp_path`` is not.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from upsert_kafka_ops.errors import LocalServiceError
from upsert_kafka_ops.local.process import free_port

#: The system user the server runs as when this process is root.
SERVICE_USER = "uko-postgres"
#: The superuser created by ``initdb``; the connection properties log in as it.
DEFAULT_USER = "uko"
#: The database ``initdb`` always creates.
DEFAULT_DATABASE = "postgres"
HOST = "127.0.0.1"
JDBC_DRIVER = "org.postgresql.Driver"

INSTALL_HINT = (
    "Install the PostgreSQL server: on Debian/Ubuntu `apt-get install -y postgresql` as root "
    "(`make toolchain` does it), on macOS `brew install postgresql`."
)
_SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_CONF_NAME = "upsert_kafka_ops.conf"
_SOCKET_PATH_MAX = 107  # sizeof(sockaddr_un.sun_path) - 1 on Linux
_HBA = """\
# Written by upsert_kafka_ops.local.postgres.
# The socket sits in the data folder, which only the server's user (and root) can open.
local   all   all                  trust
# TCP needs the password, as a real warehouse does.
host    all   all   127.0.0.1/32   scram-sha-256
"""


# -- binaries ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class PgBinaries:
    """The folder holding the server programs (``initdb``, ``pg_ctl``, ``postgres``)."""

    bindir: Path

    def tool(self, name: str) -> str:
        """A program from :attr:`bindir`, else from ``PATH``."""
        candidate = self.bindir / name
        if _executable(candidate):
            return str(candidate)
        found = shutil.which(name)
        if found is None:
            raise LocalServiceError(
                f"The PostgreSQL program {name!r} is neither in {self.bindir} nor on PATH. {INSTALL_HINT}"
            )
        return found


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _has_server(bindir: Path) -> bool:
    return all(_executable(bindir / name) for name in ("initdb", "pg_ctl"))


def _version_key(bindir: Path) -> tuple[int, ...]:
    # <root>/<version>/bin: compare versions as numbers (16 > 9.6)
    return tuple(int(p) if p.isdigit() else -1 for p in bindir.parent.name.split("."))


def find_binaries(
    *,
    pg_config: str = "pg_config",
    roots: tuple[Path, ...] = (Path("/usr/lib/postgresql"),),
    path: str | None = None,
) -> PgBinaries:
    """Find the server programs: ``pg_config --bindir``, then ``<root>/<version>/bin`` (the highest
    version), then ``PATH``.

    :param pg_config: the ``pg_config`` program (name or path).
    :param roots: folders holding one ``<version>/bin`` per installed major version (Debian's layout).
    :param path: the search path for ``pg_config`` and ``pg_ctl`` (default: ``$PATH``).
    :raises LocalServiceError: when none has both ``initdb`` and ``pg_ctl``, with the install command.
    """
    looked: list[str] = []
    exe = shutil.which(pg_config, path=path)
    answer = ""
    if exe is not None:
        try:
            proc = subprocess.run([exe, "--bindir"], capture_output=True, text=True, timeout=30, check=False)
            answer = proc.stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            answer = ""
        if answer and _has_server(Path(answer)):
            return PgBinaries(Path(answer))
    looked.append(f"`{pg_config} --bindir` ({answer or 'not found'})")
    for root in roots:
        found = sorted((d for d in root.glob("*/bin") if _has_server(d)), key=_version_key, reverse=True)
        if found:
            return PgBinaries(found[0])
        looked.append(f"{root}/*/bin")
    pg_ctl = shutil.which("pg_ctl", path=path)
    if pg_ctl is not None:
        for d in (Path(pg_ctl).resolve().parent, Path(pg_ctl).parent):
            if _has_server(d):
                return PgBinaries(d)
    looked.append("PATH")
    raise LocalServiceError(
        f"The PostgreSQL server programs (initdb, pg_ctl) were not found (looked at: {', '.join(looked)}). "
        + INSTALL_HINT
    )


# -- the account the server runs as ------------------------------------------------------------
@dataclass(frozen=True)
class ServiceAccount:
    """The system user the server runs as (only when this process is root)."""

    name: str
    uid: int
    gid: int


def _system_tool(name: str) -> str | None:
    return shutil.which(name, path=os.environ.get("PATH", "") + os.pathsep + _SYSTEM_PATH)


def service_account(name: str = SERVICE_USER) -> ServiceAccount | None:
    """None when not root (the server runs as the current user); else the system user ``name``,
    created with ``useradd --system`` when missing."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        useradd = _system_tool("useradd")
        if useradd is None:
            raise LocalServiceError(
                f"PostgreSQL refuses to run as root and the system user {name!r} to run it as does not "
                "exist; `useradd` was not found to create it. Create the user, or run as a non-root user."
            ) from None
        proc = subprocess.run(
            [
                useradd,
                "--system",
                "--user-group",
                "--no-create-home",
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/usr/sbin/nologin",
                "--comment",
                "upsert-kafka-ops local PostgreSQL",
                name,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        try:  # a concurrent run may have created it first: look again either way
            entry = pwd.getpwnam(name)
        except KeyError:
            raise LocalServiceError(
                f"PostgreSQL refuses to run as root, and creating the system user {name!r} failed "
                f"(useradd exit {proc.returncode}): {proc.stderr.strip()}"
            ) from None
    return ServiceAccount(entry.pw_name, entry.pw_uid, entry.pw_gid)


def _unsearchable_parent(path: Path, account: ServiceAccount) -> Path | None:
    """The first parent of ``path`` that ``account`` may not enter, if any."""
    groups = set(os.getgrouplist(account.name, account.gid))
    for parent in reversed(path.parents):
        st = parent.stat()
        if st.st_uid == account.uid:
            bit = stat.S_IXUSR
        elif st.st_gid in groups:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not st.st_mode & bit:
            return parent
    return None


def _conf_quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def _conninfo_quote(value: str) -> str:
    if value and not any(c in value for c in " '\\\t\n"):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


# -- the server --------------------------------------------------------------------------------
class LocalPostgres:
    """A PostgreSQL server on 127.0.0.1 with its cluster in ``dir``.

    The folder holds ``data/`` (the cluster, created by ``initdb`` on the first start only),
    ``log/postgresql.log`` and ``password`` (mode 0600), so a second start in the same folder finds
    its tables and its password again.

    :param dir: the folder (created); None: a temporary folder, removed by :meth:`stop`.
    :param port: the TCP port; None: a free port, chosen again at every start.

    Example::

        with LocalPostgres() as pg:
            with psycopg.connect(pg.conninfo) as conn:
                conn.execute("SELECT 1")
    """

    host = HOST
    user = DEFAULT_USER
    database = DEFAULT_DATABASE

    def __init__(self, dir: Path | None = None, port: int | None = None) -> None:
        self._requested_dir = Path(dir).resolve() if dir is not None else None
        self._requested_port = port
        self.dir: Path | None = self._requested_dir
        self._port: int | None = None
        self._password: str | None = None
        self._started = False
        self._temporary = False
        self._bins: PgBinaries | None = None
        self._account: ServiceAccount | None = None

    # -- addresses -------------------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._port is None:
            raise LocalServiceError("This PostgreSQL server is not started.")
        return self._port

    @property
    def password(self) -> str:
        """The superuser's password (generated at ``initdb``; kept in ``<dir>/password``)."""
        if self._password is None:
            raise LocalServiceError("This PostgreSQL server is not started.")
        return self._password

    @property
    def conninfo(self) -> str:
        """A libpq/psycopg connection string over TCP, with the password."""
        parts = {
            "host": self.host,
            "port": str(self.port),
            "dbname": self.database,
            "user": self.user,
            "password": self.password,
        }
        return " ".join(f"{k}={_conninfo_quote(v)}" for k, v in parts.items())

    @property
    def jdbc_url(self) -> str:
        """``jdbc:postgresql://127.0.0.1:PORT/DB`` (credentials go in :meth:`jdbc_properties`)."""
        return f"jdbc:postgresql://{self.host}:{self.port}/{self.database}"

    def jdbc_properties(self) -> dict[str, str]:
        """``user``, ``password`` and ``driver`` for Spark's ``DataFrameWriter.jdbc``."""
        return {"user": self.user, "password": self.password, "driver": JDBC_DRIVER}

    @property
    def run_as(self) -> str:
        """The operating-system user the server runs as."""
        if self._account is not None:
            return self._account.name
        return pwd.getpwuid(os.geteuid()).pw_name

    @property
    def data_dir(self) -> Path:
        return self._dir() / "data"

    @property
    def log_file(self) -> Path:
        return self._dir() / "log" / "postgresql.log"

    @property
    def password_file(self) -> Path:
        return self._dir() / "password"

    @property
    def pid(self) -> int | None:
        """The postmaster's pid while the server runs."""
        if self.dir is None:
            return None
        try:
            return int((self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    @property
    def running(self) -> bool:
        return self._started

    def __repr__(self) -> str:
        # never the password (it is in conninfo and jdbc_properties(), on purpose only there)
        return (
            f"LocalPostgres(dir={str(self.dir) if self.dir else None!r}, host={self.host!r}, "
            f"port={self._port}, user={self.user!r}, database={self.database!r}, running={self._started})"
        )

    def _dir(self) -> Path:
        if self.dir is None:
            raise LocalServiceError("This PostgreSQL server has no folder yet; start it first.")
        return self.dir

    # -- running the programs ----------------------------------------------------------------
    def _binaries(self) -> PgBinaries:
        if self._bins is None:
            self._bins = find_binaries()
        return self._bins

    def _as_server_user(self, cmd: list[str]) -> list[str]:
        account = self._account
        if account is None:
            return cmd
        setpriv = _system_tool("setpriv")
        if setpriv is not None:
            return [setpriv, f"--reuid={account.uid}", f"--regid={account.gid}", "--init-groups", "--", *cmd]
        runuser = _system_tool("runuser")
        if runuser is not None:
            return [runuser, "-u", account.name, "--", *cmd]
        raise LocalServiceError(
            f"As root, PostgreSQL must run as {account.name!r}, which needs `setpriv` or `runuser` "
            "(util-linux); neither was found."
        )

    def _env(self) -> dict[str, str]:
        # PG* variables of the caller (PGHOST, PGPORT, PGDATA...) must not redirect the programs
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        if self._account is not None:
            env["HOME"] = str(self._dir())
        return env

    def _run(self, program: str, args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        cmd = self._as_server_user([self._binaries().tool(program), *args])
        try:
            return subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                cwd=self._dir(),
                env=self._env(),
                timeout=timeout,
                check=False,
                start_new_session=True,
            )
        except subprocess.TimeoutExpired as exc:
            raise LocalServiceError(
                f"`{program} {' '.join(args[:1])}` did not finish within {timeout:g}s.\n{self.log_tail()}"
            ) from exc

    def _give_to_server_user(self, path: Path) -> None:
        if self._account is not None:
            os.chown(path, self._account.uid, self._account.gid)

    def _write(self, path: Path, text: str, mode: int = 0o600) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(path, mode)
        self._give_to_server_user(path)

    # -- lifecycle -------------------------------------------------------------------------
    def start(self, timeout: float = 60.0) -> LocalPostgres:
        """Create the cluster (first start in this folder only) and start the server; returns once it
        accepts TCP connections.

        :param timeout: seconds for the server to accept connections.
        :raises LocalServiceError: the binaries are missing, or the server did not start (with the
            tail of its log).
        """
        if self._started:
            raise LocalServiceError("This PostgreSQL server is already started.")
        self._bins = find_binaries()
        self._account = service_account()
        if self._requested_dir is None:
            self.dir = Path(tempfile.mkdtemp(prefix="uko-postgres-"))
            self._temporary = True
        else:
            self.dir = self._requested_dir
            self.dir.mkdir(parents=True, exist_ok=True)
        try:
            self._prepare()
            self._start_server(timeout)
        except BaseException:
            self._abandon()
            raise
        self._started = True
        return self

    def _prepare(self) -> None:
        root = self._dir()
        if self._account is not None:
            blocked = _unsearchable_parent(root, self._account)
            if blocked is not None:
                raise LocalServiceError(
                    f"PostgreSQL refuses to run as root, so it runs as the system user {self._account.name!r}, "
                    f"which cannot reach {root}: {blocked} is not searchable by it "
                    f"(mode {stat.filemode(blocked.stat().st_mode)}). Use a folder under "
                    f"{tempfile.gettempdir()} (LocalPostgres() with no dir does), or `chmod o+x {blocked}`."
                )
        socket_path = self.data_dir / ".s.PGSQL.65535"
        if len(str(socket_path)) > _SOCKET_PATH_MAX:
            raise LocalServiceError(
                f"The folder {root} is too deep for PostgreSQL's unix socket ({socket_path} is longer "
                f"than {_SOCKET_PATH_MAX} characters); use a shorter folder."
            )
        self._give_to_server_user(root)
        for d in (self.data_dir, self.log_file.parent):
            d.mkdir(mode=0o700, exist_ok=True)
            self._give_to_server_user(d)

        initialized = (self.data_dir / "PG_VERSION").is_file()
        if self.password_file.is_file():
            self._password = self.password_file.read_text().strip()
        elif initialized:
            raise LocalServiceError(
                f"The cluster in {self.data_dir} has no password file ({self.password_file}); "
                f"its superuser's password is unknown. Remove {root} to start over."
            )
        else:
            self._password = secrets.token_urlsafe(24)
            self._write(self.password_file, self._password + "\n")
        if not initialized:
            self._initdb()

    def _initdb(self) -> None:
        proc = self._run(
            "initdb",
            [
                "-D",
                str(self.data_dir),
                "-U",
                self.user,
                f"--pwfile={self.password_file}",
                "-E",
                "UTF8",
                "--no-locale",
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
            ],
            timeout=300,
        )
        if proc.returncode != 0:
            raise LocalServiceError(
                f"initdb failed (exit {proc.returncode}) for {self.data_dir}:\n"
                + (proc.stdout + proc.stderr).strip()
            )
        self._write(self.data_dir / "pg_hba.conf", _HBA)
        with open(self.data_dir / "postgresql.conf", "a") as f:
            f.write(
                f"\n# upsert_kafka_ops.local.postgres: address, socket and auth\ninclude_if_exists = '{_CONF_NAME}'\n"
            )

    def _write_settings(self, port: int) -> None:
        settings = {
            "listen_addresses": _conf_quote(HOST),
            "port": str(port),
            "unix_socket_directories": _conf_quote(str(self.data_dir)),
            "password_encryption": "'scram-sha-256'",
            # a crash loses the last commits at most, never the cluster (fsync stays on)
            "synchronous_commit": "off",
            "logging_collector": "off",
        }
        self._write(self.data_dir / _CONF_NAME, "".join(f"{k} = {v}\n" for k, v in settings.items()))

    def _start_server(self, timeout: float) -> None:
        attempts = 1 if self._requested_port is not None else 3
        for attempt in range(1, attempts + 1):
            port = self._requested_port if self._requested_port is not None else free_port()
            self._write_settings(port)
            log_offset = self.log_file.stat().st_size if self.log_file.is_file() else 0
            proc = self._run(
                "pg_ctl",
                [
                    "start",
                    "-D",
                    str(self.data_dir),
                    "-l",
                    str(self.log_file),
                    "-w",
                    "-t",
                    str(max(1, int(timeout))),
                ],
                timeout=timeout + 30,
            )
            if proc.returncode == 0:
                self._port = port
                self._wait_tcp(timeout)
                return
            new_log = self._log_text()[log_offset:]
            if self._server_running():  # pg_ctl gave up waiting: do not leave it behind
                self._stop_server("immediate", 30)
            if attempt < attempts and "could not bind" in new_log:
                continue  # another process took the free port meanwhile
            raise LocalServiceError(
                f"PostgreSQL did not start on {HOST}:{port} (pg_ctl exit {proc.returncode}):\n"
                f"{(proc.stdout + proc.stderr).strip()}\n{self.log_tail()}"
            )

    def _wait_tcp(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with socket.create_connection((HOST, self.port), timeout=5):
                    return
            except OSError as exc:
                if time.monotonic() >= deadline:
                    raise LocalServiceError(
                        f"PostgreSQL started but {HOST}:{self.port} refuses connections ({exc}).\n{self.log_tail()}"
                    ) from exc
                time.sleep(0.1)

    def _server_running(self) -> bool:
        if self.dir is None or not self.data_dir.is_dir():
            return False
        return self._run("pg_ctl", ["status", "-D", str(self.data_dir)], timeout=30).returncode == 0

    def _stop_server(self, mode: str, timeout: float) -> None:
        args = ["stop", "-D", str(self.data_dir), "-m", mode, "-w", "-t", str(max(1, int(timeout)))]
        proc = self._run("pg_ctl", args, timeout=timeout + 30)
        if proc.returncode == 0 or not self._server_running():
            return
        if mode != "immediate":
            self._stop_server("immediate", timeout)
            return
        raise LocalServiceError(
            f"PostgreSQL in {self.data_dir} did not stop (pg_ctl exit {proc.returncode}):\n"
            f"{(proc.stdout + proc.stderr).strip()}\n{self.log_tail()}"
        )

    def _abandon(self) -> None:
        """After a failed start: no server left running, no temporary folder left behind."""
        try:
            if self._server_running():
                self._stop_server("immediate", 30)
        finally:
            self._forget()

    def _forget(self) -> None:
        self._port = None
        if self._temporary and self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
            self._temporary = False

    def stop(self, timeout: float = 60.0) -> None:
        """Stop the server (``pg_ctl stop -m fast``); a no-op when it is not running. A temporary
        folder is removed."""
        if not self._started:
            return
        self._stop_server("fast", timeout)
        self._started = False
        self._forget()

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- helpers ---------------------------------------------------------------------------
    def create_database(self, name: str) -> None:
        """Create a database owned by :attr:`user` (``createdb`` over the unix socket)."""
        if not self._started:
            raise LocalServiceError("This PostgreSQL server is not started.")
        proc = self._run(
            "createdb",
            ["-h", str(self.data_dir), "-p", str(self.port), "-U", self.user, "--", name],
            timeout=60,
        )
        if proc.returncode != 0:
            raise LocalServiceError(
                f"Creating the database {name!r} failed: {(proc.stdout + proc.stderr).strip()}"
            )

    def _log_text(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")
        except (OSError, LocalServiceError):
            return ""

    def log_tail(self, lines: int = 30) -> str:
        """The server log's first FATAL/PANIC/ERROR lines and its last lines."""
        text = self._log_text().splitlines()
        if not text:
            return "(no PostgreSQL log was written)"
        errors = [ln for ln in text if any(f"{lvl}:  " in ln for lvl in ("FATAL", "PANIC", "ERROR"))][:10]
        parts = [f"--- {self.log_file} (errors)\n" + "\n".join(errors)] if errors else []
        parts.append(f"--- {self.log_file} (last {min(lines, len(text))} lines)\n" + "\n".join(text[-lines:]))
        return "\n".join(parts)


# -- detached mode (the CLI) -------------------------------------------------------------------
def default_state_dir() -> Path:
    """The CLI's folder: under the user state directory; as root ``/var/lib/upsert-kafka-ops``,
    because the server's user cannot enter root's home."""
    if os.geteuid() == 0:
        return Path("/var/lib/upsert-kafka-ops/local-postgres")
    from platformdirs import user_state_dir

    return Path(user_state_dir("upsert-kafka-ops")) / "local-postgres"


def _state_file(state_dir: Path) -> Path:
    return state_dir / "state.json"


def _attached(state_dir: Path) -> LocalPostgres:
    server = LocalPostgres(state_dir)
    server.dir = state_dir.resolve()
    server._account = service_account()
    return server


def detached_status(state_dir: Path) -> dict[str, Any]:
    """``{"running": bool, ...state}`` for a server started with :func:`start_detached` (no password:
    it is in the file named by ``password_file``)."""
    f = _state_file(state_dir)
    state: dict[str, Any] = json.loads(f.read_text()) if f.is_file() else {"dir": str(state_dir)}
    server = _attached(state_dir)
    state["running"] = server._server_running()
    if state["running"]:
        state["pid"] = server.pid
    return state


def start_detached(state_dir: Path, timeout: float = 60.0) -> LocalPostgres:
    """Start a server that outlives this process; its port and folder go to ``state.json``."""
    status = detached_status(state_dir)
    if status["running"]:
        raise LocalServiceError(
            f"A local PostgreSQL is already running in {state_dir} (pid {status.get('pid')}, port "
            f"{status.get('port')}); stop it first with `upsert-kafka-ops local postgres stop`."
        )
    server = LocalPostgres(state_dir)
    server.start(timeout=timeout)
    state = {
        "pid": server.pid,
        "host": server.host,
        "port": server.port,
        "user": server.user,
        "database": server.database,
        "jdbc_url": server.jdbc_url,
        "dir": str(server._dir()),
        "run_as": server.run_as,
        "password_file": str(server.password_file),
        "log": str(server.log_file),
    }
    _state_file(state_dir).write_text(json.dumps(state))
    # nothing to let go of: pg_ctl already started the server in its own session
    return server


def stop_detached(state_dir: Path, timeout: float = 60.0) -> bool:
    """Stop the server in ``state_dir`` (``pg_ctl stop -m fast``); False when none was running."""
    server = _attached(state_dir)
    f = _state_file(state_dir)
    if not server._server_running():
        f.unlink(missing_ok=True)
        return False
    server._stop_server("fast", timeout)
    f.unlink(missing_ok=True)
    return True
