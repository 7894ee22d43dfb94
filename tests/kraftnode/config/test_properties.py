from __future__ import annotations

from pathlib import Path

import pytest

from kraftnode.config import (
    ConfigError,
    Listener,
    Properties,
    ServerConfig,
    format_properties,
    load_properties,
    parse_properties,
)


def test_java_properties_rules() -> None:
    text = (
        "# comment\n"
        "! also a comment\n"
        "   \n"
        "a=1\n"
        "b : 2\n"
        "c 3\n"
        "d=multi \\\n"
        "    line \\\n"
        "  value\n"
        "e=tab\\tnew\\nline\\u0041\\\\\n"
        "f\\=g=h\n"
        "key\\ with\\ spaces = v\n"
        "empty=\n"
        "lonely\n"
        "a=override\n"
        "trailing=x\\\\\n"
        "crlf=yes\r\n"
        "cr=also\r"
        "colon:val:with:colons\n"
    )
    got = parse_properties(text)
    assert got == {
        "a": "override", "b": "2", "c": "3", "d": "multi line value", "e": "tab\tnew\nlineA\\",
        "f=g": "h", "key with spaces": "v", "empty": "", "lonely": "", "trailing": "x\\",
        "crlf": "yes", "cr": "also", "colon": "val:with:colons",
    }


def test_comment_lines_do_not_continue() -> None:
    assert parse_properties("# a \\\nb=1\n") == {"b": "1"}


def test_bad_unicode_escape_names_the_line() -> None:
    with pytest.raises(ConfigError, match="uxxxx"):
        parse_properties("a=\\u12x4\n")


def test_format_roundtrip() -> None:
    items = {"k y": "a=b:c#d", "x": " lead", "u": "é"}
    assert parse_properties(format_properties(items)) == items


def test_typed_getters_name_the_key() -> None:
    p = Properties({"n": " 42 ", "bad": "4x", "big": "99999999999", "t": "TRUE", "b": "maybe", "l": "a, b,,c "})
    assert p.get_int("n") == 42 and p.get_int("missing", 7) == 7
    with pytest.raises(ConfigError, match="bad.*INT"):
        p.get_int("bad")
    with pytest.raises(ConfigError, match="big"):
        p.get_int("big")
    assert p.get_long("big") == 99999999999
    assert p.get_bool("t") is True
    with pytest.raises(ConfigError, match="configuration b"):
        p.get_bool("b")
    assert p.get_list("l") == ["a", "b", "c"]
    with pytest.raises(ConfigError, match="at least 50"):
        p.get_int("n", at_least=50)


def test_server_config_defaults_and_listeners(tmp_path: Path) -> None:
    f = tmp_path / "server.properties"
    f.write_text("process.roles=controller\nnode.id=3\ncontroller.listener.names=CONTROLLER\n"
                 "listeners=CONTROLLER://:9093,PLAINTEXT://[::1]:9092\n"
                 "advertised.listeners=CONTROLLER://ctl3.example:19093\n"
                 "log.dirs=/a, /b\nmetadata.log.dir=/m\n")
    cfg = ServerConfig.load(f)
    assert cfg.node_id == 3 and cfg.process_roles == ["controller"]
    assert cfg.log_dirs == ["/a", "/b"] and cfg.metadata_log_dir == "/m"
    assert cfg.all_log_dirs == ["/a", "/b", "/m"]
    assert cfg.listeners == [Listener("CONTROLLER", None, 9093), Listener("PLAINTEXT", "::1", 9092)]
    assert cfg.advertised_controller_listeners() == [Listener("CONTROLLER", "ctl3.example", 19093)]
    assert cfg.metadata_log_segment_bytes == 1 << 30
    assert cfg.metadata_log_segment_ms == 7 * 24 * 3600 * 1000
    assert cfg.metadata_log_segment_min_bytes == 8 << 20


def test_server_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_properties(tmp_path / "nope")
    cfg = ServerConfig(Properties({"listeners": "CONTROLLER//x:1"}))
    with pytest.raises(ConfigError, match="node.id"):
        _ = cfg.node_id
    with pytest.raises(ConfigError, match="listeners"):
        _ = cfg.listeners
    assert ServerConfig(Properties({})).log_dirs == ["/tmp/kafka-logs"]
    with pytest.raises(ConfigError, match="process.roles"):
        _ = ServerConfig(Properties({"process.roles": "broker,zookeeper"})).process_roles
    with pytest.raises(ConfigError, match="port"):
        _ = ServerConfig(Properties({"listeners": "A://h:70000"})).listeners
