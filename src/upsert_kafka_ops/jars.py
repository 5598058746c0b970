"""JVM artifacts from Maven Central: the Kafka broker (and its perf tools) and Spark's connectors.

The Maven coordinates live here, inside the package, so a wheel install knows them too. The groups
Spark loads follow the Spark that runs: its connectors at its release, Delta, Iceberg and Hadoop's S3A
at what its line needs (:mod:`upsert_kafka_ops.spark_lines`), each resolved into a folder named for it.
:func:`fetch` resolves each group with Maven into its own folder of a cache directory (separate
classpaths: the broker never sees Spark's jars and the other way round), and writes a manifest; a
second call with the same coordinates finds the manifest and does nothing.

Spark's group is resolved with its transitive dependencies, minus the artifacts that the pyspark
distribution already ships in ``pyspark/jars`` (a second copy of hadoop, scala or lz4 on the
classpath would be a version conflict waiting to happen).
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

from upsert_kafka_ops import spark_lines
from upsert_kafka_ops.errors import JarsError, ToolchainError

#: Apache Kafka broker and tools (KRaft only, Java 17+).
KAFKA_VERSION = "4.3.1"
POSTGRESQL_JDBC_VERSION = "42.7.8"
#: Flink's Kafka SQL connector (a shaded jar) for the PyFlink release the conformance tests run.
FLINK_KAFKA_CONNECTOR_VERSION = "5.0.0-2.2"
FLINK_AVRO_VERSION = "2.2.0"
LOG4J_VERSION = "2.25.4"

MAVEN_CENTRAL = "https://repo.maven.apache.org/maven2"
ENV_JARS_DIR = "UPSERT_KAFKA_OPS_JARS_DIR"
ENV_MAVEN_REPO = "UPSERT_KAFKA_OPS_MAVEN_REPO"


@dataclass(frozen=True)
class Artifact:
    """A Maven artifact ``group:artifact:version``."""

    group: str
    artifact: str
    version: str
    #: False: the artifact alone, none of its dependencies
    transitive: bool = True

    def __str__(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}" + ("" if self.transitive else " (alone)")


@dataclass(frozen=True)
class JarGroup:
    """A set of artifacts resolved together into one folder (one classpath)."""

    name: str
    artifacts: tuple[Artifact, ...]
    #: ``group:artifact`` (``*`` allowed for the artifact) left out of the transitive closure.
    exclusions: tuple[str, ...] = field(default=())
    #: the cache folder's name: the group's name, with the release it was resolved for when that
    #: follows the Spark that runs (``spark-4.1.1``), so switching lines keeps each line's jars
    folder: str = ""

    @property
    def dir_name(self) -> str:
        return self.folder or self.name

    def fingerprint(self) -> str:
        text = json.dumps([[str(a) for a in self.artifacts], list(self.exclusions)])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


KAFKA_GROUP = JarGroup(
    name="kafka",
    artifacts=(
        Artifact("org.apache.kafka", "kafka_2.13", KAFKA_VERSION),
        Artifact("org.apache.kafka", "kafka-tools", KAFKA_VERSION),
        # Kafka 4.x logs through slf4j 1.7 -> log4j2 (KIP-653); the binding is not in its pom.
        Artifact("org.apache.logging.log4j", "log4j-slf4j-impl", LOG4J_VERSION),
    ),
)

#: Already in pyspark/jars (checked by tests/integration/test_jars.py against the installed pyspark):
#: kept out of the Spark group so the class path holds one copy of each.
_IN_PYSPARK = (
    "org.apache.hadoop:*",
    "org.scala-lang:*",
    "org.scala-lang.modules:*",
    "org.lz4:*",
    "org.xerial.snappy:*",
    "com.github.luben:*",
    "org.slf4j:*",
    "com.google.code.findbugs:*",
    "org.antlr:*",
    "org.checkerframework:*",
    "org.tukaani:*",
    # Delta 4.4's kernel and Unity Catalog client declare these at older releases than pyspark 4.1's
    "com.fasterxml.jackson.core:*",
    "org.apache.logging.log4j:*",
    "org.apache.parquet:*",
    "org.roaringbitmap:*",
    "io.airlift:*",
    "commons-pool:*",
    "org.locationtech.jts:*",
)


def spark_group(spark_version: str | None = None) -> JarGroup:
    """Spark's Kafka connector and Avro at the running Spark's release, Delta for its line and the
    PostgreSQL JDBC driver: every session's class path.

    :param spark_version: the Spark the jars are for (a cluster's, vendor strings tolerated); the
        installed pyspark's by default.
    """
    version = spark_version or spark_lines.installed_version()
    line = spark_lines.line_of(version)
    upstream, scala, delta = spark_lines.release(version), line.scala, spark_lines.delta_for(version)
    return JarGroup(
        name="spark",
        artifacts=(
            Artifact("org.apache.spark", f"spark-sql-kafka-0-10_{scala}", upstream),
            Artifact("org.apache.spark", f"spark-avro_{scala}", upstream),
            Artifact("io.delta", delta.artifact, delta.version),
            Artifact("org.postgresql", "postgresql", POSTGRESQL_JDBC_VERSION),
        ),
        exclusions=(*_IN_PYSPARK, f"org.apache.spark:spark-tags_{scala}"),
        folder=f"spark-{upstream}",
    )


#: Real Flink's side of the conformance tests and benchmarks (PyFlink 2.2.1 runs it in its own
#: virtualenv); not fetched unless asked for.
FLINK_GROUP = JarGroup(
    name="flink",
    artifacts=(
        Artifact("org.apache.flink", "flink-sql-connector-kafka", FLINK_KAFKA_CONNECTOR_VERSION),
        # the avro and avro-confluent formats with Avro and Confluent's registry client shaded in (the
        # client is not on Maven Central, and flink-sql-avro is not published for 2.2.1): 2.2.0 is the
        # newest bundle, and runs on Flink 2.2.1. Alone: the unshaded flink-avro beside it clashes
        Artifact("org.apache.flink", "flink-sql-avro-confluent-registry", FLINK_AVRO_VERSION),
    ),
)


def yarn_group(spark_version: str | None = None) -> JarGroup:
    """A YARN ResourceManager and NodeManager (the tests' ``tests/devservices/yarn.py`` starts one) of the Hadoop
    release the Spark line's client jars are: the cluster manager that runs Python drivers in cluster
    deploy mode. Their own JVMs; not on Spark's class path; not fetched unless asked for."""
    hadoop = spark_lines.line_for(spark_version).hadoop
    return JarGroup(
        name="yarn",
        artifacts=(
            Artifact("org.apache.hadoop", "hadoop-yarn-server-resourcemanager", hadoop),
            Artifact("org.apache.hadoop", "hadoop-yarn-server-nodemanager", hadoop),
            # the ResourceManager loads its timeline collector's base class even with the service off;
            # its own dependencies (HBase) are not needed then
            Artifact("org.apache.hadoop", "hadoop-yarn-server-timelineservice", hadoop, transitive=False),
        ),
        folder=f"yarn-{hadoop}",
    )


def s3_group(spark_version: str | None = None) -> JarGroup:
    """Spark's S3A connector for tables on S3 (``s3a://``), fetched when a pipeline has one, at the
    Hadoop release of the Spark line. hadoop-aws declares the AWS SDK's bundle (over 500 MB); the three
    SDK modules it uses weigh 9 MB together. What pyspark/jars already holds (netty, Apache
    HttpClient, commons, slf4j) is left out."""
    line = spark_lines.line_for(spark_version)
    if not line.aws_sdk:
        raise JarsError(
            f"Tables on S3 are not supported on {line.name} yet (its hadoop-aws {line.hadoop} needs the "
            "AWS SDK v1 bundle). Fix: run jobs with s3a:// tables on Spark 4.0 or later."
        )
    return JarGroup(
        name="s3",
        artifacts=(
            Artifact("org.apache.hadoop", "hadoop-aws", line.hadoop),
            *(
                Artifact("software.amazon.awssdk", a, line.aws_sdk)
                for a in ("s3", "s3-transfer-manager", "sts")
            ),
        ),
        exclusions=(
            "software.amazon.awssdk:bundle",
            "io.netty:*",
            "org.apache.httpcomponents:*",
            "commons-codec:*",
            "commons-logging:*",
            "org.slf4j:*",
        ),
        folder=f"s3-{line.hadoop}",
    )


def iceberg_group(spark_version: str | None = None) -> JarGroup:
    """Apache Iceberg tables (``kind: iceberg`` targets), fetched when a pipeline has one: the Spark
    runtime built for the line, one shaded jar with no dependencies of its own (about 50 MB; 1.11 is
    the first to take a commit's snapshot properties from the session, which a SQL MERGE needs). Its
    catalogs reach S3 through the S3A connector (the ``s3`` group) and PostgreSQL through the
    ``spark`` group's JDBC driver."""
    line = spark_lines.line_for(spark_version)
    runtime = spark_lines.require_iceberg(line)
    return JarGroup(
        name="iceberg",
        artifacts=(Artifact("org.apache.iceberg", runtime.artifact, runtime.version),),
        folder=f"iceberg-{line.line}",
    )


#: The groups' names; :func:`group` makes each for a Spark release.
GROUP_NAMES = ("kafka", "spark", "flink", "yarn", "s3", "iceberg")
#: What ``fetch()`` and ``upsert-kafka-ops jars fetch`` resolve when no group is named.
DEFAULT_GROUPS = ("kafka", "spark")
#: Groups the platform may already ship (``UPSERT_KAFKA_OPS_PROVIDED_JARS``); the rest run only
#: locally (the broker, Flink, YARN) and are always ours.
PROVIDABLE = ("spark", "s3", "iceberg")
ENV_PROVIDED = "UPSERT_KAFKA_OPS_PROVIDED_JARS"


def group(name: str, spark_version: str | None = None) -> JarGroup:
    """The jar group ``name`` for a Spark release (the installed pyspark's by default)."""
    if name == "kafka":
        return KAFKA_GROUP
    if name == "flink":
        return FLINK_GROUP
    makers = {"spark": spark_group, "yarn": yarn_group, "s3": s3_group, "iceberg": iceberg_group}
    if name not in makers:
        raise JarsError(f"Unknown jar group {name!r}; choose from {sorted(GROUP_NAMES)}.")
    return makers[name](spark_version)


def provided() -> frozenset[str]:
    """The groups the platform ships on Spark's class path itself (Databricks and EMR bring Delta,
    Iceberg, Kafka's connector and S3A): ``UPSERT_KAFKA_OPS_PROVIDED_JARS=spark,iceberg`` or ``all``.
    Those are neither fetched nor added to a session or a spark-submit."""
    raw = {p.strip() for p in os.environ.get(ENV_PROVIDED, "").split(",") if p.strip()}
    if raw == {"all"}:
        return frozenset(PROVIDABLE)
    unknown = raw - set(PROVIDABLE)
    if unknown:
        raise JarsError(
            f"{ENV_PROVIDED} names {sorted(unknown)}, which no platform provides. Fix: list some of "
            f"{', '.join(PROVIDABLE)}, or 'all'."
        )
    return frozenset(raw)


def default_jars_dir() -> Path:
    """The cache folder: ``$UPSERT_KAFKA_OPS_JARS_DIR``, else the user's cache directory."""
    env = os.environ.get(ENV_JARS_DIR)
    if env:
        return Path(env).expanduser().resolve()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("upsert-kafka-ops")) / "jars"


def pom_xml(group: JarGroup) -> str:
    """The Maven pom whose dependencies are the group's artifacts."""
    deps = []
    for a in group.artifacts:
        excl = "".join(
            f"<exclusion><groupId>{escape(e.split(':')[0])}</groupId>"
            f"<artifactId>{escape(e.split(':')[1])}</artifactId></exclusion>"
            for e in (group.exclusions if a.transitive else ("*:*",))
        )
        deps.append(
            f"<dependency><groupId>{escape(a.group)}</groupId><artifactId>{escape(a.artifact)}</artifactId>"
            f"<version>{escape(a.version)}</version><exclusions>{excl}</exclusions></dependency>"
        )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        f"<groupId>upsert-kafka-ops</groupId><artifactId>jars-{group.name}</artifactId>"
        f"<version>0</version><packaging>pom</packaging><dependencies>{''.join(deps)}</dependencies>"
        "</project>\n"
    )


def maven_settings(repo_url: str) -> str:
    """A Maven settings.xml that mirrors every repository to ``repo_url``."""
    # Some upstream poms (Spark's) declare extra repositories that are not reachable here; mirror
    # every repository to the one we use so resolution only ever asks Maven Central.
    return (
        "<settings><mirrors><mirror><id>uko-central</id><mirrorOf>*</mirrorOf>"
        f"<url>{escape(repo_url)}</url></mirror></mirrors></settings>\n"
    )


def maven_executable() -> str:
    """The `mvn` on PATH (it resolves the jars from Maven Central), or a ToolchainError saying how to get it."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ToolchainError(
            "Maven (mvn) is not on PATH; it resolves the JVM jars from Maven Central. "
            "Install it (Debian: apt-get install -y maven) and run again."
        )
    if shutil.which("java") is None:
        raise ToolchainError(
            "Java is not on PATH. Install Java 17 (Debian: apt-get install -y openjdk-17-jdk-headless)."
        )
    return mvn


def run_maven(
    mvn: str, project: Path, repo: str, what: str, goals: list[str], *, progress: str | None = None
) -> None:
    """Run Maven on ``project/pom.xml`` with its ``settings.xml``; a failure raises :class:`JarsError`
    with Maven's first error lines.

    :param progress: a label: while Maven downloads, print ``<label>: N files downloaded (X MB), Ts``
        on stderr every few seconds (a first fetch on a fresh machine takes minutes).
    """
    cmd = [mvn, "-B", "-s", str(project / "settings.xml"), "-f", str(project / "pom.xml"), *goals]
    began = last = time.monotonic()
    files, size = 0, 0.0
    tail: collections.deque[str] = collections.deque(maxlen=400)
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            tail.append(line.rstrip("\n"))
            done = _DOWNLOADED.search(line)
            if done:
                files += 1
                size += float(done["size"]) * _SIZE_UNITS.get(done["unit"], 1)
            if progress and files and time.monotonic() - last >= PROGRESS_EVERY_S:
                last = time.monotonic()
                print(
                    f"{progress}: {files} files downloaded ({size / 1e6:.1f} MB), {last - began:.0f}s",
                    file=sys.stderr,
                    flush=True,
                )
    if proc.returncode != 0:
        errors = [ln for ln in tail if "ERROR" in ln][:8]
        raise JarsError(f"Maven could not {what} from {repo} (exit {proc.returncode}):\n" + "\n".join(errors))


#: Maven's batch-mode transfer line: "Downloaded from central: https://... (1.2 MB at 3.4 MB/s)"
_DOWNLOADED = re.compile(r"\bDownloaded from \S+: \S+ \((?P<size>[\d.]+) (?P<unit>B|kB|MB|GB)")
_SIZE_UNITS = {"B": 1.0, "kB": 1e3, "MB": 1e6, "GB": 1e9}
PROGRESS_EVERY_S = 5.0


def _group(g: str | JarGroup) -> JarGroup:
    return group(g) if isinstance(g, str) else g


def group_dir(g: str | JarGroup, jars_dir: Path | None = None) -> Path:
    return (jars_dir or default_jars_dir()) / _group(g).dir_name


def is_fetched(grp: str | JarGroup, jars_dir: Path | None = None) -> bool:
    """True when the group's folder holds a manifest for the current coordinates and every jar."""
    g = _group(grp)
    folder = group_dir(g, jars_dir)
    manifest = folder / "manifest.json"
    if not manifest.is_file():
        return False
    try:
        data = json.loads(manifest.read_text())
    except ValueError:
        return False
    if data.get("fingerprint") != g.fingerprint():
        return False
    return all((folder / name).is_file() for name in data.get("jars", []))


def jar_paths(grp: str | JarGroup, jars_dir: Path | None = None) -> list[Path]:
    """The jars of a fetched group, sorted; raises :class:`JarsError` when not fetched."""
    g = _group(grp)
    folder = group_dir(g, jars_dir)
    if not is_fetched(g, jars_dir):
        raise JarsError(
            f"The {g.name} jars are not in {folder} (or are stale). "
            f"Run `upsert-kafka-ops jars fetch --group {g.name}` first."
        )
    data = json.loads((folder / "manifest.json").read_text())
    return [folder / name for name in sorted(data["jars"])]


def class_path(
    groups: tuple[str, ...] | list[str], jars_dir: Path | None = None, spark_version: str | None = None
) -> list[Path]:
    """The jars of ``groups`` to put on Spark's class path, leaving out what the platform provides
    (:func:`provided`); a :class:`JarsError` names a group that is not fetched."""
    skip = provided()
    return [p for name in groups if name not in skip for p in jar_paths(group(name, spark_version), jars_dir)]


def fetch(
    groups: list[str] | None = None,
    jars_dir: Path | None = None,
    repo_url: str | None = None,
    log: bool = True,
    spark_version: str | None = None,
) -> dict[str, Path]:
    """Resolve the groups with Maven into ``jars_dir/<group>``; a no-op for groups already fetched,
    and for the groups the platform provides (:func:`provided`).

    :param groups: group names (``kafka``, ``spark``, ``flink``); :data:`DEFAULT_GROUPS` by default.
    :param jars_dir: cache folder; :func:`default_jars_dir` by default.
    :param repo_url: Maven repository; ``$UPSERT_KAFKA_OPS_MAVEN_REPO`` or Maven Central.
    :param spark_version: the Spark the jars are for (a cluster's); the installed pyspark's by default.
    :returns: group name -> folder (the provided groups left out).
    :raises JarsError: when Maven fails; the message carries Maven's error lines.
    """
    base = jars_dir or default_jars_dir()
    repo = repo_url or os.environ.get(ENV_MAVEN_REPO) or MAVEN_CENTRAL
    skip = provided()
    out: dict[str, Path] = {}
    for name in groups or list(DEFAULT_GROUPS):
        if name in skip:
            if log:
                print(f"jars: {name} provided by the platform ({ENV_PROVIDED}): not fetched")
            continue
        g = group(name, spark_version)
        folder = base / g.dir_name
        out[name] = folder
        if is_fetched(g, base):
            if log:
                print(f"jars: {g.name} up to date in {folder}")
            continue
        _resolve(g, folder, repo, log)
    return out


def _resolve(g: JarGroup, folder: Path, repo: str, log: bool) -> None:
    mvn = maven_executable()
    if log:
        print(f"jars: resolving {g.name} ({', '.join(map(str, g.artifacts))}) into {folder}")
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{g.name}-", dir=folder.parent))
    try:
        work = staging / "build"
        work.mkdir()
        (work / "pom.xml").write_text(pom_xml(g))
        (work / "settings.xml").write_text(maven_settings(repo))
        jars = staging / "jars"
        run_maven(
            mvn,
            work,
            repo,
            f"resolve the {g.name} jars",
            ["dependency:copy-dependencies", f"-DoutputDirectory={jars}", "-DincludeScope=runtime"],
            progress=f"jars: {g.name}" if log else None,
        )
        names = sorted(p.name for p in jars.glob("*.jar"))
        if not names:
            raise JarsError(f"Maven resolved no jars for {g.name}.")
        manifest = {
            "fingerprint": g.fingerprint(),
            "artifacts": [str(a) for a in g.artifacts],
            "exclusions": list(g.exclusions),
            "jars": names,
        }
        (jars / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        # Swap in atomically-enough: a concurrent reader sees the old folder or the new one.
        if folder.exists():
            shutil.rmtree(folder)
        jars.rename(folder)
        if log:
            print(f"jars: {g.name}: {len(names)} jars")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
