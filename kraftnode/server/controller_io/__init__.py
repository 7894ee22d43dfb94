"""The controller's I/O: the active controller's shell (``controller_shell``), its
duties (``controller_duties``), snapshot files and log cleaning (``snapshot_manager``); the groups' state is the group coordinator's records in the state
machine (:mod:`kraftnode.groups`, served by ``handlers.groups``).  The pure
state they drive is :mod:`kraftnode.metadata`."""
