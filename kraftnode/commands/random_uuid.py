"""``kraftnode random-uuid``: print a random Kafka Uuid, like ``kafka-storage.sh random-uuid``."""

from __future__ import annotations

import argparse

from kraftnode.log.uuids import random_uuid
from recordbatch.wire import uuid_to_base64

NAME = "random-uuid"
HELP = "Print a random UUID (base64url, 22 characters) usable as a cluster or directory id"
EXAMPLES = """\
  kraftnode random-uuid                       # e.g. MkU3OEVBNTcwNTJENDM2Qg
  kraftnode format -c server.properties -t "$(kraftnode random-uuid)"
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    print(uuid_to_base64(random_uuid()))
    return 0
