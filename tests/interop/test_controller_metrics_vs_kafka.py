"""Kafka's controller metrics on kraftnode's /metrics, compared with a genuine Kafka 4.4
controller's JMX MBeans in the same test (issue 39, must-show 5).

A genuine Kafka 4.4 controller (one voter, formatted at metadata.version 3.9-IV0, as a kraftnode
node is) runs with remote JMX on 127.0.0.1; Kafka's own JmxTool
(``org.apache.kafka.tools.JmxTool``) lists its ``kafka.controller:*`` MBeans. Their names go
through the Prometheus JMX exporter's rules of its example Kafka configuration
(``kafka-2_0_0.yml``, lowercased: a gauge's Value -> ``kafka_<domain>_<type>_<name>``, a meter's
Count -> ``..._<name without PerSec>_total``, a timer -> ``..._<name>`` and ``..._count``), and the
result must equal the ``kafka_controller_*`` families a kraftnode node exports -- no more, no
fewer.

Then the same simulated broker (BrokerRegistration + BrokerHeartbeat over a real socket) joins
each controller, a 3-partition topic is created on each, and the broker stops heartbeating
until both fence it: at every step the gauges both controllers report agree (active controller,
active/fenced brokers, topics, partitions, offline partitions, preferred-replica imbalance), and
LastAppliedRecordOffset / LastCommittedRecordOffset move with the log.
"""

from __future__ import annotations

import re
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import CREATE_TOPICS
from tests.support.cluster import free_ports
from tests.support.kafka import KafkaHome
from tests.support.kafka_server import KafkaServer, controller_properties, server_env
from tests.support.node import call, running_node
from tests.support.sim_brokers import SimBroker

pytestmark = pytest.mark.timeout(300)

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
SESSION = "broker.session.timeout.ms=4000\nbroker.heartbeat.interval.ms=500\n"
#: the gauges both controllers must agree on, by their exporter names
COMPARED = ("activecontrollercount", "activebrokercount", "fencedbrokercount", "globaltopiccount",
            "globalpartitioncount", "offlinepartitionscount", "preferredreplicaimbalancecount",
            "controlledshutdownbrokercount", "metadataerrorcount", "ignoredstaticvoters")


def exporter_family(mbean: str, attribute: str) -> str | None:
    """The Prometheus family the JMX exporter's kafka-2_0_0.yml rules make of one MBean
    attribute (lowercaseOutputName); None for attributes those rules do not export."""
    m = re.fullmatch(r"kafka\.(\w+):type=([^,]+),name=([^,]+)", mbean)
    assert m, mbean
    domain, typ, name = m.groups()
    base = f"kafka_{domain}_{typ}_".lower()
    if attribute == "Count" and re.search(r"PerSec\w*$", name):
        return base + re.sub(r"PerSec\w*$", "", name).lower()      # ..._total (a counter)
    if attribute in ("Value", "Count") or re.fullmatch(r"\d+thPercentile", attribute):
        return base + name.lower()                                 # a gauge, or a timer's family
    return None


def jmx_names(home: KafkaHome, port: int, root: Path) -> dict[str, set[str]]:
    """MBean name -> attributes, as Kafka's JmxTool reads them from the running controller."""
    env = server_env(home, root / "jmxtool-logs", "-Xmx128m")
    env.pop("KAFKA_JMX_OPTS", None)
    deadline = time.monotonic() + 120
    while True:
        r = subprocess.run([str(home.script("kafka-run-class")), "org.apache.kafka.tools.JmxTool",
                            "--jmx-url", f"service:jmx:rmi:///jndi/rmi://127.0.0.1:{port}/jmxrmi",
                            "--object-name", "kafka.controller:*", "--one-time", "true",
                            "--report-format", "properties"],
                           capture_output=True, text=True, timeout=120, env=env)
        out: dict[str, set[str]] = {}
        for mbean, attr in re.findall(r"(kafka\.controller:type=[A-Za-z]+,name=[A-Za-z]+):([A-Za-z0-9]+)=",
                                      r.stdout):
            out.setdefault(mbean, set()).add(attr)
        if out:
            return out
        assert time.monotonic() < deadline, f"JmxTool read nothing:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
        time.sleep(1)


def jmx_values(home: KafkaHome, port: int, root: Path) -> dict[str, float]:
    """kafka.controller:type=KafkaController gauges: lowercased name -> Value."""
    env = server_env(home, root / "jmxtool-logs", "-Xmx128m")
    env.pop("KAFKA_JMX_OPTS", None)
    r = subprocess.run([str(home.script("kafka-run-class")), "org.apache.kafka.tools.JmxTool",
                        "--jmx-url", f"service:jmx:rmi:///jndi/rmi://127.0.0.1:{port}/jmxrmi",
                        "--object-name", "kafka.controller:type=KafkaController,*", "--one-time", "true",
                        "--report-format", "properties"], capture_output=True, text=True, timeout=120, env=env)
    return {name.lower(): float(v) for name, v in
            re.findall(r"kafka\.controller:type=KafkaController,name=([A-Za-z]+):Value=([-0-9.E]+)", r.stdout)}


def scrape(port: int) -> dict[str, dict[str, float]]:
    """family -> sample name -> value (labels dropped: these families have none)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    out: dict[str, dict[str, float]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if not s.labels or set(s.labels) == {"le"}:
                out.setdefault(fam.name, {})[s.name] = s.value
    return out


def ours(port: int) -> dict[str, float]:
    fams = scrape(port)
    p = "kafka_controller_kafkacontroller_"
    return {f[len(p):]: v[f] for f, v in fams.items() if f.startswith(p)}


def create_topic(port: int, name: str) -> int:
    C = w.CreateTopicsRequest
    _, r = call(port, CREATE_TOPICS, 7, C(timeout_ms=10000, validate_only=False, topics=[
        C.CreatableTopic(name=name, num_partitions=3, replication_factor=1, assignments=[], configs=[])]),
        timeout=30)
    return int(r.topics[0].error_code)  # type: ignore[attr-defined]


def agree(what: str, kraft: Callable[[], dict[str, float]], kafka: Callable[[], dict[str, float]],
          expect: dict[str, float], timeout: float = 60) -> None:
    """Poll both sides until each reports ``expect`` (and the same as the other for COMPARED)."""
    deadline = time.monotonic() + timeout
    while True:
        a, b = kraft(), kafka()
        ok = all(a.get(k) == v and b.get(k) == v for k, v in expect.items())
        if ok:
            diff = {k: (a.get(k), b.get(k)) for k in COMPARED if a.get(k) != b.get(k)}
            assert not diff, f"{what}: kraftnode vs Kafka differ: {diff}"
            return
        assert time.monotonic() < deadline, (
            f"{what}: expected {expect}\nkraftnode {a}\nkafka {b}")
        time.sleep(0.5)


@pytest.fixture
def kafka_controller(kafka44: KafkaHome, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[KafkaServer, int]]:
    port, jmx = free_ports(2)
    monkeypatch.setenv("KAFKA_JMX_OPTS", " ".join((
        "-Dcom.sun.management.jmxremote", "-Dcom.sun.management.jmxremote.authenticate=false",
        "-Dcom.sun.management.jmxremote.ssl=false", "-Dcom.sun.management.jmxremote.local.only=false",
        "-Djava.rmi.server.hostname=127.0.0.1", "-Dcom.sun.management.jmxremote.host=127.0.0.1",
        f"-Dcom.sun.management.jmxremote.port={jmx}", f"-Dcom.sun.management.jmxremote.rmi.port={jmx}")))
    s = KafkaServer(kafka44, tmp_path / "kafka", 1,
                    controller_properties(1, port, tmp_path / "kafka" / "data", voters=f"1@127.0.0.1:{port}",
                                          extra=SESSION))
    s.port = port
    try:
        s.format(CLUSTER, "--release-version", "3.9-IV0")
        s.start()
        s.wait_started()
        yield s, jmx
    finally:
        s.close()


def test_controller_metrics_have_kafka_44_names_and_values(kafka_controller: tuple[KafkaServer, int],
                                                           kafka44: KafkaHome, tmp_path: Path) -> None:
    kafka, jmx = kafka_controller
    mbeans = jmx_names(kafka44, jmx, tmp_path)
    # the MBeans Kafka documents for a KRaft controller are there (a sanity check of the scrape)
    for must in ("type=KafkaController,name=ActiveControllerCount", "type=ControllerEventManager,name=EventQueueTimeMs",
                 "type=KafkaController,name=LastAppliedRecordLagMs"):
        assert f"kafka.controller:{must}" in mbeans, sorted(mbeans)
    kafka_families = {f for mbean, attrs in mbeans.items() for a in attrs
                      if (f := exporter_family(mbean, a)) is not None}

    (mport,) = free_ports(1)
    (tmp_path / "kraft").mkdir()
    with running_node(tmp_path / "kraft", extra=f"kraftnode.metrics.listener=127.0.0.1:{mport}\n{SESSION}",
                      application_records=False) as node:
        deadline = time.monotonic() + 60
        while True:
            try:
                fams = scrape(mport)
                if fams.get("kafka_controller_kafkacontroller_activecontrollercount", {}).get(
                        "kafka_controller_kafkacontroller_activecontrollercount") == 1:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, node.log()[-3000:]
            time.sleep(0.2)
        our_families = {f for f in fams if f.startswith("kafka_controller_")}
        assert our_families == kafka_families, (
            f"only kraftnode: {sorted(our_families - kafka_families)}; "
            f"only Kafka 4.4: {sorted(kafka_families - our_families)}")
        # the exact sample names a dashboard queries: meters as _total, timers' _count
        for mbean, attrs in mbeans.items():
            fam = exporter_family(mbean, "Value" if "Value" in attrs else "Count")
            assert fam is not None
            samples = fams[fam]
            if "Value" in attrs:
                assert fam in samples, (mbean, samples)
            elif mbean.endswith("PerSec"):
                assert fam + "_total" in samples, (mbean, samples)
            else:
                assert fam + "_count" in samples, (mbean, samples)

        # the same simulated broker on each, then a topic, then fenced by silence
        def kafka_values() -> dict[str, float]:
            return jmx_values(kafka44, jmx, tmp_path)

        def kraft_values() -> dict[str, float]:
            return ours(mport)

        agree("no broker yet", kraft_values, kafka_values,
              {"activecontrollercount": 1, "activebrokercount": 0, "globaltopiccount": 0})
        before = kraft_values()
        brokers = [SimBroker(node.port, 7, CLUSTER), SimBroker(kafka.port, 7, CLUSTER)]
        try:
            for b in brokers:
                b.join()
            agree("one broker", kraft_values, kafka_values, {"activebrokercount": 1, "fencedbrokercount": 0})
            assert create_topic(node.port, "metrics-t") == 0
            assert create_topic(kafka.port, "metrics-t") == 0
            agree("a topic", kraft_values, kafka_values,
                  {"globaltopiccount": 1, "globalpartitioncount": 3, "offlinepartitionscount": 0,
                   "preferredreplicaimbalancecount": 0})
            after = kraft_values()
            assert after["lastappliedrecordoffset"] > before["lastappliedrecordoffset"]
            assert after["lastcommittedrecordoffset"] >= before["lastappliedrecordoffset"]
            assert after["eventqueueoperationsstartedcount"] > before["eventqueueoperationsstartedcount"]
        finally:
            for b in brokers:
                b.close()
        # no more heartbeats: both fence the broker after broker.session.timeout.ms; its
        # partitions lose their leader
        agree("the broker fenced", kraft_values, kafka_values,
              {"activebrokercount": 0, "fencedbrokercount": 1, "offlinepartitionscount": 3,
               "preferredreplicaimbalancecount": 3}, timeout=90)
        assert kraft_values()["newactivecontrollerscount"] >= 1
        processing = scrape(mport)["kafka_controller_controllereventmanager_eventqueueprocessingtimems"]
        assert processing["kafka_controller_controllereventmanager_eventqueueprocessingtimems_count"] > 0
    assert not kafka.faults(), kafka.faults()


def test_exporter_rules() -> None:
    assert exporter_family("kafka.controller:type=KafkaController,name=ActiveControllerCount", "Value") == \
        "kafka_controller_kafkacontroller_activecontrollercount"
    assert exporter_family("kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec", "Count") == \
        "kafka_controller_controllerstats_uncleanleaderelections"
    assert exporter_family("kafka.controller:type=ControllerEventManager,name=EventQueueTimeMs",
                           "99thPercentile") == "kafka_controller_controllereventmanager_eventqueuetimems"
    assert exporter_family("kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec",
                           "OneMinuteRate") is None
