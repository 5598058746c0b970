"""A real S3 server on 127.0.0.1 for the tests: MinIO, built with ``go install`` from the
Go module proxy (``make minio`` builds it once per machine into the tool cache), found on
``UKO_MINIO`` (the binary's path) or the ``PATH``.

:class:`LocalS3` starts it on a free port with generated root credentials, creates buckets, and
describes itself as the pipeline ``storage`` entry that reaches it (:meth:`LocalS3.storage`)::

    with LocalS3(tmp / "s3") as s3:
        s3.create_bucket("lake")
        env = {**os.environ, **s3.credentials_env()}   # for a process that runs the pipeline
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from upsert_kafka_ops.errors import LocalServiceError
from upsert_kafka_ops.local.process import free_ports, stop_group, wait_ready
from upsert_kafka_ops.spec.connection import SecretRef
from upsert_kafka_ops.spec.storage import S3Storage

ENV_BINARY = "UKO_MINIO"
#: the variables :meth:`LocalS3.credentials_env` sets and :meth:`LocalS3.storage` refers to
ACCESS_KEY_ENV, SECRET_KEY_ENV = "UKO_S3_ACCESS_KEY_ID", "UKO_S3_SECRET_ACCESS_KEY"


def minio_binary() -> str:
    """The MinIO server binary: ``$UKO_MINIO``, else ``minio`` on the ``PATH``."""
    found = os.environ.get(ENV_BINARY) or shutil.which("minio")
    if not found or not os.access(found, os.X_OK):
        raise LocalServiceError(
            "The MinIO server is not installed. Run `make minio` (go install from the Go module proxy, "
            f"into the tool cache) and set {ENV_BINARY} to .tools/bin/minio, or put `minio` on the PATH."
        )
    return found


class LocalS3:
    """A MinIO server with its data in ``dir`` (a fresh temporary folder by default), as a context
    manager. Its root user's keys are generated per server and never passed on a command line."""

    def __init__(self, dir: Path | str | None = None, *, port: int | None = None) -> None:
        self.dir = Path(dir if dir is not None else tempfile.mkdtemp(prefix="uko-s3-")).resolve()
        self.port = port
        self.access_key = "uko-" + secrets.token_hex(4)
        self.secret_key = secrets.token_urlsafe(24)
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        if self.port is None or self._proc is None:
            raise LocalServiceError("The local S3 server is not started.")
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.dir / "minio.log"

    def credentials_env(self) -> dict[str, str]:
        """The environment that :meth:`storage`'s secret references read."""
        return {ACCESS_KEY_ENV: self.access_key, SECRET_KEY_ENV: self.secret_key}

    def storage(self, *, in_process: bool = False) -> S3Storage:
        """The pipeline ``storage`` entry for this server: credentials as ``env:`` references to
        :meth:`credentials_env`, or (``in_process``) as values that stay in this process."""
        if in_process:
            keys = SecretRef.from_value(self.access_key), SecretRef.from_value(self.secret_key)
        else:
            keys = SecretRef(env=ACCESS_KEY_ENV), SecretRef(env=SECRET_KEY_ENV)
        return S3Storage(
            endpoint=self.endpoint,
            region="us-east-1",
            path_style_access=True,
            access_key_id=keys[0],
            secret_access_key=keys[1],
        )

    def start(self, timeout: float = 60.0) -> LocalS3:
        if self._proc is not None:
            raise LocalServiceError("This local S3 server is already started.")
        binary = minio_binary()
        data = self.dir / "data"
        data.mkdir(parents=True, exist_ok=True)
        self.port, console = free_ports(2, first=self.port or 0)
        env = {**os.environ, "MINIO_ROOT_USER": self.access_key, "MINIO_ROOT_PASSWORD": self.secret_key,
               "MINIO_BROWSER": "off", "MINIO_UPDATE": "off", "MINIO_CONFIG_DIR": str(self.dir / "config")}  # fmt: skip
        cmd = [binary, "server", str(data), "--address", f"127.0.0.1:{self.port}",
               "--console-address", f"127.0.0.1:{console}", "--quiet"]  # fmt: skip
        with open(self.log_file, "ab") as out:
            self._proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          cwd=self.dir, env=env, start_new_session=True)  # fmt: skip

        def ready(left: float) -> bool:
            try:
                with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
                    f"{self.endpoint}/minio/health/ready", timeout=min(2.0, max(left, 0.1))
                ) as resp:
                    return bool(resp.status == 200)
            except (OSError, urllib.error.URLError):
                time.sleep(0.2)
                return False

        def tail() -> str:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-30:])

        try:
            wait_ready(self._proc, ready, timeout, "The local S3 server (MinIO)", tail)
        except BaseException:
            self.stop()
            raise
        return self

    def create_bucket(self, name: str) -> None:
        """Create the bucket ``name`` (an existing one is kept)."""
        client = self.client()
        with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
            client.create_bucket(Bucket=name)

    def client(self) -> Any:
        """A boto3 client with the root user's keys."""
        return self.storage(in_process=True).client()

    def stop(self, timeout: float = 15.0) -> None:
        if self._proc is not None:
            stop_group(self._proc, timeout)
            self._proc = None

    def __enter__(self) -> LocalS3:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
