"""The codec against Kafka's own generated message classes, every message and version (issue 36).

For every generated class (requests, responses, headers, metadata and control records, group
records, QuorumStateData) and every version in ``schemas/``, seeded random instances -- every
field present in that version set, nullable ones sometimes null, unknown tagged fields on
flexible versions -- and the all-defaults instance are encoded by kraftnode and handed to
Kafka's class of the same name (tests/interop/java/message-codec): Kafka reads them (every
byte, nothing left over), writes them again, and converts them with its JsonConverter. The
bytes Kafka writes must be kraftnode's, and Kafka's JSON what kraftnode's ``to_json`` says.

The reference is Kafka 4.4.0; a version 4.4 no longer has (KIP-896 removed the oldest
versions of many APIs, and 4.0 removed ControlledShutdown) is compared with Kafka 3.9 instead,
the newest release that has it. Two exceptions, both written down in docs/schemas.md:
- the group coordinator's records (``schemas/groups/``) follow Kafka 3.9's definitions, which
  4.0 changed in place when KIP-848 became GA: they are compared with Kafka 3.9's classes;
- Kafka 4.0 renamed three VoteRequest fields (KIP-996: CandidateEpoch, CandidateId and
  CandidateDirectoryId became ReplicaEpoch, ReplicaId, ReplicaDirectoryId) without changing
  a byte; kraftnode keeps 3.9's names, so the JSON comparison maps them (``RENAMED_IN_4_0``).
"""

from __future__ import annotations

import json
import random
import subprocess
import uuid
from collections import Counter
from typing import Any

import pytest

from recordbatch.message import FieldInfo, Message
from tests.kraftnode.protocol.strategies import all_message_classes
from tests.support.kafka import KafkaHome, java_env

pytestmark = pytest.mark.interop

SEED = 36
EXAMPLES = 6
#: unknown tags far above any Kafka assigns, so Kafka keeps them as unknown too
UNKNOWN_TAGS = range(1000, 1004)
TEXT = ["", "a", "kraft", "é☃", "__cluster_metadata", "x" * 40]
INTS = {"int8": 8, "int16": 16, "uint16": 16, "int32": 32, "uint32": 32, "int64": 64}


#: message -> Kafka 4.0's JSON name -> kraftnode's (3.9's), for fields renamed without a wire change
RENAMED_IN_4_0 = {"VoteRequest": {"replicaEpoch": "candidateEpoch", "replicaId": "candidateId",
                                  "replicaDirectoryId": "candidateDirectoryId"}}


def _groups_classes() -> list[type[Message]]:
    import importlib

    pkg = importlib.import_module("kraftnode.protocol.generated.groups")
    return [getattr(pkg, n) for n in pkg.__all__]


GROUP_RECORDS = {c.NAME for c in _groups_classes()}


def _json_names_of_records_fields() -> set[str]:
    """Kafka's JsonConverter writes a records field as its size (or not at all), not its
    bytes: such fields are compared through the encoded bytes instead."""
    names: set[str] = set()

    def walk(cls: type[Message], seen: set[type]) -> None:
        if cls in seen:
            return
        seen.add(cls)
        for f in cls.FIELDS:
            if f.type == "records":
                names.add(f.name[0].lower() + f.name[1:])
            if f.struct is not None:
                walk(f.struct, seen)

    for c in all_message_classes():
        walk(c, set())
    return names


RECORDS_FIELDS = _json_names_of_records_fields()


def _scalar(t: str, rnd: random.Random) -> Any:
    if t in INTS:
        bits = INTS[t]
        if t.startswith("uint"):
            return rnd.choice([0, 1, 2**bits - 1, rnd.randrange(2**bits)])
        lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        return rnd.choice([0, -1, 1, lo, hi, rnd.randint(lo, hi)])
    if t == "bool":
        return rnd.random() < 0.5
    if t == "float64":
        return rnd.choice([0.0, -1.5, 3.141592653589793, rnd.uniform(-1e9, 1e9)])
    if t == "string":
        return rnd.choice(TEXT)
    if t == "uuid":
        return rnd.choice([uuid.UUID(int=0), uuid.UUID(int=1), uuid.UUID(int=rnd.getrandbits(128))])
    if t in ("bytes", "records"):
        return bytes(rnd.getrandbits(8) for _ in range(rnd.choice([0, 1, 7, 20])))
    raise AssertionError(t)


def _value(f: FieldInfo, version: int, rnd: random.Random, flexible: bool, depth: int) -> Any:
    if f.nullable_in(version) and rnd.random() < 0.25:
        return None
    if f.type.startswith("[]"):
        n = rnd.choice([0, 1, 2] if depth < 2 else [0, 1])
        if f.struct is not None:
            return [instance(f.struct, version, rnd, flexible, depth + 1) for _ in range(n)]
        return [_scalar(f.type[2:], rnd) for _ in range(n)]
    if f.struct is not None:
        return instance(f.struct, version, rnd, flexible, depth + 1)
    return _scalar(f.type, rnd)


def instance(cls: type[Message], version: int, rnd: random.Random, flexible: bool, depth: int = 0) -> Message:
    kwargs = {f.attr: _value(f, version, rnd, flexible, depth) for f in cls.FIELDS if f.present_in(version)}
    if flexible and rnd.random() < 0.3:
        tags = sorted(rnd.sample(list(UNKNOWN_TAGS), rnd.choice([1, 2])))
        kwargs["unknown_tagged_fields"] = [(t, bytes(rnd.getrandbits(8) for _ in range(3))) for t in tags]
    return cls(**kwargs)


def cases() -> list[tuple[type[Message], int, Message]]:
    rnd = random.Random(SEED)
    out = []
    for cls in all_message_classes() + _groups_classes():
        lo, hi = cls.VALID_VERSIONS  # type: ignore[attr-defined]
        for version in range(lo, hi + 1):
            flexible = cls.is_flexible(version)  # type: ignore[attr-defined]
            out.append((cls, version, cls()))
            out.extend((cls, version, instance(cls, version, rnd, flexible)) for _ in range(EXAMPLES))
    return out


def kafka_answers(home: KafkaHome, lines: list[str]) -> list[dict[str, Any]]:
    classes = home.compile("message-codec")
    r = subprocess.run(home.java(classes, "MessageCodec"), input="\n".join(lines) + "\n",
                       capture_output=True, text=True, timeout=600, env=java_env())
    assert r.returncode == 0, r.stderr[-3000:]
    answers = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(answers) == len(lines), r.stderr[-3000:]
    return answers


def comparable(obj: Any, names: dict[str, str]) -> Any:
    """JSON with records fields left out and the names in ``names`` replaced."""
    if isinstance(obj, dict):
        return {names.get(k, k): comparable(v, names) for k, v in obj.items()
                if k not in RECORDS_FIELDS and not (k.endswith("SizeInBytes") and k[:-11] in RECORDS_FIELDS)}
    if isinstance(obj, list):
        return [comparable(v, names) for v in obj]
    return obj


def test_codec_byte_identical_to_kafkas_generated_classes(kafka44: KafkaHome, kafka_home: KafkaHome) -> None:
    all_cases = cases()
    lines = [f"{cls.NAME} {v} {m.encode(v).hex()}" for cls, v, m in all_cases]
    groups = [i for i, (cls, _, _) in enumerate(all_cases) if cls.NAME in GROUP_RECORDS]
    answers = kafka_answers(kafka44, lines)
    older = sorted({i for i, a in enumerate(answers) if a.get("error", "").startswith(("unsupported", "no class"))}
                   | set(groups))
    for i, a in zip(older, kafka_answers(kafka_home, [lines[i] for i in older]), strict=True):
        answers[i] = {**a, "release": kafka_home.version}

    compared: Counter[str] = Counter()
    problems: list[str] = []
    for (cls, version, msg), line, a in zip(all_cases, lines, answers, strict=True):
        where = f"{cls.NAME} v{version}"
        if "error" in a:
            problems.append(f"{where}: Kafka {a.get('release', kafka44.version)}: {a['error']}  [{line[:200]}]")
            continue
        compared[a.get("release", kafka44.version)] += 1
        ours = msg.encode(version).hex()
        if a["bytes"] != ours:
            problems.append(f"{where}: Kafka writes {a['bytes'][:160]}, kraftnode {ours[:160]}")
        elif a.get("json") is not None and \
                comparable(a["json"], RENAMED_IN_4_0.get(cls.NAME, {})) != comparable(msg.to_json(version), {}):
            problems.append(f"{where}: Kafka's JSON {json.dumps(a['json'])[:300]} != kraftnode's "
                            f"{json.dumps(msg.to_json(version), default=str)[:300]}")
    versions = {(cls.NAME, v) for cls, v, _ in all_cases}
    print(f"\n{len(all_cases)} instances of {len(versions)} message versions compared: "
          + ", ".join(f"{n} with Kafka {r}" for r, n in sorted(compared.items())))
    assert not problems, f"{len(problems)} differences from Kafka's classes:\n" + "\n".join(problems[:40])
