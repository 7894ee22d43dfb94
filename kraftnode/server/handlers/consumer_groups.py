"""KIP-848's consumer group protocol on the raft leader: ConsumerGroupHeartbeat and
ConsumerGroupDescribe, through the group coordinator's shell
(:class:`~kraftnode.server.handlers.group_service.GroupService`, shared with the classic
protocol's handlers in kraftnode.server.handlers.groups)."""

from __future__ import annotations

import uuid

from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import CONSUMER_GROUP_DESCRIBE, CONSUMER_GROUP_HEARTBEAT
from kraftnode.security import authorizer as az
from kraftnode.server.handlers.base import ClientSoftware, HandlerBase, HandlerServices
from kraftnode.server.handlers.group_service import (
    UNAUTHORIZED_OPS,
    GroupService,
    current_client,
    group_topics,
    now_ms,
)


def _uuid_b64(text: str) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding (the member id Kafka makes)."""
    import base64

    return base64.urlsafe_b64encode(uuid.UUID(text).bytes).decode().rstrip("=")


class ConsumerGroupHandlers(HandlerBase):
    """The consumer protocol's group APIs: the services' authorizer, and the group
    coordinator's shell the classic protocol's handlers made."""

    def __init__(self, services: HandlerServices, clients: ClientSoftware, service: GroupService) -> None:
        super().__init__(services, clients)
        self.service = service

    async def consumer_group_heartbeat(self, q: w.ConsumerGroupHeartbeatRequest,
                                       v: int) -> w.ConsumerGroupHeartbeatResponse:
        def err(code: int, message: str | None = None) -> w.ConsumerGroupHeartbeatResponse:
            return w.ConsumerGroupHeartbeatResponse(throttle_time_ms=0, error_code=int(code), error_message=message,
                                                    member_id=None, member_epoch=0, heartbeat_interval_ms=0,
                                                    assignment=None)
        if not self.service.config.consumer_protocol_enabled:
            # KafkaApis.handleConsumerGroupHeartbeat while the consumer protocol is not enabled
            return err(Errors.UNSUPPORTED_VERSION,
                       "The new group coordinator is not enabled (group.coordinator.rebalance.protocols "
                       "does not list consumer)")
        if self.denied(az.GROUP, q.group_id, az.READ, CONSUMER_GROUP_HEARTBEAT):
            return err(Errors.GROUP_AUTHORIZATION_FAILED)
        # Kafka 4.4's KafkaApis: every named topic needs DESCRIBE, else the whole heartbeat is
        # TOPIC_AUTHORIZATION_FAILED (no message), so a client learns nothing of topics it may
        # not see. (Kafka also leaves out of a regex's topics those the member may not
        # describe; that is not done here: see docs/server.md.)
        if q.subscribed_topic_names and any(self.denied(az.TOPIC, t, az.DESCRIBE, CONSUMER_GROUP_HEARTBEAT)
                                            for t in set(q.subscribed_topic_names)):
            return err(Errors.TOPIC_AUTHORIZATION_FAILED)
        code = self.service.write_refusal()
        if code:
            return err(code)
        client_id, host = current_client()
        new_id = str(uuid.UUID(bytes=uuid.uuid4().bytes))
        now = now_ms()
        return await self.service.call(
            err, lambda c, t: c.consumer_group_heartbeat(t, q, client_id, host, _uuid_b64(new_id), now, v))

    async def consumer_group_describe(self, q: w.ConsumerGroupDescribeRequest,
                                      v: int) -> w.ConsumerGroupDescribeResponse:
        D = w.ConsumerGroupDescribeResponse
        code = self.service.coordinator_error()
        c = self.service.coordinator
        names = {tid: name for name, (tid, _n) in group_topics().items()}
        described = {d.group_id: d for d in c.consumer_group_describe(list(q.group_ids), names)} \
            if c is not None and not code else {}
        out = []
        for gid in q.group_ids:
            if self.denied(az.GROUP, gid, az.DESCRIBE, CONSUMER_GROUP_DESCRIBE):
                code_g: int = int(Errors.GROUP_AUTHORIZATION_FAILED)
            else:
                code_g = code
            if code_g:
                out.append(D.DescribedGroup(error_code=code_g, error_message=None, group_id=gid, group_state="",
                                            group_epoch=0, assignment_epoch=0, assignor_name="", members=[],
                                            authorized_operations=UNAUTHORIZED_OPS))
            else:
                d = described[gid]
                if q.include_authorized_operations:
                    d.authorized_operations = self.authorized_operations(az.GROUP, gid, 1 << az.READ | 1 << az.DESCRIBE
                                                                | 1 << az.DELETE)
                out.append(d)
        return D(throttle_time_ms=0, groups=out)
