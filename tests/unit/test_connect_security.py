"""The Spark Connect client's and server's rules that need no server (issue 44): the token never goes
in clear text to another machine nor into a URL or a process argument, a server without a token only
on loopback, a generated token in a file only its owner reads, and the TLS check against a real TLS
socket (Python's ``ssl`` server with a certificate made here): a wrong CA bundle and a server without
TLS fail at once, naming the setting."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from upsert_kafka_ops.cli import main
from upsert_kafka_ops.engine.connect import channel_builder, check_tls, is_loopback
from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.local import LocalSparkConnect
from upsert_kafka_ops.local.tls import generate
from upsert_kafka_ops.runtime import ConnectRuntime

SPARK4 = int(pyspark.__version__.split(".")[0]) >= 4

TOKEN = "tok-UNIT-3f9c"
DEMO = Path(__file__).resolve().parents[2] / "pipelines" / "demo.yaml"


def test_loopback_names() -> None:
    assert all(is_loopback(h) for h in ("localhost", "127.0.0.1", "127.0.0.5", "::1", "[::1]"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "10.0.0.1", "spark-connect", "localhost.example"))


def test_a_token_is_never_sent_in_clear_text_to_another_machine() -> None:
    if not SPARK4:  # Spark 3.5's lane: no token authentication, so no Connect runtime at all
        with pytest.raises(SpecError, match=r"remote: the Spark Connect runtime needs Spark 4\.0"):
            channel_builder("sc://127.0.0.1:15002", TOKEN, None)
        return
    with pytest.raises(SpecError) as exc:
        channel_builder("sc://spark-connect:15002", TOKEN, None)
    assert exc.value.field == "remote" and "use_ssl=true" in str(exc.value) and TOKEN not in str(exc.value)
    # on this machine it goes with gRPC's local credentials; without a token, plain as before
    assert channel_builder("sc://127.0.0.1:15002", TOKEN, None).token == TOKEN
    assert channel_builder("sc://spark-connect:15002", None, None).token is None


def test_the_runtime_takes_the_token_from_a_reference_or_pysparks_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with pytest.raises(SpecError) as exc:
        ConnectRuntime(remote=f"sc://h:15002/;use_ssl=true;token={TOKEN}")
    assert "never goes into a URL" in str(exc.value)
    with pytest.raises(SpecError):
        ConnectRuntime.model_validate({"remote": "sc://h:15002", "token": TOKEN})  # a literal secret
    monkeypatch.setenv("MY_TOKEN", TOKEN)
    runtime = ConnectRuntime.model_validate({"remote": "sc://h:15002", "token": "env:MY_TOKEN"})
    assert runtime.resolved_token() == TOKEN and TOKEN not in repr(runtime) + runtime.model_dump_json()
    monkeypatch.setenv("SPARK_CONNECT_AUTHENTICATE_TOKEN", "from-env")
    assert ConnectRuntime(remote="sc://h:15002").resolved_token() == "from-env"
    monkeypatch.setenv("UKO_SPARK_CONNECT_CA_CERT", str(tmp_path / "missing.crt"))
    with pytest.raises(SpecError) as missing:
        ConnectRuntime(remote="sc://h:15002/;use_ssl=true").resolved_ca_cert()
    assert missing.value.field == "UKO_SPARK_CONNECT_CA_CERT"
    # the variable verifies a TLS connection; it does not turn TLS on for a plain one (a local server)
    assert ConnectRuntime(remote="sc://localhost:15002").resolved_ca_cert() is None


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    """A TLS server on loopback with a certificate for localhost and 127.0.0.1 (its CA returned)."""
    files = generate(tmp_path_factory.mktemp("tls"))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(files.server_keystore)
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            try:
                with context.wrap_socket(conn, server_side=True):
                    pass
            except (ssl.SSLError, OSError):
                conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1], files.ca_cert
    stop.set()
    thread.join(5)
    listener.close()


def test_tls_is_checked_against_the_ca_bundle_before_the_client_starts(tls_server: tuple[int, Path]) -> None:
    port, ca = tls_server
    check_tls("localhost", f"localhost:{port}", ca.read_bytes())  # verifies: no error
    with pytest.raises(SpecError) as wrong:
        check_tls("localhost", f"localhost:{port}", None)  # the system's CAs do not know this one
    assert wrong.value.field == "ca_cert" and "does not verify" in wrong.value.message
    plain = socket.create_server(("127.0.0.1", 0))  # accepts, speaks no TLS, closes
    try:
        threading.Thread(target=lambda: plain.accept()[0].close(), daemon=True).start()
        with pytest.raises(SpecError) as no_tls:
            check_tls("localhost", f"127.0.0.1:{plain.getsockname()[1]}", ca.read_bytes(), timeout=5)
        assert no_tls.value.field == "use_ssl"
    finally:
        plain.close()


def test_a_server_without_a_token_only_on_loopback_and_the_token_never_in_its_arguments() -> None:
    with pytest.raises(SpecError) as exc:
        LocalSparkConnect(host="0.0.0.0", insecure_no_token=True)
    assert exc.value.field == "insecure_no_token" and "127.0.0.1" in str(exc.value)
    assert LocalSparkConnect(insecure_no_token=True).token is None
    server = LocalSparkConnect(port=15002, token=TOKEN)
    assert TOKEN not in " ".join(server.command())
    generated = LocalSparkConnect(port=15002)
    assert generated.token and len(generated.token) >= 32 and generated.token != LocalSparkConnect().token
    with pytest.raises(SpecError) as conf:
        LocalSparkConnect(port=15002, conf={"spark.connect.authenticate.token": TOKEN}).command()
    assert conf.value.field == "conf"


def test_the_cli_refuses_a_token_in_clear_and_options_without_their_server(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["spark-connect", "--host", "0.0.0.0", "--insecure-no-token"]) != 0
    assert "insecure_no_token" in capsys.readouterr().err
    assert main(["spark-connect", "--token", TOKEN]) != 0  # a literal: refused, and not echoed
    err = capsys.readouterr().err
    assert "--token" in err and TOKEN not in err
    assert main(["run", str(DEMO), "--job", "users-to-delta", "--token", "env:X"]) != 0
    assert "--token: is given without --remote" in capsys.readouterr().err
