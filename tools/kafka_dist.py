"""Genuine Apache Kafka releases from Maven Central, laid out as a Kafka home for the tests.

    python -m tools.kafka_dist install 4.4          # prints the home's path
    python -m tools.kafka_dist install 3.9 4.0 4.4  # several; one path a line
    python -m tools.kafka_dist path 4.4             # the path if installed, exit 1 if not
    python -m tools.kafka_dist list                 # the versions it knows, and which are here

Apache Kafka's binary distribution (the .tgz) is not on Maven Central, but its jars are:
``org.apache.kafka:kafka_2.13`` (the broker and controller), ``kafka-tools``, ``kafka-storage``
and their runtime dependencies, and ``kafka-raft``'s test jar (the tests' Java raft voter uses
its ``MockLog``). This script writes a small pom for one release, has Maven
copy those jars into ``libs/``, adds the slf4j binding the distribution ships (log4j 2 for
4.x, reload4j for 3.9), writes the launchers the tests use into ``bin/`` (a
``kafka-run-class.sh`` of our own and one script per tool, each naming the class that
release has for it, found in the jars), Kafka's log configuration into ``config/``, and
unpacks Kafka's own message definitions into ``reference/`` (``message/`` from
kafka-clients, ``metadata/`` from kafka-metadata, ``raft/`` from kafka-raft: the layout of
``../shared/reference/kafka-3.9``).

A home is cached under ``.cache/kafka/<version>/`` of the checkout (``KRAFTNODE_KAFKA_CACHE``
moves it) and reused while the stamp written last names this script's ``LAYOUT``; Maven keeps the jars in
``~/.m2`` as well. Versions: an exact one (``4.0.2``) or a line (``3.9``, ``4.0``, ``4.4``),
which means the newest release of that line this script names in ``LINES``.

Stdlib only: it runs before the project's virtual environment exists (``.ci/run``).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: the newest release of each line Maven Central serves (checked 2026-12-06); a test that
#: names a line gets this release
LINES = {"3.9": "3.9.2", "4.0": "4.0.2", "4.1": "4.1.2", "4.2": "4.2.2", "4.3": "4.3.2", "4.4": "4.4.0"}

#: the jars a Kafka home needs: the server (with its Scala core), the tools, the storage
#: tool's module; Maven brings their runtime dependencies
ARTIFACTS = ("kafka_2.13", "kafka-tools", "kafka-storage")

#: tool script -> the classes that implement it across releases, newest location first; the
#: first one present in the release's jars is written into the script, and a tool none of
#: whose classes exists is not written (e.g. the share-group tools before 4.0)
TOOLS: dict[str, tuple[str, ...]] = {
    "kafka-server-start": ("kafka.Kafka",),
    "kafka-storage": ("kafka.tools.StorageTool",),
    "kafka-metadata-quorum": ("org.apache.kafka.tools.MetadataQuorumCommand",),
    "kafka-features": ("org.apache.kafka.tools.FeatureCommand",),
    "kafka-topics": ("org.apache.kafka.tools.TopicCommand", "kafka.admin.TopicCommand"),
    "kafka-configs": ("org.apache.kafka.tools.ConfigCommand", "kafka.admin.ConfigCommand"),
    "kafka-acls": ("org.apache.kafka.tools.AclCommand", "kafka.admin.AclCommand"),
    "kafka-cluster": ("org.apache.kafka.tools.ClusterTool",),
    "kafka-broker-api-versions": ("org.apache.kafka.tools.BrokerApiVersionsCommand",
                                  "kafka.admin.BrokerApiVersionsCommand"),
    "kafka-console-producer": ("org.apache.kafka.tools.ConsoleProducer", "kafka.tools.ConsoleProducer"),
    "kafka-console-consumer": ("org.apache.kafka.tools.consumer.ConsoleConsumer", "kafka.tools.ConsoleConsumer"),
    "kafka-console-share-consumer": ("org.apache.kafka.tools.consumer.ConsoleShareConsumer",),
    "kafka-verifiable-producer": ("org.apache.kafka.tools.VerifiableProducer",),
    "kafka-verifiable-consumer": ("org.apache.kafka.tools.VerifiableConsumer",),
    "kafka-verifiable-share-consumer": ("org.apache.kafka.tools.VerifiableShareConsumer",),
    "kafka-consumer-groups": ("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",),
    "kafka-share-groups": ("org.apache.kafka.tools.consumer.group.ShareGroupCommand",),
    "kafka-streams-groups": ("org.apache.kafka.tools.streams.StreamsGroupCommand",),
    "kafka-transactions": ("org.apache.kafka.tools.TransactionsCommand",),
    "kafka-leader-election": ("org.apache.kafka.tools.LeaderElectionCommand",),
    "kafka-reassign-partitions": ("org.apache.kafka.tools.reassign.ReassignPartitionsCommand",),
    "kafka-get-offsets": ("org.apache.kafka.tools.GetOffsetShell",),
    "kafka-delete-records": ("org.apache.kafka.tools.DeleteRecordsCommand",),
    "kafka-dump-log": ("org.apache.kafka.tools.DumpLogSegments", "kafka.tools.DumpLogSegments"),
    "kafka-producer-perf-test": ("org.apache.kafka.tools.ProducerPerformance",),
    "kafka-consumer-perf-test": ("org.apache.kafka.tools.ConsumerPerformance",),
    "kafka-e2e-latency": ("org.apache.kafka.tools.EndToEndLatency",),
    "kafka-client-metrics": ("org.apache.kafka.tools.ClientMetricsCommand",),
    "kafka-jmx": ("org.apache.kafka.tools.JmxTool",),
    "test-kraft-server-start": ("kafka.tools.TestRaftServer",),
}

RUN_CLASS = """\
#!/usr/bin/env bash
# Kafka {version}'s class launcher, written by kraftnode's tools/kafka_dist.py (Apache Kafka's
# kafka-run-class.sh, reduced to what the tests use): kafka-run-class.sh [-daemon] [-name NAME]
# [-loggc] CLASS [ARGS...]; the jars in libs/ plus $CLASSPATH; Kafka's environment variables
# (KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS, KAFKA_GC_LOG_OPTS, KAFKA_JMX_OPTS, KAFKA_OPTS,
# KAFKA_LOG4J_OPTS, LOG_DIR, JAVA_HOME); the tools' log configuration unless KAFKA_LOG4J_OPTS
# names another.
base_dir=$(cd "$(dirname "${{BASH_SOURCE[0]}}")/.." && pwd)
DAEMON_MODE=false; DAEMON_NAME=kafka; GC_LOG_ENABLED=false
while [ $# -gt 0 ]; do
  case "$1" in
    -name) DAEMON_NAME=$2; shift 2;;
    -loggc) [ -z "${{KAFKA_GC_LOG_OPTS:-}}" ] && GC_LOG_ENABLED=true; shift;;
    -daemon) DAEMON_MODE=true; shift;;
    *) break;;
  esac
done
if [ $# -lt 1 ]; then
  echo "USAGE: $0 [-daemon] [-name servicename] [-loggc] classname [opts]" >&2
  exit 1
fi
LOG_DIR=${{LOG_DIR:-$base_dir/logs}}
mkdir -p "$LOG_DIR"
KAFKA_LOG4J_OPTS=${{KAFKA_LOG4J_OPTS:-{tools_log4j}}}
# Kafka's default JVM options (G1), unless KAFKA_OPTS or KAFKA_HEAP_OPTS already choose a
# collector: a second collector flag makes the JVM refuse to start
case " ${{KAFKA_OPTS:-}} ${{KAFKA_HEAP_OPTS:-}} " in
  *-XX:+Use*GC*) default_perf="-server -Djava.awt.headless=true";;
  *) default_perf="-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true";;
esac
KAFKA_JVM_PERFORMANCE_OPTS=${{KAFKA_JVM_PERFORMANCE_OPTS:-$default_perf}}
if [ "$GC_LOG_ENABLED" = true ]; then
  KAFKA_GC_LOG_OPTS="-Xlog:gc*:file=$LOG_DIR/$DAEMON_NAME-gc.log:time,tags:filecount=10,filesize=100M"
fi
CLASSPATH="$base_dir/libs/*${{CLASSPATH:+:$CLASSPATH}}"
JAVA=${{JAVA_HOME:+$JAVA_HOME/bin/}}java
# shellcheck disable=SC2086
set -- "$JAVA" ${{KAFKA_HEAP_OPTS:--Xmx256M}} $KAFKA_JVM_PERFORMANCE_OPTS ${{KAFKA_GC_LOG_OPTS:-}} ${{KAFKA_JMX_OPTS:-}} \\
  -Dkafka.logs.dir="$LOG_DIR" $KAFKA_LOG4J_OPTS -cp "$CLASSPATH" ${{KAFKA_OPTS:-}} "$@"
if [ "$DAEMON_MODE" = true ]; then
  nohup "$@" > "$LOG_DIR/$DAEMON_NAME.out" 2>&1 < /dev/null &
else
  exec "$@"
fi
"""

TOOL = """\
#!/usr/bin/env bash
# Kafka {version}: {name}.sh runs {cls} (written by kraftnode's tools/kafka_dist.py)
exec "$(dirname "${{BASH_SOURCE[0]}}")/kafka-run-class.sh" {cls} "$@"
"""

SERVER = """\
#!/usr/bin/env bash
# Kafka {version}: {name}.sh runs {cls} with the server's log configuration and Kafka's server
# heap default (written by kraftnode's tools/kafka_dist.py, after Kafka's kafka-server-start.sh)
base_dir=$(cd "$(dirname "${{BASH_SOURCE[0]}}")/.." && pwd)
if [ $# -lt 1 ]; then
  echo "USAGE: $0 server.properties [--override property=value]*" >&2
  exit 1
fi
export KAFKA_LOG4J_OPTS=${{KAFKA_LOG4J_OPTS:-{server_log4j}}}
export KAFKA_HEAP_OPTS=${{KAFKA_HEAP_OPTS:--Xmx1G -Xms1G}}
exec "$base_dir/bin/kafka-run-class.sh" {cls} "$@"
"""

# Kafka 3.9's config/log4j.properties and tools-log4j.properties (log4j 1 through reload4j)
LOG4J1_SERVER = """\
log4j.rootLogger=INFO, stdout, kafkaAppender
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
""" + "".join(f"""\
log4j.appender.{a}=org.apache.log4j.DailyRollingFileAppender
log4j.appender.{a}.DatePattern='.'yyyy-MM-dd-HH
log4j.appender.{a}.File=${{kafka.logs.dir}}/{f}
log4j.appender.{a}.layout=org.apache.log4j.PatternLayout
log4j.appender.{a}.layout.ConversionPattern=[%d] %p %m (%c)%n
""" for a, f in (("kafkaAppender", "server.log"), ("stateChangeAppender", "state-change.log"),
                 ("requestAppender", "kafka-request.log"), ("cleanerAppender", "log-cleaner.log"),
                 ("controllerAppender", "controller.log"), ("authorizerAppender", "kafka-authorizer.log"))) + """\
log4j.logger.kafka=INFO
log4j.logger.org.apache.kafka=INFO
log4j.logger.kafka.request.logger=WARN, requestAppender
log4j.additivity.kafka.request.logger=false
log4j.logger.kafka.network.RequestChannel$=WARN, requestAppender
log4j.additivity.kafka.network.RequestChannel$=false
log4j.logger.org.apache.kafka.controller=INFO, controllerAppender
log4j.additivity.org.apache.kafka.controller=false
log4j.logger.kafka.controller=TRACE, controllerAppender
log4j.additivity.kafka.controller=false
log4j.logger.kafka.log.LogCleaner=INFO, cleanerAppender
log4j.additivity.kafka.log.LogCleaner=false
log4j.logger.state.change.logger=INFO, stateChangeAppender
log4j.additivity.state.change.logger=false
log4j.logger.kafka.authorizer.logger=INFO, authorizerAppender
log4j.additivity.kafka.authorizer.logger=false
"""

LOG4J1_TOOLS = """\
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.appender.stderr.Target=System.err
"""


def _log4j2_file(name: str, file: str) -> str:
    return (f'    <RollingFile name="{name}" fileName="${{sys:kafka.logs.dir}}/{file}" '
            f'filePattern="${{sys:kafka.logs.dir}}/{file}.%d{{yyyy-MM-dd-HH}}">\n'
            '      <PatternLayout pattern="[%d] %p %m (%c)%n"/>\n'
            '      <Policies><TimeBasedTriggeringPolicy/></Policies>\n'
            '    </RollingFile>\n')


def _log4j2_logger(name: str, level: str, appender: str) -> str:
    return (f'    <Logger name="{name}" level="{level}" additivity="false">'
            f'<AppenderRef ref="{appender}"/></Logger>\n')


# Kafka 4.x's config/log4j2.yaml and tools-log4j2.yaml, as XML (log4j 2 reads XML with no
# extra module): the same appenders, files and levels
LOG4J2_SERVER = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Configuration>\n  <Appenders>\n'
    '    <Console name="STDOUT" target="SYSTEM_OUT"><PatternLayout pattern="[%d] %p %m (%c)%n"/></Console>\n'
    + _log4j2_file("KafkaAppender", "server.log") + _log4j2_file("StateChangeAppender", "state-change.log")
    + _log4j2_file("RequestAppender", "kafka-request.log") + _log4j2_file("CleanerAppender", "log-cleaner.log")
    + _log4j2_file("ControllerAppender", "controller.log") + _log4j2_file("AuthorizerAppender", "kafka-authorizer.log")
    + '  </Appenders>\n  <Loggers>\n'
    '    <Root level="INFO"><AppenderRef ref="STDOUT"/><AppenderRef ref="KafkaAppender"/></Root>\n'
    '    <Logger name="kafka" level="INFO"/>\n    <Logger name="org.apache.kafka" level="INFO"/>\n'
    + _log4j2_logger("kafka.request.logger", "WARN", "RequestAppender")
    + _log4j2_logger("kafka.network.RequestChannel$", "WARN", "RequestAppender")
    + _log4j2_logger("org.apache.kafka.controller", "INFO", "ControllerAppender")
    + _log4j2_logger("kafka.controller", "TRACE", "ControllerAppender")
    + _log4j2_logger("kafka.log.LogCleaner", "INFO", "CleanerAppender")
    + _log4j2_logger("org.apache.kafka.storage.internals.log.LogCleaner", "INFO", "CleanerAppender")
    + _log4j2_logger("state.change.logger", "INFO", "StateChangeAppender")
    + _log4j2_logger("kafka.authorizer.logger", "INFO", "AuthorizerAppender")
    + '  </Loggers>\n</Configuration>\n')

LOG4J2_TOOLS = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Configuration>\n  <Appenders>\n'
    '    <Console name="STDERR" target="SYSTEM_ERR"><PatternLayout pattern="[%d] %p %m (%c)%n"/></Console>\n'
    '  </Appenders>\n  <Loggers>\n'
    '    <Root level="WARN"><AppenderRef ref="STDERR"/></Root>\n'
    '  </Loggers>\n</Configuration>\n')


class InstallError(Exception):
    """An install that cannot be done: the message names the version and what failed."""


def resolve(version: str) -> str:
    """``4.4`` -> ``4.4.0`` (the newest release of the line we name); an exact version stays."""
    if version in LINES:
        return LINES[version]
    parts = version.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise InstallError(f"not a Kafka version: {version!r} (give e.g. 4.4, 4.0.2 or 3.9)")
    return version


def uses_log4j2(version: str) -> bool:
    """Kafka 4.0 moved from log4j 1 (reload4j) to log4j 2 (KIP-653)."""
    return int(version.split(".")[0]) >= 4


def cache_root() -> Path:
    return Path(os.environ.get("KRAFTNODE_KAFKA_CACHE", REPO / ".cache" / "kafka"))


#: bumped whenever what install() lays out changes: a cached home with another number is
#: installed again
LAYOUT = 4


def _stamp_text(version: str) -> str:
    return f"{version} layout {LAYOUT}\n"


def installed(version: str) -> Path | None:
    """The home of ``version`` when a complete install by this script is there."""
    exact = resolve(version)
    home = cache_root() / exact
    stamp = home / ".installed"
    if stamp.is_file() and stamp.read_text() == _stamp_text(exact):
        return home
    return None


def _pom(version: str) -> str:
    deps = "".join(f"    <dependency><groupId>org.apache.kafka</groupId><artifactId>{a}</artifactId>"
                   f"<version>{version}</version></dependency>\n" for a in ARTIFACTS)
    return ('<project xmlns="http://maven.apache.org/POM/4.0.0">\n  <modelVersion>4.0.0</modelVersion>\n'
            f"  <groupId>kraftnode.tools</groupId><artifactId>kafka-{version}</artifactId>"
            "<version>1</version><packaging>pom</packaging>\n"
            f"  <dependencies>\n{deps}  </dependencies>\n</project>\n")


#: the log4j 2 release Kafka 4.0's distribution ships: its kafka_2.13 pom brings no log4j-core
#: (4.1+ does), so the home gets this one
LOG4J2_OF_4_0 = "2.24.3"


def _logging_jars(libs: Path, version: str) -> list[str]:
    """The logging jars Kafka's distribution ships and its poms leave out: for 4.x log4j 2's
    slf4j binding, at the log4j-core version kafka_2.13 brings (with log4j-core itself where
    it brings none); for 3.9 reload4j's binding (reload4j itself comes with kafka_2.13)."""
    if not uses_log4j2(version):
        return [] if list(libs.glob("slf4j-reload4j-*.jar")) else ["org.slf4j:slf4j-reload4j:1.7.36"]
    for jar in libs.glob("slf4j-reload4j-*.jar"):
        jar.unlink()  # 4.x logs through log4j 2 only
    core = sorted(libs.glob("log4j-core-*.jar"))
    if core:
        return [f"org.apache.logging.log4j:log4j-slf4j-impl:{core[0].name[len('log4j-core-'):-len('.jar')]}"]
    return [f"org.apache.logging.log4j:{a}:{LOG4J2_OF_4_0}" for a in ("log4j-api", "log4j-core", "log4j-slf4j-impl")]


def _mvn(args: list[str], cwd: Path, version: str) -> None:
    if shutil.which("mvn") is None:
        raise InstallError("Maven (mvn) is not on PATH: it fetches Kafka's jars from Maven Central")
    r = subprocess.run(["mvn", "-q", "-B", *args], cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-15:])
        raise InstallError(f"Kafka {version}: mvn {' '.join(args[:1])} failed:\n{tail}")


def _classes_in(libs: Path) -> set[str]:
    names: set[str] = set()
    for jar in libs.glob("*.jar"):
        with zipfile.ZipFile(jar) as z:
            names.update(n[:-6].replace("/", ".") for n in z.namelist()
                         if n.endswith(".class") and "$" not in n)
    return names


def _extract_reference(libs: Path, version: str, out: Path) -> None:
    """Kafka's own message JSON: the reference the schemas are compared with."""
    for artifact, prefix, sub in (("kafka-clients", "common/message/", "message"),
                                  ("kafka-metadata", "common/metadata/", "metadata"),
                                  ("kafka-raft", "common/message/", "raft")):
        jar = libs / f"{artifact}-{version}.jar"
        target = out / sub
        target.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(jar) as z:
            for name in z.namelist():
                if name.startswith(prefix) and name.endswith(".json"):
                    (target / name[len(prefix):]).write_bytes(z.read(name))


def install(version: str) -> Path:
    """Install ``version`` (once; later calls return the cached home)."""
    exact = resolve(version)
    done = installed(exact)
    if done is not None:
        return done
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{exact}.lock", "w") as lock:  # parallel test workers: install once
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = installed(exact)
        if done is not None:
            return done
        home = root / exact
        shutil.rmtree(home, ignore_errors=True)
        with tempfile.TemporaryDirectory(prefix=f"kafka-{exact}-", dir=root) as tmp:
            work = Path(tmp)
            (work / "pom.xml").write_text(_pom(exact))
            staged = work / "home"
            libs = staged / "libs"
            _mvn(["dependency:copy-dependencies", f"-DoutputDirectory={libs}", "-DincludeScope=runtime"],
                 work, exact)
            for artifact in _logging_jars(libs, exact):
                _mvn(["dependency:copy", f"-Dartifact={artifact}", f"-DoutputDirectory={libs}"], work, exact)
            # raft's test jar (its MockLog) for the tests' Java raft voter, as a source build has it
            _mvn(["dependency:copy", f"-Dartifact=org.apache.kafka:kafka-raft:{exact}:jar:test",
                  f"-DoutputDirectory={libs}"], work, exact)
            _lay_out(staged, exact)
            staged.rename(home)
        (home / ".installed").write_text(_stamp_text(exact))
    return home


def _lay_out(home: Path, version: str) -> None:
    libs, bin_dir, config = home / "libs", home / "bin", home / "config"
    if not (libs / f"kafka_2.13-{version}.jar").is_file():
        raise InstallError(f"Kafka {version}: Maven brought no kafka_2.13-{version}.jar")
    bin_dir.mkdir()
    config.mkdir()
    if uses_log4j2(version):
        (config / "log4j2.xml").write_text(LOG4J2_SERVER)
        (config / "tools-log4j2.xml").write_text(LOG4J2_TOOLS)
        server_log4j = "-Dlog4j2.configurationFile=$base_dir/config/log4j2.xml"
        tools_log4j = "-Dlog4j2.configurationFile=$base_dir/config/tools-log4j2.xml"
    else:
        (config / "log4j.properties").write_text(LOG4J1_SERVER)
        (config / "tools-log4j.properties").write_text(LOG4J1_TOOLS)
        server_log4j = "-Dlog4j.configuration=file:$base_dir/config/log4j.properties"
        tools_log4j = "-Dlog4j.configuration=file:$base_dir/config/tools-log4j.properties"
    scripts = {"kafka-run-class": RUN_CLASS.format(version=version, tools_log4j=tools_log4j)}
    classes = _classes_in(libs)
    for name, candidates in TOOLS.items():
        cls = next((c for c in candidates if c in classes), None)
        if cls is None:
            continue
        template = SERVER if name in ("kafka-server-start", "test-kraft-server-start") else TOOL
        scripts[name] = template.format(version=version, name=name, cls=cls, server_log4j=server_log4j)
    for name in ("kafka-server-start", "kafka-storage", "kafka-metadata-quorum"):
        if name not in scripts:
            raise InstallError(f"Kafka {version}: no class for {name}.sh among {TOOLS[name]}")
    for name, text in scripts.items():
        path = bin_dir / f"{name}.sh"
        path.write_text(text)
        path.chmod(0o755)
    _extract_reference(libs, version, home / "reference")
    (home / "VERSION").write_text(version + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.kafka_dist",
                                     description="Genuine Apache Kafka releases from Maven Central as Kafka homes.")
    sub = parser.add_subparsers(dest="command", required=True)
    p_install = sub.add_parser("install", help="install releases (cached); prints each home's path")
    p_install.add_argument("versions", nargs="+", metavar="VERSION", help="e.g. 4.4, 4.0, 3.9 or 4.0.2")
    p_path = sub.add_parser("path", help="print an installed release's home; exit 1 if not installed")
    p_path.add_argument("version", metavar="VERSION")
    sub.add_parser("list", help="the release lines this script knows, and which are installed")
    args = parser.parse_args(argv)
    try:
        if args.command == "install":
            for v in args.versions:
                print(install(v))
        elif args.command == "path":
            home = installed(args.version)
            if home is None:
                print(f"Kafka {resolve(args.version)} is not installed: "
                      f"python -m tools.kafka_dist install {args.version}", file=sys.stderr)
                return 1
            print(home)
        else:
            for line, exact in LINES.items():
                print(f"{line}\t{exact}\t{installed(exact) or '-'}")
    except InstallError as e:
        print(f"kafka_dist: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
