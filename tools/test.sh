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

echo "== codegen --check"; .venv/bin/python -m codegen --check
echo "== ruff";            .venv/bin/ruff check codegen kraftnode recordbatch tests tools
echo "== mypy";            .venv/bin/mypy recordbatch kraftnode/raft kraftnode/protocol kraftnode/server kraftnode/security kraftnode/metadata codegen
echo "== pytest"
set +e
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=30 "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure"
  exit 1
fi
exit "$rc"
