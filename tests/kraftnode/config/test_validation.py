"""Start-up refuses what Kafka 3.9 refuses, with Kafka's message (kraftnode/config/validation.py).

Each message below is the one the genuine server printed for the same file
(``kafka-server-start.sh``: ``ERROR Exiting Kafka due to fatal exception`` and the exception's
message; a Scala ``require``'s ``requirement failed: `` prefix is not part of it), with
`` (key)`` appended where Kafka's own words do not name the key.  Cases marked *kraftnode's
own* are ones where Kafka starts and fails later (or silently keeps one of two entries).
docs/operations.md's start-up validation table lists the same cases
(``test_the_table_lists_every_case``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kraftnode.config import ConfigError
from kraftnode.config.node_config import load
from tests.support.cluster import SUITE_RELEASE

BASE = {
    "process.roles": "controller",
    "node.id": "1",
    "listeners": "CONTROLLER://127.0.0.1:9093",
    "controller.listener.names": "CONTROLLER",
    "controller.quorum.voters": "1@127.0.0.1:9093",
}
VOTERS_FORM = "Each entry should be in the form `{id}@{host}:{port}`."
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="a" user_admin="a";')
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" '
              'password="a";')

#: case -> (changes to BASE: key -> value, None removes the key; the exact message)
REFUSALS: dict[str, tuple[dict[str, str | None], str]] = {
    "roles-unknown": ({"process.roles": "controller,zookeeper"},
                      "Invalid value zookeeper for configuration process.roles: String must be one of: "
                      "broker, controller"),
    "roles-duplicate": ({"process.roles": "controller,controller"},
                        "Duplicate role names found in `process.roles`: ArrayBuffer(controller, controller)"),
    # kraftnode's own: without process.roles Kafka 3.9 starts in ZooKeeper mode
    "roles-missing": ({"process.roles": None},
                      "The kafka configuration file appears to be for a legacy cluster: process.roles "
                      "is not set. kraftnode runs in KRaft mode only (process.roles=controller)"),
    "roles-empty": ({"process.roles": ""},
                    "The kafka configuration file appears to be for a legacy cluster: process.roles "
                    "is not set. kraftnode runs in KRaft mode only (process.roles=controller)"),
    # kraftnode's own: Kafka would start a broker
    "roles-broker-only": ({"process.roles": "broker"},
                          "Invalid value 'broker' for configuration process.roles: a kraftnode is a "
                          "controller"),
    "node-id-missing": ({"node.id": None},
                        "Missing configuration `node.id` which is required when `process.roles` is "
                        "defined (i.e. when running in KRaft mode)."),
    "node-id-negative": ({"node.id": "-5"},
                         "Missing configuration `node.id` which is required when `process.roles` is "
                         "defined (i.e. when running in KRaft mode)."),
    "log-dirs-empty": ({"log.dirs": "", "metadata.log.dir": "/tmp/kraftnode-unused"},
                       "At least one log directory must be defined via log.dirs or log.dir."),
    "voters-semicolon": ({"controller.quorum.voters": "1@127.0.0.1:9093;2@127.0.0.1:9094"},
                         f"Invalid configuration value for controller.quorum.voters. {VOTERS_FORM}"),
    "voters-empty-entry": ({"controller.quorum.voters": "1@127.0.0.1:9093,,2@127.0.0.1:9094"},
                           f"Invalid configuration value for controller.quorum.voters. {VOTERS_FORM}"),
    "voters-missing-port": ({"controller.quorum.voters": "1@127.0.0.1"},
                            "Failed to parse host name from entry 1@127.0.0.1 for the configuration "
                            f"controller.quorum.voters. {VOTERS_FORM}"),
    "voters-non-numeric-id": ({"controller.quorum.voters": "x@127.0.0.1:9093"},
                              "Failed to parse voter ID as an integer from x (controller.quorum.voters)"),
    "voters-bad-host": ({"controller.quorum.voters": "1@bad!host:9093"},
                        "Failed to parse host name from entry 1@bad!host:9093 for the configuration "
                        f"controller.quorum.voters. {VOTERS_FORM}"),
    # kraftnode's own: Kafka 3.9 starts with an empty voter host
    "voters-empty-host": ({"controller.quorum.voters": "1@:9093"},
                          "Failed to parse host name from entry 1@:9093 for the configuration "
                          f"controller.quorum.voters. {VOTERS_FORM}"),
    "voters-port-out-of-range": ({"controller.quorum.voters": "1@127.0.0.1:70000"},
                                 "port out of range:70000 (controller.quorum.voters)"),
    "voters-non-routable": ({"controller.quorum.voters": "1@0.0.0.0:9093"},
                            "Host string (0.0.0.0) is not routeable (controller.quorum.voters)"),
    # kraftnode's own: Kafka keeps the last entry of the id
    "voters-duplicate-id": ({"controller.quorum.voters": "1@127.0.0.1:9093,1@127.0.0.1:9094"},
                            "Duplicate voter id 1 in controller.quorum.voters: each voter is listed once"),
    "bootstrap-missing-port": ({"controller.quorum.voters": None,
                                "controller.quorum.bootstrap.servers": "127.0.0.1"},
                               "Failed to parse host name from 127.0.0.1 for the configuration "
                               "controller.quorum.bootstrap.servers. Each entry should be in the form "
                               '"{host}:{port}"'),
    "no-quorum": ({"controller.quorum.voters": None},
                  "If using process.roles, either controller.quorum.bootstrap.servers must contain the "
                  "set of bootstrap controllers or controller.quorum.voters must contain a parseable "
                  "set of controllers."),
    "node-not-a-voter": ({"controller.quorum.voters": "2@127.0.0.1:9093,3@127.0.0.1:9094"},
                         "If process.roles contains the 'controller' role, the node id 1 must be "
                         "included in the set of voters controller.quorum.voters=Set(2, 3)"),
    "listener-not-a-controller-listener": ({"listeners": "CONTROLLER://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9095"},
                                           "The listeners config must only contain KRaft controller "
                                           "listeners from controller.listener.names when "
                                           "process.roles=controller"),
    "controller-listener-name-without-listener": ({"controller.listener.names": "CONTROLLER,OTHER"},
                                                  "controller.listener.names must only contain values "
                                                  "appearing in the 'listeners' configuration when "
                                                  "running the KRaft controller role"),
    "controller-listener-names-name-no-listener": ({"listeners": "PLAINTEXT://127.0.0.1:9093"},
                                                   "The listeners config must only contain KRaft "
                                                   "controller listeners from controller.listener.names "
                                                   "when process.roles=controller"),
    "advertised-non-routable": ({"advertised.listeners": "CONTROLLER://0.0.0.0:9093"},
                                "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. "
                                "Use a routable IP address."),
    # kraftnode's own: Kafka starts, then every login to a peer fails with these words
    "sasl-controller-mechanism-not-enabled": (
        {"listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT",
         "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.controller.protocol": "SCRAM-SHA-256",
         "listener.name.controller.plain.sasl.jaas.config": PLAIN_JAAS,
         "listener.name.controller.scram-sha-256.sasl.jaas.config": SCRAM_JAAS},
        "Client SASL mechanism 'SCRAM-SHA-256' not enabled in the server, enabled mechanisms are "
        "[PLAIN] (sasl.mechanism.controller.protocol, sasl.enabled.mechanisms)"),
    "sasl-controller-mechanism-default-gssapi": (
        {"listener.security.protocol.map": "CONTROLLER:SASL_SSL",
         "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
         "listener.name.controller.plain.sasl.jaas.config": PLAIN_JAAS},
        "Client SASL mechanism 'GSSAPI' not enabled in the server, enabled mechanisms are [PLAIN] "
        "(sasl.mechanism.controller.protocol, listener.name.controller.sasl.enabled.mechanisms)"),
}

#: refusals about the metadata log directory (``kraftnode start`` only: format creates it)
STORAGE = {
    "metadata-dir-not-formatted": "No readable meta.properties files found: {dir} (log.dirs) is not "
                                  "formatted: run `kraftnode format --config {props} --cluster-id ID` first",
    "metadata-dir-not-a-directory": "No readable meta.properties files found: error while reading "
                                    "{dir}/meta.properties: Not a directory (metadata.log.dir)",
    "metadata-dir-unreadable": "No readable meta.properties files found: error while reading "
                               "{dir}/meta.properties: Permission denied (log.dirs)",
    "metadata-dir-not-writable": "AccessDeniedException: {dir}/__cluster_metadata-0 (log.dirs: {dir} is "
                                 "not writable)",
}

#: one real `kraftnode start` per class of refusal
PROCESS_CASES = ["roles-missing", "node-id-missing", "voters-semicolon", "node-not-a-voter",
                 "controller-listener-name-without-listener", "advertised-non-routable",
                 "sasl-controller-mechanism-not-enabled"]


def write(tmp_path: Path, changes: dict[str, str | None]) -> Path:
    props = {**BASE, "log.dirs": str(tmp_path / "meta"), **changes}
    p = tmp_path / "server.properties"
    p.write_text("".join(f"{k}={v}\n" for k, v in props.items() if v is not None))
    return p


def start(props: Path, prefix: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*(prefix or []), sys.executable, "-m", "kraftnode", "start", str(props)],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def assert_refused(res: subprocess.CompletedProcess[str], message: str) -> None:
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert lines == [f"kraftnode start: error: {message}"], res.stderr


def formatted(tmp_path: Path) -> Path:
    props = write(tmp_path, {})
    res = subprocess.run([sys.executable, "-m", "kraftnode", "format", *SUITE_RELEASE, "--config", str(props),
                          "--cluster-id", "MkU3OEVBNTcwNTJENDM2Qg"], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    return props


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refusal(tmp_path: Path, case: str) -> None:
    changes, message = REFUSALS[case]
    with pytest.raises(ConfigError) as e:
        load(str(write(tmp_path, changes)))
    assert str(e.value) == message


def test_a_valid_configuration_passes(tmp_path: Path) -> None:
    cfg = load(str(write(tmp_path, {"controller.quorum.voters": "1@127.0.0.1:9093,2@[::1]:9094, 3@h-3.example:9095"})))
    assert [(v.node_id, v.host, v.port) for v in cfg.static_voters] == [
        (1, "127.0.0.1", 9093), (2, "::1", 9094), (3, "h-3.example", 9095)]
    cfg = load(str(write(tmp_path, {"controller.quorum.voters": None,
                                    "controller.quorum.bootstrap.servers": "127.0.0.1:9093, [::1]:9094"})))
    assert cfg.bootstrap_servers == (("127.0.0.1", 9093), ("::1", 9094))
    # combined roles: Kafka allows broker listeners beside the controller's
    load(str(write(tmp_path, {"process.roles": "broker,controller",
                              "listeners": "CONTROLLER://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9095"})))


@pytest.mark.parametrize("case", PROCESS_CASES)
def test_start_refuses_in_one_line(tmp_path: Path, case: str) -> None:
    changes, message = REFUSALS[case]
    assert_refused(start(write(tmp_path, changes)), message)


def test_storage_refusal_not_formatted(tmp_path: Path) -> None:
    props = write(tmp_path, {})
    assert_refused(start(props), STORAGE["metadata-dir-not-formatted"].format(
        dir=tmp_path / "meta", props=props))


def test_storage_refusal_not_a_directory(tmp_path: Path) -> None:
    props = formatted(tmp_path)
    afile = tmp_path / "afile"
    afile.write_text("x")
    with props.open("a") as f:
        f.write(f"metadata.log.dir={afile}\n")
    assert_refused(start(props), STORAGE["metadata-dir-not-a-directory"].format(dir=afile))


def _no_dac_override() -> list[str]:
    """Run as root without CAP_DAC_OVERRIDE, so file modes count (as tests/kraftnode/commands/
    test_bad_input.py does)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        if os.environ.get("CI") == "true":
            pytest.fail("setpriv (util-linux) is needed to test permission errors as root")
        pytest.skip("running as root without setpriv: cannot drop CAP_DAC_OVERRIDE")
    caps = "-dac_override,-dac_read_search"
    return [setpriv, f"--inh-caps={caps}", f"--bounding-set={caps}"]


@pytest.mark.parametrize(("case", "mode"), [("metadata-dir-unreadable", 0),
                                            ("metadata-dir-not-writable", 0o555)])
def test_storage_refusal_permissions(tmp_path: Path, case: str, mode: int) -> None:
    props = formatted(tmp_path)
    meta = tmp_path / "meta"
    prefix = _no_dac_override()
    meta.chmod(mode)
    try:
        res = start(props, prefix)
    finally:
        meta.chmod(0o755)
    assert_refused(res, STORAGE[case].format(dir=meta))


def test_the_table_lists_every_case() -> None:
    """docs/operations.md's start-up validation table names the cases of this file."""
    doc = (Path(__file__).resolve().parents[3] / "docs" / "operations.md").read_text()
    table = doc.split("## Start-up validation", 1)[1].split("\n## ", 1)[0]
    in_doc = set(re.findall(r"^\| `([\w-]+)` \|", table, re.MULTILINE))
    assert in_doc == set(REFUSALS) | set(STORAGE)
