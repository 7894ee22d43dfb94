"""Discrete-event simulation of kraftnode's Raft core under faults."""
