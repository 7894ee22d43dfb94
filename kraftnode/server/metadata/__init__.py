"""The I/O side of the replicated state: snapshot files and log cleaning
(``snapshot_manager``), producer-id state (``producers``) and the active controller's duties
(``controller_duties``); the groups' state is the group coordinator's records in the state
machine (:mod:`kraftnode.groups`, served by ``handlers.group_service``).  The pure
state they drive is :mod:`kraftnode.metadata`."""
