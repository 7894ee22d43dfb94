"""Our schemas/ agree with Apache Kafka 3.9's message definitions (and Kafka 4.4's, for
the versions beyond 3.9's range, and for the files taken whole from Kafka 4.4).

Every file under ``schemas/`` is compared with Kafka's definition of the message
with the same ``name`` (Kafka's files are JSON with ``//`` comments).  Every key
except ``about`` must be equal -- same keys present, same values, no
normalisation -- and the field lists must have the same fields in the same
order, recursively, including ``commonStructs``.  ``about`` texts are ours.

A file taken from Kafka 4.4 (``FROM_4_4``) is compared whole with 4.4's definition
(the ``kafka_4_4`` fixture: kafka-clients-4.4.0.jar's ``common/message/``), and with
3.9's version by version: every version both releases define must put the same bytes
on the wire (same fields, types, nullability, taggedness and tags), so a 3.9 peer that
negotiates one of them is still spoken to as 3.9 did.

The presence and strict-JSON checks run without the reference data; the
agreement checks need it (see the ``reference_dir`` fixture).
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = REPO / "schemas"
SCHEMA_FILES = sorted(SCHEMAS.rglob("*.json"))


def _ids(paths: list[Path]) -> list[str]:
    return [p.relative_to(SCHEMAS).as_posix() for p in paths]


# The interop table of shared/DESIGN.md: API -> (api key, Kafka 3.9 validVersions).
INTEROP_APIS = {
    "Produce": (0, "3-13"),  # Kafka 4.4's, as FROM_4_4 below; 3.9: 0-11
    "Fetch": (1, "4-18"),  # Kafka 4.4 (AT_4_4)
    "ListOffsets": (2, "1-11"),  # 3.9: 0-9
    "Metadata": (3, "0-13"),  # 3.9: 0-12
    "SaslHandshake": (17, "0-1"),
    "ApiVersions": (18, "0-5"),  # Kafka 4.4 (AT_4_4)
    "SaslAuthenticate": (36, "0-2"),
    "Vote": (52, "0-2"),  # Kafka 3.9: 0-1; v2 is Kafka 4.0's (KIP-996), see BEYOND_3_9
    "BeginQuorumEpoch": (53, "0-1"),
    "EndQuorumEpoch": (54, "0-1"),
    "DescribeQuorum": (55, "0-2"),
    "UpdateFeatures": (57, "0-2"),  # Kafka 4.4 (AT_4_4)
    "FetchSnapshot": (59, "0-1"),
    "DescribeCluster": (60, "0-2"),  # Kafka 4.4 (AT_4_4)
    "OffsetCommit": (8, "2-10"),  # 3.9: 0-9
    "OffsetFetch": (9, "1-10"),  # 3.9: 0-9
    "FindCoordinator": (10, "0-6"),
    "JoinGroup": (11, "0-9"),
    "Heartbeat": (12, "0-4"),
    "LeaveGroup": (13, "0-5"),
    "SyncGroup": (14, "0-5"),
    "DescribeGroups": (15, "0-6"),  # 3.9: 0-5
    "ListGroups": (16, "0-5"),
    "DeleteGroups": (42, "0-3"),  # 3.9: 0-2
    "OffsetDelete": (47, "0"),
    "ConsumerGroupHeartbeat": (68, "0-1"),  # v1 is Kafka 4.0's (KIP-848 regex), see BEYOND_3_9
    "ConsumerGroupDescribe": (69, "0-1"),  # v1 is Kafka 4.0's (KIP-1099), see BEYOND_3_9
    "AddRaftVoter": (80, "0-1"),  # Kafka 4.4 (AT_4_4)
    "RemoveRaftVoter": (81, "0"),
    "UpdateRaftVoter": (82, "0"),
}
OTHER_MESSAGES = {
    "RequestHeader": "header",
    "ResponseHeader": "header",
    "LeaderChangeMessage": "data",
    "SnapshotHeaderRecord": "data",
    "SnapshotFooterRecord": "data",
    "KRaftVersionRecord": "data",
    "VotersRecord": "data",
    "QuorumStateData": "data",
}
# Kafka 3.9's metadata/ directory (25 records).
METADATA_RECORDS = [
    "AbortTransactionRecord",
    "AccessControlEntryRecord",
    "BeginTransactionRecord",
    "BrokerRegistrationChangeRecord",
    "ClientQuotaRecord",
    "ConfigRecord",
    "DelegationTokenRecord",
    "EndTransactionRecord",
    "FeatureLevelRecord",
    "FenceBrokerRecord",
    "NoOpRecord",
    "PartitionChangeRecord",
    "PartitionRecord",
    "ProducerIdsRecord",
    "RegisterBrokerRecord",
    "RegisterControllerRecord",
    "RemoveAccessControlEntryRecord",
    "RemoveDelegationTokenRecord",
    "RemoveTopicRecord",
    "RemoveUserScramCredentialRecord",
    "TopicRecord",
    "UnfenceBrokerRecord",
    "UnregisterBrokerRecord",
    "UserScramCredentialRecord",
    "ZkMigrationStateRecord",
]

# Versions beyond Kafka 3.9's range, taken from Kafka 4.x (the only exceptions to the
# agreement with 3.9): message -> (Kafka 3.9's validVersions, why). The comparison first
# cuts ours back to 3.9's range -- validVersions, and every field that exists only in the
# newer versions -- so each 3.9 version must still agree field for field, and the
# extension can only add fields at versions a 3.9 peer never negotiates. The whole of
# each of these files, new versions included, is then compared with Kafka 4.4's own
# definition (test_beyond_3_9_agrees_with_kafka_4_4).
BEYOND_3_9 = {
    "VoteRequest": ("0-1", "KIP-996 pre-vote (Kafka 4.0): v2 adds PreVote"),
    "VoteResponse": ("0-1", "KIP-996 (Kafka 4.0): v2 is the same as v1"),
    "ConsumerGroupHeartbeatRequest": ("0", "KIP-848 (Kafka 4.0): v1 adds SubscribedTopicRegex; "
                                           "KIP-1082: the consumer makes its member id"),
    "ConsumerGroupHeartbeatResponse": ("0", "Kafka 4.0: v1 may answer INVALID_REGULAR_EXPRESSION"),
    "ConsumerGroupDescribeRequest": ("0", "KIP-1099 (Kafka 4.0): v1 is the same as v0"),
    "ConsumerGroupDescribeResponse": ("0", "KIP-1099 (Kafka 4.0): v1 adds Members[].MemberType"),
}
# Kafka 4.x's definitions differ from 3.9's in two ways that are not on the wire and that the
# files above keep as 3.9 has them (so that their 3.9 versions still agree with 3.9): 4.0
# removed ZooKeeper, and with it the "zkBroker" listener; and it renamed fields of
# VoteRequest (KIP-996: a pre-vote's sender is not a candidate).  The comparison with 4.4
# undoes exactly these on our side before comparing everything else.
RENAMED_IN_4 = {
    "VoteRequest": {"CandidateEpoch": "ReplicaEpoch", "CandidateId": "ReplicaId",
                    "CandidateDirectoryId": "ReplicaDirectoryId"},
}

# Files taken whole from Kafka 4.4 (issue 36: the client-facing APIs at 4.4's versions,
# KIP-896's removals included): compared with 4.4's definition, and with 3.9's over the
# versions both define. message -> why.
FROM_4_4 = {
    f"{api}{kind}": why
    for api, why in {
        "Produce": "v12 (KIP-890), v13 topic ids (KIP-516); v0-2 removed (KIP-896)",
        "ListOffsets": "v10 TimeoutMs (KIP-1075), v11 (KIP-1023); v0 removed",
        "Metadata": "v13 top-level ErrorCode (KIP-1102)",
        "OffsetCommit": "v10 topic ids (KIP-848); v0-1 removed",
        "OffsetFetch": "v10 topic ids (KIP-848); v0 removed",
        "FindCoordinator": "v6 share coordinators (KIP-932); zkBroker listener gone",
        "DescribeGroups": "v6 ErrorMessage, GROUP_ID_NOT_FOUND (KIP-1043)",
        "DeleteGroups": "v3 ErrorMessage",
    }.items()
    for kind in ("Request", "Response")
}
# Metadata records taken whole from Kafka 4.4 (issue 37): new records and new versions.
FROM_4_4.update({
    "RegisterBrokerRecord": "v4 CordonedLogDirs (KIP-1066)",
    "BrokerRegistrationChangeRecord": "v3 CordonedLogDirs (KIP-1066)",
    "ClearElrRecord": "new in Kafka 4.0 (KIP-966)",
    "UnregisterControllerRecord": "new in Kafka 4.4",
})

# Messages taken whole from Kafka 4.4 (issue 36, the controller listener at 4.4's versions):
# their new versions add fields, and KIP-896 (Kafka 4.0) removed old versions -- raising the
# minimum, dropping fields only those versions had and the "zkBroker" listener -- so they
# cannot be cut back to 3.9's. Compared as FROM_4_4 (whole with 4.4, version by version with 3.9).
AT_4_4 = {
    f"{api}{kind}": why
    for api, why in {
        "Fetch": "v18 HighWatermark (KIP-1166); v0-3 removed",
        "ApiVersions": "v5 ClusterId/NodeId (KIP-1242)",
        "CreateTopics": "v0-1 removed (KIP-896)",
        "DeleteTopics": "v0 removed (KIP-896)",
        "DescribeAcls": "v0 removed (KIP-896)",
        "CreateAcls": "v0 removed (KIP-896)",
        "DeleteAcls": "v0 removed (KIP-896)",
        "DescribeConfigs": "v0 removed (KIP-896), and with it IsDefault",
        "CreateDelegationToken": "v0 removed (KIP-896)",
        "RenewDelegationToken": "v0 removed (KIP-896)",
        "ExpireDelegationToken": "v0 removed (KIP-896)",
        "DescribeDelegationToken": "v0 removed (KIP-896)",
        "AlterPartitionReassignments": "v1 AllowReplicationFactorChange (KIP-860)",
        "AlterPartition": "v0-1 removed (KIP-896), and with them TopicName",
        "UpdateFeatures": "v2: no per-feature results",
        "DescribeCluster": "v2 IncludeFencedBrokers / IsFenced (KIP-1073)",
        "BrokerHeartbeat": "v2 CordonedLogDirs (KIP-1066)",
        "AddRaftVoter": "v1 AckWhenCommitted",
        "UnregisterController": "new in Kafka 4.x",
    }.items()
    for kind in ("Request", "Response")
}

# the controller listener's messages are Kafka 4.4's files too: one list, one comparison
FROM_4_4.update(AT_4_4)

TOP_KEYS = {
    "apiKey",
    "type",
    "listeners",
    "name",
    "validVersions",
    "deprecatedVersions",
    "flexibleVersions",
    "latestVersionUnstable",
    "fields",
    "commonStructs",
}
FIELD_KEYS = {
    "name",
    "type",
    "versions",
    "nullableVersions",
    "taggedVersions",
    "tag",
    "default",
    "ignorable",
    "entityType",
    "mapKey",
    "zeroCopy",
    "flexibleVersions",
    "about",
    "fields",
}
STRUCT_KEYS = {"name", "versions", "fields"}
MESSAGE_TYPES = {"request", "response", "header", "data", "metadata"}
IGNORED = {"about"}  # documentation only; ours are our own words


# --------------------------------------------------------------------------- parsing


def strip_json_comments(text: str) -> str:
    """Drop ``//`` comments (to end of line) that are outside JSON strings."""
    out: list[str] = []
    i, n, in_string = 0, len(text), False
    while i < n:
        c = text[i]
        if in_string:
            if c == "\\":
                out.append(text[i : i + 2])
                i += 2
                continue
            if c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        out.append(c)
        i += 1
    return "".join(out)


def load_kafka_json(path: Path) -> dict[str, Any]:
    return json.loads(strip_json_comments(path.read_text(encoding="utf-8")))


@cache
def kafka_index(reference: Path) -> dict[str, Path]:
    """Kafka's definitions by message name (file names differ once: ZkMigrationRecord)."""
    index: dict[str, Path] = {}
    for path in sorted(reference.rglob("*.json")):
        name = load_kafka_json(path)["name"]
        assert name not in index, f"duplicate {name}: {index[name]} and {path}"
        index[name] = path
    return index


# ------------------------------------------------------------------------ comparison


def _compare_attrs(
    ours: dict[str, Any], kafka: dict[str, Any], path: str, skip: set[str], diffs: list[str]
) -> None:
    for key in sorted((set(ours) | set(kafka)) - skip - IGNORED):
        if key not in kafka:
            diffs.append(f"{path}.{key}: ours {ours[key]!r}, Kafka has no such key")
        elif key not in ours:
            diffs.append(f"{path}.{key}: missing in ours, Kafka {kafka[key]!r}")
        elif ours[key] != kafka[key] or type(ours[key]) is not type(kafka[key]):
            diffs.append(f"{path}.{key}: ours {ours[key]!r}, Kafka {kafka[key]!r}")


def _compare_fields(
    ours: list[dict[str, Any]], kafka: list[dict[str, Any]], path: str, diffs: list[str]
) -> None:
    our_names = [f.get("name") for f in ours]
    kafka_names = [f.get("name") for f in kafka]
    if our_names != kafka_names:
        diffs.append(f"{path}.fields: names/order differ: ours {our_names}, Kafka {kafka_names}")
    kafka_by_name = {f.get("name"): f for f in kafka}
    for field in ours:
        other = kafka_by_name.get(field.get("name"))
        if other is not None:
            _compare_field(field, other, f"{path}.fields[{field.get('name')}]", diffs)


def _compare_field(
    ours: dict[str, Any], kafka: dict[str, Any], path: str, diffs: list[str]
) -> None:
    _compare_attrs(ours, kafka, path, {"fields"}, diffs)
    if "fields" in ours or "fields" in kafka:
        _compare_fields(ours.get("fields", []), kafka.get("fields", []), path, diffs)


def compare_schema(ours: dict[str, Any], kafka: dict[str, Any]) -> list[str]:
    """Every difference with a wire or codegen meaning between two definitions."""
    diffs: list[str] = []
    path = str(kafka.get("name", ours.get("name")))
    _compare_attrs(ours, kafka, path, {"fields", "commonStructs"}, diffs)
    _compare_fields(ours.get("fields", []), kafka.get("fields", []), path, diffs)
    our_structs = ours.get("commonStructs", [])
    kafka_structs = kafka.get("commonStructs", [])
    our_names = [s.get("name") for s in our_structs]
    kafka_names = [s.get("name") for s in kafka_structs]
    if our_names != kafka_names:
        diffs.append(f"{path}.commonStructs: ours {our_names}, Kafka {kafka_names}")
    kafka_by_name = {s.get("name"): s for s in kafka_structs}
    for struct in our_structs:
        other = kafka_by_name.get(struct.get("name"))
        if other is not None:
            _compare_field(struct, other, f"{path}.commonStructs[{struct.get('name')}]", diffs)
    return diffs


# ----------------------------------------------------------------------------- tests


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _walk_fields(fields: list[dict[str, Any]], path: str):
    for field in fields:
        here = f"{path}.fields[{field.get('name')}]"
        yield here, field
        yield from _walk_fields(field.get("fields", []), here)


@pytest.mark.parametrize("path", SCHEMA_FILES, ids=_ids(SCHEMA_FILES))
def test_schema_file_is_strict_json_with_required_keys(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    schema = json.loads(text)  # strict: no comments, no trailing commas
    problems: list[str] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        indent = len(line) - len(line.lstrip(" "))
        if line[indent : indent + 1] == "\t" or indent % 2:
            problems.append(f"line {lineno}: not indented by multiples of 2 spaces")
    if not text.endswith("\n"):
        problems.append("no newline at end of file")
    if not isinstance(schema, dict):
        pytest.fail(f"{path}: top level is not an object")
    for key in ("type", "name", "validVersions", "flexibleVersions", "fields"):
        if key not in schema:
            problems.append(f"missing top-level key {key!r}")
    if unknown := set(schema) - TOP_KEYS:
        problems.append(f"unknown top-level keys {sorted(unknown)}")
    if schema.get("type") not in MESSAGE_TYPES:
        problems.append(f"type {schema.get('type')!r} not in {sorted(MESSAGE_TYPES)}")
    if schema.get("type") in ("request", "response", "metadata") and "apiKey" not in schema:
        problems.append("missing apiKey")
    if path.stem != schema.get("name"):
        problems.append(f"file name {path.name} does not match name {schema.get('name')!r}")
    in_metadata_dir = path.parent.name == "metadata"
    if in_metadata_dir != (schema.get("type") == "metadata"):
        problems.append("metadata records (and only they) belong in schemas/metadata/")
    fields = list(_walk_fields(schema.get("fields", []), schema.get("name", "?")))
    for struct in schema.get("commonStructs", []):
        if unknown := set(struct) - STRUCT_KEYS:
            problems.append(f"commonStructs[{struct.get('name')}]: unknown keys {sorted(unknown)}")
        fields += _walk_fields(struct.get("fields", []), f"commonStructs[{struct.get('name')}]")
    for where, field in fields:
        for key in ("name", "type", "versions"):
            if key not in field:
                problems.append(f"{where}: missing {key!r}")
        if unknown := set(field) - FIELD_KEYS:
            problems.append(f"{where}: unknown keys {sorted(unknown)}")
    assert not problems, f"{path.relative_to(REPO)}:\n" + "\n".join(problems)


def test_required_messages_present() -> None:
    present = {p.relative_to(SCHEMAS).as_posix(): _load(p) for p in SCHEMA_FILES}
    problems: list[str] = []
    for api, (key, versions) in INTEROP_APIS.items():
        for kind in ("request", "response"):
            name = f"{api}{kind.capitalize()}"
            schema = present.get(f"{name}.json")
            if schema is None:
                problems.append(f"missing schemas/{name}.json")
                continue
            got = (schema.get("apiKey"), schema.get("validVersions"), schema.get("type"))
            if got != (key, versions, kind):
                problems.append(
                    f"{name}: (apiKey, validVersions, type) {got}, expected {(key, versions, kind)}"
                )
    for name, kind in OTHER_MESSAGES.items():
        schema = present.get(f"{name}.json")
        if schema is None:
            problems.append(f"missing schemas/{name}.json")
        elif schema.get("type") != kind:
            problems.append(f"{name}: type {schema.get('type')!r}, expected {kind!r}")
    for name in METADATA_RECORDS:
        if f"metadata/{name}.json" not in present:
            problems.append(f"missing schemas/metadata/{name}.json")
    assert not problems, "\n".join(problems)


def _min_version(versions: str) -> int:
    return int(versions.split("-")[0].rstrip("+"))


def cut_to_3_9(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` as Kafka 3.9 defines it: newer versions and their new fields removed."""
    name = schema.get("name")
    if name not in BEYOND_3_9:
        return schema
    valid, _ = BEYOND_3_9[name]
    top = int(valid.split("-")[-1])
    cut = copy.deepcopy(schema)
    cut["validVersions"] = valid

    def prune(fields: list[dict[str, Any]]) -> list[dict[str, Any]]:
        kept = [f for f in fields if _min_version(f["versions"]) <= top]
        for f in kept:
            if "fields" in f:
                f["fields"] = prune(f["fields"])
        return kept

    cut["fields"] = prune(cut["fields"])
    return cut


def test_beyond_3_9_only_adds_newer_versions() -> None:
    for name, (valid, _) in BEYOND_3_9.items():
        ours = _load(SCHEMAS / f"{name}.json")
        assert _min_version(ours["validVersions"].split("-")[-1]) > int(valid.split("-")[-1]), name
        assert cut_to_3_9(ours) != ours or ours["validVersions"] != valid
    # A field added at a 3.9 version is not hidden by the exception.
    mutated = _load(SCHEMAS / "VoteRequest.json")
    mutated["fields"].append({"name": "Extra", "type": "int8", "versions": "1+"})
    assert any(f["name"] == "Extra" for f in cut_to_3_9(mutated)["fields"])


# ------------------------------------------------------------------ Kafka 4.4's definitions

# Kafka 4.4's message JSON, as Kafka ships it: inside kafka-clients-4.4.0.jar
# (``common/message/``), or a directory it was unpacked into.
KAFKA_4_4_ENV = "KRAFTNODE_KAFKA_4_4_MESSAGES"
KAFKA_4_4_CANDIDATES = [
    REPO / ".cache" / "kafka" / "4.4.0" / "libs" / "kafka-clients-4.4.0.jar",
    REPO.parent / "main" / ".cache" / "kafka" / "4.4.0" / "libs" / "kafka-clients-4.4.0.jar",
    Path.home() / ".m2" / "repository" / "org" / "apache" / "kafka" / "kafka-clients" / "4.4.0"
    / "kafka-clients-4.4.0.jar",
]


def _metadata_records_4_4(directory: Path) -> dict[str, Any]:
    """name -> Kafka 4.4's metadata record definitions, from a Kafka home's reference/metadata
    (tools/kafka_dist.py unpacks them from kafka-metadata's sources jar)."""
    return {d["name"]: d for d in (load_kafka_json(p) for p in sorted(directory.glob("*.json")))}


@pytest.fixture(scope="module")
def kafka_4_4() -> Any:
    """``name -> Kafka 4.4's definition``; skips when absent (fails under
    KRAFTNODE_REQUIRE_REFERENCE=1, as the 3.9 reference does)."""
    import os
    import zipfile

    env = os.environ.get(KAFKA_4_4_ENV)
    for candidate in ([Path(env)] if env else []) + KAFKA_4_4_CANDIDATES:
        if candidate.is_dir():
            return lambda name: load_kafka_json(candidate / f"{name}.json")
        if candidate.is_file():
            jar = zipfile.ZipFile(candidate)
            records = _metadata_records_4_4(candidate.parent.parent / "reference" / "metadata")

            def load(name: str, jar: zipfile.ZipFile = jar, records: dict[str, Any] = records) -> Any:
                if name in records:  # metadata records ship in the sources, not the jars
                    return records[name]
                return json.loads(strip_json_comments(jar.read(f"common/message/{name}.json").decode()))
            return load
    problem = f"Kafka 4.4's message definitions not found (set {KAFKA_4_4_ENV})"
    if os.environ.get("KRAFTNODE_REQUIRE_REFERENCE") == "1":
        pytest.fail(problem)
    pytest.skip(problem)


def as_kafka_4(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with the two 3.9-isms Kafka 4.x dropped undone (see RENAMED_IN_4)."""
    out = copy.deepcopy(schema)
    if "listeners" in out:
        out["listeners"] = [x for x in out["listeners"] if x != "zkBroker"]
    renames = RENAMED_IN_4.get(out.get("name", ""), {})

    def rename(fields: list[dict[str, Any]]) -> None:
        for f in fields:
            f["name"] = renames.get(f["name"], f["name"])
            rename(f.get("fields", []))

    rename(out.get("fields", []))
    return out


def cut_kafka_to_ours(kafka: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    """Kafka's definition cut back to our top version, when Kafka has newer ones still."""
    top = int(ours["validVersions"].split("-")[-1])
    if int(kafka["validVersions"].split("-")[-1]) <= top:
        return kafka
    cut = copy.deepcopy(kafka)
    cut["validVersions"] = ours["validVersions"]

    def prune(fields: list[dict[str, Any]]) -> list[dict[str, Any]]:
        kept = [f for f in fields if _min_version(f["versions"]) <= top]
        for f in kept:
            if "fields" in f:
                f["fields"] = prune(f["fields"])
        return kept

    cut["fields"] = prune(cut["fields"])
    cut.pop("latestVersionUnstable", None)
    return cut


@pytest.mark.parametrize("name", sorted(BEYOND_3_9))
def test_beyond_3_9_agrees_with_kafka_4_4(name: str, kafka_4_4: Any) -> None:
    """The versions beyond 3.9 are Kafka's: every key but ``about``, at every version we
    serve, equals Kafka 4.4's definition (names and listeners as RENAMED_IN_4 says)."""
    ours = as_kafka_4(_load(SCHEMAS / f"{name}.json"))
    kafka = cut_kafka_to_ours(kafka_4_4(name), ours)
    diffs = compare_schema(ours, kafka)
    assert not diffs, f"schemas/{name}.json differs from Kafka 4.4's:\n" + "\n".join(diffs)


def test_comparison_with_kafka_4_4_can_fail(kafka_4_4: Any) -> None:
    """A new field at the wrong version, or one missing, is reported against 4.4."""
    ours = as_kafka_4(_load(SCHEMAS / "ConsumerGroupHeartbeatRequest.json"))
    kafka = kafka_4_4("ConsumerGroupHeartbeatRequest")
    regex = next(f for f in ours["fields"] if f["name"] == "SubscribedTopicRegex")
    regex["versions"] = "0+"
    assert compare_schema(ours, kafka) == [
        "ConsumerGroupHeartbeatRequest.fields[SubscribedTopicRegex].versions: ours '0+', Kafka '1+'"]
    ours["fields"].remove(regex)
    assert any("names/order differ" in d for d in compare_schema(ours, kafka))
    # the 3.9 listener is only forgiven as "zkBroker"
    other = as_kafka_4(_load(SCHEMAS / "ConsumerGroupDescribeRequest.json"))
    other["listeners"].append("controller")
    assert compare_schema(other, kafka_4_4("ConsumerGroupDescribeRequest")) != []


# schemas/groups/: the group coordinator's records (the keys and values of __consumer_offsets).
# Kafka does not publish them with the protocol messages: they are packaged in its
# group-coordinator jar, so they are compared with the genuine Kafka installation's copy.
GROUP_RECORD_FILES = [p for p in SCHEMA_FILES if p.parent.name == "groups"]
PROTOCOL_FILES = [p for p in SCHEMA_FILES if p.parent.name != "groups"]


def group_coordinator_jar(kafka_home: Any) -> Path:
    """The installation's ``kafka-group-coordinator-<version>.jar``."""
    return Path(kafka_home.libs / f"kafka-group-coordinator-{kafka_home.version}.jar")


@pytest.mark.parametrize("path", GROUP_RECORD_FILES, ids=_ids(GROUP_RECORD_FILES))
def test_group_record_agrees_with_kafka_3_9(path: Path, kafka_home: Any) -> None:
    import zipfile

    ours = _load(path)
    with zipfile.ZipFile(group_coordinator_jar(kafka_home)) as jar:
        text = jar.read(f"common/message/{path.name}").decode()
    diffs = compare_schema(ours, json.loads(strip_json_comments(text)))
    assert not diffs, f"{path.relative_to(REPO)} differs from Kafka's {path.name}:\n" + "\n".join(diffs)


def test_every_kafka_group_record_has_a_schema(kafka_home: Any) -> None:
    """Every record of the 3.9 group coordinator but KIP-932's share groups (early access in 3.9)."""
    import zipfile

    with zipfile.ZipFile(group_coordinator_jar(kafka_home)) as jar:
        kafka = {Path(n).stem for n in jar.namelist()
                 if n.startswith("common/message/") and n.endswith(".json")
                 and not Path(n).name.startswith("ShareGroup")}
    assert kafka == {p.stem for p in GROUP_RECORD_FILES}


# ------------------------------------------------------ version by version (FROM_4_4)


def _versions(spec: str | None) -> range:
    """Kafka's version syntax ("3+", "0-12", "8", "none") as a range."""
    if spec is None or spec == "none":
        return range(0)
    if spec.endswith("+"):
        return range(int(spec[:-1]), 0x7FFF + 1)
    lo, _, hi = spec.partition("-")
    return range(int(lo), int(hi or lo) + 1)


def wire_shape(fields: list[dict[str, Any]], structs: dict[str, list[dict[str, Any]]],
               v: int) -> list[Any]:
    """What a version puts on the wire: each present field's name, type, nullability,
    taggedness, tag and default, recursively (common structs resolved)."""
    out: list[Any] = []
    for f in fields:
        if v not in _versions(f["versions"]):
            continue
        sub = f.get("fields")
        if sub is None:
            sub = structs.get(f["type"].removeprefix("[]"))
        out.append((f["name"], f["type"], v in _versions(f.get("nullableVersions")),
                    # a tag is written as 0 or "0" in Kafka's files alike
                    v in _versions(f.get("taggedVersions")), None if f.get("tag") is None else int(f["tag"]),
                    f.get("default"),
                    wire_shape(sub, structs, v) if sub else None))
    return out


def shared_version_diffs(newer: dict[str, Any], older: dict[str, Any]) -> list[str]:
    """The versions both definitions have whose wire shape (or flexibility) differs."""
    diffs = []
    shared = set(_versions(newer["validVersions"])) & set(_versions(older["validVersions"]))
    for v in sorted(shared):
        shapes = []
        for d in (newer, older):
            structs = {s["name"]: s["fields"] for s in d.get("commonStructs", [])}
            shapes.append((v in _versions(d["flexibleVersions"]), wire_shape(d["fields"], structs, v)))
        if shapes[0] != shapes[1]:
            diffs.append(f"{newer['name']} v{v}: ours {shapes[0]}, Kafka 3.9 {shapes[1]}")
    return diffs


FROM_4_4_FILES = [p for p in SCHEMA_FILES if p.stem in FROM_4_4]


def test_from_4_4_lists_only_existing_files() -> None:
    assert {p.stem for p in FROM_4_4_FILES} == set(FROM_4_4)


@pytest.mark.parametrize("path", FROM_4_4_FILES, ids=_ids(FROM_4_4_FILES))
def test_agrees_with_kafka_4_4(path: Path, kafka_4_4: Any) -> None:
    """The whole file, every version, equals Kafka 4.4's definition (nothing forgiven)."""
    ours = _load(path)
    diffs = compare_schema(ours, kafka_4_4(ours["name"]))
    assert not diffs, f"{path.relative_to(REPO)} differs from Kafka 4.4's {path.name}:\n" + "\n".join(diffs)


@pytest.mark.parametrize("path", FROM_4_4_FILES, ids=_ids(FROM_4_4_FILES))
def test_from_4_4_speaks_3_9_at_shared_versions(path: Path, reference_dir: Path) -> None:
    ours = _load(path)
    kafka_path = kafka_index(reference_dir).get(ours["name"])
    if kafka_path is None:
        pytest.skip(f"{ours['name']} is new in Kafka 4.x")
    diffs = shared_version_diffs(ours, load_kafka_json(kafka_path))
    assert not diffs, "\n".join(diffs)


def test_shared_version_comparison_can_fail() -> None:
    """A field moved to another version, a nullability or a tag changed: each is reported
    at the versions it changes, and only there."""
    original = _load(SCHEMAS / "OffsetCommitRequest.json")
    assert shared_version_diffs(original, original) == []
    mutated = copy.deepcopy(original)
    topics = next(f for f in mutated["fields"] if f["name"] == "Topics")
    partitions = next(f for f in topics["fields"] if f["name"] == "Partitions")
    epoch = next(f for f in partitions["fields"] if f["name"] == "CommittedLeaderEpoch")
    assert epoch["versions"] == "6+"
    epoch["versions"] = "7+"
    assert [d.split(":")[0] for d in shared_version_diffs(mutated, original)] == [
        "OffsetCommitRequest v6"]
    mutated = copy.deepcopy(original)
    mutated["fields"][0]["nullableVersions"] = "9+"   # GroupId
    assert [d.split(":")[0] for d in shared_version_diffs(mutated, original)] == [
        "OffsetCommitRequest v9", "OffsetCommitRequest v10"]
    mutated = copy.deepcopy(original)
    mutated["flexibleVersions"] = "9+"
    assert [d.split(":")[0] for d in shared_version_diffs(mutated, original)] == ["OffsetCommitRequest v8"]


@pytest.mark.parametrize("path", PROTOCOL_FILES, ids=_ids(PROTOCOL_FILES))
def test_agrees_with_kafka_3_9(path: Path, reference_dir: Path) -> None:
    if path.stem in FROM_4_4:
        pytest.skip(f"Kafka 4.4's definition ({FROM_4_4[path.stem]}): test_agrees_with_kafka_4_4")
    ours = cut_to_3_9(_load(path))
    kafka_path = kafka_index(reference_dir).get(ours["name"])
    assert kafka_path is not None, f"Kafka 3.9 has no message named {ours['name']}"
    diffs = compare_schema(ours, load_kafka_json(kafka_path))
    assert not diffs, (
        f"{path.relative_to(REPO)} differs from {kafka_path.relative_to(reference_dir)}:\n"
        + "\n".join(diffs)
    )


def test_every_kafka_metadata_record_has_a_schema(reference_dir: Path) -> None:
    """Kafka 3.9's records, and the records Kafka 4.4 added (taken whole: FROM_4_4)."""
    kafka = {load_kafka_json(p)["name"] for p in (reference_dir / "metadata").glob("*.json")}
    kafka |= {"ClearElrRecord", "UnregisterControllerRecord"}
    ours = {p.stem for p in (SCHEMAS / "metadata").glob("*.json")}
    assert kafka == ours, f"missing: {sorted(kafka - ours)}; extra: {sorted(ours - kafka)}"


# ------------------------------------------------------- the comparison can fail


def test_comparison_reports_a_changed_versions() -> None:
    original = _load(SCHEMAS / "FetchRequest.json")
    mutated = copy.deepcopy(original)
    topics = next(f for f in mutated["fields"] if f["name"] == "Topics")
    partitions = next(f for f in topics["fields"] if f["name"] == "Partitions")
    epoch = next(f for f in partitions["fields"] if f["name"] == "CurrentLeaderEpoch")
    assert epoch["versions"] == "9+"
    epoch["versions"] = "10+"
    assert compare_schema(original, original) == []
    assert compare_schema(mutated, original) == [
        "FetchRequest.fields[Topics].fields[Partitions].fields[CurrentLeaderEpoch].versions:"
        " ours '10+', Kafka '9+'"
    ]


def test_comparison_reports_every_difference() -> None:
    original = _load(SCHEMAS / "DescribeQuorumResponse.json")
    mutated = copy.deepcopy(original)
    mutated["validVersions"] = "0-3"
    mutated["fields"][0]["about"] = "about texts are ignored"
    mutated["fields"][1]["ignorable"] = False  # Kafka: true
    del mutated["fields"][1]["nullableVersions"]
    mutated["fields"][2]["fields"].reverse()
    state = mutated["commonStructs"][0]["fields"]
    state[3]["default"] = "-1"  # Kafka has the number -1: the type counts too
    state.append({"name": "Extra", "type": "int8", "versions": "0+"})
    diffs = compare_schema(mutated, original)
    expected = [
        "DescribeQuorumResponse.validVersions:",
        "DescribeQuorumResponse.fields[ErrorMessage].ignorable:",
        "DescribeQuorumResponse.fields[ErrorMessage].nullableVersions: missing in ours",
        "DescribeQuorumResponse.fields[Topics].fields: names/order differ",
        "DescribeQuorumResponse.commonStructs[ReplicaState].fields[LastFetchTimestamp].default:",
        "DescribeQuorumResponse.commonStructs[ReplicaState].fields: names/order differ",
    ]
    for prefix in expected:
        assert any(d.startswith(prefix) for d in diffs), (prefix, diffs)
    assert len(diffs) == len(expected), diffs


def test_strip_json_comments_keeps_slashes_inside_strings() -> None:
    text = '{\n  // a comment\n  "a": "http://x // y", // trailing\n  "b": "q\\"//"\n}\n'
    assert json.loads(strip_json_comments(text)) == {"a": "http://x // y", "b": 'q"//'}
