"""The process helpers the local services share: free ports, Java, a loopback JSON request, waiting
for a service to answer, and stopping a process or its process group (SIGTERM, then SIGKILL)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from upsert_kafka_ops.errors import LocalServiceError, ToolchainError


def free_port(port: int = 0) -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago: any (``0``), or ``port`` itself.

    :raises LocalServiceError: when the given port is taken.
    """
    return free_ports(1, first=port)[0]


def free_ports(count: int, first: int = 0) -> list[int]:
    """``count`` distinct TCP ports on 127.0.0.1 that were free a moment ago, the first one ``first``
    when given. All are held open until the last is found: ports asked for one at a time can repeat
    (a broker's PLAINTEXT and SSL listeners once got the same one, and the broker refused to start).

    :raises LocalServiceError: when ``first`` is taken.
    """
    with contextlib.ExitStack() as held:
        ports = []
        for i in range(count):
            s = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            wanted = first if i == 0 else 0
            try:
                s.bind(("127.0.0.1", wanted))
            except OSError as exc:
                raise LocalServiceError(
                    f"Port {wanted} on 127.0.0.1 is in use ({exc.strerror}): choose another port, or none for a free one."
                ) from None
            ports.append(int(s.getsockname()[1]))
        return ports


def get_json(url: str, timeout: float = 5.0) -> Any:
    """GET ``url`` (a local service's REST API) and parse its JSON; no proxy, whatever the
    environment's ``http_proxy`` says (it must not see, or break, loopback requests)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    with opener.open(request, timeout=timeout) as resp:
        return json.loads(resp.read())


def java_executable() -> str:
    """``$JAVA_HOME/bin/java`` or ``java``, checked to be Java 17 or newer."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else "java"
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False).stderr
    except FileNotFoundError as exc:
        raise ToolchainError(
            "Java 17 or newer is required to run the Kafka broker and Spark; it was not found. "
            "Install it (Debian: apt-get install -y openjdk-17-jdk-headless) or set JAVA_HOME."
        ) from exc
    version = out.split('"')[1] if '"' in out else ""
    major = int(version.split(".")[0]) if version[:2].isdigit() else 0
    if major < 17:
        raise ToolchainError(f"Java 17 or newer is required, found {version or out.strip()!r}.")
    return java


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie still answers kill(0); read its state
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def terminate(pid: int, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    """SIGTERM, then SIGKILL after ``timeout``; returns once the process has exited."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None:
            if proc.poll() is not None:
                return
        elif not alive(pid):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    if proc is not None:
        proc.wait(timeout=10)
    else:
        end = time.monotonic() + 10
        while alive(pid) and time.monotonic() < end:
            time.sleep(0.1)


def wait_ready(
    proc: subprocess.Popen[bytes] | None,
    ready: Callable[[float], bool],
    timeout: float,
    what: str,
    log_tail: Callable[[], str],
) -> None:
    """Return once ``ready(seconds_left)`` is true; fail when ``proc`` exits first or ``timeout`` passes,
    with ``log_tail()`` (the service's own account) in the error."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise LocalServiceError(f"{what} exited with code {proc.returncode} during start.\n{log_tail()}")
        if ready(deadline - time.monotonic()):
            return
    raise LocalServiceError(f"{what} did not answer within {timeout:g}s.\n{log_tail()}")


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def stop_group(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM the process group of ``proc`` (started with ``start_new_session``; Spark's shutdown hooks
    stop executors), SIGKILL what remains."""
    pgid = proc.pid  # start_new_session: the leader's pid is the group id
    _signal_group(pgid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=timeout)
    # the leader is gone (or stuck): sweep the group, executors included
    _signal_group(pgid, signal.SIGKILL)
    proc.wait(timeout=10)
