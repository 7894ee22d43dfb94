"""Simulated brokers that speak the real protocol to a controller (kraftnode or genuine Kafka):
BrokerRegistration v4 and BrokerHeartbeat v1 over their own open TCP connection, as a Kafka
broker's lifecycle manager sends them. They hold no partitions: a heartbeat reports the metadata
offset it is given (the controller's own, so the broker counts as caught up and is unfenced).

Used by the controller metrics test and tools/bench/controller_scale.py.
"""

from __future__ import annotations

import socket
import time
import uuid
from typing import Any

from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import BROKER_HEARTBEAT, BROKER_REGISTRATION
from tests.support.node import frame_call

__all__ = ["SimBroker"]


class SimBroker:
    def __init__(self, port: int, broker_id: int, cluster_id: str, mv_max: int = 21,
                 timeout: float = 30.0, features: dict[str, tuple[int, int]] | None = None) -> None:
        self.port = port
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.mv_max = mv_max
        #: more supported feature ranges (a Kafka 4.x controller checks every finalized feature)
        self.features = dict(features or {})
        self.incarnation = uuid.uuid4()
        self.directory = uuid.UUID(int=(broker_id << 64) | 0x1234)
        self.epoch = -1
        self.timeout = timeout
        self._cid = 0
        self.sock: socket.socket | None = None

    def _call(self, key: int, version: int, body: Any) -> Any:
        if self.sock is None:
            self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout)
        self._cid += 1
        try:
            return frame_call(self.sock, key, version, body, self._cid, client_id=f"broker-{self.broker_id}")
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def register(self) -> int:
        """BrokerRegistration; the error code (0: registered, ``self.epoch`` set)."""
        R = w.BrokerRegistrationRequest
        q = R(broker_id=self.broker_id, cluster_id=self.cluster_id, incarnation_id=self.incarnation,
              listeners=[R.Listener(name="PLAINTEXT", host="127.0.0.1", port=20000 + self.broker_id,
                                    security_protocol=0)],
              features=[R.Feature(name="metadata.version", min_supported_version=7,
                                  max_supported_version=self.mv_max),
                        R.Feature(name="kraft.version", min_supported_version=0, max_supported_version=1),
                        *(R.Feature(name=n, min_supported_version=lo, max_supported_version=hi)
                          for n, (lo, hi) in self.features.items())],
              rack=None, is_migrating_zk_broker=False, log_dirs=[self.directory], previous_broker_epoch=-1)
        r = self._call(BROKER_REGISTRATION, 4, q)
        if r.error_code == 0:
            self.epoch = int(r.broker_epoch)
        return int(r.error_code)

    def heartbeat(self, offset: int, want_fence: bool = False) -> Any:
        """One BrokerHeartbeat v1 reporting ``offset`` as replayed; the response."""
        q = w.BrokerHeartbeatRequest(broker_id=self.broker_id, broker_epoch=self.epoch,
                                     current_metadata_offset=offset, want_fence=want_fence,
                                     want_shut_down=False, offline_log_dirs=[])
        return self._call(BROKER_HEARTBEAT, 1, q)

    def join(self, deadline_s: float = 60.0) -> None:
        """Register (retrying while the controller is not ready) and heartbeat until unfenced
        (reporting its registration's offset as replayed: caught up)."""
        end = time.monotonic() + deadline_s
        while True:
            code = self.register()
            if code == 0:
                break
            if time.monotonic() > end:
                raise AssertionError(f"broker {self.broker_id} could not register: error {code}")
            time.sleep(0.2)
        offset = self.epoch
        while True:
            r = self.heartbeat(offset)
            if r.error_code == 0 and not r.is_fenced:
                return
            if time.monotonic() > end:
                raise AssertionError(f"broker {self.broker_id} stayed fenced: {r}")
            time.sleep(0.1)
