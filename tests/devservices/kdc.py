"""A real MIT Kerberos KDC on 127.0.0.1, for Kafka's GSSAPI listener and its tests.

Use it as a context manager::

    with LocalKdc(tmp_path / "kdc") as kdc:
        keytab = kdc.add_principal("alice")       # alice@UKO.LOCAL, its keys in a keytab
        kafka = LocalKafka(tmp_path / "kafka", kerberos=kdc)

The programs (``kdb5_util``, ``kadmin.local``, ``krb5kdc``) come from the machine: Debian's
``krb5-kdc`` and ``krb5-admin-server`` packages, which ``make kerberos`` installs as root. The realm's
database, its stash, the KDC's profile and the clients' ``krb5.conf`` live in the work folder; nothing
touches ``/etc``. Clients find the KDC through :attr:`LocalKdc.krb5_conf` (``KRB5_CONFIG`` for MIT's
library and kinit, ``-Djava.security.krb5.conf`` for a JVM). Clients use TCP only, no DNS, no reverse lookups:
a service's host is the name the client was given (``kafka/localhost``).
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

from upsert_kafka_ops.errors import LocalServiceError
from upsert_kafka_ops.local.process import free_port, terminate, wait_ready

DEFAULT_REALM = "UKO.LOCAL"
INSTALL_HINT = (
    "Install an MIT KDC: on Debian/Ubuntu `apt-get install -y krb5-kdc krb5-admin-server krb5-user` "
    "as root (`make kerberos` does it)."
)
_SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")


def _program(name: str) -> str:
    found = shutil.which(name) or next(
        (str(Path(d) / name) for d in _SBIN if os.access(Path(d) / name, os.X_OK)), None
    )
    if found is None:
        raise LocalServiceError(f"{name} was not found. {INSTALL_HINT}")
    return found


class LocalKdc:
    """An MIT KDC for one realm on a free loopback port (TCP).

    :param work_dir: folder for the database, keytabs, configuration and log (created).
    :param realm: the Kerberos realm (upper case by convention).
    """

    def __init__(self, work_dir: Path | str, realm: str = DEFAULT_REALM) -> None:
        self.work_dir = Path(work_dir).resolve()
        self.realm = realm
        self.port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    # -- files -------------------------------------------------------------------------------
    @property
    def krb5_conf(self) -> Path:
        """The clients' configuration: the realm, its KDC on 127.0.0.1, TCP only, names as given."""
        return self.work_dir / "krb5.conf"

    @property
    def log_file(self) -> Path:
        return self.work_dir / "kdc.log"

    def keytab(self, name: str) -> Path:
        """The keytab :meth:`add_principal` wrote for ``name``."""
        return self.work_dir / "keytabs" / (name.replace("/", "_") + ".keytab")

    def principal(self, name: str) -> str:
        """``name@REALM``."""
        return f"{name}@{self.realm}"

    def environment(self) -> dict[str, str]:
        """Environment for MIT's tools and library: this realm's configuration and KDC profile."""
        return {
            **os.environ,
            "KRB5_CONFIG": str(self.krb5_conf),
            "KRB5_KDC_PROFILE": str(self.work_dir / "kdc.conf"),
        }

    def _write_configuration(self) -> None:
        w, realm = self.work_dir, self.realm
        self.krb5_conf.write_text(
            "[libdefaults]\n"
            f"  default_realm = {realm}\n"
            "  dns_lookup_realm = false\n"
            "  dns_lookup_kdc = false\n"
            "  rdns = false\n"
            "  dns_canonicalize_hostname = false\n"
            "  udp_preference_limit = 1\n"
            "  ticket_lifetime = 24h\n"
            "  renew_lifetime = 7d\n"
            "  forwardable = true\n"
            "[realms]\n"
            f"  {realm} = {{\n    kdc = 127.0.0.1:{self.port}\n  }}\n"
            "[domain_realm]\n"
            f"  localhost = {realm}\n"
        )
        (w / "kdc.conf").write_text(
            "[kdcdefaults]\n"
            f"  kdc_listen = 127.0.0.1:{self.port}\n"  # UDP too (clients here use TCP only)
            f"  kdc_tcp_listen = 127.0.0.1:{self.port}\n"
            "[realms]\n"
            f"  {realm} = {{\n"
            f"    database_name = {w / 'principal'}\n"
            f"    key_stash_file = {w / 'stash'}\n"
            f"    acl_file = {w / 'kadm5.acl'}\n"
            "    max_life = 24h\n"
            "    max_renewable_life = 7d\n"
            "    supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal\n"
            "  }\n"
            "[logging]\n"
            f"  kdc = FILE:{self.log_file}\n"
        )
        (w / "kadm5.acl").write_text("")

    def _run(self, args: list[str]) -> None:
        proc = subprocess.run(
            args,
            env=self.environment(),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        if proc.returncode != 0 or "error" in proc.stderr.lower():
            raise LocalServiceError(
                f"{Path(args[0]).name} failed (exit {proc.returncode}): {(proc.stdout + proc.stderr).strip()}"
            )

    # -- principals --------------------------------------------------------------------------
    def add_principal(self, name: str) -> Path:
        """Create ``name@REALM`` with random keys and write them to a keytab (returned)."""
        if self.port is None:
            raise LocalServiceError("Start the KDC before adding principals.")
        keytab = self.keytab(name)
        keytab.parent.mkdir(exist_ok=True)
        kadmin = _program("kadmin.local")
        self._run([kadmin, "-r", self.realm, "-q", f"addprinc -randkey {self.principal(name)}"])
        self._run([kadmin, "-r", self.realm, "-q", f"ktadd -k {keytab} {self.principal(name)}"])
        if not keytab.is_file():  # kadmin.local -q exits 0 even when its query failed
            raise LocalServiceError(f"kadmin.local wrote no keytab for {self.principal(name)} ({keytab}).")
        keytab.chmod(0o600)
        return keytab

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self, timeout: float = 30.0) -> LocalKdc:
        """Create the realm's database and start ``krb5kdc``; returns once it accepts connections."""
        if self._proc is not None:
            raise LocalServiceError("This KDC is already started.")
        programs = [_program(p) for p in ("kdb5_util", "krb5kdc")]
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self._write_configuration()
        if not (self.work_dir / "principal").exists():
            master = secrets.token_urlsafe(24)  # unlocks the database; kept only in the stash file
            self._run([programs[0], "create", "-s", "-r", self.realm, "-P", master])
        with open(self.work_dir / "krb5kdc.out", "ab") as out:
            self._proc = subprocess.Popen(
                [programs[1], "-n", "-r", self.realm],
                env=self.environment(),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

        def listens(left: float) -> bool:
            try:
                with socket.create_connection(("127.0.0.1", self.port or 0), timeout=min(0.5, left)):
                    return True
            except OSError:
                time.sleep(0.05)
                return False

        try:
            wait_ready(self._proc, listens, timeout, "krb5kdc", self.log_tail)
        except BaseException:
            self.stop()
            raise
        return self

    def log_tail(self, lines: int = 30) -> str:
        """The end of the KDC's console output and of its log."""
        parts = []
        for f in (self.work_dir / "krb5kdc.out", self.log_file):
            if f.is_file():
                text = f.read_text(errors="replace").splitlines()
                parts.append(f"--- {f} (last {min(lines, len(text))} lines)\n" + "\n".join(text[-lines:]))
        return "\n".join(parts) or "(krb5kdc wrote nothing)"

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the KDC (SIGTERM, then SIGKILL) and wait for it to exit."""
        if self._proc is None:
            return
        terminate(self._proc.pid, timeout, self._proc)
        self._proc = None

    def __enter__(self) -> LocalKdc:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
