"""``kraftnode start server.properties``: run a node."""

from __future__ import annotations

import argparse
import logging

import anyio

from kraftnode.cli import UsageError
from kraftnode.config import ConfigError, ServerConfig

NAME = "start"
HELP = "start a node from a Kafka-style server.properties file"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="path to server.properties")


def run(args: argparse.Namespace) -> int:
    from kraftnode.server.node import run_node

    try:
        config = ServerConfig.load(args.config)
        config.node_id  # noqa: B018 - validate early, with the key named in the error
        listeners = config.listeners
    except ConfigError as e:
        raise UsageError(str(e)) from None
    if not listeners:
        raise UsageError(f"{args.config}: 'listeners' names no listener")
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s [%(name)s] %(message)s")
    try:
        anyio.run(run_node, config)
    except KeyboardInterrupt:
        pass
    return 0
