"""``python -m tests.simulation``: run seeds of the Raft simulation (see runner.main)."""

import sys

from tests.simulation.runner import main

sys.exit(main())
