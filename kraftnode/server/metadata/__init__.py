"""The I/O side of the replicated state: snapshot files and log cleaning
(``snapshot_manager``), producer-id state (``producers``), the committed group offsets
(``group_offsets``) and the active controller's duties (``controller_duties``).  The pure
state they drive is :mod:`kraftnode.metadata`."""
