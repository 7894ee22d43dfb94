"""A replicated key-value store on kraftnode's embedding API (docs/embedding.md).

    python -m kraftnode format --config node1.properties --cluster-id ID   # each node, once
    python tools/examples/kvstore.py node1.properties                      # each node

Then type commands on stdin, one per line:

    put KEY VALUE     append (KEY, VALUE); prints the committed offset
    del KEY           append (KEY, null): a tombstone
    get KEY           read this node's state (every node applies every committed write)
    keys              every key, sorted
    status            node id, leader, high watermark, applied offset

Writes go to the leader (a follower answers ``not the leader: N``).  The records are
ordinary Kafka records of ``__cluster_metadata`` partition 0, so any Kafka consumer can
read the store's history, e.g. ``kafka-console-consumer.sh --bootstrap-server HOST:PORT
--topic __cluster_metadata --from-beginning --property print.key=true``; snapshots keep
the latest value per key once the log below them is cleaned.
"""

from __future__ import annotations

import sys

import anyio

from kraftnode.config import ConfigError
from kraftnode.embed import AppendError, EmbeddedNode, NotLeaderError
from kraftnode.metadata.state_machine import KeyValueStateMachine
from kraftnode.server.node import StartupError


async def handle(node: EmbeddedNode[KeyValueStateMachine], line: str) -> str | None:
    words = line.split(maxsplit=2)
    if not words:
        return None
    cmd, args = words[0].lower(), words[1:]
    try:
        if cmd == "put" and len(args) == 2:
            r = await node.append([(args[0].encode(), args[1].encode())])
            return f"ok {r.last_offset}"
        if cmd == "del" and len(args) == 1:
            r = await node.append([(args[0].encode(), None)])
            return f"ok {r.last_offset}"
    except NotLeaderError as e:
        return f"not the leader: {e.leader_id}"
    except AppendError as e:
        return f"error: {e}"
    if cmd == "get" and len(args) == 1:
        v = node.state.data.get(args[0].encode())
        return "(none)" if v is None else v.decode(errors="replace")
    if cmd == "keys" and not args:
        return " ".join(sorted(k.decode(errors="replace") for k in node.state.data))
    if cmd == "status" and not args:
        return (f"node {node.node_id} leader {node.leader_id} high-watermark {node.high_watermark} "
                f"applied {node.applied_offset}")
    return "usage: put KEY VALUE | del KEY | get KEY | keys | status"


async def main(config: str) -> None:
    async with EmbeddedNode(config, KeyValueStateMachine()) as node:
        print(f"kvstore node {node.node_id} ready", flush=True)
        while True:
            line = await anyio.to_thread.run_sync(sys.stdin.readline)
            if not line:
                break
            answer = await handle(node, line.strip())
            if answer is not None:
                print(answer, flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: kvstore.py SERVER.PROPERTIES", file=sys.stderr)
        sys.exit(2)
    try:
        anyio.run(main, sys.argv[1])
    except (ConfigError, StartupError) as e:
        print(f"kvstore: {e}", file=sys.stderr)
        sys.exit(2)
