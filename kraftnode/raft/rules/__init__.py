"""The Raft core's rules by topic (as Kafka's KafkaRaftClient handlers and internals/*Handler).

Each rule is a function of the node, typed against :class:`~kraftnode.raft.rules.port.RaftCore`
(what a rule may use of :class:`kraftnode.raft.raft_node.RaftNode`, the public event API,
which dispatches events to them). The modules import one another in one direction only:
``port`` <- ``validation``, ``timers`` <- ``epochs`` <- ``replication`` <- ``snapshot_transfer``,
``voter_changes`` <- ``leadership`` <- ``elections`` <- ``per_state``.
"""
