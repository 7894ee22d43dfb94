"""``kraftnode start server.properties``: run a node."""

from __future__ import annotations

import argparse
import logging

from kraftnode.config import ConfigError
from kraftnode.errors import UsageError

# The server is imported inside run(), on purpose: the CLI imports every command module to list
# them, and the server (asyncio, uvloop, prometheus_client, every handler) is the heaviest import.

NAME = "start"
HELP = "start a node from a Kafka-style server.properties file"
EXAMPLES = """\
  kraftnode start config/single-node.properties
  kraftnode start --log-level DEBUG server.properties      # every client connection logged
  KRAFTNODE_LOG_LEVEL=WARN kraftnode start server.properties
  kraftnode start --log-config logging.ini server.properties
  kraftnode start server.properties --override node.id=2 --override log.dirs=/tmp/n2
The node logs to the console; kraftnode.log.file=PATH in the properties adds a file rotated
by size. Keys and defaults: docs/configuration.md. SIGTERM or Ctrl-C stops it cleanly.
"""

log = logging.getLogger("kraftnode.start")


def add_logging_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--log-level", metavar="LEVEL", default=None,
                   help="DEBUG, INFO, WARN or ERROR (default: $KRAFTNODE_LOG_LEVEL, else INFO); "
                        "DEBUG logs every client connection")
    p.add_argument("--log-config", metavar="FILE", default=None,
                   help="a Python logging configuration (INI for fileConfig, or .json for "
                        "dictConfig); it replaces --log-level and kraftnode.log.file")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="path to server.properties (see config/ for examples)")
    p.add_argument("--override", metavar="KEY=VALUE", action="append", default=[],
                   help="a property that overrides the file's value, as kafka-server-start.sh's "
                        "--override (repeat it for more keys)")
    add_logging_arguments(p)


def parse_overrides(items: list[str]) -> dict[str, str]:
    """``--override`` values as Kafka's ``CommandLineUtils.parseKeyValueArgs`` reads them:
    split at the first ``=``; a key without ``=`` or value gets the empty value (which the
    key's type check then judges). An empty key is bad input."""
    out: dict[str, str] = {}
    for item in items:
        key, _, value = item.partition("=")
        if not key.strip():
            raise UsageError(f"--override {item!r}: expected KEY=VALUE, e.g. --override node.id=2")
        out[key.strip()] = value
    return out


def run(args: argparse.Namespace) -> int:
    from kraftnode import logsetup
    from kraftnode.config import node_config
    from kraftnode.server.node import StartupError, start

    try:
        level = logsetup.resolve_level(args.log_level)
        logsetup.configure(level)       # the console, while the configuration is read
        try:
            cfg = node_config.load(args.config, check_storage=True,
                                   overrides=parse_overrides(args.override))
        except ConfigError as e:
            raise UsageError(str(e)) from None
        logsetup.configure(level, log_file=cfg.log_file, max_bytes=cfg.log_file_max_bytes,
                           backups=cfg.log_file_backups, log_config=args.log_config)
    except logsetup.LogSetupError as e:
        raise UsageError(str(e)) from None
    for warning in cfg.warnings:
        log.warning("%s", warning)
    try:
        start(cfg)
    except StartupError as e:
        raise UsageError(str(e)) from None
    except KeyboardInterrupt:
        pass
    return 0
