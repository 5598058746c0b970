"""Java key and trust stores (JKS, PKCS12) as the PEM files Python TLS clients read.

Flink's registry options name Java stores; confluent-kafka's Python client reads PEM. The JDK's
``keytool`` (present wherever Spark runs) reads the store; its passwords reach keytool through
environment variables (``-storepass:env``), never its command line. The PEM files land in one
private folder per process (mode 0700, removed at exit) and are reused per store.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from upsert_kafka_ops.errors import SpecError

_PEM_CERT = "-----BEGIN CERTIFICATE-----"
_lock = threading.Lock()
_folder: Path | None = None
_done: dict[tuple[str, str, float, str], tuple[Path, ...]] = {}


def _private_dir() -> Path:
    global _folder
    if _folder is None:
        _folder = Path(tempfile.mkdtemp(prefix="uko-tls-"))
        os.chmod(_folder, 0o700)
        atexit.register(shutil.rmtree, _folder, True)
    return _folder


def _keytool() -> str:
    home = os.environ.get("JAVA_HOME")
    tool = Path(home) / "bin" / "keytool" if home else None
    found = str(tool) if tool and tool.is_file() else shutil.which("keytool")
    if not found:
        from upsert_kafka_ops.errors import ToolchainError

        raise ToolchainError(
            "keytool (from the JDK) is needed to read Java key/trust stores; it was not found. "
            "Fix: install Java 17 or set JAVA_HOME, or give PEM files (properties.ssl.ca.location, ...)."
        )
    return found


def _run(args: list[str], passwords: dict[str, str], what: Path, option: str) -> str:
    env = {**os.environ, **passwords}
    # no terminal: a store without a password given must fail, not wait for one to be typed
    proc = subprocess.run(
        [_keytool(), *args], capture_output=True, text=True, env=env, check=False, stdin=subprocess.DEVNULL
    )
    if proc.returncode != 0:
        detail = (proc.stdout + proc.stderr).strip().splitlines()
        raise SpecError(
            option,
            f"keytool could not read the store {str(what)!r}: {detail[0] if detail else proc.returncode}",
            "check the store's path, type and password.",
        )
    return proc.stdout


def _cached(
    path: Path, kind: str, password: str | None, option: str
) -> tuple[tuple[str, str, float, str], tuple[Path, ...] | None]:
    """The cache key of a conversion (the store, its mtime and a digest of the password, so that a
    wrong password is never answered from the cache) and its earlier result."""
    try:
        stamp = path.stat().st_mtime
    except OSError as exc:
        raise SpecError(option, f"cannot read the store {str(path)!r}: {exc.strerror}.") from None
    digest = hashlib.sha256((password or "").encode()).hexdigest()
    key = (str(path.resolve()), kind, stamp, digest)
    return key, _done.get(key)


def truststore_pem(
    path: Path, password: str | None, option: str = "avro-confluent.ssl.truststore.location"
) -> Path:
    """The trusted certificates of a store (or a PEM bundle, returned as it is) as a PEM bundle."""
    if path.is_file() and path.read_bytes()[:64].lstrip().startswith(_PEM_CERT.encode()):
        return path
    with _lock:
        key, done = _cached(path, "trust", password, option)
        if done:
            return done[0]
        args = ["-list", "-rfc", "-keystore", str(path)]
        env = {}
        if password:
            args += ["-storepass:env", "UKO_STORE_PASSWORD"]
            env["UKO_STORE_PASSWORD"] = password
        out = _run(args, env, path, option)
        blocks = []
        inside: list[str] = []
        for line in out.splitlines():
            if line.startswith(_PEM_CERT):
                inside = [line]
            elif inside:
                inside.append(line)
                if line.startswith("-----END CERTIFICATE-----"):
                    blocks.append("\n".join(inside))
                    inside = []
        if not blocks:
            raise SpecError(
                option,
                f"the store {str(path)!r} holds no certificate.",
                "import the CA certificate into it.",
            )
        pem = _private_dir() / f"trust-{len(_done)}.pem"
        pem.write_text("\n".join(blocks) + "\n")
        _done[key] = (pem,)
        return pem


def keystore_pem(
    path: Path, password: str, option: str = "avro-confluent.ssl.keystore.location"
) -> tuple[Path, Path]:
    """(certificate chain PEM, unencrypted private key PEM, mode 0600) of a store's one key entry."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    with _lock:
        key, done = _cached(path, "key", password, option)
        if done:
            return done[0], done[1]
        folder = _private_dir()
        p12 = folder / f"key-{len(_done)}.p12"
        _run(
            [
                "-importkeystore",
                "-noprompt",
                "-srckeystore",
                str(path),
                "-srcstorepass:env",
                "UKO_STORE_PASSWORD",
                "-destkeystore",
                str(p12),
                "-deststoretype",
                "PKCS12",
                "-deststorepass:env",
                "UKO_STORE_PASSWORD",
            ],
            {"UKO_STORE_PASSWORD": password},
            path,
            option,
        )
        try:
            private, cert, chain = pkcs12.load_key_and_certificates(p12.read_bytes(), password.encode())
        finally:
            p12.unlink(missing_ok=True)
        if private is None or cert is None:
            raise SpecError(
                option,
                f"the store {str(path)!r} holds no private key with its certificate.",
                "give a store with one key entry (the client's key and certificate).",
            )
        cert_pem = folder / f"cert-{len(_done)}.pem"
        key_pem = folder / f"key-{len(_done)}.pem"
        cert_pem.write_bytes(b"".join(c.public_bytes(serialization.Encoding.PEM) for c in [cert, *chain]))
        fd = os.open(key_pem, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(
                private.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                )
            )
        _done[key] = (cert_pem, key_pem)
        return cert_pem, key_pem
