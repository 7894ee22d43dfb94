"""Turn the model into lines of Python encode/decode code, one body per wire layout.

For every struct and every valid version the emitter resolves all version
conditions (presence, nullability, flexibility, taggedness) to constants and
writes straight-line code; versions whose code comes out identical share one
function (a "layout").  Runs of fixed-width fields become a single
``struct.Struct`` call.  This is what makes the generated codecs fast without any
runtime code generation: the only per-message dispatch is one tuple index by
version.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from codegen.schema import FieldSpec, MessageSpec, StructSpec, Versions

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
PACKABLE = {**{t: (v[2], v[1]) for t, v in FIXED.items()}, "bool": ("?", 1), "uuid": ("16s", 16)}

PY_TYPES = {
    "bool": "bool", "int8": "int", "int16": "int", "uint16": "int", "int32": "int",
    "uint32": "int", "int64": "int", "float64": "float", "string": "str",
    "bytes": "bytes", "records": "Any", "uuid": "uuid.UUID",
}


def view_mode(msg: MessageSpec) -> bool:
    """Decode from a memoryview (records fields stay zero-copy; headers are parsed in
    place at the front of a possibly large frame) rather than from bytes."""
    return msg.type == "header" or any(
        f.type == "records" for s in msg.all_structs() for f in s.fields)


def inside(r: Versions | None, v: int) -> bool:
    return r is not None and r.lo <= v <= r.hi


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
    """Expression true when ``x`` equals the field's default (used for tagged/absent fields).

    A struct is compared by its generated ``_isdef_*`` function (field by field, what
    ``Message.__eq__`` against a fresh default instance answers, without building one)."""
    d = default_expr(f)
    if d == "None":
        return f"{x} is None"
    if f.is_array or f.type == "bytes":
        return f"({x} is not None and len({x}) == 0)"
    if f.struct is not None:
        if f.nullable is not None:   # None is not the default (a default struct is)
            return f"({x} is not None and _isdef_{f.struct.func}({x}))"
        return f"_isdef_{f.struct.func}({x})"
    return f"{x} == {d}"


def is_default_struct_expr(s: StructSpec) -> str:
    """Expression (of ``o``) true when ``o`` equals a default-constructed ``s``: the same
    class, every field at its default, no unknown tagged fields."""
    conds = [f"type(o) is _{s.func}"]
    conds += [is_default_expr(f, f"o.{f.attr}") for f in s.fields]
    conds.append("not o.unknown_tagged_fields")
    return " and ".join(conds)


@dataclass
class Layouts:
    """Deduplicated function bodies for one struct: body text -> index, and per-version index."""

    bodies: list[list[str]] = field(default_factory=list)
    by_version: dict[int, int] = field(default_factory=dict)

    def add(self, v: int, body: list[str]) -> None:
        for i, b in enumerate(self.bodies):
            if b == body:
                self.by_version[v] = i
                return
        self.bodies.append(body)
        self.by_version[v] = len(self.bodies) - 1


class Emitter:
    """Emits code for one message; call :meth:`emit` once."""

    def __init__(self, msg: MessageSpec):
        self.msg = msg
        self.valid = msg.valid
        self.structs_fmt: dict[str, str] = {}   # struct format -> constant name
        self.w: dict[str, Layouts] = {}
        self.r: dict[str, Layouts] = {}
        self.v = msg.valid.lo
        self.d = 0  # nesting depth of inlined struct reads
        # Messages with records fields decode from a memoryview (zero-copy records);
        # all others from bytes, where slices are cheaper.
        self.view_mode = view_mode(msg)
        # requests (and their header) are read as leniently as Kafka reads them (recordbatch/
        # message.py, the *_k readers); everything else strictly
        self.k = "_k" if msg.type == "request" or msg.name == "RequestHeader" else ""

    # -- helpers ------------------------------------------------------------
    def struct_const(self, fmt: str) -> str:
        if fmt not in self.structs_fmt:
            self.structs_fmt[fmt] = f"_S{len(self.structs_fmt)}"
        return self.structs_fmt[fmt]

    def flex(self, f: FieldSpec | None = None) -> bool:
        if f is not None and f.flexible_override != "inherit":
            assert not isinstance(f.flexible_override, str)
            return inside(f.flexible_override, self.v)
        return inside(self.msg.flexible, self.v)

    def nullable(self, f: FieldSpec) -> bool:
        return inside(f.nullable, self.v)

    def tagged_now(self, f: FieldSpec) -> bool:
        return inside(f.tagged, self.v)

    def regular_now(self, f: FieldSpec) -> bool:
        return inside(f.versions, self.v) and not self.tagged_now(f)

    def child_fn(self, kind: str, s: StructSpec) -> str:
        table = self.w if kind == "w" else self.r
        return f"_{kind}_{s.func}_{table[s.func].by_version[self.v]}"

    def what(self, s: StructSpec, f: FieldSpec) -> str:
        return repr(f"{s.path}.{f.attr}")

    def packable(self, f: FieldSpec) -> bool:
        return (not f.is_array and f.struct is None and f.type in PACKABLE
                and self.regular_now(f))

    # -- writing -------------------------------------------------------------
    def write_value(self, s: StructSpec, f: FieldSpec, x: str, out: str, flex: bool) -> list[str]:
        nullable = self.nullable(f)
        what = self.what(s, f)
        lines: list[str] = []
        if f.is_array:
            fn = "w_ccount" if flex else "w_count"
            lines.append(f"{fn}({out}, {x}, {nullable}, {what}, v)")
            if f.elem_type in FIXED and f.elem_type != "float64":
                ch = FIXED[f.elem_type][2]
                body = [f"{out} += struct.pack('>%d{ch}' % len({x}), *{x})"]
            elif f.struct is not None:
                body = [f"w_{f.attr} = {self.child_fn('w', f.struct)}",
                        f"for e_{f.attr} in {x}:", f"    w_{f.attr}(e_{f.attr}, {out}, v)"]
            else:
                body = [f"for e_{f.attr} in {x}:"] + [
                    "    " + ln for ln in self._write_scalar(f.elem_type, f"e_{f.attr}", out, flex, False, what)]
            if f.nullable is not None:  # the attribute may hold None (refused above if not nullable now)
                lines.append(f"if {x} is not None:")
                lines += ["    " + ln for ln in body]
            else:
                lines += body
            return lines
        if f.struct is not None:
            fn = self.child_fn("w", f.struct)
            if f.nullable is not None:
                if nullable:
                    # Kafka marks a nullable struct with an int8 (-1 null, 1 present), but
                    # inside a tagged field with an unsigned varint (0 null, 1 present)
                    null = "\\x00" if self.tagged_now(f) else "\\xff"
                    lines += [f"if {x} is None:", f"    {out} += b'{null}'", "else:",
                              f"    {out} += b'\\x01'", f"    {fn}({x}, {out}, v)"]
                else:
                    lines += [f"if {x} is None:",
                              f"    raise UnsupportedVersionError({what} + ' is not nullable in version %d' % v)",
                              f"{fn}({x}, {out}, v)"]
            else:
                lines.append(f"{fn}({x}, {out}, v)")
            return lines
        return self._write_scalar(f.type, x, out, flex, nullable, what)

    def _write_scalar(self, t: str, x: str, out: str, flex: bool, nullable: bool,
                      what: str) -> list[str]:
        if t == "bool":
            return [f"{out}.append(1 if {x} else 0)"]
        if t in FIXED:
            return [f"{out} += {FIXED[t][0]}.pack({x})"]
        if t == "uuid":
            return [f"{out} += {x}.bytes"]
        if t == "string":
            fn = "w_cstr" if flex else "w_str"
        elif t in ("bytes", "records"):
            fn = "w_cbytes" if flex else "w_bytes"
        else:
            raise ValueError(f"cannot write type {t}")
        return [f"{fn}({out}, {x}, {nullable}, {what}, v)"]

    def write_struct(self, s: StructSpec) -> list[str]:
        lines: list[str] = []
        run: list[FieldSpec] = []

        def flush() -> None:
            if not run:
                return
            if len(run) == 1:
                lines.extend(self.write_value(s, run[0], f"o.{run[0].attr}", "out", self.flex(run[0])))
            else:
                fmt = ">" + "".join(PACKABLE[f.type][0] for f in run)
                args = ", ".join(f"o.{f.attr}.bytes" if f.type == "uuid" else f"o.{f.attr}"
                                 for f in run)
                lines.append(f"out += {self.struct_const(fmt)}.pack({args})")
            run.clear()

        for f in s.fields:
            x = f"o.{f.attr}"
            if self.packable(f):
                run.append(f)
                continue
            if self.regular_now(f):
                flush()
                lines += self.write_value(s, f, x, "out", self.flex(f))
            elif f.tagged is None and not inside(f.versions, self.v) and not f.ignorable:
                lines.append(f"if not ({is_default_expr(f, x)}):")
                lines.append(f"    raise absent_error({self.what(s, f)}, v)")
        flush()
        tfs = s.tagged_fields
        if self.flex():
            known = [f for f in tfs if self.tagged_now(f)]
            if not known:
                lines.append("if o.unknown_tagged_fields:")
                lines.append("    w_tagged(out, sorted(o.unknown_tagged_fields, key=_tag_key))")
                lines.append("else:")
                lines.append("    out.append(0)")
            else:
                lines.append("tagged: list[tuple[int, bytes]] = []")
                for f in known:
                    x = f"o.{f.attr}"
                    lines.append(f"if not ({is_default_expr(f, x)}):")
                    lines.append("    t = bytearray()")
                    lines += ["    " + ln for ln in self.write_value(s, f, x, "t", True)]
                    lines.append(f"    tagged.append(({f.tag}, bytes(t)))")
                lines.append("if o.unknown_tagged_fields:")
                lines.append("    tagged.extend(o.unknown_tagged_fields)")
                lines.append("    tagged.sort(key=_tag_key)")
                lines.append("w_tagged(out, tagged)")
        for f in tfs:
            if inside(f.versions, self.v) or f.ignorable or self.tagged_now(f):
                continue
            x = f"o.{f.attr}"
            lines.append(f"if not ({is_default_expr(f, x)}):")
            lines.append(f"    raise absent_error({self.what(s, f)}, v)")
        if not self.flex() and any(self.tagged_now(f) for f in tfs):
            raise ValueError(f"{s.path}: tagged fields in a non-flexible version")
        return lines or ["pass"]

    # -- reading -------------------------------------------------------------
    # Nested struct reads are inlined into the parent's code down to this depth: a Python
    # function call plus a returned tuple per element is most of a small struct's cost.
    INLINE_DEPTH = 4

    def L(self, name: str) -> str:  # noqa: N802 - a local variable name for this nesting depth
        return f"{name}{self.d}"

    def read_value(self, s: StructSpec, f: FieldSpec, target: str, flex: bool) -> list[str]:
        nullable = self.nullable(f)
        n = self.L("n")
        lines: list[str] = []
        if f.is_array:
            if flex:
                # inline the common case: a count below 127 in one byte, bounded by what remains
                lines += [f"{n} = buf[pos] - 1", f"if 0 <= {n} < 0x7f and {n} < blen - pos:",
                          "    pos += 1", "else:",
                          f"    {n}, pos = r_ccount(buf, pos, {nullable})"]
            else:
                lines.append(f"{n}, pos = r_count{self.k}(buf, pos, {nullable})")
            body: list[str] = []
            if f.elem_type in FIXED and f.elem_type != "float64":
                _, size, ch = FIXED[f.elem_type]
                body.append(f"{target} = list(struct.unpack_from('>%d{ch}' % {n}, buf, pos))")
                body.append(f"pos += {size} * {n}")
            else:
                a, e = self.L(f"a_{s.name}_{f.attr}_"), self.L(f"e_{s.name}_{f.attr}_")
                body.append(f"{a} = []")
                if f.struct is not None and self.d < self.INLINE_DEPTH:
                    body.append(f"for _ in range({n}):")
                    body += ["    " + ln for ln in self.read_struct_inline(f.struct)]
                    body.append(f"    {a}.append({self.obj(f.struct, self.d + 1)})")
                elif f.struct is not None:
                    r = self.L(f"r_{s.name}_{f.attr}_")
                    body.append(f"{r} = {self.child_fn('r', f.struct)}")
                    body.append(f"for _ in range({n}):")
                    body.append(f"    {e}, pos = {r}(buf, pos, v)")
                    body.append(f"    {a}.append({e})")
                else:
                    body.append(f"for _ in range({n}):")
                    body += ["    " + ln for ln in self._read_scalar(f.elem_type, e, flex, False)]
                    body.append(f"    {a}.append({e})")
                body.append(f"{target} = {a}")
            if nullable:
                lines += [f"if {n} < 0:", f"    {target} = None", "else:"]
                lines += ["    " + ln for ln in body]
            else:
                lines += body
            return lines
        if f.struct is not None:
            fn = self.child_fn("r", f.struct)
            m = self.L("m")
            if nullable and self.tagged_now(f):
                # Kafka writes an unsigned varint, 0 for null and 1 for present; kraftnode
                # before 2026-12 wrote int8 -1 for null here, which is read as null too
                lines += [f"{m} = buf[pos]", "pos += 1", f"if {m} == 0 or {m} == 0xff:",
                          f"    {target} = None", "else:", f"    {target}, pos = {fn}(buf, pos, v)"]
            elif nullable:
                lines += [f"({m},) = I8.unpack_from(buf, pos)", "pos += 1", f"if {m} < 0:",
                          f"    {target} = None", "else:", f"    {target}, pos = {fn}(buf, pos, v)"]
            else:
                lines.append(f"{target}, pos = {fn}(buf, pos, v)")
            return lines
        return self._read_scalar(f.type, target, flex, nullable)

    def _read_scalar(self, t: str, target: str, flex: bool, nullable: bool) -> list[str]:
        if t == "bool":
            return [f"{target} = buf[pos] != 0", "pos += 1"]
        if t in FIXED:
            name, size, _ = FIXED[t]
            return [f"({target},) = {name}.unpack_from(buf, pos)", f"pos += {size}"]
        if t == "uuid":
            return [f"{target}, pos = r_uuid(buf, pos)"]
        fn = {"string": "str", "bytes": "bytes", "records": "records"}[t]
        # the lenient readers differ from the strict ones for classic strings, bytes and
        # records, and for compact strings (compact bytes are read alike)
        k = self.k if t == "string" or not flex else ""
        call = f"{target}, pos = r_{'c' if flex else ''}{fn}{k}(buf, pos, {nullable})"
        if t == "string" and flex:
            # inline the common case: a short, non-null compact string (1-byte length)
            n = self.L("n")
            errors = ", 'replace'" if self.k else ""
            return [f"{n} = buf[pos]", f"if 0 < {n} < 0x80 and pos + {n} <= blen:",
                    (f"    {target} = str(buf[pos + 1:pos + {n}], 'utf-8'{errors})" if self.view_mode
                     else f"    {target} = buf[pos + 1:pos + {n}].decode({'' if not errors else repr('utf-8') + errors})"),
                    f"    pos += {n}", "else:", f"    {call}"]
        return [call]

    def read_tags_as_kafka(self, s: StructSpec, o: str) -> list[str]:
        """A request's tagged fields, read as Kafka's generated ``read`` reads them: a known
        tag's value is read without looking at its declared size (reading goes on where the
        value ends); a known tag outside the versions its field is tagged in is refused ("Tag N
        is not valid for version V"); an unknown tag is kept aside and skipped by its size."""
        ntags, tag, size, end = self.L("ntags"), self.L("tag"), self.L("size"), self.L("end")
        block = [f"{ntags}, pos = read_uvarint(buf, pos)", f"for _ in range({ntags}):",
                 f"    {tag}, pos = read_uvarint(buf, pos)", f"    {size}, pos = read_uvarint(buf, pos)"]
        kw = "if"
        for f in s.tagged_fields:
            block.append(f"    {kw} {tag} == {f.tag}:")
            kw = "elif"
            if self.tagged_now(f) and inside(f.versions, self.v):
                block += ["        " + ln for ln in self.read_value(s, f, f"{o}.{f.attr}", True)]
            else:
                block.append(f"        raise DecodeError(f'Tag {f.tag} is not valid for version {{v}}')")
        ind = "    "
        if s.tagged_fields:
            block.append("    else:")
            ind = "        "
        block.append(f"{ind}{end} = pos + {size}")
        block.append(f"{ind}if {end} > len(buf):")
        block.append(f"{ind}    raise DecodeError(f'tagged field of {{{size}}} bytes exceeds the remaining "
                     f"{{len(buf) - pos}}')")
        block.append(f"{ind}if {o}.unknown_tagged_fields is None:")
        block.append(f"{ind}    {o}.unknown_tagged_fields = []")
        block.append(f"{ind}{o}.unknown_tagged_fields.append(({tag}, bytes(buf[pos:{end}])))")
        block.append(f"{ind}pos = {end}")
        # fast path: most structs carry no tagged fields at all (a single 0 byte)
        return ["if buf[pos] == 0:", "    pos += 1", "else:"] + ["    " + ln for ln in block]

    def read_struct_inline(self, s: StructSpec) -> list[str]:
        """The body of ``s``'s reader for this version, reading into ``o<depth+1>``."""
        self.d += 1
        try:
            return self.read_struct(s, inline=True)
        finally:
            self.d -= 1

    def obj(self, s: StructSpec, depth: int) -> str:
        """The local holding the struct being read (typed per struct, for mypy)."""
        return "o0" if depth == 0 else f"o{depth}_{s.name}"

    def read_struct(self, s: StructSpec, inline: bool = False) -> list[str]:
        o = self.obj(s, self.d)
        lines: list[str] = [f"{o} = _new(_{s.func})"]
        run: list[FieldSpec] = []

        def flush() -> None:
            if not run:
                return
            if len(run) == 1:
                lines.extend(self.read_value(s, run[0], f"{o}.{run[0].attr}", self.flex(run[0])))
            else:
                fmt = ">" + "".join(PACKABLE[f.type][0] for f in run)
                size = sum(PACKABLE[f.type][1] for f in run)
                targets = [self.L(f"_u{i}_") if f.type == "uuid" else f"{o}.{f.attr}"
                           for i, f in enumerate(run)]
                lines.append(f"({', '.join(targets)},) = {self.struct_const(fmt)}.unpack_from(buf, pos)")
                lines.append(f"pos += {size}")
                for i, f in enumerate(run):
                    if f.type == "uuid":
                        u = self.L(f"_u{i}_")
                        lines.append(f"{o}.{f.attr} = _UUIDS.get({u}) or uuid_from_bytes({u})")
            run.clear()

        for f in s.fields:
            target = f"{o}.{f.attr}"
            if self.packable(f):
                run.append(f)
            elif self.regular_now(f):
                flush()
                lines += self.read_value(s, f, target, self.flex(f))
            else:
                flush()
                lines.append(f"{target} = {default_expr(f)}")
        flush()
        lines.append(f"{o}.unknown_tagged_fields = None")
        if self.flex() and self.k:
            lines += self.read_tags_as_kafka(s, o)
        elif self.flex():
            known = [f for f in s.tagged_fields if self.tagged_now(f)]
            ntags, tag, end = self.L("ntags"), self.L("tag"), self.L("end")
            block = [f"{ntags}, pos = read_uvarint(buf, pos)", f"for _ in range({ntags}):",
                     f"    {tag}, {end}, pos = r_tag_header(buf, pos)"]
            kw = "if"
            for f in known:
                block.append(f"    {kw} {tag} == {f.tag}:")
                kw = "elif"
                block += ["        " + ln for ln in self.read_value(s, f, f"{o}.{f.attr}", True)]
                block.append(f"        if pos != {end}:")
                block.append(f"            raise DecodeError('tagged field {s.path}.{f.attr} has the wrong size')")
            ind = "    "
            if known:
                block.append("    else:")
                ind = "        "
            block.append(f"{ind}if {o}.unknown_tagged_fields is None:")
            block.append(f"{ind}    {o}.unknown_tagged_fields = []")
            block.append(f"{ind}{o}.unknown_tagged_fields.append(({tag}, bytes(buf[pos:{end}])))")
            block.append(f"{ind}pos = {end}")
            # fast path: most structs carry no tagged fields at all (a single 0 byte)
            lines.append("if buf[pos] == 0:")
            lines.append("    pos += 1")
            lines.append("else:")
            lines += ["    " + ln for ln in block]
        if not inline:
            lines.append(f"return {o}, pos")
            if any("blen" in ln for ln in lines):
                lines.insert(0, "blen = len(buf)")
        return lines

    # -- driver ----------------------------------------------------------------
    def emit(self, structs_children_first: list[StructSpec]) -> None:
        for s in structs_children_first:
            self.w[s.func] = Layouts()
            self.r[s.func] = Layouts()
            for v in range(self.valid.lo, self.valid.hi + 1):
                self.v = v
                self.w[s.func].add(v, self.write_struct(s))
                self.r[s.func].add(v, self.read_struct(s))
