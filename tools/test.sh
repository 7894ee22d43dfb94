#!/usr/bin/env bash
# The project's test command (README): installs what it needs, then runs every check.
# Extra arguments go to pytest, e.g. `tools/test.sh tests/recordbatch -x`.
set -euo pipefail
KRAFTNODE_EXTRAS=dev,spark source "$(dirname "$0")/_venv.sh"

if ! command -v kcat >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && apt-get install -y -qq kcat) >/dev/null 2>&1 \
      || echo "warning: could not install kcat; its interop test will skip (fail under CI)"
  else
    echo "note: kcat is not installed; its interop test will skip"
  fi
fi

# Debian's prometheus: a real Prometheus server scrapes a real quorum (tests/kraftnode/server/metrics/test_metrics_prometheus.py)
if ! command -v prometheus >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian's prometheus (once) for the metrics test"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus) >/dev/null 2>&1 \
      || echo "warning: could not install prometheus; its metrics test will skip (fail under CI)"
  else
    echo "note: prometheus is not installed; its metrics test will skip"
  fi
fi

# iproute2 (`ip netns`) for the real network-partition test; not in Debian's minimal images
if ! command -v ip >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && apt-get install -y -qq iproute2) >/dev/null 2>&1 \
      || echo "warning: could not install iproute2; the network-partition test will skip (fail under CI)"
  else
    echo "note: iproute2 is not installed; the network-partition test will skip"
  fi
fi

# KafkaJS (npm, pinned by tests/interop/js/package-lock.json) for the group-consumer interop test
if command -v npm >/dev/null 2>&1; then
  (cd "$(dirname "$0")/../tests/interop/js" && npm ci --no-audit --no-fund --silent) >/dev/null 2>&1 \
    || echo "warning: npm ci in tests/interop/js failed; the KafkaJS test will skip (fail under CI)"
else
  echo "note: node/npm is not installed; the KafkaJS test will skip"
fi

# Maven fetches the genuine Kafka releases the interop tests run (tools/kafka_dist.py)
if ! command -v mvn >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian's maven (once) to fetch genuine Kafka releases from Maven Central"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends maven) >/dev/null 2>&1 \
      || echo "warning: could not install maven; the genuine-Kafka tests will skip (fail under CI)"
  else
    echo "note: maven is not installed; the genuine-Kafka tests will skip"
  fi
fi
# Genuine Apache Kafka 3.9, 4.0 and 4.4 from Maven Central, laid out as Kafka homes under
# .cache/kafka/ (once; later runs reuse them). Tests name the line they need (tests/support/kafka.py).
echo "== genuine Kafka releases: $(.venv/bin/python -m tools.kafka_dist install 3.9 4.0 4.4 2>&1 | tr '\n' ' ')"
if [ "${KRAFTNODE_REQUIRE_KAFKA:-}" = 1 ] && ! .venv/bin/python -m tools.kafka_dist path 4.4 >/dev/null 2>&1; then
  echo "genuine Kafka releases are required (KRAFTNODE_REQUIRE_KAFKA=1) but could not be installed"
  exit 1
fi

# Hadoop's single-process HDFS (MiniDFSCluster: hadoop-client-minicluster of the Hadoop version
# pyspark bundles, from Maven Central, under .cache/hadoop/) for the Spark cluster tests
# (tests/kraftnode/spark/test_cluster.py, docs/spark.md's HDFS example); they skip without it,
# and fail under CI=true
echo "== Hadoop MiniDFSCluster: $(.venv/bin/python -m tools.hadoop_dist install 2>&1 | tail -1)"

echo "== codegen --check"; .venv/bin/python -m codegen --check
echo "== ruff";            .venv/bin/ruff check codegen kraftnode recordbatch tests tools
echo "== lint-imports"; .venv/bin/lint-imports --no-cache
echo "== mypy";            .venv/bin/mypy recordbatch kraftnode/raft kraftnode/protocol kraftnode/server kraftnode/security kraftnode/metadata kraftnode/groups kraftnode/controller kraftnode/config kraftnode/log kraftnode/errors.py kraftnode/javaprops.py kraftnode/java_order.py kraftnode/features.py codegen
# Two stages, one command: the tests that run in the test process alone (marked in_process by
# tests/conftest.py) in parallel with pytest-xdist, then the real-process and interop tests as two
# pytest processes side by side (tests/conftest.py, --stream): the modules that start genuine Kafka
# servers, Spark or Hadoop one at a time (they time nodes and JVMs), and every other real-process
# module, also one at a time, beside them. Extra arguments go to every run; a stage they leave
# empty is fine, but a full run needs both to run tests.
# KRAFTNODE_TEST_WORKERS sets the in-process stage's worker count (default 2; "auto": one per core);
# KRAFTNODE_REAL_STREAMS=1 runs the real-process stage as one process (serially).
workers=${KRAFTNODE_TEST_WORKERS:-2}
set +e
echo "== pytest: in-process tests, $workers workers"
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=30 -m in_process -n "$workers" --dist load "$@"
rc1=$?
rc2=0
if [ "$rc1" -ne 0 ] && [ "$rc1" -ne 5 ] && printf '%s\n' "$@" | grep -qxE -- '-x|--exitfirst'; then
  echo "== pytest: real-process and interop tests skipped (-x and the first stage failed)"
else
  if [ "${KRAFTNODE_REAL_STREAMS:-2}" = 1 ]; then
    echo "== pytest: real-process and interop tests, one at a time"
    .venv/bin/python -m pytest -q -p no:cacheprovider --durations=30 -m "not in_process" "$@"
    rc2=$?
  else
    echo "== pytest: real-process and interop tests, two streams (the other stream's report follows)"
    other_log=$(mktemp)
    .venv/bin/python -m pytest -q -p no:cacheprovider --durations=20 --stream other "$@" >"$other_log" 2>&1 &
    other_pid=$!
    .venv/bin/python -m pytest -q -p no:cacheprovider --durations=30 --stream genuine "$@"
    rc_genuine=$?
    wait "$other_pid"
    rc_other=$?
    echo "== pytest: the other real-process stream"
    cat "$other_log"; rm -f "$other_log"
    # a failed stream fails the stage; no test in one stream (5) is fine when the other ran some
    rc2=0
    for rc in "$rc_genuine" "$rc_other"; do
      if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then rc2=$rc; fi
    done
    if [ "$rc_genuine" -eq 5 ] && [ "$rc_other" -eq 5 ]; then rc2=5; fi
  fi
fi
set -e
for rc in "$rc1" "$rc2"; do
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then
    exit "$rc"
  fi
done
if { [ $# -eq 0 ] && { [ "$rc1" -eq 5 ] || [ "$rc2" -eq 5 ]; }; } || { [ "$rc1" -eq 5 ] && [ "$rc2" -eq 5 ]; }; then
  echo "pytest collected no tests: that is a failure"
  exit 1
fi
exit 0
