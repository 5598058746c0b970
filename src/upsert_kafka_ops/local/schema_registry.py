"""A real Schema-Registry-compatible server on 127.0.0.1: Apicurio Registry with its Confluent API.

Confluent's Schema Registry is not on Maven Central, and Apicurio's own server distribution is not
either. What is there is Apicurio Registry's application module (``io.apicurio:apicurio-registry-app``,
2.4.2.Final: in-memory H2 storage and the Confluent-compatible API ``/apis/ccompat/v7``). It is built
here into a runnable Quarkus application with Maven:

- the app jar has no Jandex index, so Quarkus is told to index it;
- one of its Quarkus extensions (``apicurio-common-app-components-config-index``) has no deployment
  module on Central; it is left out and the one bean its build step would record, the list of
  runtime-editable properties, is produced empty (Apicurio's dynamic configuration stays off);
- ``org.everit.json.schema`` (JSON Schema support, not on Central) is left out: Avro and Protobuf
  are unaffected.

The build lands in the jar cache (``<jars dir>/schema-registry``, about 130 MB, one to three
minutes the first time) and is reused while the coordinates and the glue below are unchanged.

    with LocalSchemaRegistry(tmp_path) as registry:
        print(registry.url)  # http://127.0.0.1:<port>/apis/ccompat/v7
"""

from __future__ import annotations

import hashlib
import json
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from xml.sax.saxutils import escape

from upsert_kafka_ops import jars
from upsert_kafka_ops.errors import LocalServiceError
from upsert_kafka_ops.local.process import free_ports, java_executable, terminate, wait_ready
from upsert_kafka_ops.local.tls import generate

APICURIO_VERSION = "2.4.2.Final"
QUARKUS_VERSION = "2.16.4.Final"  # the Quarkus that Apicurio 2.4.2.Final is built with
_EXCLUDED = (
    "io.apicurio:apicurio-common-app-components-config-index",
    "com.github.everit-org.json-schema:org.everit.json.schema",
)
_GLUE = """\
package uko.registry;

import io.apicurio.common.apps.config.DynamicConfigPropertyList;
import java.util.List;
import javax.enterprise.context.ApplicationScoped;
import javax.enterprise.inject.Produces;

/** What the left-out config-index build step would record: no runtime-editable properties. */
@ApplicationScoped
public class NoDynamicConfig {
    @Produces
    @ApplicationScoped
    DynamicConfigPropertyList dynamicConfigProperties() {
        return new DynamicConfigPropertyList(List.of());
    }
}
"""
_PROPERTIES = """\
quarkus.index-dependency.registry.group-id=io.apicurio
quarkus.index-dependency.registry.artifact-id=apicurio-registry-app
"""


def _pom() -> str:
    exclusions = "".join(
        f"<exclusion><groupId>{escape(g)}</groupId><artifactId>{escape(a)}</artifactId></exclusion>"
        for g, a in (e.split(":") for e in _EXCLUDED)
    )
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>upsert-kafka-ops</groupId><artifactId>schema-registry</artifactId><version>0</version>
  <properties><project.build.sourceEncoding>UTF-8</project.build.sourceEncoding></properties>
  <dependencyManagement><dependencies>
    <dependency><groupId>io.quarkus</groupId><artifactId>quarkus-bom</artifactId>
      <version>{QUARKUS_VERSION}</version><type>pom</type><scope>import</scope></dependency>
  </dependencies></dependencyManagement>
  <dependencies>
    <dependency><groupId>io.apicurio</groupId><artifactId>apicurio-registry-app</artifactId>
      <version>{APICURIO_VERSION}</version><exclusions>{exclusions}</exclusions></dependency>
  </dependencies>
  <build><plugins>
    <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-compiler-plugin</artifactId>
      <version>3.11.0</version><configuration><release>17</release></configuration></plugin>
    <plugin><groupId>io.quarkus</groupId><artifactId>quarkus-maven-plugin</artifactId>
      <version>{QUARKUS_VERSION}</version>
      <executions><execution><goals><goal>build</goal></goals></execution></executions></plugin>
  </plugins></build>
</project>
"""


def fingerprint() -> str:
    return hashlib.sha256((_pom() + _GLUE + _PROPERTIES).encode()).hexdigest()[:16]


def registry_dir(jars_dir: Path | None = None) -> Path:
    return (jars_dir or jars.default_jars_dir()) / "schema-registry"


def is_built(jars_dir: Path | None = None) -> bool:
    folder = registry_dir(jars_dir)
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    return manifest.get("fingerprint") == fingerprint() and (folder / "registry-runner.jar").is_file()


def build(jars_dir: Path | None = None, repo_url: str | None = None, log: bool = True) -> Path:
    """Build the registry into the jar cache (a no-op when up to date); returns its folder."""
    import os

    folder = registry_dir(jars_dir)
    if is_built(jars_dir):
        if log:
            print(f"jars: schema-registry up to date in {folder}", file=sys.stderr)
        return folder
    mvn = jars.maven_executable()
    repo = repo_url or os.environ.get(jars.ENV_MAVEN_REPO) or jars.MAVEN_CENTRAL
    if log:
        print(
            f"jars: building Apicurio Registry {APICURIO_VERSION} (Quarkus {QUARKUS_VERSION}) into {folder}",
            file=sys.stderr,
        )
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".schema-registry-", dir=folder.parent))
    try:
        (staging / "pom.xml").write_text(_pom())
        (staging / "settings.xml").write_text(jars.maven_settings(repo))
        java_dir = staging / "src" / "main" / "java" / "uko" / "registry"
        java_dir.mkdir(parents=True)
        (java_dir / "NoDynamicConfig.java").write_text(_GLUE)
        resources = staging / "src" / "main" / "resources"
        resources.mkdir(parents=True)
        (resources / "application.properties").write_text(_PROPERTIES)
        jars.run_maven(
            mvn,
            staging,
            repo,
            "build the local Schema Registry",
            ["package", "-DskipTests"],
            progress="jars: schema-registry" if log else None,
        )
        out = staging / "out"
        out.mkdir()
        (staging / "target" / "schema-registry-0-runner.jar").rename(out / "registry-runner.jar")
        (staging / "target" / "lib").rename(out / "lib")  # the runner's manifest points at lib/
        (out / "manifest.json").write_text(
            json.dumps(
                {"fingerprint": fingerprint(), "apicurio": APICURIO_VERSION, "quarkus": QUARKUS_VERSION}
            )
            + "\n"
        )
        if folder.exists():
            shutil.rmtree(folder)
        out.rename(folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


class LocalSchemaRegistry:
    """Apicurio Registry (in-memory storage) on a free loopback port, Confluent API at :attr:`url`.

    :param work_dir: folder for its console log (created).
    :param jars_dir: jar cache; the registry is built there first when missing.
    :param heap: JVM heap (``-Xmx``).
    :param tls: serve HTTPS only, with a generated CA (:attr:`ca_file`) and a certificate for 127.0.0.1.
    """

    def __init__(
        self, work_dir: Path | str, jars_dir: Path | None = None, heap: str = "384m", tls: bool = False
    ) -> None:
        self.work_dir = Path(work_dir)
        self.jars_dir = jars_dir
        self.heap = heap
        self.tls = tls
        self.port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The Confluent-compatible API, as ``avro-confluent.url`` takes it."""
        if self.port is None:
            raise LocalServiceError("The Schema Registry is not started.")
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.port}/apis/ccompat/v7"

    @property
    def ca_file(self) -> Path:
        """The CA certificate (PEM) of a TLS registry."""
        return self.work_dir / "tls" / "ca.pem"

    @property
    def log_file(self) -> Path:
        return self.work_dir / "registry.log"

    def start(self, timeout: float = 120.0) -> LocalSchemaRegistry:
        if self._proc is not None:
            raise LocalServiceError("This Schema Registry is already started.")
        folder = build(self.jars_dir, log=False)
        java = java_executable()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.port, plain_port = free_ports(2)
        listen = [f"-Dquarkus.http.port={self.port}"]
        if self.tls:
            files = generate(self.work_dir / "tls")
            assert files.ca_cert == self.ca_file
            listen = [
                f"-Dquarkus.http.port={plain_port}",
                f"-Dquarkus.http.ssl-port={self.port}",
                "-Dquarkus.http.insecure-requests=disabled",
                f"-Dquarkus.http.ssl.certificate.files={files.server_keystore}",
                f"-Dquarkus.http.ssl.certificate.key-files={files.server_keystore}",
            ]
        cmd = [
            java,
            f"-Xmx{self.heap}",
            "-XX:+UseSerialGC",
            "-Djava.awt.headless=true",
            "-Dquarkus.http.host=127.0.0.1",
            *listen,
            "-Dquarkus.log.console.color=false",
            "-jar",
            str(folder / "registry-runner.jar"),
        ]
        with open(self.log_file, "ab") as out:
            self._proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=self.work_dir,
            )
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        def answers(left: float) -> bool:
            try:
                context = ssl.create_default_context(cafile=str(self.ca_file)) if self.tls else None
                with urllib.request.urlopen(f"{self.url}/subjects", timeout=2, context=context) as resp:
                    if resp.status == 200:
                        return True
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.5)
            return False

        wait_ready(self._proc, answers, timeout, "The Schema Registry", self.log_tail)

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_file.is_file():
            return "(no registry log was written)"
        text = self.log_file.read_text(errors="replace").splitlines()
        return f"--- {self.log_file} (last {min(lines, len(text))} lines)\n" + "\n".join(text[-lines:])

    def stop(self, timeout: float = 30.0) -> None:
        if self._proc is None:
            return
        terminate(self._proc.pid, timeout, self._proc)
        self._proc = None

    def __enter__(self) -> LocalSchemaRegistry:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
