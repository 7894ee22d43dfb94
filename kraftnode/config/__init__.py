"""kraftnode's configuration: ``server.properties`` read as Kafka reads it.

* :mod:`~kraftnode.config.properties` -- the file's raw keys and values (Java's
  ``Properties`` rules) with typed getters, and the ``listeners`` syntax;
* :mod:`~kraftnode.config.keys` -- the key table: the one source of every key's name, type,
  default, validator and documentation (``docs/configuration.md`` is generated from it);
* :mod:`~kraftnode.config.server_config` -- :class:`ServerConfig`, the keys kraftnode uses,
  each read through the table;
* :mod:`~kraftnode.config.validation` -- the start-up checks across keys that Kafka makes
  (the node id among the voters, the controller listener among the listeners, ...), with
  Kafka's messages;
* :mod:`~kraftnode.config.node_config` -- :class:`NodeConfig`, everything a running node
  reads, validated once (import it from there: it pulls in the log and listener security,
  which this package's light names below must not).
"""

from kraftnode.config.properties import (
    Listener,
    Properties,
    format_properties,
    load_properties,
    parse_listeners,
    parse_properties,
)
from kraftnode.config.server_config import ServerConfig
from kraftnode.errors import ConfigError

__all__ = [
    "ConfigError",
    "Listener",
    "Properties",
    "ServerConfig",
    "format_properties",
    "load_properties",
    "parse_listeners",
    "parse_properties",
]
