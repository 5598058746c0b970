"""A one-node YARN cluster on 127.0.0.1 for the tests: Hadoop's own ResourceManager and
NodeManager (the ``yarn`` jar group, Hadoop's release in pyspark's jars), each a JVM of its own.

YARN is the cluster manager on this machine that runs a Python driver in cluster deploy mode (Spark
standalone refuses to), so it is what the deferrable Airflow runs are tested on. spark-submit finds
the cluster through :attr:`LocalYarn.conf_dir` (``HADOOP_CONF_DIR``); :attr:`LocalYarn.driver_conf`
makes a driver and its executors use this machine's Spark jars and Python.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any
from xml.sax.saxutils import escape

from upsert_kafka_ops.errors import LocalServiceError
from upsert_kafka_ops.local.process import free_ports, get_json, java_executable, stop_group
from upsert_kafka_ops.spark_lines import spark_home

#: what Hadoop's own launch scripts open on Java 17 (Guice and the RPC layer reflect into java.base)
_OPENS = [f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in (
    "java.lang", "java.lang.reflect", "java.io", "java.net", "java.nio", "java.util", "java.util.concurrent",
    "sun.nio.ch",
)]  # fmt: skip


class LocalYarn:
    """A ResourceManager and a NodeManager as a context manager.

    :param dir: folder for the configuration, the logs and the NodeManager's local directories.
    :param memory_mb: memory the NodeManager offers to containers.
    :param vcores: virtual cores it offers.
    """

    def __init__(self, dir: Path | str | None = None, *, memory_mb: int = 4096, vcores: int = 2) -> None:
        self.dir = Path(dir if dir is not None else tempfile.mkdtemp(prefix="uko-yarn-")).resolve()
        self.memory_mb = memory_mb
        self.vcores = vcores
        self.ports: dict[str, int] = {}
        self._procs: dict[str, subprocess.Popen[bytes]] = {}

    # -- addresses ---------------------------------------------------------------------------------
    @property
    def conf_dir(self) -> Path:
        """The Hadoop configuration folder (``HADOOP_CONF_DIR`` for spark-submit)."""
        return self.dir / "conf"

    @property
    def rm_url(self) -> str:
        """The ResourceManager's web address (its REST API is under ``/ws/v1/cluster``)."""
        if "rm_web" not in self.ports:
            raise LocalServiceError("The YARN cluster is not started.")
        return f"http://127.0.0.1:{self.ports['rm_web']}"

    @property
    def driver_conf(self) -> dict[str, str]:
        """Spark settings for a job on this cluster: the installed pyspark's jars (already on the node,
        not uploaded), this Python for the driver and executors, containers sized to fit the node."""
        python = sys.executable
        return {
            "spark.yarn.jars": f"local:{spark_home() / 'jars'}/*",
            "spark.yarn.appMasterEnv.PYSPARK_PYTHON": python,
            "spark.executorEnv.PYSPARK_PYTHON": python,
            "spark.driver.memory": "768m",
            "spark.executor.memory": "768m",
            "spark.executor.instances": "1",
            "spark.executor.cores": "1",
        }

    def log_file(self, role: str) -> Path:
        """``resourcemanager`` or ``nodemanager``: the process's console output."""
        return self.dir / f"{role}.log"

    # -- lifecycle ---------------------------------------------------------------------------------
    def _write_conf(self) -> None:
        from upsert_kafka_ops import jars

        self.conf_dir.mkdir(parents=True, exist_ok=True)
        local, logs = self.dir / "nm-local", self.dir / "nm-logs"
        local.mkdir(exist_ok=True)
        logs.mkdir(exist_ok=True)
        p = self.ports
        yarn = {
            "yarn.resourcemanager.hostname": "127.0.0.1",
            "yarn.resourcemanager.address": f"127.0.0.1:{p['rm']}",
            "yarn.resourcemanager.scheduler.address": f"127.0.0.1:{p['rm_scheduler']}",
            "yarn.resourcemanager.resource-tracker.address": f"127.0.0.1:{p['rm_tracker']}",
            "yarn.resourcemanager.admin.address": f"127.0.0.1:{p['rm_admin']}",
            "yarn.resourcemanager.webapp.address": f"127.0.0.1:{p['rm_web']}",
            "yarn.nodemanager.hostname": "127.0.0.1",
            "yarn.nodemanager.address": f"127.0.0.1:{p['nm']}",
            "yarn.nodemanager.localizer.address": f"127.0.0.1:{p['nm_localizer']}",
            "yarn.nodemanager.webapp.address": f"127.0.0.1:{p['nm_web']}",
            "yarn.nodemanager.resource.memory-mb": str(self.memory_mb),
            "yarn.nodemanager.resource.cpu-vcores": str(self.vcores),
            "yarn.scheduler.minimum-allocation-mb": "256",
            "yarn.scheduler.maximum-allocation-mb": str(self.memory_mb),
            "yarn.nodemanager.local-dirs": str(local),
            "yarn.nodemanager.log-dirs": str(logs),
            # containers are JVMs sized by Spark; a development machine's disk may be nearly full
            "yarn.nodemanager.vmem-check-enabled": "false",
            "yarn.nodemanager.pmem-check-enabled": "false",
            "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage": "99.9",
            # containers inherit only the variables listed (Hadoop's default list, then the java
            # launcher's JDK_JAVA_OPTIONS: the JVM options this machine's other JVMs get, e.g. the test
            # suite's C1-only compiler, reach the drivers and executors YARN starts too)
            "yarn.nodemanager.env-whitelist": "JAVA_HOME,HADOOP_COMMON_HOME,HADOOP_HDFS_HOME,HADOOP_CONF_DIR,"
                "CLASSPATH_PREPEND_DISTCACHE,HADOOP_YARN_HOME,HADOOP_HOME,PATH,LANG,TZ,JDK_JAVA_OPTIONS",
            "yarn.resourcemanager.scheduler.class":
                "org.apache.hadoop.yarn.server.resourcemanager.scheduler.fifo.FifoScheduler",
        }  # fmt: skip
        core = {"fs.defaultFS": "file:///", "hadoop.tmp.dir": str(self.dir / "tmp")}
        for name, props in (("yarn-site.xml", yarn), ("core-site.xml", core)):
            body = "".join(
                f"<property><name>{escape(k)}</name><value>{escape(v)}</value></property>"
                for k, v in props.items()
            )
            (self.conf_dir / name).write_text(f"<configuration>{body}</configuration>\n")
        (self.conf_dir / "log4j.properties").write_text(
            "log4j.rootLogger=WARN, console\n"
            "log4j.logger.org.apache.hadoop.yarn.server.resourcemanager.ResourceManager=INFO\n"
            "log4j.logger.org.apache.hadoop.yarn.server.nodemanager.NodeStatusUpdaterImpl=INFO\n"
            "log4j.appender.console=org.apache.log4j.ConsoleAppender\n"
            "log4j.appender.console.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.console.layout.ConversionPattern=%d %p %c{1}: %m%n\n"
        )
        self._classpath = f"{self.conf_dir}:{jars.group_dir('yarn')}/*"
        jars.jar_paths("yarn")  # a clear error when the group is not fetched

    def _spawn(self, role: str, main: str) -> None:
        cmd = [java_executable(), "-Xmx384m", *_OPENS, "-cp", self._classpath, main]
        with open(self.log_file(role), "ab") as out:
            self._procs[role] = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                                 stdin=subprocess.DEVNULL, cwd=self.dir, start_new_session=True)  # fmt: skip

    def start(self, timeout: float = 180.0) -> LocalYarn:
        """Start both daemons; returns once the node is RUNNING in the ResourceManager.

        :raises LocalServiceError: when a daemon exits or the node does not register in time; the
            message carries the logs' tails.
        """
        if self._procs:
            raise LocalServiceError("This YARN cluster is already started.")
        self.dir.mkdir(parents=True, exist_ok=True)
        names = ("rm", "rm_scheduler", "rm_tracker", "rm_admin", "rm_web", "nm", "nm_localizer", "nm_web")
        self.ports = dict(zip(names, free_ports(len(names)), strict=True))
        self._write_conf()
        try:
            self._spawn("resourcemanager", "org.apache.hadoop.yarn.server.resourcemanager.ResourceManager")
            self._wait(timeout, lambda: self.get("/ws/v1/cluster/info")["clusterInfo"]["haState"] == "ACTIVE",
                       "the ResourceManager did not become active")  # fmt: skip
            self._spawn("nodemanager", "org.apache.hadoop.yarn.server.nodemanager.NodeManager")
            self._wait(timeout, self._node_running, "the NodeManager did not register")
        except BaseException:
            self.stop()
            raise
        return self

    def get(self, path: str, timeout: float = 5.0) -> Any:
        """GET ``path`` of the ResourceManager's REST API as JSON."""
        return get_json(f"{self.rm_url}{path}", timeout)

    def _node_running(self) -> bool:
        nodes = (self.get("/ws/v1/cluster/nodes").get("nodes") or {}).get("node") or []
        return any(n.get("state") == "RUNNING" for n in nodes)

    def _wait(self, timeout: float, ready: Any, what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            for role, proc in self._procs.items():
                if proc.poll() is not None:
                    raise LocalServiceError(
                        f"The YARN {role} exited with code {proc.returncode}.\n{self.log_tail()}"
                    )
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                if ready():
                    return
            if time.monotonic() >= deadline:
                raise LocalServiceError(f"YARN: {what} within {timeout:g}s.\n{self.log_tail()}")
            time.sleep(0.5)

    def log_tail(self, lines: int = 30) -> str:
        parts = []
        for role in ("resourcemanager", "nodemanager"):
            f = self.log_file(role)
            if f.is_file():
                text = f.read_text(errors="replace").splitlines()
                parts.append(f"--- {f} (last {min(lines, len(text))} lines)\n" + "\n".join(text[-lines:]))
        return "\n".join(parts) or "(no YARN log was written)"

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the NodeManager (and its containers), then the ResourceManager."""
        for role in ("nodemanager", "resourcemanager"):
            proc = self._procs.pop(role, None)
            if proc is not None:
                stop_group(proc, timeout)
        self._procs.clear()

    def __enter__(self) -> LocalYarn:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
