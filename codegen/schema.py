"""Parse Kafka-schema-language JSON into a small model the templates render.

The model is deliberately close to the JSON: a message has fields, a field has a
type and version ranges.  Everything the wire depends on is resolved here once
(version ranges as integer pairs, struct types linked to their definitions,
snake_case attribute names, default values as Python expressions), so that the
emitter and the templates only make formatting decisions.
"""

from __future__ import annotations

import json
import keyword
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_VERSION = 32767

PRIMITIVES = {
    "bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64",
    "string", "bytes", "records", "uuid",
}


class SchemaError(Exception):
    """A schema file is malformed; the message names the file and field."""


@dataclass(frozen=True)
class Versions:
    """An inclusive version range; ``None`` means "no versions"."""

    lo: int
    hi: int

    @staticmethod
    def parse(text: str | None, what: str) -> Versions | None:
        if text is None or text == "none":
            return None
        m = re.fullmatch(r"(\d+)(\+|-(\d+))?", text.strip())
        if not m:
            raise SchemaError(f"{what}: bad version range {text!r}")
        lo = int(m.group(1))
        if m.group(2) is None:
            hi = lo
        elif m.group(2) == "+":
            hi = MAX_VERSION
        else:
            hi = int(m.group(3))
        if hi < lo:
            raise SchemaError(f"{what}: empty version range {text!r}")
        return Versions(lo, hi)

    def contains(self, v: int) -> bool:
        return self.lo <= v <= self.hi


def snake(name: str) -> str:
    """Kafka field name -> Python attribute name (``ReplicaDirectoryId`` -> ``replica_directory_id``)."""
    s = name.replace("KRaft", "Kraft")
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    s = s.lower()
    if keyword.iskeyword(s) or s in {"type", "version"}:
        s += "_"
    return s


def module_name(name: str) -> str:
    s = snake(name)
    return s.rstrip("_")


@dataclass
class FieldSpec:
    name: str
    attr: str
    type: str                    # as written, e.g. "[]int32", "string", "LeaderIdAndEpoch"
    versions: Versions | None
    nullable: Versions | None
    tagged: Versions | None
    tag: int | None
    ignorable: bool
    default_raw: object
    flexible_override: Versions | None | str  # "inherit" when not set
    about: str
    struct: StructSpec | None = None        # for struct and []struct types
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def elem_type(self) -> str:
        return self.type[2:] if self.is_array else self.type


@dataclass
class StructSpec:
    name: str            # struct (class) name, e.g. "TopicData"
    path: str            # qualified python name, e.g. "VoteRequest.TopicData"
    func: str            # function suffix, e.g. "VoteRequest_TopicData"
    versions: Versions
    fields: list[FieldSpec]
    children: list[StructSpec] = field(default_factory=list)

    @property
    def tagged_fields(self) -> list[FieldSpec]:
        return sorted((f for f in self.fields if f.tagged is not None), key=lambda f: f.tag or 0)


@dataclass
class MessageSpec:
    name: str
    type: str
    api_key: int | None
    valid: Versions
    flexible: Versions | None
    root: StructSpec
    source: Path
    module: str
    raw: dict[str, Any]

    def all_structs(self) -> list[StructSpec]:
        out: list[StructSpec] = []

        def visit(s: StructSpec) -> None:
            out.append(s)
            for c in s.children:
                visit(c)

        visit(self.root)
        return out


def _load_json(path: Path) -> dict[str, Any]:
    try:
        with path.open(encoding="utf-8") as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        raise SchemaError(f"{path}: not strict JSON: {e}") from None
    if not isinstance(data, dict):
        raise SchemaError(f"{path}: top level must be an object")
    return data


def parse_message(path: Path) -> MessageSpec:
    raw = _load_json(path)
    for key in ("name", "type", "validVersions", "fields"):
        if key not in raw:
            raise SchemaError(f"{path}: missing {key!r}")
    name = raw["name"]
    valid = Versions.parse(raw["validVersions"], f"{path}: validVersions")
    if valid is None:
        raise SchemaError(f"{path}: validVersions may not be none")
    flexible = Versions.parse(raw.get("flexibleVersions", "none"), f"{path}: flexibleVersions")

    common_raw = {s["name"]: s for s in raw.get("commonStructs", [])}
    root = StructSpec(name=name, path=name, func=name, versions=valid, fields=[])
    built_common: dict[str, StructSpec] = {}

    def build_fields(parent: StructSpec, fields_raw: list[dict[str, Any]], ctx: str) -> None:
        seen_tags: set[int] = set()
        for fr in fields_raw:
            where = f"{path}: {ctx}.{fr.get('name', '?')}"
            for key in ("name", "type", "versions"):
                if key not in fr:
                    raise SchemaError(f"{where}: missing {key!r}")
            ftype = fr["type"]
            versions = Versions.parse(fr["versions"], where)
            tagged = Versions.parse(fr.get("taggedVersions"), where)
            tag = fr.get("tag")
            if isinstance(tag, str):  # Kafka's own files sometimes quote tags; Jackson accepts it
                if not tag.isdigit():
                    raise SchemaError(f"{where}: bad tag {tag!r}")
                tag = int(tag)
            if (tagged is None) != (tag is None):
                raise SchemaError(f"{where}: tag and taggedVersions go together")
            if tag is not None:
                if tag in seen_tags:
                    raise SchemaError(f"{where}: duplicate tag {tag}")
                seen_tags.add(tag)
            fo: Versions | None | str = "inherit"
            if "flexibleVersions" in fr:
                fo = Versions.parse(fr["flexibleVersions"], where)
            spec = FieldSpec(
                name=fr["name"], attr=snake(fr["name"]), type=ftype, versions=versions,
                nullable=Versions.parse(fr.get("nullableVersions"), where),
                tagged=tagged, tag=tag, ignorable=bool(fr.get("ignorable", False)),
                default_raw=fr.get("default"), flexible_override=fo,
                about=fr.get("about", ""), raw=fr,
            )
            elem = spec.elem_type
            if elem not in PRIMITIVES:
                if "fields" in fr:
                    if elem in common_raw:
                        raise SchemaError(f"{where}: struct {elem} shadows a common struct")
                    sv = versions or valid
                    child = StructSpec(name=elem, path=f"{root.path}.{elem}",
                                       func=f"{name}_{elem}", versions=sv, fields=[])
                    root.children.append(child)
                    build_fields(child, fr["fields"], f"{ctx}.{fr['name']}")
                    spec.struct = child
                elif elem in common_raw:
                    if elem not in built_common:
                        cr = common_raw[elem]
                        cv = Versions.parse(cr.get("versions", "0+"), where) or valid
                        child = StructSpec(name=elem, path=f"{root.path}.{elem}",
                                           func=f"{name}_{elem}", versions=cv, fields=[])
                        built_common[elem] = child
                        root.children.append(child)
                        build_fields(child, cr["fields"], elem)
                    spec.struct = built_common[elem]
                else:
                    raise SchemaError(f"{where}: unknown type {ftype!r}")
            elif "fields" in fr:
                raise SchemaError(f"{where}: primitive type {ftype!r} cannot have fields")
            parent.fields.append(spec)
        names = [f.attr for f in parent.fields]
        if len(set(names)) != len(names):
            raise SchemaError(f"{path}: {ctx}: duplicate field names")

    build_fields(root, raw["fields"], name)
    # Flatten nested struct definitions so every struct is a direct child of the message
    # class (Kafka also forbids two structs of the same name in one message).
    all_children: list[StructSpec] = []

    def collect(s: StructSpec) -> None:
        for c in s.children:
            all_children.append(c)
            collect(c)

    collect(root)
    names = [c.name for c in all_children]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise SchemaError(f"{path}: struct names used twice: {sorted(dup)}")
    for c in all_children:
        c.children = []
    root.children = all_children
    return MessageSpec(
        name=name, type=raw["type"], api_key=raw.get("apiKey"), valid=valid,
        flexible=flexible, root=root, source=path, module=module_name(name), raw=raw,
    )


def load_all(schema_dir: Path) -> list[MessageSpec]:
    files = sorted(schema_dir.rglob("*.json"))
    if not files:
        raise SchemaError(f"no schema files under {schema_dir}")
    return [parse_message(p) for p in files]
