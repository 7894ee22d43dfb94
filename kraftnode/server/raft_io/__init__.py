"""The raft core's I/O shell: the driver that runs the core's actions against real time,
disk and network (``driver``), the sending of its requests to peers (``send``), the one RPC
table (``rpcs``) with its wire converters (``wire``), and the disk log adapter
(``disk_log``).  The only place outside ``kraftnode.raft`` that touches the core itself."""
