"""A Spark Connect server on 127.0.0.1: pyspark's own ``SparkConnectServer``, started with
``spark-submit`` (the pip distribution has no ``sbin/start-connect-server.sh``) and configured like a
local run's driver: the project's jars, Delta, the session defaults and the class archive. Runs then
connect to its warm driver instead of starting one each::

    with LocalSparkConnect(tmp_path) as server:
        runtime = ConnectRuntime(remote=server.url, token=SecretRef.from_value(server.token))
        execute_job(pipeline, "users-to-delta", runtime=runtime)

The server requires a bearer token (``spark.connect.authenticate.token``): the one given, or one
generated here. It reaches the JVM through its environment (``SPARK_CONNECT_AUTHENTICATE_TOKEN``),
never its arguments. ``insecure_no_token=True`` runs without one, on a loopback address only.

The server is one JVM in its own process group, stopped by signalling that group. Its Python
workers (``foreachBatch``) run with this interpreter.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from types import TracebackType

from upsert_kafka_ops import spark_compat
from upsert_kafka_ops.engine.connect import TOKEN_ENV, is_loopback
from upsert_kafka_ops.errors import LocalServiceError, SpecError
from upsert_kafka_ops.local.process import free_port, java_executable, stop_group, wait_ready
from upsert_kafka_ops.spark_lines import spark_home

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


class LocalSparkConnect:
    """A Spark Connect server on a free loopback port, as a context manager.

    :param dir: folder for its log (``connect.log``) and the artifacts clients upload; a temporary
        folder when not given.
    :param master: the server's Spark master (its driver runs the queries of every client).
    :param port: the gRPC port (default: a free one).
    :param conf: Spark configuration over the project's (``runtime.spark_conf``).
    :param host: the address to listen on (``0.0.0.0`` in a container; loopback by default).
    :param jar_groups: the fetched jar groups on the server's class path (``s3``, ``iceberg`` for the
        runs with tables on S3 or Iceberg targets; ``spark`` always).
    """

    def __init__(
        self,
        dir: Path | str | None = None,
        *,
        master: str = "local[*]",
        port: int | None = None,
        conf: dict[str, str] | None = None,
        host: str = "127.0.0.1",
        jar_groups: tuple[str, ...] = ("spark",),
        token: str | None = None,
        insecure_no_token: bool = False,
    ) -> None:
        if insecure_no_token and token is not None:
            raise SpecError("insecure_no_token", "is set and a token is given.", "give one of them.")
        if insecure_no_token and not is_loopback(host):
            raise SpecError(
                "insecure_no_token",
                f"refused on {host}: a server without a token on an address other machines reach runs "
                "anyone's code with everything it holds.",
                "keep the token (clients send it), or listen on 127.0.0.1.",
            )
        self.dir = Path(dir if dir is not None else tempfile.mkdtemp(prefix="uko-connect-")).resolve()
        self.master = master
        self.host = host
        self.port = port
        self.conf = dict(conf or {})
        self.jar_groups = ("spark", *(g for g in jar_groups if g != "spark"))
        #: the token clients send (None with ``insecure_no_token``); never log it
        self.token: str | None = None if insecure_no_token else (token or secrets.token_urlsafe(32))
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``sc://HOST:PORT`` (``localhost`` when listening on loopback or every address: pyspark's own
        client sends a token without TLS to that name only): what ``ConnectRuntime`` takes, with the
        token apart."""
        if self.port is None or self._proc is None:
            raise LocalServiceError("The Spark Connect server is not started.")
        local = self.host in ("0.0.0.0", "::") or is_loopback(self.host)
        host = "localhost" if local else self.host
        return f"sc://{host}:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.dir / "connect.log"

    def command(self) -> list[str]:
        """spark-submit's arguments: the server class, the project's configuration, the binding."""
        from upsert_kafka_ops.engine.session import spark_conf

        if any(key.lower() == "spark.connect.authenticate.token" for key in self.conf):
            raise SpecError(
                "conf",
                "holds spark.connect.authenticate.token: process arguments are public.",
                "give the token as token= (it reaches the server through its environment).",
            )
        conf = {**spark_conf(self.master, jar_groups=self.jar_groups), **self.conf}
        conf.pop("spark.app.name", None)
        conf["spark.connect.grpc.binding.address"] = self.host
        conf["spark.connect.grpc.binding.port"] = str(self.port)
        args = [
            str(spark_home() / "bin" / "spark-submit"),
            "--class",
            SERVER_CLASS,
            "--name",
            "upsert-kafka-ops connect",
        ]
        for key, value in conf.items():
            args += ["--conf", f"{key}={value}"]
        return args

    def start(self, timeout: float = 180.0) -> LocalSparkConnect:
        """Start the server; returns once its gRPC port answers.

        :raises LocalServiceError: when it exits or does not answer within ``timeout`` seconds, with
            the tail of its log."""
        if self._proc is not None:
            raise LocalServiceError("This Spark Connect server is already started.")
        spark_compat.require_connect("spark-connect")
        java_executable()  # a clear error when Java is missing
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port(self.port or 0) if self.host == "127.0.0.1" else int(self.port or 15002)
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
        env.pop(TOKEN_ENV, None)
        if self.token is not None:
            env[TOKEN_ENV] = self.token
        # its owner's alone: Spark writes a foreachBatch worker's URL, token included, into it
        log = os.open(self.log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(log, "ab") as out:
            self._proc = subprocess.Popen(
                self.command(),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=self.dir,
                start_new_session=True,  # the server leaves ./artifacts in its folder
            )

        def answers(left: float) -> bool:
            with contextlib.suppress(OSError):
                probe = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
                socket.create_connection((probe, int(self.port or 0)), timeout=min(1.0, left)).close()
                return True
            return False

        try:
            wait_ready(self._proc, answers, timeout, "The Spark Connect server", self.log_tail)
        except BaseException:
            self.stop()
            raise
        return self

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_file.is_file():
            return "(the Spark Connect server wrote no log)"
        text = self.log_file.read_text(errors="replace").splitlines()
        return f"--- {self.log_file} (last {min(lines, len(text))} lines)\n" + "\n".join(text[-lines:])

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the server (its process group); a no-op when it is not running."""
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_group(proc, timeout)

    def __enter__(self) -> LocalSparkConnect:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
