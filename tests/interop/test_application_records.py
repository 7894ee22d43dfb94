"""Must-show 5 of issue 37: no client can poison the metadata log (docs/server.md, "Application
records"). The README's demo write (`echo hello | kcat ... -t __cluster_metadata -P`), then a
genuine Kafka broker (3.9 and 4.4) pointed at the same quorum:

* on a quorum without kraftnode.application.records.enable (the default) the write is refused
  with a clear error, nothing is written, and the broker registers and runs: a topic is created,
  a record produced and consumed by a group through it, and it still runs well after the
  quorum's fetch timeout;
* on a quorum that opted in the write is committed, the node said so at start-up, and the
  broker is refused with one line in the controller's log (its fetches, so that the record does
  not kill it, or its registration): it never joins.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.cluster import CLUSTER_ID
from tests.support.kafka import KafkaHome
from tests.support.kraft_brokers import Setup, wait_until

pytestmark = pytest.mark.timeout(600)

#: one broker: the internal topics' replication factors must be 1 (docs/brokers.md)
ONE_BROKER = ("offsets.topic.replication.factor=1\ntransaction.state.log.replication.factor=1\n"
              "transaction.state.log.min.isr=1\nbroker.heartbeat.interval.ms=500\n")
BROKER = 101


def _kcat() -> str:
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        if os.environ.get("CI"):
            pytest.fail("kcat is required in CI (tools/test.sh installs it)")
        pytest.skip("kcat is not installed")
    return kcat


def _readme_write(kcat: str, port: int) -> subprocess.CompletedProcess[str]:
    """The README's demo write, as a person types it."""
    return subprocess.run(["bash", "-c", f"echo hello | {kcat} -b 127.0.0.1:{port} -t __cluster_metadata -p 0 "
                                         "-P -X acks=all"], capture_output=True, text=True, timeout=120)


def _readme_read(kcat: str, port: int) -> str:
    r = subprocess.run([kcat, "-b", f"127.0.0.1:{port}", "-t", "__cluster_metadata", "-p", "0", "-C",
                        "-o", "beginning", "-e", "-q"], capture_output=True, timeout=120)
    return r.stdout.decode(errors="replace")


def test_the_readme_write_then_a_genuine_broker(kafka_release: KafkaHome, tmp_path: Path) -> None:
    kcat = _kcat()
    s = Setup(kafka_release, tmp_path / "default", "", ONE_BROKER, voters=1, brokers=(BROKER,))
    try:
        s.cl.start(1)
        s.wait_for_leader(60)
        port = s.cl.port(1)
        w = _readme_write(kcat, port)
        out = w.stdout + w.stderr
        assert "Invalid topic" in out, out   # librdkafka's name for INVALID_TOPIC_EXCEPTION
        assert "hello" not in _readme_read(kcat, port)
        # the broker, on the same quorum: it registers, is unfenced and serves
        b = s.brokers[BROKER]
        b.format(CLUSTER_ID)
        b.start()
        b.wait_started(120)
        wait_until("the broker unfenced", lambda: "The broker has been unfenced" in b.log(), 60, s.logs)
        s.create_topic("orders", "--partitions", "1", "--replication-factor", "1")
        prod = kafka_release.tool("kafka-console-producer", "--bootstrap-server", s.bootstrap, "--topic", "orders",
                                  input="first order\n", env={"LOG_DIR": str(tmp_path / "tool-logs")})
        assert prod.returncode == 0, prod.stdout + prod.stderr
        cons = s.cli("kafka-console-consumer", "--topic", "orders", "--group", "readers", "--from-beginning",
                     "--max-messages", "1", "--timeout-ms", "60000")
        assert cons.returncode == 0 and "first order" in cons.stdout, cons.stdout + cons.stderr
        time.sleep(3)  # longer than the quorum's fetch timeout (2 s): the broker keeps replaying the log
        assert b.running, b.log()[-4000:]
        assert "MetadataParseException" not in b.log() and "application record" not in s.cl.log(1)
    finally:
        for srv in s.brokers.values():
            srv.kill()
        s.cl.close()


def test_an_opted_in_quorum_takes_the_write_and_refuses_the_broker(kafka_release: KafkaHome,
                                                                    tmp_path: Path) -> None:
    kcat = _kcat()
    s = Setup(kafka_release, tmp_path / "opted-in", "kraftnode.application.records.enable=true\n", ONE_BROKER,
              voters=1, brokers=(BROKER,))
    try:
        s.cl.start(1)
        s.wait_for_leader(60)
        port = s.cl.port(1)
        assert "kraftnode.application.records.enable=true: this quorum's log takes application records" \
            in s.cl.log(1)
        w = _readme_write(kcat, port)
        assert w.returncode == 0, w.stdout + w.stderr
        wait_until("hello committed", lambda: "hello" in _readme_read(kcat, port), 30)
        b = s.brokers[BROKER]
        b.format(CLUSTER_ID)
        b.start()
        # it fetches before it registers: refused there (INVALID_REQUEST, which it retries), or
        # else when it registers (INVALID_REGISTRATION) -- one line in the controller's log either way
        line = re.compile(rf"refusing the (fetches|registration) of broker {BROKER}: "
                          r"kraftnode\.application\.records\.enable=true \(this quorum's log takes application "
                          r"records, which a Kafka broker cannot replay; docs/server\.md\)")
        wait_until("the broker refused", lambda: line.search(s.cl.log(1)), 120, s.logs)
        time.sleep(3)   # longer than the quorum's fetch timeout: the broker keeps trying
        assert len(line.findall(s.cl.log(1))) == 1
        assert b.running and "MetadataParseException" not in b.log(), b.log()[-3000:]
        assert "The broker has been unfenced" not in b.log()
    finally:
        for srv in s.brokers.values():
            srv.kill()
        s.cl.close()
