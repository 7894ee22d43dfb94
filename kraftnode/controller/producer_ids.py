"""Producer id blocks for the brokers' transaction coordinators: Kafka's ProducerIdControlManager.

A broker asks for a block (AllocateProducerIds) when its idempotent or transactional producers
have used up the previous one; the controller hands out the next 1000 ids and records where
the following block starts (ProducerIdsRecord), so blocks never overlap, across failovers too.
"""

from __future__ import annotations

from dataclasses import dataclass

from kraftnode.controller.context import ControllerContext
from kraftnode.controller.errors import ApiError
from kraftnode.controller.result import ControllerResult
from kraftnode.protocol.errors import Errors
from kraftnode.protocol.generated.metadata import ProducerIdsRecord

__all__ = ["PRODUCER_ID_BLOCK_SIZE", "ProducerIdControl", "ProducerIdsBlock"]

PRODUCER_ID_BLOCK_SIZE = 1000
MAX_LONG = (1 << 63) - 1


@dataclass(frozen=True)
class ProducerIdsBlock:
    assigned_broker_id: int
    first_producer_id: int
    size: int


class ProducerIdControl:
    def __init__(self, ctl: ControllerContext) -> None:
        self.ctl = ctl

    def generate_next_producer_id(self, broker_id: int, broker_epoch: int) -> ControllerResult[ProducerIdsBlock]:
        self.ctl.check_broker_epoch(broker_id, broker_epoch)
        first = max(self.ctl.view.image.next_producer_id, 0)
        if first > MAX_LONG - PRODUCER_ID_BLOCK_SIZE:
            raise ApiError(Errors.UNKNOWN_SERVER_ERROR, "Exhausted all producerIds as the next block's end producerId "
                                                        "has exceeded the int64 type limit")
        block = ProducerIdsBlock(broker_id, first, PRODUCER_ID_BLOCK_SIZE)
        rec = ProducerIdsRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                                next_producer_id=first + PRODUCER_ID_BLOCK_SIZE)
        return ControllerResult.of([(rec, 0)], block)
