"""Listener security as Kafka 3.9 configures it: the security protocols and per-listener
keys (``listeners``), TLS (``tls``), SASL with PLAIN and SCRAM (``sasl``, ``scram``), the
StandardAuthorizer (``authorizer``) and the one per-API authorization table
(``api_checks``), and the start-up glue the node calls (``setup``, ``hooks``).

Shared by the server and the CLI's client (``kraftnode.quorum_client``), so it imports
nothing of ``kraftnode.server``: the network and handler code only call small hooks here."""
