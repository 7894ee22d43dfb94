"""The network side of a node: listener, connections, request handlers."""
