"""Test-only planted bugs for real node processes (not part of kraftnode).

A test that wants a node with a planted bug puts this directory first on the node
process's PYTHONPATH (``NetnsQuorum.path_first``) and names the bug in
``KRAFTNODE_TEST_PLANT``; Python imports ``sitecustomize`` at start-up, before
kraftnode, and the bug is patched in from here. Without the variable nothing happens.

``stale_lease``: a leader serves linearizable reads from a "lease" that never expires.
Its read barrier completes at once, without a majority confirming the leadership (the
raft core's own ``stale_read`` simulation plant, see tests/simulation/plants.py), and it
never gives up leadership on its own (check-quorum disabled): etcd's documented hazard of
lease-based reads without CheckQuorum. A leader cut off from the quorum then keeps
answering reads from its old state while the majority elects another and commits more.

``stale_read``: only the first half: read barriers complete without a majority, while
check-quorum still makes a cut-off leader resign after 1.5x the fetch timeout (a plain
read-index bug; stale reads only in the window before it resigns).
"""

from __future__ import annotations

import os
import sys

_PLANT = os.environ.get("KRAFTNODE_TEST_PLANT", "")


def _plant_stale_read() -> None:
    from kraftnode.raft import raft_node
    from kraftnode.raft.states import LeaderState

    def planted(self: raft_node.RaftNode, st: LeaderState, majority_round: int) -> int:
        return st.read_round  # every read round counts as confirmed at once

    raft_node.RaftNode.read_round_confirmed = planted  # type: ignore[method-assign]


def _plant_no_check_quorum() -> None:
    from kraftnode.raft import quorum_config

    # a day: the leader never resigns for want of fetches within a test
    quorum_config.RaftConfig.check_quorum_timeout_ms = property(lambda self: 86_400_000)  # type: ignore[method-assign,assignment]


if _PLANT in ("stale_lease", "stale_read"):
    _plant_stale_read()
    if _PLANT == "stale_lease":
        _plant_no_check_quorum()
    print(f"PLANTED BUG (tests/support/plant_site): {_PLANT}", file=sys.stderr, flush=True)
elif _PLANT:
    print(f"unknown KRAFTNODE_TEST_PLANT {_PLANT!r}", file=sys.stderr, flush=True)
    sys.exit(2)
