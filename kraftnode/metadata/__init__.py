"""The replicated state, pure: what committed records say, with no I/O.

``image`` (Kafka's MetadataImage and its replay), ``state`` (:class:`MetadataState`, the
node's default state machine) and ``state_machine`` (the :class:`StateMachine` protocol an
application implements, and the runner that applies committed batches to one).  The
server's I/O around it (snapshot files, the controller's writes) is in
``kraftnode.server.controller_io``; nothing here imports ``kraftnode.server``.
"""
