"""Turn one field of the model into lines of Python encode/decode code.

The templates lay out modules, classes and functions; this module decides, per
Kafka type, which bytes are written and read.  Keeping type knowledge in Python
(rather than in Jinja macros) keeps both readable.
"""

from __future__ import annotations

from codegen.schema import MAX_VERSION, FieldSpec, MessageSpec, StructSpec, Versions

FIXED = {
    # type: (struct name in recordbatch.wire, size, struct format char)
    "int8": ("I8", 1, "b"),
    "int16": ("I16", 2, "h"),
    "uint16": ("U16", 2, "H"),
    "int32": ("I32", 4, "i"),
    "uint32": ("U32", 4, "I"),
    "int64": ("I64", 8, "q"),
    "float64": ("F64", 8, "d"),
}

PY_TYPES = {
    "bool": "bool", "int8": "int", "int16": "int", "uint16": "int", "int32": "int",
    "uint32": "int", "int64": "int", "float64": "float", "string": "str",
    "bytes": "bytes", "records": "Any", "uuid": "uuid.UUID",
}


def cond(r: Versions | None, valid: Versions) -> str:
    """Python expression for "v is in r", simplified against the message's valid range."""
    if r is None:
        return "False"
    parts = []
    if r.lo > valid.lo:
        parts.append(f"v >= {r.lo}")
    if r.hi < valid.hi and r.hi < MAX_VERSION:
        parts.append(f"v <= {r.hi}")
    if r.lo > valid.hi or r.hi < valid.lo:
        return "False"
    return " and ".join(parts) if parts else "True"


def py_type(f: FieldSpec) -> str:
    elem = f.struct.func if f.struct else PY_TYPES[f.elem_type]
    t = f"_{elem}" if f.struct else elem
    if f.is_array:
        t = f"list[{t}]"
    if f.nullable is not None or f.type == "records":
        t = f"{t} | None"
    return t


def default_expr(f: FieldSpec) -> str:
    """A fresh default value, as Kafka's generated Java classes initialise it."""
    d = f.default_raw
    if isinstance(d, str):
        d_s: str | None = d.strip()
    elif d is None:
        d_s = None
    else:
        d_s = str(d).lower() if isinstance(d, bool) else str(d)
    if d_s == "null":
        if f.nullable is None:
            raise ValueError(f"{f.name}: default null on a non-nullable field")
        return "None"
    if f.is_array:
        if d_s not in (None, ""):
            raise ValueError(f"{f.name}: arrays only take null defaults")
        return "[]"
    if f.struct is not None:
        return f"_{f.struct.func}()"
    t = f.type
    if t == "bool":
        if d_s in (None, "", "false"):
            return "False"
        if d_s == "true":
            return "True"
        raise ValueError(f"{f.name}: bad bool default {d!r}")
    if t in FIXED and t != "float64":
        return str(int(d_s, 0)) if d_s not in (None, "") else "0"
    if t == "float64":
        return repr(float(d_s)) if d_s not in (None, "") else "0.0"
    if t == "string":
        return repr(d_s if d_s is not None and d is not None else "")
    if t == "uuid":
        if d_s not in (None, ""):
            raise ValueError(f"{f.name}: uuid defaults are not supported")
        return "ZERO_UUID"
    if t == "bytes":
        return 'b""'
    if t == "records":
        return "None"
    raise ValueError(f"{f.name}: no default for type {t}")


def is_default_expr(f: FieldSpec, x: str) -> str:
    """Expression true when ``x`` equals the field's default (used for tagged/absent fields)."""
    d = default_expr(f)
    if d == "None":
        return f"{x} is None"
    if f.is_array:
        return f"({x} is not None and len({x}) == 0)"
    if f.type in ("bytes",):
        return f"({x} is not None and len({x}) == 0)"
    return f"{x} == {d}"


def guard(c: str, block: list[str]) -> list[str]:
    """``block`` under ``if c:``, simplified when ``c`` is a constant."""
    if c == "True":
        return block
    if c == "False":
        return []
    return [f"if {c}:"] + ["    " + ln for ln in block]


class Emitter:
    def __init__(self, msg: MessageSpec):
        self.msg = msg
        self.valid = msg.valid
        # "True"/"False" when every valid version agrees, else the name of a local.
        c = cond(msg.flexible, msg.valid)
        self.flex = c if c in ("True", "False") else "flex"

    def flex_setup(self) -> list[str]:
        return [] if self.flex != "flex" else [f"flex = {cond(self.msg.flexible, self.valid)}"]

    def flex_expr(self, f: FieldSpec) -> str:
        if f.flexible_override == "inherit":
            return self.flex
        assert not isinstance(f.flexible_override, str)
        return cond(f.flexible_override, self.valid)

    def what(self, s: StructSpec, f: FieldSpec) -> str:
        return f"{s.path}.{f.attr}"

    # -- writing -------------------------------------------------------------
    def write_value(self, s: StructSpec, f: FieldSpec, x: str, out: str, flex: str,
                    indent: str) -> list[str]:
        nullable = cond(f.nullable, self.valid)
        what = repr(self.what(s, f))
        lines: list[str] = []
        if f.is_array:
            count_c = f"w_ccount({out}, {x}, {nullable}, {what}, v)"
            count = f"w_count({out}, {x}, {nullable}, {what}, v)"
            lines += self._flex_branch(flex, [count_c], [count])
            elem_lines = self._write_elem(f, "e", out, flex, s)
            if f.elem_type in FIXED and f.elem_type != "float64":
                _, size, ch = FIXED[f.elem_type]
                body = [f"{out} += struct.pack('>%d{ch}' % len({x}), *{x})"]
            else:
                body = [f"for e in {x}:"] + ["    " + ln for ln in elem_lines]
            if f.nullable is not None:
                lines.append(f"if {x} is not None:")
                lines += ["    " + ln for ln in body]
            else:
                lines += body
            return [indent + ln for ln in lines]
        if f.struct is not None:
            if f.nullable is not None:
                lines.append(f"if {x} is None:")
                lines.append(f"    if not ({nullable}):")
                lines.append(f"        raise UnsupportedVersionError({what} + ' is not nullable in version %d' % v)")
                lines.append(f"    {out} += b'\\xff'")
                lines.append("else:")
                lines.append(f"    if {nullable}:")
                lines.append(f"        {out} += b'\\x01'")
                lines.append(f"    _w_{f.struct.func}({x}, {out}, v)")
            else:
                lines.append(f"_w_{f.struct.func}({x}, {out}, v)")
            return [indent + ln for ln in lines]
        lines += self._write_scalar(f.type, x, out, flex, nullable, what)
        return [indent + ln for ln in lines]

    def _write_elem(self, f: FieldSpec, x: str, out: str, flex: str, s: StructSpec) -> list[str]:
        if f.struct is not None:
            return [f"_w_{f.struct.func}({x}, {out}, v)"]
        return self._write_scalar(f.elem_type, x, out, flex, "False", repr(self.what(s, f) + "[]"))

    def _flex_branch(self, flex: str, a: list[str], b: list[str]) -> list[str]:
        if flex == "True":
            return a
        if flex == "False":
            return b
        return [f"if {flex}:"] + ["    " + ln for ln in a] + ["else:"] + ["    " + ln for ln in b]

    def _write_scalar(self, t: str, x: str, out: str, flex: str, nullable: str, what: str) -> list[str]:
        if t == "bool":
            return [f"{out}.append(1 if {x} else 0)"]
        if t in FIXED:
            return [f"{out} += {FIXED[t][0]}.pack({x})"]
        if t == "uuid":
            return [f"{out} += {x}.bytes"]
        if t == "string":
            return self._flex_branch(flex, [f"w_cstr({out}, {x}, {nullable}, {what}, v)"],
                                     [f"w_str({out}, {x}, {nullable}, {what}, v)"])
        if t in ("bytes", "records"):
            return self._flex_branch(flex, [f"w_cbytes({out}, {x}, {nullable}, {what}, v)"],
                                     [f"w_bytes({out}, {x}, {nullable}, {what}, v)"])
        raise ValueError(f"cannot write type {t}")

    def write_struct(self, s: StructSpec) -> list[str]:
        lines: list[str] = self.flex_setup()
        for f in s.fields:
            present = f.versions
            tagged = f.tagged
            regular = present
            if tagged is not None and present is not None:
                # Tagged in taggedVersions; a regular field in any remaining versions.
                if tagged.lo <= present.lo and tagged.hi >= present.hi:
                    regular = None
            x = f"o.{f.attr}"
            if regular is not None:
                c = cond(regular, self.valid)
                if tagged is not None:
                    c = f"({c}) and not ({cond(tagged, self.valid)})"
                body = self.write_value(s, f, x, "out", self.flex_expr(f), "    ")
                if c == "True":
                    lines += [ln[4:] for ln in body]
                    continue
                lines.append(f"if {c}:")
                lines += body
                if not f.ignorable and tagged is None:
                    lines.append(f"elif not ({is_default_expr(f, x)}):")
                    lines.append(f"    raise absent_error({self.what(s, f)!r}, v)")
            elif tagged is None and not f.ignorable:
                lines.append(f"if not ({is_default_expr(f, x)}):")
                lines.append(f"    raise absent_error({self.what(s, f)!r}, v)")
        tfs = s.tagged_fields
        if self.flex != "False":
            block = ["tagged: list[tuple[int, bytes]] = []"]
            for f in tfs:
                x = f"o.{f.attr}"
                assert f.tagged is not None
                c = cond(f.tagged, self.valid)
                block.append(f"if ({c}) and not ({is_default_expr(f, x)}):")
                block.append("    t = bytearray()")
                block += self.write_value(s, f, x, "t", "True", "    ")
                block.append(f"    tagged.append(({f.tag}, bytes(t)))")
                if not f.ignorable:
                    block.append(f"elif not ({c}) and not ({is_default_expr(f, x)}):")
                    block.append(f"    raise absent_error({self.what(s, f)!r}, v)")
            block.append("if o.unknown_tagged_fields:")
            block.append("    tagged.extend(o.unknown_tagged_fields)")
            block.append("    tagged.sort(key=_tag_key)")
            block.append("w_tagged(out, tagged)")
            lines += guard(self.flex, block)
        elif tfs:
            raise ValueError(f"{s.path}: tagged fields in a message without flexible versions")
        if not lines:
            lines.append("pass")
        return lines

    # -- reading -------------------------------------------------------------
    def read_value(self, s: StructSpec, f: FieldSpec, target: str, flex: str) -> list[str]:
        nullable = cond(f.nullable, self.valid)
        lines: list[str] = []
        if f.is_array:
            lines += self._flex_branch(flex, [f"n, pos = r_ccount(buf, pos, {nullable})"],
                                       [f"n, pos = r_count(buf, pos, {nullable})"])
            lines.append("if n < 0:")
            lines.append(f"    {target} = None")
            lines.append("else:")
            if f.elem_type in FIXED and f.elem_type != "float64":
                _, size, ch = FIXED[f.elem_type]
                lines.append(f"    {target} = list(struct.unpack_from('>%d{ch}' % n, buf, pos))")
                lines.append(f"    pos += {size} * n")
            else:
                lines.append("    a = []")
                lines.append("    for _ in range(n):")
                if f.struct is not None:
                    lines.append(f"        e, pos = _r_{f.struct.func}(buf, pos, v)")
                else:
                    lines += ["        " + ln for ln in self._read_scalar(f.elem_type, "e", flex, "False")]
                lines.append("        a.append(e)")
                lines.append(f"    {target} = a")
            return lines
        if f.struct is not None:
            if f.nullable is not None:
                lines.append(f"if {nullable}:")
                lines.append("    (m,) = I8.unpack_from(buf, pos)")
                lines.append("    pos += 1")
                lines.append("else:")
                lines.append("    m = 1")
                lines.append("if m < 0:")
                lines.append(f"    {target} = None")
                lines.append("else:")
                lines.append(f"    {target}, pos = _r_{f.struct.func}(buf, pos, v)")
            else:
                lines.append(f"{target}, pos = _r_{f.struct.func}(buf, pos, v)")
            return lines
        return self._read_scalar(f.type, target, flex, nullable)

    def _read_scalar(self, t: str, target: str, flex: str, nullable: str) -> list[str]:
        if t == "bool":
            return [f"{target} = buf[pos] != 0", "pos += 1"]
        if t in FIXED:
            name, size, _ = FIXED[t]
            return [f"({target},) = {name}.unpack_from(buf, pos)", f"pos += {size}"]
        if t == "uuid":
            return [f"{target}, pos = r_uuid(buf, pos)"]
        fn = {"string": "str", "bytes": "bytes", "records": "records"}[t]
        return self._flex_branch(flex, [f"{target}, pos = r_c{fn}(buf, pos, {nullable})"],
                                 [f"{target}, pos = r_{fn}(buf, pos, {nullable})"])

    def read_struct(self, s: StructSpec) -> list[str]:
        lines: list[str] = [f"o = _new(_{s.func})"] + self.flex_setup()
        for f in s.fields:
            present = f.versions
            tagged = f.tagged
            regular = present
            if tagged is not None and present is not None:
                if tagged.lo <= present.lo and tagged.hi >= present.hi:
                    regular = None
            target = f"o.{f.attr}"
            if regular is None:
                lines.append(f"{target} = {default_expr(f)}")
                continue
            c = cond(regular, self.valid)
            if tagged is not None:
                c = f"({c}) and not ({cond(tagged, self.valid)})"
            body = self.read_value(s, f, target, self.flex_expr(f))
            if c == "True":
                lines += body
            else:
                lines.append(f"if {c}:")
                lines += ["    " + ln for ln in body]
                lines.append("else:")
                lines.append(f"    {target} = {default_expr(f)}")
        lines.append("o.unknown_tagged_fields = None")
        if self.flex != "False":
            block = ["ntags, pos = read_uvarint(buf, pos)", "for _ in range(ntags):",
                     "    tag, end, pos = r_tag_header(buf, pos)"]
            first = True
            for f in s.tagged_fields:
                assert f.tagged is not None
                c = cond(f.tagged, self.valid)
                kw = "if" if first else "elif"
                first = False
                block.append(f"    {kw} tag == {f.tag} and ({c}):")
                block += ["        " + ln for ln in self.read_value(s, f, f"o.{f.attr}", "True")]
                block.append("        if pos != end:")
                block.append(f"            raise DecodeError('tagged field {s.path}.{f.attr} has the wrong size')")
            ind = "    "
            if not first:
                block.append("    else:")
                ind = "        "
            block.append(f"{ind}if o.unknown_tagged_fields is None:")
            block.append(f"{ind}    o.unknown_tagged_fields = []")
            block.append(f"{ind}o.unknown_tagged_fields.append((tag, bytes(buf[pos:end])))")
            block.append(f"{ind}pos = end")
            lines += guard(self.flex, block)
        lines.append("return o, pos")
        return lines
