"""The network: the Kafka-framed TCP listener (``listener``), the client for raft peers
(``peer_client``) and the ApiVersions answer (``api_versions``)."""
