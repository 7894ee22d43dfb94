"""What kraftnode advertises differently from a Kafka 3.9 controller since issue 36: the APIs
of the controller listener at Kafka 4.4's ranges (docs/protocol.md). API key -> kraftnode's
range (None: no longer served). Tests comparing kraftnode's ApiVersions with a genuine 3.9
controller's expect exactly these differences; tests/interop/test_controller_listener_versions.py
checks kraftnode against a genuine 4.4 controller directly."""

from __future__ import annotations

__all__ = ["AT_4_4_OVER_3_9", "differences_from_3_9"]

AT_4_4_OVER_3_9: dict[int, tuple[int, int] | None] = {
    1: (4, 18), 7: None, 18: (0, 5), 19: (2, 7), 20: (1, 6), 29: (1, 3), 30: (1, 3), 31: (1, 3),
    32: (1, 4), 38: (1, 3), 39: (1, 2), 40: (1, 2), 41: (1, 3), 45: (0, 1), 52: (0, 2), 56: (2, 3),
    57: (0, 2), 60: (0, 2), 63: (0, 2), 80: (0, 1),
}


def differences_from_3_9(ours: dict[int, tuple[int, int]], kafka_3_9: dict[int, tuple[int, int]]
                         ) -> tuple[dict[int, tuple[int, int] | None], dict[int, tuple[int, int] | None]]:
    """(what differs, what should differ) for the APIs the 3.9 controller lists."""
    got = {k: ours.get(k) for k, v in kafka_3_9.items() if ours.get(k) != v}
    want = {k: v for k, v in AT_4_4_OVER_3_9.items() if k in kafka_3_9}
    return got, want
