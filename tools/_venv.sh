# Sourced by tools/test.sh and tools/dev.sh: make .venv on a fresh machine and install
# the project with everything its tests and jobs need. Idempotent and quiet when done.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.installed-$(cat pyproject.toml | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  .venv/bin/pip install -q --disable-pip-version-check --upgrade pip
  .venv/bin/pip install -q --disable-pip-version-check -e '.[dev,spark]'
  rm -f .venv/.installed-*
  touch "$stamp"
fi
