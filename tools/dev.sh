#!/usr/bin/env bash
# The project's main job (README): a local quorum on loopback, on built-in defaults.
# Extra arguments go to `kraftnode dev-cluster`, e.g. `tools/dev.sh --nodes 5`.
set -euo pipefail
KRAFTNODE_EXTRAS= source "$(dirname "$0")/_venv.sh"   # the node's runtime dependencies only
exec .venv/bin/kraftnode dev-cluster "$@"
