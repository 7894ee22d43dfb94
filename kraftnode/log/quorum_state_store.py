"""The ``quorum-state`` file: Kafka's ``FileQuorumStateStore`` JSON, byte for byte.

A voter must remember its epoch and vote across restarts or it could vote twice in
one epoch.  Kafka stores ``QuorumStateData`` (v0 with kraft.version 0, v1 with
kraft.version 1) as compact JSON in schema field order plus a ``data_version``
field, written through ``quorum-state.tmp``, fsync, atomic rename, fsync of the
directory.  We write identical bytes so a Kafka controller could take over the
directory, and we read strictly: garbage is a :class:`QuorumStateError` and the
file is left untouched for an operator to look at, never silently replaced.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraftnode.errors import LocalError
from kraftnode.log.fileutil import atomic_write
from recordbatch.wire import ZERO_UUID, uuid_from_base64, uuid_to_base64

__all__ = ["QuorumStateData", "QuorumStateError", "QuorumStateStore", "FILE_NAME"]

FILE_NAME = "quorum-state"
_MAX_BYTES = 1024 * 1024
_I32 = (-(2**31), 2**31 - 1)
_I64 = (-(2**63), 2**63 - 1)


class QuorumStateError(LocalError, ValueError):
    """``quorum-state`` exists but cannot be understood; the node must not start."""


@dataclass
class QuorumStateData:
    """QuorumStateData fields; which are written depends on ``data_version``."""

    leader_id: int = -1
    leader_epoch: int = -1
    voted_id: int = -1
    voted_directory_id: uuid.UUID = ZERO_UUID  # v1
    cluster_id: str = ""  # v0
    applied_offset: int = 0  # v0
    current_voters: list[int] | None = field(default_factory=list)  # v0
    data_version: int = 1

    def to_json(self) -> str:
        if self.data_version == 0:
            obj: dict[str, Any] = {
                "clusterId": self.cluster_id,
                "leaderId": self.leader_id,
                "leaderEpoch": self.leader_epoch,
                "votedId": self.voted_id,
                "appliedOffset": self.applied_offset,
                "currentVoters": None
                if self.current_voters is None
                else [{"voterId": v} for v in self.current_voters],
            }
        elif self.data_version == 1:
            obj = {
                "leaderId": self.leader_id,
                "leaderEpoch": self.leader_epoch,
                "votedId": self.voted_id,
                "votedDirectoryId": uuid_to_base64(self.voted_directory_id),
            }
        else:
            raise ValueError(f"unsupported quorum-state data_version {self.data_version}")
        obj["data_version"] = self.data_version
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str, source: str = FILE_NAME) -> QuorumStateData:
        def bad(why: str) -> QuorumStateError:
            return QuorumStateError(f"{source}: invalid quorum state: {why}")

        try:
            obj = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as e:
            raise bad(f"not JSON ({e})") from None
        if not isinstance(obj, dict):
            raise bad("top-level value is not a JSON object")
        version = obj.get("data_version")
        if version is None:
            raise bad("missing data_version")
        if type(version) is not int or version not in (0, 1):
            raise bad(f"unsupported data_version {version!r}")

        def num(name: str, bounds: tuple[int, int]) -> int:
            if name not in obj:
                raise bad(f"missing field {name!r}, which is mandatory in version {version}")
            v = obj[name]
            if type(v) is not int or not bounds[0] <= v <= bounds[1]:
                raise bad(f"field {name!r} is not a valid integer: {v!r}")
            return v

        data = cls(
            leader_id=num("leaderId", _I32),
            leader_epoch=num("leaderEpoch", _I32),
            voted_id=num("votedId", _I32),
            data_version=version,
        )
        if version == 0:
            cid = obj.get("clusterId")
            if not isinstance(cid, str):
                raise bad("field 'clusterId' is missing or not a string")
            data.cluster_id = cid
            data.applied_offset = num("appliedOffset", _I64)
            if "currentVoters" not in obj:
                raise bad("missing field 'currentVoters', which is mandatory in version 0")
            voters = obj["currentVoters"]
            if voters is None:
                data.current_voters = None
            elif isinstance(voters, list):
                ids = []
                for v in voters:
                    if not isinstance(v, dict) or type(v.get("voterId")) is not int:
                        raise bad(f"malformed voter entry {v!r}")
                    ids.append(v["voterId"])
                data.current_voters = ids
            else:
                raise bad("field 'currentVoters' is not an array")
        else:
            dir_text = obj.get("votedDirectoryId")
            if not isinstance(dir_text, str):
                raise bad("field 'votedDirectoryId' is missing or not a string")
            try:
                data.voted_directory_id = uuid_from_base64(dir_text)
            except ValueError as e:
                raise bad(str(e)) from None
        return data


class QuorumStateStore:
    """Reads and atomically writes ``<partition dir>/quorum-state``."""

    def __init__(self, partition_dir: str | os.PathLike[str]) -> None:
        self.path = Path(partition_dir) / FILE_NAME

    def read(self) -> QuorumStateData | None:
        """The stored state, ``None`` if there is no file; garbage raises :class:`QuorumStateError`."""
        try:
            with open(self.path, "rb") as f:
                raw = f.read(_MAX_BYTES + 1)
        except FileNotFoundError:
            return None
        except IsADirectoryError:
            raise QuorumStateError(f"{self.path}: is a directory") from None
        if len(raw) > _MAX_BYTES:
            raise QuorumStateError(f"{self.path}: invalid quorum state: file is larger than 1 MiB")
        if not raw.strip():
            raise QuorumStateError(f"{self.path}: invalid quorum state: file is empty")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise QuorumStateError(f"{self.path}: invalid quorum state: not UTF-8 text") from None
        return QuorumStateData.from_json(text, str(self.path))

    def write(self, data: QuorumStateData) -> None:
        """Durably replace the file (quorum-state.tmp, fsync, rename, fsync dir)."""
        atomic_write(self.path, data.to_json().encode("utf-8"))

    def clear(self) -> None:
        for p in (self.path, self.path.with_name(FILE_NAME + ".tmp")):
            try:
                p.unlink()
            except FileNotFoundError:
                pass
