"""``kraftnode quorum --bootstrap-controller HOST:PORT describe --status|--replication``,
``add-controller`` and ``remove-controller``.

Prints exactly what Kafka 3.9's ``kafka-metadata-quorum.sh`` prints for the same
quorum: it asks a bootstrap controller for the cluster (DescribeCluster with
EndpointType 2, which names the active controller), then asks the active
controller DescribeQuorum, as the Java Admin client does.
"""

from __future__ import annotations

import argparse
import sys
import time

from kraftnode.commands import transfer_leadership, voter_changes
from kraftnode.config import ConfigError, load_properties
from kraftnode.errors import UsageError
from kraftnode.quorum_client import (
    NoLeader,
    QuorumInfo,
    ReplicaInfo,
    fetch_quorum_info,
    parse_servers,
    security_from_properties,
    use_security,
)
from recordbatch.wire import ZERO_UUID, uuid_to_base64

NAME = "quorum"
HELP = "describe a KRaft quorum, like kafka-metadata-quorum.sh"
EXAMPLES = """\
  kraftnode quorum --bootstrap-controller 127.0.0.1:9093 describe --status
  kraftnode quorum --bootstrap-controller 127.0.0.1:9093 describe --replication --human-readable
  kraftnode quorum --bootstrap-controller 127.0.0.1:9093 describe --replication --watch 1
  kraftnode quorum --bootstrap-controller 127.0.0.1:9093 --command-config new.properties add-controller
  kraftnode quorum --bootstrap-controller 127.0.0.1:9093 remove-controller -i 4 -d=DIRECTORY_ID
  kraftnode quorum --bootstrap-controller 127.0.0.1:9093 transfer-leadership --to 2
  kraftnode quorum --bootstrap-controller 127.0.0.1:9093 --command-config client.properties describe --status
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    conn = p.add_mutually_exclusive_group(required=True)
    conn.add_argument("--bootstrap-controller", help="comma-separated host:port controllers")
    conn.add_argument("--bootstrap-server", help="comma-separated host:port (served the same way)")
    p.add_argument("--command-config", default=None,
                   help="the Admin client's properties, as kafka-metadata-quorum.sh takes them: "
                        "security.protocol, ssl.* and sasl.mechanism/sasl.jaas.config (PLAIN, "
                        "SCRAM-SHA-256/512) for a secured listener; for add-controller also the "
                        "server.properties of the controller to add")
    sub = p.add_subparsers(dest="quorum_command",
                           metavar="{describe,add-controller,remove-controller,transfer-leadership}",
                           parser_class=type(p))
    sub.required = True
    fmt = argparse.RawDescriptionHelpFormatter
    d = sub.add_parser("describe", help="describe the metadata quorum", formatter_class=fmt,
                       epilog="examples:\n"
                              "  kraftnode quorum --bootstrap-controller 127.0.0.1:9093 describe --status\n"
                              "  kraftnode quorum --bootstrap-controller 127.0.0.1:9093 describe "
                              "--replication --watch 1\n")
    d.add_argument("--status", action="store_true", help="a short summary of the quorum status")
    d.add_argument("--replication", action="store_true", help="replication detail per replica")
    d.add_argument("--human-readable", action="store_true",
                   help="with --replication: timestamps as 'N ms ago'")
    d.add_argument("--watch", nargs="?", type=float, const=2.0, default=None, metavar="SECONDS",
                   help="refresh every SECONDS (default 2) until Ctrl-C: a live table with the "
                        "lag of each replica (the screen is redrawn on a terminal)")
    d.add_argument("--count", type=int, default=None, metavar="N",
                   help="with --watch: stop after N refreshes (for scripts)")
    a = sub.add_parser("add-controller", help="add a controller to the KRaft controller cluster",
                       formatter_class=fmt,
                       epilog="example (the new controller was formatted with --no-initial-controllers"
                              " and is running):\n  kraftnode quorum --bootstrap-controller "
                              "127.0.0.1:9093 --command-config new.properties add-controller\n")
    a.add_argument("--dry-run", action="store_true", help="print what would be done, but do not do it")
    r = sub.add_parser("remove-controller", help="remove a controller from the KRaft controller cluster",
                       formatter_class=fmt,
                       epilog="example (ids from describe --status):\n  kraftnode quorum "
                              "--bootstrap-controller 127.0.0.1:9093 remove-controller "
                              "--controller-id 4 --controller-directory-id=DIRECTORY_ID\n"
                              "(write -d=ID / --controller-directory-id=ID: a directory id may start "
                              "with '-', which would be read as an option)\n")
    r.add_argument("--controller-id", "-i", type=int, required=True, help="the id of the controller to remove")
    r.add_argument("--controller-directory-id", "-d", required=True,
                   help="the directory id of the controller to remove")
    r.add_argument("--dry-run", action="store_true", help="print what would be done, but do not do it")
    t = sub.add_parser("transfer-leadership", help="move leadership to a caught-up voter (kraftnode only)",
                       formatter_class=fmt,
                       epilog="example:\n  kraftnode quorum --bootstrap-controller 127.0.0.1:9093 "
                              "transfer-leadership --to 2\n")
    t.add_argument("--to", type=int, required=True, metavar="N", help="the voter to become leader")


def _node_json(info: QuorumInfo, r: ReplicaInfo) -> str:
    # Kafka 3.9 prints "directoryId": null for an unknown directory; only 4.1 drops the
    # field (KAFKA-19109)
    d = "null" if r.directory_id == ZERO_UUID else f'"{uuid_to_base64(r.directory_id)}"'
    s = f'{{"id": {r.replica_id}, "directoryId": {d}'
    eps = info.endpoints.get(r.replica_id, [])
    if eps:
        s += ', "endpoints": [' + ", ".join(f'"{e}"' for e in eps) + "]"
    return s + "}"


def format_status(info: QuorumInfo) -> str:
    leader = next((v for v in info.voters if v.replica_id == info.leader_id), None)
    if leader is None:
        raise UsageError(f"leader {info.leader_id} is not among the voters")
    lagging = min(info.voters, key=lambda v: v.log_end_offset)
    max_lag = leader.log_end_offset - lagging.log_end_offset
    if lagging is leader:
        lag_ms = 0
    elif leader.last_caught_up_timestamp != -1 and lagging.last_caught_up_timestamp != -1:
        lag_ms = leader.last_caught_up_timestamp - lagging.last_caught_up_timestamp
    else:
        lag_ms = -1
    voters = "[" + ", ".join(_node_json(info, v) for v in info.voters) + "]"
    observers = "[" + ", ".join(_node_json(info, o) for o in info.observers) + "]"
    return (f"ClusterId:              {info.cluster_id}\n"
            f"LeaderId:               {info.leader_id}\n"
            f"LeaderEpoch:            {info.leader_epoch}\n"
            f"HighWatermark:          {info.high_watermark}\n"
            f"MaxFollowerLag:         {max_lag}\n"
            f"MaxFollowerLagTimeMs:   {lag_ms}\n"
            f"CurrentVoters:          {voters}\n"
            f"CurrentObservers:       {observers}\n")


def format_replication(info: QuorumInfo, human_readable: bool = False,
                       now_ms: int | None = None) -> str:
    leader = next((v for v in info.voters if v.replica_id == info.leader_id), None)
    if leader is None:
        raise UsageError(f"leader {info.leader_id} is not among the voters")
    now = int(time.time() * 1000) if now_ms is None else now_ms

    def ts(value: int) -> str:
        if value == -1:
            return "-1"
        return f"{now - value} ms ago" if human_readable else str(value)

    rows = []
    groups = [([leader], "Leader"),
              ([v for v in info.voters if v.replica_id != info.leader_id], "Follower"),
              (info.observers, "Observer")]
    for replicas, status in groups:
        for r in replicas:
            rows.append([str(r.replica_id), uuid_to_base64(r.directory_id), str(r.log_end_offset),
                         str(leader.log_end_offset - r.log_end_offset),
                         ts(r.last_fetch_timestamp), ts(r.last_caught_up_timestamp), status])
    headers = ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
               "LastCaughtUpTimestamp", "Status"]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    # Kafka's ToolsUtils.prettyPrintTable: left-aligned, padded, each cell followed by a tab
    lines = ["".join(c.ljust(w) + "\t" for c, w in zip(row, widths, strict=True))
             for row in [headers, *rows]]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    if args.command_config is not None:
        try:
            props = load_properties(args.command_config).raw()
        except ConfigError as e:
            raise UsageError(str(e)) from None
        use_security(security_from_properties(props))
    if args.quorum_command == "add-controller":
        return voter_changes.add_controller(args)
    if args.quorum_command == "remove-controller":
        return voter_changes.remove_controller(args)
    if args.quorum_command == "transfer-leadership":
        return transfer_leadership.transfer_leadership(args)
    if args.status and args.replication:
        raise UsageError("Only one of --status or --replication should be specified with describe sub-command")
    if not (args.status or args.replication):
        raise UsageError("One of --status or --replication must be specified with describe sub-command")
    if args.human_readable and args.status:
        raise UsageError("The option --human-readable is only supported along with --replication")
    if args.count is not None and args.watch is None:
        raise UsageError("--count is only supported along with --watch")
    if args.watch is not None and not args.watch > 0:
        raise UsageError(f"--watch {args.watch:g}: the refresh interval must be positive")
    if args.count is not None and args.count < 1:
        raise UsageError(f"--count {args.count}: must be at least 1")
    servers = parse_servers(args.bootstrap_controller or args.bootstrap_server)
    endpoint_type = 2 if args.bootstrap_controller else 1
    if args.watch is not None:
        return _watch(args, servers, endpoint_type)
    info = describe_when_led(servers, endpoint_type)
    print(_render(args, info), end="")
    return 0


#: how long a describe waits for a leader -- Kafka's default.api.timeout.ms, what
#: kafka-metadata-quorum.sh's Admin client retries NOT_LEADER_OR_FOLLOWER for
LEADER_WAIT_S = 60.0


def describe_when_led(servers: list[tuple[str, int]], endpoint_type: int) -> QuorumInfo:
    """The quorum, asked again while controllers answer but none as the leader (an election:
    a describe typed right after the leader died waits for the next one, as Kafka's tool
    does); any other failure at once."""
    deadline = time.monotonic() + LEADER_WAIT_S
    while True:
        try:
            return fetch_quorum_info(servers, endpoint_type)
        except NoLeader:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.2)


def _render(args: argparse.Namespace, info: QuorumInfo) -> str:
    if args.status:
        return format_status(info)
    return format_replication(info, args.human_readable)


def _watch(args: argparse.Namespace, servers: list[tuple[str, int]], endpoint_type: int) -> int:
    """Redraw the table every ``--watch`` seconds; a failed refresh says why and keeps watching
    (the first failing is an error, as for the plain describe)."""
    tty = sys.stdout.isatty()
    what = "--status" if args.status else "--replication"
    n = 0
    try:
        while True:
            n += 1
            started = time.monotonic()
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            try:
                info = fetch_quorum_info(servers, endpoint_type)
                head = (f"LeaderId: {info.leader_id}  LeaderEpoch: {info.leader_epoch}  "
                        f"HighWatermark: {info.high_watermark}")
                body = _render(args, info)
            except UsageError as e:
                if n == 1:
                    # nothing answered from the start (a wrong or dead address): fail as the
                    # plain describe does, one line and exit code 2, not a screen of errors
                    raise
                head, body = "no answer", f"error: {e}\n"
            if tty:
                sys.stdout.write("\x1b[H\x1b[2J")   # home and clear, as watch(1) redraws
            sys.stdout.write(f"Every {args.watch:g}s: describe {what}  {stamp}  {head}\n\n{body}")
            if not tty:
                sys.stdout.write("\n")
            sys.stdout.flush()
            if args.count is not None and n >= args.count:
                return 0
            time.sleep(max(0.0, args.watch - (time.monotonic() - started)))
    except KeyboardInterrupt:
        return 0
