"""Building the SparkSession: jars from the local cache, Delta enabled, sized to the machine.

pyspark is imported inside the functions, so importing this module needs no JVM.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from upsert_kafka_ops import jars, spark_compat, spark_lines
from upsert_kafka_ops.engine import class_archive
from upsert_kafka_ops.errors import ToolchainError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from upsert_kafka_ops.spec.connection import KafkaConnection
    from upsert_kafka_ops.spec.storage import S3Storage

#: the Spark (log4j) level when the caller names none: ``warn`` for the library; the CLI sets ``error``
#: (``info`` with ``-v``) through this variable, so every session its process builds follows it
ENV_LOG_LEVEL = "UPSERT_KAFKA_OPS_SPARK_LOG_LEVEL"
LOG_LEVELS = ("error", "warn", "info", "debug")
#: lines the driver JVM prints on stderr at every start that ask nothing of the user: Spark 4 launches
#: it with --add-modules=jdk.incubator.vector, and the JVM announces the incubator module; the java
#: launcher repeats options the user set in its environment
_JVM_NOTICES = (
    b"WARNING: Using incubator modules:",
    b"NOTE: Picked up JDK_JAVA_OPTIONS:",
    b"Picked up JAVA_TOOL_OPTIONS:",
)
#: the driver JVM's output, at each line's own level, when the process has configured logging
#: (an Airflow task, a Dagster run, the CLI): an orchestrator logs raw stderr as errors
JVM_LOG = logging.getLogger("upsert_kafka_ops.spark")
# log4j's pattern (resources/spark-log4j2*.properties, Spark's own default): "26/11/26 03:10:00 WARN ..."
_LOG4J_LINE = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) ")
_LOG4J_LEVELS = {
    "TRACE": logging.DEBUG,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
}


def jvm_line(line: str, previous: int = logging.INFO) -> tuple[int, str]:
    """A line of a Spark JVM's output as (Python logging level, text): a log4j line at its level,
    without log4j's timestamp (the record has its own); a stack trace's ``at``/``Caused by`` lines at
    the level of the line they continue; the JVM's start-up notices at DEBUG; anything else INFO."""
    found = _LOG4J_LINE.match(line)
    if found:
        return _LOG4J_LEVELS[found[1]], line[len(found[0]) - len(found[1]) - 1 :]
    if line.startswith(("\t", " ", "Caused by:", "Suppressed:")):
        return previous, line
    if line.encode().startswith(_JVM_NOTICES):
        return logging.DEBUG, line
    return logging.INFO, line


def log_level(level: str | None = None) -> str:
    """The Spark log level to use: ``level``, else ``$UPSERT_KAFKA_OPS_SPARK_LOG_LEVEL``, else ``warn``."""
    chosen = (level or os.environ.get(ENV_LOG_LEVEL) or "warn").lower()
    if chosen not in LOG_LEVELS:
        raise ToolchainError(
            f"Spark log level {chosen!r} (from the argument or ${ENV_LOG_LEVEL}) is not one of "
            f"{', '.join(LOG_LEVELS)}; set one of those."
        )
    return chosen


#: Text Spark redacts from the strings it shows (plans, explain output): a ``password``, ``secret`` or
#: ``token`` setting's value, and the password inside a JAAS line.
SECRET_TEXT = r'(?i)(password|secret|token)[^=,{}\s]*=[^,}\s]*|password\s*=\s*"[^"]*"'


#: the generated classes a JVM keeps compiled (``spark.sql.codegen.cache.maxEntries``, Spark's default
#: 100). One incremental run into Delta compiles about 125 classes (the fold, the MERGE, the log's
#: state), so with 100 the cache evicts each class before the next run asks for it and every run
#: compiles them all again with Janino. Measured on a warm session, 20 runs of 10 records into Delta:
#: 142 compilations a run with 100 entries, under 1 with 1,000; 3.98 -> 2.67 JVM CPU s and 4.07 ->
#: 2.92 s a run, metaspace 197 -> 173 MB (fewer classes loaded and dropped).
CODEGEN_CACHE_ENTRIES = 1000

#: the garbage collector of a local driver (the master ``local[...]``: the driver is the executor too).
#: A run is a batch job, so the throughput collector suits it; G1, the JVM's default, marks the old
#: generation concurrently, and a long-lived session's old generation holds what it keeps between runs
#: (above all the compiled generated classes, each with its class loader). Every allocation of half a
#: G1 region or more (a Kafka fetch buffer, a Parquet page) then started a marking cycle: 108 cycles,
#: 25% of the session's CPU, in 5 minutes of the job tests. With this collector the Spark drivers of
#: those tests took 280 -> 232 CPU s. A driver on a cluster keeps the cluster's choice.
LOCAL_DRIVER_GC = "-XX:+UseParallelGC"


def spark_conf(
    master: str = "local[*]",
    *,
    app_name: str = "upsert-kafka-ops",
    jars_dir: Path | None = None,
    ui: bool = False,
    shuffle_partitions: int | None = None,
    extra: dict[str, str] | None = None,
    level: str | None = None,
    jar_groups: tuple[str, ...] = ("spark",),
) -> dict[str, str]:
    """The Spark configuration the project runs with, as plain strings (no Spark needed).

    :param master: ``local[*]`` by default; ``spark://host:port``, ``yarn``, ``k8s://...`` work too.
    :param jars_dir: jar cache holding the fetched ``spark`` group.
    :param ui: start the Spark UI (off by default: tests and batch jobs do not need it).
    :param shuffle_partitions: defaults to twice the cores of the machine (local masters), which
        suits the topic sizes a single machine handles; set it for a cluster.
    :param extra: more settings, applied last.
    :param level: Spark's log level (:func:`log_level`), set when the session starts.
    :param jar_groups: the fetched jar groups on the class path: ``spark``, ``s3`` for tables on S3,
        ``iceberg`` for Iceberg tables (with Iceberg's SQL extensions).

    A local driver's heap is a quarter of the machine (at most 8 GB), or ``SPARK_DRIVER_MEMORY`` when
    set, as with ``spark-submit``.
    """
    cores = os.cpu_count() or 2
    local = master.startswith("local")
    # local mode: the driver is the only JVM; give it a quarter of the machine (Spark's default is 1g)
    # unless SPARK_DRIVER_MEMORY (the variable spark-submit reads) says otherwise
    memory_gb = max(1, (os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")) // 4 // 2**30)
    driver_memory = os.environ.get("SPARK_DRIVER_MEMORY", "").strip() or f"{min(memory_gb, 8)}g"
    verbose = log_level(level) in ("info", "debug")  # a bad level fails here, before any JVM starts
    log4j = (
        resources.files("upsert_kafka_ops")
        / "resources"
        / ("spark-log4j2-verbose.properties" if verbose else "spark-log4j2.properties")
    )
    # HotSpot never JIT-compiles a method past 8,000 bytes of bytecode; Spark's generated code for a
    # wide row (a format's decoder or encoder) is often larger and then runs interpreted. Measured:
    # JSON-encoding 1M rows of 7 columns 3.1 s -> 1.85 s with the limit lifted.
    java_opts = f"-Dlog4j2.configurationFile={log4j} -XX:-DontCompileHugeMethods"
    # a local driver runs batch jobs: the throughput collector (LOCAL_DRIVER_GC), not G1's concurrent one
    driver_opts = f"{java_opts} {LOCAL_DRIVER_GC}" if local else java_opts
    extensions = ["io.delta.sql.DeltaSparkSessionExtension"]
    if "iceberg" in jar_groups:  # Iceberg's parse its maintenance procedures (CALL <catalog>.system.*)
        extensions.append("org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
    conf = {
        "spark.master": master,
        "spark.app.name": app_name,
        "spark.jars": ",".join(str(p) for p in jars.class_path(jar_groups, jars_dir)),
        "spark.sql.extensions": ",".join(extensions),
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.shuffle.partitions": str(shuffle_partitions or max(2, 2 * cores)),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.codegen.cache.maxEntries": str(CODEGEN_CACHE_ENTRIES),
        "spark.ui.enabled": "true" if ui else "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": driver_opts,
        "spark.executor.extraJavaOptions": java_opts,
        "spark.driver.host": "127.0.0.1" if local else "",
        "spark.driver.bindAddress": "127.0.0.1" if local else "",
        "spark.driver.memory": driver_memory if local else "",
        # Delta rebuilds a table's state from its log with 50 tasks by default, sized for clusters; on
        # one machine a few do the same work with less scheduling (measured: ~15% off a small MERGE run)
        "spark.databricks.delta.snapshotPartitions": str(max(2, cores)) if local else "",
        # Kafka batch reads through Spark's DataSource V2 reader (as streaming reads are): it reports
        # the records each task read, which progress lines show (Spark's default list has kafka in it)
        "spark.sql.sources.useV1SourceList": "avro,csv,json,orc,parquet,text",
        # PySpark 4 records the Python call site of every DataFrame and functions call for its error
        # messages: five JVM round trips and a walk of the Python stack per call (a Connect client
        # walks the stack too). The engine builds its expressions with hundreds of such calls per run,
        # and the call sites would name the engine's lines, not the user's. Off: a warm incremental
        # Delta run of 10 records 1.03 -> 0.71 s, 2,692 -> 1,269 JVM calls, 0.94 -> 0.65 CPU s.
        # A static setting, read once per process from the session (a Connect client: its server's).
        "spark.python.sql.dataFrameDebugging.enabled": "false",
        # Spark prints a Kafka writer's producer settings into its plan (the UI's SQL tab, event logs,
        # the History Server): a store password or a JAAS line's password would be there in clear text
        "spark.redaction.string.regex": SECRET_TEXT,
        "spark.sql.redaction.string.regex": SECRET_TEXT,
    }
    conf = {k: v for k, v in conf.items() if v != ""}
    conf.update(spark_compat.session_conf(spark_lines.installed_version()))  # what the Spark line needs
    conf.update(extra or {})
    driver_opts = conf.get("spark.driver.extraJavaOptions", "")
    if "Archive" not in driver_opts:  # unless the caller chose one: a local driver maps its classes
        conf["spark.driver.extraJavaOptions"] = f"{driver_opts} {class_archive.java_options(conf)}".strip()
    return conf


def check_pyspark_version() -> str:
    """The installed pyspark version; a :class:`ToolchainError` when its line is not supported (the
    connector jars are resolved for the installed release itself)."""
    import pyspark

    version = str(pyspark.__version__)
    spark_lines.line_of(version)
    return version


def is_connect(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect client session (no JVM in this process: no
    ``sparkContext``, no ``_jvm``)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def application_id(spark: SparkSession) -> str:
    """The id of the Spark application ``spark`` runs in (a Spark Connect session's is the server's);
    empty when the session does not say."""
    try:
        if is_connect(spark):
            return str(spark.conf.get("spark.app.id", "") or "")
        return str(spark.sparkContext.applicationId or "")
    except Exception:  # a label for links and logs: never fail a run over it
        return ""


#: SQL settings a Connect session gets whatever its server's defaults: results depend on them
CONNECT_SESSION_CONF = {"spark.sql.session.timeZone": "UTC"}


def remote_session(
    remote: str, conf: dict[str, str] | None = None, *, token: str | None = None, ca_cert: bytes | None = None
) -> SparkSession:
    """A Spark Connect session on ``remote`` (``sc://host:port``, no token in it), with
    :data:`CONNECT_SESSION_CONF` and ``conf`` set on it; ``token`` and ``ca_cert`` (PEM) travel as
    :func:`upsert_kafka_ops.engine.connect.channel_builder` says. Needs the Spark Connect client
    (the ``connect`` extra).

    :raises SpecError: the server refused the token (field ``token``), or TLS failed (``ca_cert``,
        ``use_ssl``), or the token would go in clear text to another machine (``remote``)."""
    check_pyspark_version()
    from upsert_kafka_ops.engine.connect import channel_builder, refused

    try:
        from pyspark.sql.connect.session import SparkSession as ConnectSession

        builder = channel_builder(remote, token, ca_cert)
        # what pyspark's builder.remote() sets: its functions and DataFrame APIs take the client's
        # path in this process from now on
        os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
        spark = ConnectSession.builder.channelBuilder(builder).getOrCreate()
    except ImportError as exc:
        raise ToolchainError(
            f"the Spark Connect client cannot load ({exc}); install the connect extra: "
            "pip install 'upsert-kafka-ops[connect]'."
        ) from None
    try:
        for key, value in {**CONNECT_SESSION_CONF, **(conf or {})}.items():
            spark.conf.set(key, value)
    except Exception as exc:
        error = refused(exc, builder.endpoint)
        if error is None:
            raise
        with contextlib.suppress(Exception):  # the server refused it: nothing to release
            spark.stop()
        raise error from None
    try:  # the client builds plans for its own line: the server must run the same one
        spark_lines.same_line(spark_lines.installed_version(), str(spark.version))
    except ToolchainError:
        with contextlib.suppress(Exception):
            spark.stop()
        raise
    return spark  # type: ignore[return-value]


def existing_session() -> SparkSession | None:
    """The SparkSession this thread should use when the caller gave none: the thread's active one,
    else the one another thread of this process created (e.g. an Airflow task run in-process next
    to a test's session). The caller did not create it, so it must never stop it."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if SparkContext._active_spark_context is not None:
        return SparkSession.builder.getOrCreate()
    return None


@contextmanager
def session_for(
    job: str,
    master: str = "local[*]",
    conf: dict[str, str] | None = None,
    jar_groups: tuple[str, ...] = ("spark",),
) -> Iterator[SparkSession]:
    """The session a run of ``job`` uses: :func:`existing_session`, else one built for the run
    (``master``, ``conf``, ``jar_groups``) and stopped when the run ends. A session it did not build
    is never stopped."""
    spark = existing_session()
    own = None
    if spark is None:
        spark = own = build_spark_session(
            master, app_name=f"upsert-kafka-ops:{job}", extra=conf, jar_groups=jar_groups
        )
    try:
        yield spark
    finally:
        if own is not None:
            own.stop()


def build_spark_session(master: str = "local[*]", **kwargs: Any) -> SparkSession:
    """Create (or return the active) SparkSession with :func:`spark_conf`.

    Keyword arguments go to :func:`spark_conf`. Runs need no network: the jars come from the
    local cache (``upsert-kafka-ops jars fetch``). When this call starts the driver JVM, its stdout
    and stderr pass through to this process's stderr (stdout stays free for results), without the
    JVM's start-up notices (with them at level ``info`` and ``debug``).
    """
    check_pyspark_version()
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if master.startswith("local"):
        # keep the driver on loopback instead of the first network interface
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # its Python workers run this interpreter, not the first python3 on PATH (pyspark reads the
        # variable when the context starts: a virtualenv's command run without activating it would
        # start workers of another Python, which pyspark refuses)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    conf = spark_conf(master, **kwargs)
    level = log_level(kwargs.get("level"))
    if SparkContext._active_spark_context is None:
        try:
            _start_context(conf, quiet=level in ("error", "warn"))
        except Exception as exc:
            archive = class_archive.mapped(conf)
            if archive is None or "JAVA_GATEWAY_EXITED" not in str(exc):
                raise
            # a damaged archive stops the JVM at start; so does an option the JVM refuses, or too
            # little memory. Once more without the archive: a JVM that stops again raises, and the
            # archive stays; one that starts shows the archive was the cause, and it is removed.
            conf = class_archive.unmapped(conf)
            _start_context(conf, quiet=level in ("error", "warn"))
            print(
                f"upsert-kafka-ops: the JVM could not map {archive} (its crash report, hs_err_pid*.log, "
                "is in the working folder); removed it, started without it",
                file=sys.stderr,
            )
            archive.unlink(missing_ok=True)
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(level.upper())
    return session


#: PySpark's classes it names without their package (``sc._jvm.PythonUtils``), bound to the
#: session's JVM view at start (:func:`_bind_classes`). py4j resolves a bare name in the JVM at every
#: use: first as a class of that name, then in each of PySpark's eight star-imported packages (or its
#: single import), and each miss is a class lookup through every jar on the driver's class path (some
#: 300). Building a DataFrame's columns (``PythonUtils.toSeq``) paid several of those per call.
#: Measured on the golden-format tests (one session, 140 tests, 2 cores; three runs each way,
#: alternated, medians): the tests' processes 110 -> 105 CPU s, the JVM's py4j threads 51 -> 47 s.
_BOUND_CLASSES = (
    "org.apache.spark.api.java.JavaSparkContext",
    "org.apache.spark.api.python.PythonUtils",
    "org.apache.spark.api.python.PythonRDD",
    "org.apache.spark.api.python.SerDeUtil",
    "org.apache.spark.api.python.BytesToString",
    "org.apache.spark.api.python.PythonAccumulatorV2",
    "org.apache.spark.api.python.SimplePythonFunction",
    "org.apache.spark.sql.api.python.PythonSQLUtils",
    "org.apache.spark.sql.functions",
)


def _bind_classes(jvm: Any) -> None:
    """Bind :data:`_BOUND_CLASSES` to ``jvm`` (a py4j ``JVMView``) by their simple and their full
    names (PySpark asks for some by the full one: ``functions`` at every ``F.*`` call, a round trip
    each): one round trip per class here, none at each use. A class this Spark line lacks stays
    looked up as before."""
    from py4j.java_gateway import JavaClass  # type: ignore[import-untyped]

    for name in _BOUND_CLASSES:
        found = getattr(jvm, name)  # py4j takes a name it cannot find for a package's
        if not isinstance(found, JavaClass):
            continue
        setattr(jvm, name, found)
        setattr(jvm, name.rsplit(".", 1)[1], found)


def _start_context(conf: dict[str, str], *, quiet: bool) -> None:
    """Start the driver JVM and its SparkContext, its stderr pumped through a filter (pyspark's own
    start leaves the JVM writing to this process's stderr directly)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    spark_conf_ = SparkConf(loadDefaults=False).setAll(list(conf.items()))
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    gateway = launch_gateway(spark_conf_, popen_kwargs=pipes)  # type: ignore[no-untyped-call]
    _bind_classes(gateway.jvm)
    notices = _JVM_NOTICES if quiet else ()
    # both to stderr: this process's stdout is for its results (the CLI's tables and --json), and the
    # JVM writes its own warnings to stdout
    for name in ("stdout", "stderr"):
        stream = getattr(gateway.proc, name)
        threading.Thread(
            target=_pump, args=(stream, notices), name=f"spark-driver-{name}", daemon=True
        ).start()
    SparkContext(conf=spark_conf_, gateway=gateway)


def _pump(stream: Any, dropped: tuple[bytes, ...]) -> None:
    """The JVM's output, line by line, without ``dropped``: to :data:`JVM_LOG` at each line's level
    when logging is configured, else to this process's stderr (file descriptor 2) as it came."""
    level = logging.INFO
    for raw in iter(stream.readline, b""):
        if raw.startswith(dropped):
            continue
        if JVM_LOG.hasHandlers():
            level, text = jvm_line(raw.decode("utf-8", errors="replace").rstrip("\r\n"), level)
            JVM_LOG.log(level, "%s", text)
            continue
        try:
            os.write(2, raw)
        except OSError:
            return


#: sessions inside :func:`static_plans`: id -> (how many blocks, the setting to restore)
_STATIC: dict[int, tuple[int, str]] = {}
_STATIC_LOCK = threading.Lock()


@contextmanager
def static_plans(spark: SparkSession) -> Iterator[None]:
    """Run the block's queries without adaptive query execution, then restore the session's setting
    (when the last of the blocks running at once in its threads ends).

    The fold's queries are chains of small aggregations over ``2 x cores`` shuffle partitions, where
    adaptive execution has nothing to coalesce or re-plan, yet runs every shuffle stage as a job of its
    own and plans again between them. Measured on a warm local session, 8 partitions (median of 6):
    materialize of 100 records 2.18 s -> 1.59 s, of 1M records 4.87 s -> 4.56 s, the same rows. The
    setting is the session's: other queries running meanwhile in other threads are planned the same
    way (their results do not change)."""
    key = "spark.sql.adaptive.enabled"
    with _STATIC_LOCK:
        blocks, before = _STATIC.get(id(spark), (0, ""))
        if not blocks:
            before = spark.conf.get(key) or "true"
            spark.conf.set(key, "false")
        _STATIC[id(spark)] = (blocks + 1, before)
    try:
        yield
    finally:
        with _STATIC_LOCK:
            blocks, before = _STATIC.pop(id(spark))
            if blocks > 1:
                _STATIC[id(spark)] = (blocks - 1, before)
            else:
                spark.conf.set(key, before)


def use_storage(spark: SparkSession, storage: S3Storage, bucket: str) -> None:
    """Give ``spark`` the settings of the store that holds ``bucket`` (S3A's per-bucket keys, secrets
    included: session settings, which Spark redacts wherever it shows them, never a command line).
    The S3A connector must be on the session's class path (the ``s3`` jar group)."""
    for key, value in storage.hadoop_conf(bucket).items():
        spark.conf.set(key, value)


def use_krb5_conf_in_driver(spark: SparkSession, connection: KafkaConnection) -> None:
    """Point the driver JVM's Kerberos at a GSSAPI connection's ``kerberos_krb5_conf``: Kafka's Java
    client reads the JVM's one ``java.security.krb5.conf``, loaded at its first Kerberos login. In
    local mode the executors are this JVM; a cluster's executors read theirs from
    ``spark.executor.extraJavaOptions`` (or ``/etc/krb5.conf``)."""
    from upsert_kafka_ops.spec.connection import krb5_conf_unset

    path = connection.kerberos_krb5_conf
    if connection.sasl_mechanism != "GSSAPI" or path is None:
        return
    system = spark.sparkContext._jvm.java.lang.System  # type: ignore[union-attr]
    key = "java.security.krb5.conf"
    if krb5_conf_unset(system.getProperty(key), path, f"the Spark driver's {key}"):
        system.setProperty(key, path)
