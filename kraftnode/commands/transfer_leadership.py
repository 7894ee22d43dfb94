"""``kraftnode quorum --bootstrap-controller HOST:PORT transfer-leadership --to N``.

Moves leadership to voter N (a kraftnode extension; see docs/raft.md "Leadership
transfer"). The request is an EndQuorumEpoch sent to the leader naming the leader
itself at its current epoch with N as the only preferred candidate -- a message Kafka
never sends, so genuine clients and peers are unaffected; a Kafka 3.9 controller
answers it INVALID_REQUEST.
"""

from __future__ import annotations

import argparse
import time
from typing import cast

from kraftnode.errors import UsageError
from kraftnode.protocol import Errors
from kraftnode.protocol.generated import EndQuorumEpochRequest, EndQuorumEpochResponse
from kraftnode.protocol.registry import END_QUORUM_EPOCH
from kraftnode.quorum_client import ClientError, QuorumInfo, call, fetch_quorum_info, parse_servers
from kraftnode.vocabulary import METADATA_PARTITION, METADATA_TOPIC
from recordbatch.wire import ZERO_UUID

WAIT_S = 15.0


def _leader_address(info: QuorumInfo, leader_id: int) -> tuple[str, int]:
    for ep in info.endpoints.get(leader_id, []):
        hostport = ep.split("://", 1)[-1]
        host, _, port = hostport.rpartition(":")
        return host.strip("[]"), int(port)
    raise UsageError(f"no endpoint known for the leader {leader_id}")


def transfer_leadership(args: argparse.Namespace) -> int:
    servers = parse_servers(args.bootstrap_controller or args.bootstrap_server)
    endpoint_type = 2 if args.bootstrap_controller else 1
    target = args.to
    info = fetch_quorum_info(servers, endpoint_type)
    voters = {v.replica_id: v for v in info.voters}
    if target not in voters:
        raise UsageError(f"node {target} is not a voter (voters: {', '.join(map(str, sorted(voters)))})")
    if target == info.leader_id:
        print(f"node {target} is already the leader (epoch {info.leader_epoch})")
        return 0
    host, port = _leader_address(info, info.leader_id)
    start = time.monotonic()
    req = EndQuorumEpochRequest(topics=[EndQuorumEpochRequest.TopicData(
        topic_name=METADATA_TOPIC, partitions=[EndQuorumEpochRequest.PartitionData(
            partition_index=METADATA_PARTITION, leader_id=info.leader_id, leader_epoch=info.leader_epoch,
            preferred_candidates=[EndQuorumEpochRequest.ReplicaInfo(
                candidate_id=target, candidate_directory_id=voters[target].directory_id or ZERO_UUID)])])])
    try:
        _, resp = call(host, port, END_QUORUM_EPOCH, 1, req, timeout=WAIT_S)
    except ClientError as e:
        raise UsageError(f"the leader {info.leader_id} did not answer: {e}") from None
    r = cast(EndQuorumEpochResponse, resp)
    code = r.error_code or (r.topics[0].partitions[0].error_code if r.topics and r.topics[0].partitions
                            else Errors.NONE)
    if code == Errors.VOTER_NOT_FOUND:
        raise UsageError(f"node {target} is not a voter")
    if code == Errors.REQUEST_TIMED_OUT:
        t, leader = voters[target], voters.get(info.leader_id)
        end = leader.log_end_offset if leader is not None else -1
        raise UsageError(f"node {target} is not caught up with the leader {info.leader_id} (its log ends at "
                         f"{t.log_end_offset}, the leader's at {end}): transfer refused")
    if code in (Errors.FENCED_LEADER_EPOCH, Errors.NOT_LEADER_OR_FOLLOWER):
        raise UsageError(f"leadership changed while transferring ({Errors(code).name}); run describe --status")
    if code == Errors.INVALID_REQUEST:
        raise UsageError(f"the leader {info.leader_id} refused the transfer (INVALID_REQUEST: a Kafka "
                         "controller, or a transfer already in progress)")
    if code != Errors.NONE:
        raise UsageError(f"the leader refused the transfer: {Errors(code).name}")
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            now = fetch_quorum_info(servers, endpoint_type)
        except UsageError:
            now = None
        if now is not None and now.leader_epoch > info.leader_epoch:
            if now.leader_id != target:
                raise UsageError(f"node {now.leader_id} was elected in epoch {now.leader_epoch}, not {target}")
            ms = (time.monotonic() - start) * 1000
            print(f"leadership moved from {info.leader_id} to {target}: epoch {now.leader_epoch} "
                  f"({ms:.0f} ms)")
            return 0
        time.sleep(0.02)
    raise UsageError(f"the leader resigned but no new leader was seen within {WAIT_S:.0f}s")
