"""``kraftnode start server.properties``: run a node."""

from __future__ import annotations

import argparse
import logging

from kraftnode.cli import UsageError
from kraftnode.config import ConfigError

NAME = "start"
HELP = "start a node from a Kafka-style server.properties file"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="path to server.properties")


def run(args: argparse.Namespace) -> int:
    from kraftnode.server import node_config
    from kraftnode.server.node import StartupError, start

    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s [%(name)s] %(message)s")
    try:
        cfg = node_config.load(args.config)
    except ConfigError as e:
        raise UsageError(str(e)) from None
    try:
        start(cfg)
    except StartupError as e:
        raise UsageError(str(e)) from None
    except KeyboardInterrupt:
        pass
    return 0
