"""The genuine kafka-metadata-quorum.sh adds and removes a controller of a dynamic quorum
whose controller listener is SASL_SSL (--command-config carries the client's security keys
beside the new controller's own), and the new voter fetches over SASL_SSL with PLAIN."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from kraftnode.log.meta_properties import read_meta_properties
from recordbatch.wire import uuid_to_base64
from tests.kraftnode.server.test_voter_changes import DynamicPair
from tests.support.certs import PASSWORD, make_pki

pytestmark = pytest.mark.timeout(300)

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret";')


def test_add_and_remove_a_controller_over_sasl_ssl(tmp_path: Path, kafka_home: Any) -> None:
    pki = make_pki(tmp_path / "pki")
    node = pki.issue("node")
    extra = ("listener.security.protocol.map=CONTROLLER:SASL_SSL\n"
             f"ssl.keystore.type=PKCS12\nssl.keystore.location={node.p12}\n"
             f"ssl.keystore.password={PASSWORD}\n"
             f"ssl.truststore.type=PEM\nssl.truststore.location={pki.ca_cert}\n"
             "sasl.enabled.mechanisms=PLAIN\nsasl.mechanism.controller.protocol=PLAIN\n"
             f"listener.name.controller.plain.sasl.jaas.config={JAAS}\n"
             # the Admin client's keys (kafka-metadata-quorum.sh --command-config)
             f"security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config={JAAS}\n")
    pair = DynamicPair(tmp_path / "q", extra)
    try:
        pair.start(1)
        pair.start(2)
        boot = f"127.0.0.1:{pair.port(1)}"
        conf1 = str(pair.root / "node1" / "server.properties")
        conf2 = str(pair.root / "node2" / "server.properties")
        meta = read_meta_properties(pair.root / "node2" / "metadata")
        assert meta is not None and meta.directory_id is not None
        dir2 = uuid_to_base64(meta.directory_id)
        added = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:   # node 2 must be fetching as an observer first
            added = kafka_home.tool("kafka-metadata-quorum", "--bootstrap-controller", boot,
                                    "--command-config", conf2, "add-controller")
            if added.returncode == 0:
                break
            time.sleep(1)
        assert added is not None and added.returncode == 0, added.stdout + added.stderr[-3000:] + pair.logs()
        assert added.stdout.startswith("Added controller 2 with directory id")
        status = kafka_home.tool("kafka-metadata-quorum", "--bootstrap-controller", boot,
                                 "--command-config", conf1, "describe", "--replication")
        assert status.returncode == 0, status.stderr[-3000:]
        voters = {int(m.group(1)) for m in re.finditer(r"^(\d+)\s+\S+\s+\d+\s+\d+.*(Leader|Follower)",
                                                          status.stdout, re.M)}
        assert voters == {1, 2}, status.stdout
        removed = kafka_home.tool("kafka-metadata-quorum", "--bootstrap-controller", boot,
                                  "--command-config", conf1, "remove-controller", "--controller-id", "2",
                                  f"--controller-directory-id={dir2}")
        assert removed.returncode == 0, removed.stderr[-3000:]
        assert "Removed  KRaft controller 2" in removed.stdout
        log2 = (pair.root / "node2" / "node.log").read_text(errors="replace")
        log1 = (pair.root / "node1" / "node.log").read_text(errors="replace")
        assert "authenticated as User:admin with PLAIN" in log1 and "Traceback" not in log1 + log2
    finally:
        pair.close()
