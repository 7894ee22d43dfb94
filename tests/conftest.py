"""Shared test fixtures.

``reference_dir``: Apache Kafka 3.9's message definitions in ``../shared/reference``.
A user's clone does not have them, so tests that need them skip with a reason;
CI sets ``KRAFTNODE_REQUIRE_REFERENCE=1`` which turns the skip into a failure.

``kafka_home`` (Kafka 3.9), ``kafka40`` (4.0) and ``kafka44`` (4.4, the newest): genuine Apache
Kafka's servers, tools and jars (``tests/support/kafka.py``): ``KAFKA_HOME`` when it is of that
line, else the release from Maven Central that ``tools/kafka_dist.py`` installs, else (3.9 only)
``../shared/kafka-3.9``; a skip with a reason otherwise, a failure under
``KRAFTNODE_REQUIRE_KAFKA=1`` (CI).
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest

from tests.support.kafka import KafkaHome, require_kafka_home

# Ctrl-C as a person at a terminal sends it: a shell without job control starts background
# commands with SIGINT ignored, an ignored signal stays ignored across exec, and Python then
# never raises KeyboardInterrupt -- so every process the tests start and stop with SIGINT
# (`kraftnode dev-cluster`, tools/dev.sh) would hang when the suite itself was started with
# `... &` from a script. Our own handler is reset to the default in each child at exec.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REPO = Path(__file__).resolve().parent.parent
REFERENCE = REPO.parent / "shared" / "reference" / "kafka-3.9"


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    if not REFERENCE.is_dir():
        if os.environ.get("KRAFTNODE_REQUIRE_REFERENCE") == "1":
            pytest.fail(f"reference data required but missing: {REFERENCE}")
        pytest.skip(f"Kafka 3.9 reference data not present at {REFERENCE}")
    return REFERENCE


@pytest.fixture(scope="session")
def kafka_home() -> KafkaHome:
    """Genuine Apache Kafka 3.9: the generation the suite was first built against."""
    return require_kafka_home("3.9")


@pytest.fixture(scope="session")
def kafka40() -> KafkaHome:
    """Genuine Apache Kafka 4.0 (the newest 4.0.x): the first KRaft-only release."""
    return require_kafka_home("4.0")


@pytest.fixture(scope="session")
def kafka44() -> KafkaHome:
    """Genuine Apache Kafka 4.4.0, the newest release."""
    return require_kafka_home("4.4")


#: the releases a journey that must hold for every generation runs against: the one the suite
#: was built on and the newest (tests/support/kafka.py)
RELEASES = ("3.9", "4.4")


@pytest.fixture(scope="session", params=RELEASES, ids=[f"kafka{r}" for r in RELEASES])
def kafka_release(request: pytest.FixtureRequest) -> KafkaHome:
    """Genuine Apache Kafka of each line in ``RELEASES``: a test using it runs once per release."""
    return require_kafka_home(request.param)


# ------------------------------------------------------------------ the parallel group
#: Tests that run in this one process -- no node, JVM, network namespace or process pool of
#: their own -- carry the ``in_process`` mark: ``tools/test.sh`` runs them in parallel with
#: pytest-xdist, then every other test serially (real processes are timing-sensitive on a
#: loaded host).  A test is in the group when its directory (relative to tests/) or file name
#: is listed below *and* its module shows no sign of starting processes (``_SPAWNS``), so a
#: real-process test added to one of these directories still runs serially.
IN_PROCESS_DIRS = ("recordbatch", "codegen", "schemas", "kraftnode/protocol", "kraftnode/log",
                   "kraftnode/raft", "kraftnode/config", "kraftnode/commands", "kraftnode/metadata",
                   "kraftnode/controller", "kraftnode/groups", "simulation", "support")
IN_PROCESS_FILES = ("test_snapshot_manager.py", "test_listener.py", "test_metrics.py",
                    "test_authorizer.py", "test_scram_credentials.py", "test_credentials.py",
                    "test_errors.py", "test_import_graph.py", "test_architecture_doc.py", "test_layout.py",
                    "test_group_fetch_view.py", "test_controller_records.py", "test_bench_fsync_modes.py")
_SPAWNS = re.compile(
    r"subprocess|Popen|create_subprocess|multiprocessing|ProcessPool|os\.fork|running_node|"
    r"NodeProcess|kafka_home|kafka4\d|kafka_release|KafkaHome|\bCluster\(|StaticCluster|DynamicCluster|local_session|pyspark|"
    r"tests\.support\.(?:node|cluster|quorums|netns|kafka|java_\w+)\b")
_IN_PROCESS: dict[Path, bool] = {}


def _is_in_process(path: Path) -> bool:
    if path not in _IN_PROCESS:
        rel = path.relative_to(Path(__file__).resolve().parent).as_posix()
        listed = rel.rpartition("/")[0] in IN_PROCESS_DIRS or path.name in IN_PROCESS_FILES
        _IN_PROCESS[path] = listed and not _SPAWNS.search(path.read_text())
    return _IN_PROCESS[path]


# ------------------------------------------------------------------ the two real-process streams
#: ``tools/test.sh`` runs the real-process stage as two pytest processes side by side:
#: ``--stream genuine``, the modules that start genuine Kafka servers (directly, or through a bench
#: tool), a Spark cluster or Hadoop, one after another (at most one JVM cluster at a time), and
#: ``--stream other``, every other real-process module -- those that only run genuine Kafka tools
#: and clients against kraftnode nodes included. (pytest-xdist's ``loadgroup`` would do it in one
#: process, but xdist 3.8 renames an item's ``_nodeid``, which pytest 9 no longer reads, so its
#: groups are silently ignored.)
_GENUINE = re.compile(
    r"tests\.support\.(?:kafka_server|java_raft|migration|kraft_brokers|spark_cluster|sim_brokers|"
    r"mixed_controllers)\b|KafkaServer|combined_server|hadoop_dist|spark_cluster|"
    r"tools\W+bench\W+(?:controller|controller_scale|elections|spark_read)\.py")
_STREAMS: dict[Path, str] = {}


def stream_of(path: Path) -> str:
    """``genuine`` or ``other``: which real-process stream a test module runs in."""
    if path not in _STREAMS:
        _STREAMS[path] = "genuine" if _GENUINE.search(path.read_text()) else "other"
    return _STREAMS[path]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--stream", choices=("genuine", "other"), default=None,
                     help="run only this real-process stream's modules (tools/test.sh)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    stream = config.getoption("--stream")
    keep, drop = [], []
    for item in items:
        path = Path(str(item.path)).resolve()
        in_process = _is_in_process(path)
        if in_process:
            item.add_marker(pytest.mark.in_process)
        if stream is None or (not in_process and stream_of(path) == stream):
            keep.append(item)
        else:
            drop.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
