# Sourced by tools/dev.sh and tools/test.sh: make .venv on a fresh machine and install the
# project into it (editable), with the extras named in KRAFTNODE_EXTRAS: none for dev.sh (the
# node's runtime dependencies only), "dev,spark" for test.sh (everything the tests need).
# Says in one line what it installs, and only when it does; quiet once done.
set -euo pipefail
# the checkout this script belongs to, also when reached through a symlinked tools/ (the doc
# tests run the README in a work directory whose tools/ and .venv/ link here): never install
# from anywhere else
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
PY=${PYTHON:-python3}
extras=${KRAFTNODE_EXTRAS:-}
hash=$(sha256sum pyproject.toml | cut -c1-16)
stamp=.venv/.installed-${extras:-runtime}-$hash
full=.venv/.installed-dev,spark-$hash      # a full install also serves the runtime-only one
if [ ! -f "$stamp" ] && [ ! -f "$full" ]; then
  if [ -n "$extras" ]; then
    what="kraftnode with its [$extras] extras (test, lint and Spark dependencies; first time ~1 GB)"
    target=".[$extras]"
  else
    what="kraftnode and its runtime dependencies only"
    target="."
  fi
  echo "$(basename "$0"): installing $what into .venv/ ..."
  if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
  fi
  .venv/bin/pip install -q --disable-pip-version-check -e "$target"
  rm -f .venv/.installed-"${extras:-runtime}"-*
  touch "$stamp"
fi
# Bytecode caches, kept in .venv/pycache: where PYTHONDONTWRITEBYTECODE is set (container
# images often set it) every kraftnode process would compile the generated protocol codecs
# again as it starts, ~0.5 s a process on a 2-core host, and the test suite starts thousands
# (tests/kraftnode/commands' CLI tests: 42 s -> 18 s). Under .venv/, not beside the sources:
# the checkout stays as cloned.
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX="$PWD/.venv/pycache"
