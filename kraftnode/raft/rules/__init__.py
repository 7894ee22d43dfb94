"""The Raft core's rules by topic (as Kafka's KafkaRaftClient handlers and internals/*Handler).

:class:`kraftnode.raft.raft_node.RaftNode` is the public event API; it binds these functions
as its methods and dispatches events to them.
"""
