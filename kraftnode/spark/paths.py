"""Find the files a ``kraft-log`` read covers, and which replica each belongs to.

A path may be a segment (``*.log``) or snapshot (``*.checkpoint``) file, a
``__cluster_metadata-0`` partition directory, a metadata log dir (the directory
holding ``meta.properties`` and ``__cluster_metadata-0``), or any directory above
log dirs (e.g. a ``kraftnode dev-cluster`` directory with one log dir per node);
globs are expanded.  Anything else is an error naming the path -- a path that
matches nothing is never silently ignored.

A path is a local path (relative ones are made absolute here, on the driver, so
they mean the same on every executor), a ``file://`` URI, or a URI of any filesystem
Hadoop's ``FileSystem`` reads with the session's configuration (``hdfs://``,
``s3a://``, ``abfs://``, ``gs://``, ``viewfs://`` ...).  Local paths are listed with
``os``; the others through the driver JVM's Hadoop ``FileSystem`` (py4j), which is
why discovering them needs a Spark session.  Replica discovery (``meta.properties``,
``node<N>`` directories) is the same code on both.
"""

from __future__ import annotations

import glob
import os
import posixpath
import re
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import unquote, urlparse

from kraftnode.errors import LocalError
from kraftnode.log.meta_properties import MetaPropertiesError, parse_meta_properties
from kraftnode.log.metadata_log import METADATA_PARTITION_DIR as PARTITION_DIR
from kraftnode.log.segment import parse_segment_file_name
from kraftnode.log.snapshot import parse_snapshot_file_name

__all__ = ["InputFile", "PathError", "discover", "PARTITION_DIR", "is_local", "local_path", "needs_jvm"]

_MAX_DEPTH = 4
_NODE_IN_PATH = re.compile(r"(?:node|replica|broker|controller)[-_]?(\d+)", re.IGNORECASE)
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")


class PathError(LocalError, ValueError):
    """A path given to the ``kraft-log`` source is not something it can read."""


@dataclass(frozen=True, order=True)
class InputFile:
    replica: int | None
    path: str
    file_type: str  # segment | snapshot | bootstrap
    sort_key: int = 0
    size: int = 0


def scheme_of(path: str) -> str | None:
    m = _SCHEME.match(path)
    if m is None or len(m.group(1)) == 1:  # C:\... is a Windows drive, not a scheme
        return None
    return m.group(1).lower()


def is_local(path: str) -> bool:
    """A plain path or a ``file:`` URI: opened with ``open()`` wherever it is read."""
    return scheme_of(path) in (None, "file")


def needs_jvm(paths: list[str]) -> bool:
    return not all(is_local(p) for p in paths)


def local_path(path: str) -> str:
    """A plain absolute path for a plain path (made absolute against this process's working
    directory) or a ``file:`` URI."""
    if scheme_of(path) == "file":
        u = urlparse(path)
        path = unquote(u.path)
    return os.path.abspath(path)


class _FS(Protocol):
    label: str

    def status(self, path: str) -> tuple[bool, int] | None: ...  # (is_dir, size) or None: absent
    def list(self, path: str) -> list[tuple[str, bool, int]]: ...  # (name, is_dir, size), sorted
    def read(self, path: str, limit: int) -> bytes: ...
    def glob(self, pattern: str) -> list[str]: ...


class _Local:
    label = "the local filesystem"

    def status(self, path: str) -> tuple[bool, int] | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return (os.path.isdir(path), st.st_size)

    def list(self, path: str) -> list[tuple[str, bool, int]]:
        out = []
        try:
            entries = list(os.scandir(path))
        except OSError:
            return []
        for e in entries:
            try:
                is_dir = e.is_dir(follow_symlinks=True)
                size = 0 if is_dir else e.stat().st_size
            except OSError:
                continue
            out.append((e.name, is_dir, size))
        return sorted(out)

    def read(self, path: str, limit: int) -> bytes:
        with open(path, "rb") as f:
            return f.read(limit)

    def glob(self, pattern: str) -> list[str]:
        return sorted(glob.glob(pattern))


class _Hadoop:
    """Hadoop's ``FileSystem`` of the driver JVM, through py4j."""

    def __init__(self, spark: Any, sample: str) -> None:
        self.jvm = spark._jvm
        self.conf = spark._jsc.hadoopConfiguration()
        try:
            self.fs = self.jvm.org.apache.hadoop.fs.Path(sample).getFileSystem(self.conf)
        except Exception as e:  # py4j: no FileSystem for the scheme, unknown host...
            raise PathError(f"{sample}: no filesystem Spark can read ({_java_message(e)})") from None
        self.label = f"filesystem {self.fs.getUri().toString()}"

    def _path(self, p: str) -> Any:
        return self.jvm.org.apache.hadoop.fs.Path(p)

    def status(self, path: str) -> tuple[bool, int] | None:
        try:
            st = self.fs.getFileStatus(self._path(path))
        except Exception as e:
            if "FileNotFoundException" in _java_class(e):
                return None
            raise PathError(f"{path}: cannot read on {self.label}: {_java_message(e)}") from None
        return (bool(st.isDirectory()), int(st.getLen()))

    def list(self, path: str) -> list[tuple[str, bool, int]]:
        try:
            sts = self.fs.listStatus(self._path(path))
        except Exception as e:
            raise PathError(f"{path}: cannot list on {self.label}: {_java_message(e)}") from None
        return sorted((st.getPath().getName(), bool(st.isDirectory()), int(st.getLen())) for st in sts)

    def read(self, path: str, limit: int) -> bytes:
        stream = self.fs.open(self._path(path))
        try:
            size = min(limit, int(self.fs.getFileStatus(self._path(path)).getLen()))
            data = self.jvm.org.apache.commons.io.IOUtils.toByteArray(stream, size) if size else b""
            return bytes(data)
        finally:
            stream.close()

    def glob(self, pattern: str) -> list[str]:
        try:
            sts = self.fs.globStatus(self._path(pattern))
        except Exception as e:
            raise PathError(f"{pattern}: cannot list on {self.label}: {_java_message(e)}") from None
        return sorted(self.fs.makeQualified(st.getPath()).toString() for st in (sts or []))

    def qualify(self, path: str) -> str:
        return str(self.fs.makeQualified(self._path(path)).toString())


def _java_class(e: Exception) -> str:
    j = getattr(e, "java_exception", None)
    return str(j.getClass().getName()) if j is not None else type(e).__name__


def _java_message(e: Exception) -> str:
    j = getattr(e, "java_exception", None)
    if j is not None:
        msg = j.getMessage()
        return f"{j.getClass().getSimpleName()}: {str(msg).splitlines()[0] if msg else ''}".rstrip(": ")
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def _join(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name


def _parent(path: str) -> str:
    return posixpath.dirname(path.rstrip("/")) if "://" in path else os.path.dirname(path.rstrip("/"))


def _name(path: str) -> str:
    return posixpath.basename(path.rstrip("/"))


class _Discovery:
    def __init__(self, fs: _FS) -> None:
        self.fs = fs

    def replica_of(self, log_dir: str) -> int | None:
        """node.id from ``meta.properties``; otherwise a ``node<N>`` component of the path."""
        meta = _join(log_dir, "meta.properties")
        st = self.fs.status(meta)
        if st is not None and not st[0]:
            try:
                raw = self.fs.read(meta, 1024 * 1024)
            except (OSError, PathError) as e:
                raise PathError(f"{meta}: cannot read on {self.fs.label}: {e}") from None
            except Exception as e:
                raise PathError(f"{meta}: cannot read on {self.fs.label}: {_java_message(e)}") from None
            try:
                return parse_meta_properties(raw, meta).node_id
            except MetaPropertiesError as e:
                raise PathError(str(e)) from None
        parts = [p for p in re.split(r"/+", log_dir.split("://", 1)[-1]) if p]
        for part in reversed(parts):
            m = _NODE_IN_PATH.fullmatch(part)
            if m:
                return int(m.group(1))
        return None

    def file(self, path: str, replica: int | None, size: int) -> InputFile:
        name = _name(path)
        base = parse_segment_file_name(name)
        if base is not None:
            return InputFile(replica, path, "segment", base, size)
        sid = parse_snapshot_file_name(name)
        if sid is not None:
            return InputFile(replica, path, "snapshot", sid.offset, size)
        if name == "bootstrap.checkpoint":
            return InputFile(replica, path, "bootstrap", -1, size)
        raise PathError(f"{path}: not a log segment (<20 digits>.log) or snapshot (<offset>-<epoch>.checkpoint) file")

    def partition_files(self, pdir: str, replica: int | None) -> list[InputFile]:
        out = []
        for name, is_dir, size in self.fs.list(pdir):
            if not is_dir and (parse_segment_file_name(name) is not None
                               or parse_snapshot_file_name(name) is not None):
                out.append(self.file(_join(pdir, name), replica, size))
        return out

    def log_dir_files(self, log_dir: str) -> list[InputFile]:
        replica = self.replica_of(log_dir)
        out = self.partition_files(_join(log_dir, PARTITION_DIR), replica)
        boot = _join(log_dir, "bootstrap.checkpoint")
        st = self.fs.status(boot)
        if st is not None and not st[0]:
            out.append(self.file(boot, replica, st[1]))
        return out

    def find_log_dirs(self, root: str, depth: int) -> list[str]:
        entries = self.fs.list(root)
        if any(name == PARTITION_DIR and is_dir for name, is_dir, _ in entries):
            return [root]
        if depth >= _MAX_DEPTH:
            return []
        found: list[str] = []
        for name, is_dir, _ in entries:
            if is_dir and not name.startswith("."):
                found.extend(self.find_log_dirs(_join(root, name), depth + 1))
        return found

    def one(self, path: str) -> list[InputFile]:
        st = self.fs.status(path)
        if st is None:
            raise PathError(f"{path}: no such file or directory on {self.fs.label}")
        is_dir, size = st
        if not is_dir:
            pdir = _parent(path)
            log_dir = _parent(pdir) if _name(pdir) == PARTITION_DIR else pdir
            return [self.file(path, self.replica_of(log_dir), size)]
        if _name(path) == PARTITION_DIR:
            return self.partition_files(path, self.replica_of(_parent(path)))
        log_dirs = self.find_log_dirs(path, 0)
        if not log_dirs:
            raise PathError(f"{path}: not a metadata log dir (no {PARTITION_DIR} directory in it or below it)")
        out: list[InputFile] = []
        for d in log_dirs:
            out.extend(self.log_dir_files(d))
        return out


def _has_magic(p: str) -> bool:
    return glob.has_magic(p) or any(c in p for c in "{}")


def discover(paths: list[str], spark: Any = None) -> list[InputFile]:
    """Every file to read, grouped by replica and ordered by offset; duplicates removed.

    Local paths come back absolute; other URIs fully qualified by their Hadoop
    ``FileSystem`` (``spark`` must then be a session: the listing runs in its JVM)."""
    if not paths:
        raise PathError("no path given: use .load(PATH) or .option('path', PATH)")
    seen: dict[str, InputFile] = {}
    local = _Local()
    hadoop: dict[str, _Hadoop] = {}
    for p in paths:
        if is_local(p):
            d = _Discovery(local)
            lp = local_path(p)
            expanded = local.glob(lp) if glob.has_magic(lp) else [lp]
        else:
            if spark is None:
                raise PathError(f"{p}: a {scheme_of(p)}:// path is listed through Spark's filesystem layer; "
                                "read it with kraftnode.spark.read_log(spark, ...) or kraftnode audit")
            key = p.split("/", 3)[:3]
            k = "/".join(key)
            if k not in hadoop:
                hadoop[k] = _Hadoop(spark, p)
            fs = hadoop[k]
            d = _Discovery(fs)
            expanded = fs.glob(p) if _has_magic(p) else [fs.qualify(p)]
        if not expanded:
            raise PathError(f"{p}: the pattern matches nothing on {d.fs.label}")
        for e in expanded:
            for f in d.one(e):
                seen.setdefault(os.path.realpath(f.path) if is_local(f.path) else f.path, f)
    return sorted(seen.values(), key=lambda f: (f.replica is None, f.replica or 0, f.file_type, f.sort_key, f.path))
