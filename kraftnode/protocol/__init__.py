"""Kafka wire protocol: generated message classes, framing, API registry, error codes.

Every message class is importable here by its Kafka name
(``from kraftnode.protocol import VoteRequest``); each has ``encode(version)``
and the classmethod ``decode(data, version)``.  Malformed input raises
:class:`DecodeError`, the single exception type for undecodable bytes.
"""

from kraftnode.protocol.errors import Errors
from kraftnode.protocol.generated import *  # noqa: F403
from kraftnode.protocol.generated import __all__ as _generated_all
from kraftnode.protocol.registry import SERVED, ApiSpec
from recordbatch.generated import *  # noqa: F403
from recordbatch.generated import __all__ as _control_all
from recordbatch.wire import DecodeError, UnsupportedVersionError

__all__ = [
    *_generated_all,
    *_control_all,
    "ApiSpec",
    "DecodeError",
    "Errors",
    "SERVED",
    "UnsupportedVersionError",
]
