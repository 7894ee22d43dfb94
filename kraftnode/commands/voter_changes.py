"""``kraftnode quorum ... add-controller`` / ``remove-controller`` (KIP-853).

Does what Kafka 3.9's ``kafka-metadata-quorum.sh`` does for these sub-commands: the
controller to add is described by its own server.properties (``--command-config``):
node.id, the directory id from its metadata log dir's meta.properties, and its
advertised controller listeners; the request goes to the active controller, found
with DescribeCluster as the Java Admin client finds it.  The success lines are
Kafka's, character for character (including Kafka's double space in the remove
line).
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Callable
from typing import Any

from kraftnode.config import ConfigError, ServerConfig
from kraftnode.errors import UsageError
from kraftnode.log.meta_properties import MetaPropertiesError, read_meta_properties
from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import ADD_RAFT_VOTER, REMOVE_RAFT_VOTER
from kraftnode.quorum_client import (
    ClientError,
    call,
    describe_cluster,
    fetch_quorum_info,
    parse_servers,
)
from recordbatch.message import Message
from recordbatch.wire import uuid_from_base64, uuid_to_base64

__all__ = ["add_controller", "remove_controller", "controller_to_add"]

RETRY_FOR_S = 60.0   # the Admin client's default.api.timeout.ms: retriable errors are retried
TIMEOUT_MS = 30_000  # the Admin client's default request timeout


def _servers(args: argparse.Namespace) -> tuple[list[tuple[str, int]], int]:
    return parse_servers(args.bootstrap_controller or args.bootstrap_server), 2 if args.bootstrap_controller else 1


def _active_controller(servers: list[tuple[str, int]], endpoint_type: int) -> tuple[str, int]:
    last = "no bootstrap server answered"
    for host, port in servers:
        try:
            dc = describe_cluster(host, port, endpoint_type)
        except ClientError as e:
            last = str(e)
            continue
        for b in dc.brokers:
            if b.broker_id == dc.controller_id:
                return b.host, b.port
        last = "the quorum has no active controller"
    raise UsageError(last)


def _send_to_leader(args: argparse.Namespace, api_key: int, request: Message,
                    done_already: tuple[int, Callable[[], bool]]) -> None:
    """Send ``request`` to the active controller, retrying what the Admin client retries.

    ``done_already`` is (error code, check): the answer that means "it is already so"
    (DUPLICATE_VOTER for an add, VOTER_NOT_FOUND for a remove) and how to confirm it. A try
    that got a retriable answer may still have taken effect: the leader appended the
    VotersRecord and then timed out waiting for it to commit (REQUEST_TIMED_OUT), or
    resigned (NOT_LEADER_OR_FOLLOWER) and its successor committed it. The retry then
    meets that answer; when the quorum shows the change made, the person sees success,
    not an error about their own earlier try.
    """
    servers, endpoint_type = _servers(args)
    deadline = time.monotonic() + RETRY_FOR_S
    tried = False   # a request may have reached the leader before this one
    while True:
        try:
            host, port = _active_controller(servers, endpoint_type)
            _, resp = call(host, port, api_key, 0, request, timeout=TIMEOUT_MS / 1000 + 5)
        except (ClientError, UsageError) as e:
            if time.monotonic() > deadline:
                raise UsageError(str(e)) from None
            tried = True
            time.sleep(0.5)
            continue
        r: Any = resp
        if r.error_code == Errors.NONE:
            return
        code, check = done_already
        if tried and r.error_code == code and check():
            return
        # retriable, as the Admin client treats them: the leader moved, or "not yet"
        # (REQUEST_TIMED_OUT: the new voter is not caught up, a change is still uncommitted)
        if r.error_code in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.NOT_CONTROLLER, Errors.REQUEST_TIMED_OUT) \
                and time.monotonic() < deadline:
            tried = True
            time.sleep(0.5)
            continue
        raise UsageError(f"{Errors(r.error_code).name}: {r.error_message or 'the controller refused'}")


def _is_voter(args: argparse.Namespace, node_id: int, directory_id: uuid.UUID) -> bool | None:
    """Whether the leader's DescribeQuorum lists (node_id, directory_id) among the current
    voters; None when no leader answered."""
    servers, endpoint_type = _servers(args)
    try:
        info = fetch_quorum_info(servers, endpoint_type)
    except UsageError:
        return None
    return any(v.replica_id == node_id and v.directory_id == directory_id for v in info.voters)


def controller_to_add(config_path: str) -> tuple[int, uuid.UUID, list[tuple[str, str, int]]]:
    """(node id, directory id, [(listener, host, port)]) from a controller's server.properties."""
    try:
        cfg = ServerConfig.load(config_path)
        node_id = cfg.node_id
        if node_id < 0:
            raise UsageError("node.id was negative in configuration file. "
                             "Is this a valid controller configuration file?")
        if "controller" not in cfg.process_roles:
            raise UsageError("process.roles did not contain 'controller' in configuration file. "
                             "Is this a valid controller configuration file?")
        meta_dir = cfg.metadata_log_dir
        names = cfg.controller_listener_names
        listeners = {ln.name: ln for ln in cfg.listeners}
        listeners.update({ln.name: ln for ln in cfg.advertised_listeners})
    except ConfigError as e:
        raise UsageError(str(e)) from None
    try:
        meta = read_meta_properties(meta_dir)
    except MetaPropertiesError as e:
        raise UsageError(str(e)) from None
    if meta is None:
        raise UsageError(f"Unable to read meta.properties from {meta_dir}")
    if meta.directory_id is None:
        raise UsageError(f"No directory id found in {meta_dir}")
    if not names:
        raise UsageError("controller.listener.names was not found. "
                         "Is this a valid controller configuration file?")
    endpoints = []
    for name in names:
        ln = listeners.get(name.upper()) or listeners.get(name)
        if ln is None:
            raise UsageError(f"Cannot find information about controller listener name: {name}")
        endpoints.append((ln.name, ln.host or "localhost", ln.port))
    return node_id, meta.directory_id, endpoints


def _endpoint_text(name: str, host: str, port: int) -> str:
    return f"{name}://{'[' + host + ']' if ':' in host else host}:{port}"


def add_controller(args: argparse.Namespace) -> int:
    if args.command_config is None:
        raise UsageError("You must supply the configuration file of the controller you are adding "
                         "when using add-controller.")
    node_id, directory_id, endpoints = controller_to_add(args.command_config)
    if not args.dry_run:
        R = w.AddRaftVoterRequest
        _send_to_leader(args, ADD_RAFT_VOTER, R(
            cluster_id=None, timeout_ms=TIMEOUT_MS, voter_id=node_id, voter_directory_id=directory_id,
            listeners=[R.Listener(name=n, host=h, port=p) for n, h, p in endpoints]),
            (Errors.DUPLICATE_VOTER, lambda: _is_voter(args, node_id, directory_id) is True))
    print(f"{'DRY RUN of adding' if args.dry_run else 'Added'} controller {node_id} with directory id "
          f"{uuid_to_base64(directory_id)} and endpoints: "
          + ", ".join(_endpoint_text(*e) for e in endpoints))
    return 0


def remove_controller(args: argparse.Namespace) -> int:
    if args.controller_id < 0:
        raise UsageError(f"Invalid negative --controller-id: {args.controller_id}")
    try:
        directory_id = uuid_from_base64(args.controller_directory_id)
    except ValueError as e:
        raise UsageError(f"Failed to parse --controller-directory-id: {e}") from None
    if not args.dry_run:
        _send_to_leader(args, REMOVE_RAFT_VOTER, w.RemoveRaftVoterRequest(
            cluster_id=None, voter_id=args.controller_id, voter_directory_id=directory_id),
            (Errors.VOTER_NOT_FOUND, lambda: _is_voter(args, args.controller_id, directory_id) is False))
    print(f"{'DRY RUN of removing ' if args.dry_run else 'Removed '} KRaft controller "
          f"{args.controller_id} with directory id {uuid_to_base64(directory_id)}")
    return 0
