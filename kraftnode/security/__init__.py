"""Listener security: Kafka's security protocols, TLS (``tls``) and the listener
configuration lookups (``listeners``).  Kept apart from the network and handler code,
which only call small hooks here."""
