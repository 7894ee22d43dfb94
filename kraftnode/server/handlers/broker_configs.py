"""DescribeConfigs of this node's own broker resource, as Kafka's ConfigHelper answers it.

Kafka lists every config of the node (KafkaConfig's names) with its value and its source:
STATIC_BROKER_CONFIG for a key set in the properties file, DEFAULT_CONFIG for a default
(no dynamic configs here), sensitive values (passwords, JAAS) as null, every entry
read-only (kraftnode changes no config at run time); with IncludeSynonyms, the synonyms
in Kafka's order (the static value, then the default); from v3 the config type, and the
documentation when asked.  Our configs are the keys of ``kraftnode.config.keys`` and the
security families (``ssl.*``, ``sasl.*``, ``listener.name.*``) set in the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kraftnode.config import keys as key_table
from kraftnode.protocol import generated as w

__all__ = ["describe_broker"]

# DescribeConfigsResponse ConfigSource
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
# DescribeConfigsResponse ConfigType (ConfigDef.Type)
_TYPES = {"boolean": 1, "string": 2, "int": 3, "long": 5, "list": 7, "host:port": 2, "password": 9}
_SECURITY_PREFIXES = ("ssl.", "sasl.", "listener.name.")
# Kafka's defaults of keys kraftnode requires (no default in kraftnode.config.keys): Kafka
# lists them as the DEFAULT_CONFIG synonym
_KAFKA_DEFAULTS = {"node.id": "-1"}


def _sensitive(name: str) -> bool:
    n = name.lower()
    return "password" in n or n.endswith("sasl.jaas.config") or n.endswith(".jaas.config")


def _entries(props: Mapping[str, str]) -> list[tuple[str, str | None, str | None, int, bool, str]]:
    """(name, value, default, config type, sensitive, doc) of every config of this node."""
    out = []
    for k in key_table.KEYS:
        sens = k.type == "password" or _sensitive(k.name)
        default = k.default if k.default is not None else _KAFKA_DEFAULTS.get(k.name)
        out.append((k.name, props.get(k.name), default, _TYPES.get(k.type, 2), sens, k.doc))
    known = {k.name for k in key_table.KEYS}
    for name in sorted(props):
        if name not in known and name.startswith(_SECURITY_PREFIXES):
            sens = _sensitive(name)
            out.append((name, props[name], None, 9 if sens else 2, sens, ""))
    return out


def describe_broker(props: Mapping[str, str], keys: list[str] | None, include_synonyms: bool,
                    include_documentation: bool, version: int) -> list[Any]:
    R = w.DescribeConfigsResponse
    configs = []
    for name, value, default, ctype, sensitive, doc in _entries(props):
        if keys is not None and name not in keys:
            continue
        static = value is not None
        shown = None if sensitive else (value if static else default)
        synonyms = []
        if include_synonyms and version >= 1:
            if static:
                synonyms.append(R.DescribeConfigsSynonym(name=name, value=None if sensitive else value,
                                                         source=STATIC_BROKER_CONFIG))
            if default is not None:
                synonyms.append(R.DescribeConfigsSynonym(name=name, value=None if sensitive else default,
                                                         source=DEFAULT_CONFIG))
        configs.append(R.DescribeConfigsResourceResult(
            name=name, value=shown, read_only=True, config_source=STATIC_BROKER_CONFIG if static else DEFAULT_CONFIG, is_sensitive=sensitive,
            synonyms=synonyms, config_type=ctype,
            documentation=doc if include_documentation and version >= 3 else None))
    return configs
