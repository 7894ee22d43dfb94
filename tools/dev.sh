#!/usr/bin/env bash
# The project's main job (README): a local quorum on loopback, on built-in defaults.
# Extra arguments go to `kraftnode dev-cluster`, e.g. `tools/dev.sh --nodes 5`.
set -euo pipefail
source "$(dirname "$0")/_venv.sh"
exec .venv/bin/kraftnode dev-cluster "$@"
