"""kraftnode: a KRaft quorum node that speaks Kafka's wire protocol and stores Kafka's log format."""

__version__ = "0.1.0"
