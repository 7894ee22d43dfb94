"""ApiVersions answers, including Kafka's downgrade for versions we do not know.

A client that asks with a newer ApiVersions version than ours gets a *v0*
response with UNSUPPORTED_VERSION and our ApiVersions range, so it can retry with
a version we speak (KIP-511); everything else about the answer follows Kafka 4.4:
v5 (KIP-1242) carries the ClusterId and NodeId the client means to reach, and a
mismatch is REBOOTSTRAP_REQUIRED (:func:`answer`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from kraftnode import features
from kraftnode import features as features_mod  # ``features`` is also answer()'s parameter
from kraftnode.java_order import java_string_hash
from kraftnode.protocol.errors import Errors
from kraftnode.protocol.framing import Request
from kraftnode.protocol.generated import ApiVersionsRequest, ApiVersionsResponse
from kraftnode.protocol.generated.api_versions_response import (
    _ApiVersionsResponse_ApiVersion as _ApiVersion,
)
from kraftnode.protocol.registry import API_VERSIONS, SERVED, VOTE

# KIP-511: ClientSoftwareName/Version must match this (ApiVersionsRequest.isValid()).
_SOFTWARE_RE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")

#: what a node without controller duties (or before their first replay) reports finalized
METADATA_VERSION_3_9 = 21


def java_feature_order(names: Iterable[str], capacity: int = 16) -> list[str]:
    """The order a Kafka 4.4 controller lists features in ApiVersions: its maps' (a
    java.util.HashMap) iteration order -- by bucket, insertion order within one. The supported
    map starts at 16 buckets; the finalized one at 8, holding metadata.version last (as a
    genuine 4.4 controller lists them: group, streams, transaction, eligible.leader.replicas,
    share, metadata). The capacity doubles while the size exceeds 3/4 of it."""
    ordered = list(names)
    while len(ordered) > capacity * 3 // 4:
        capacity *= 2

    def bucket(name: str) -> int:
        h = java_string_hash(name) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(ordered, key=bucket)


def version_range(lo: int, hi: int) -> str:
    """A supported range as Kafka's VersionRange.toString prints it in error messages."""
    return str(lo) if lo == hi else f"{lo}-{hi}"


@dataclass
class FeatureView:
    """Supported and finalized feature levels, as ApiVersions reports them: supported as a
    Kafka 4.4 controller supports them (metadata.version 3.3-IV3 to 4.4-IV2, every production
    feature from 0 to its latest production level: kraftnode.features)."""

    supported: dict[str, tuple[int, int]] = field(default_factory=features.supported_features)
    finalized_epoch: int = -1
    finalized: dict[str, int] = field(default_factory=dict)
    #: Advertised caps below what we can decode: Vote v2 (KIP-996, Kafka 4.0) only when
    #: pre-vote is enabled, so by default the answer is Kafka 3.9's.
    api_max: dict[int, int] = field(default_factory=lambda: {VOTE: 1})


def _api_keys(api_max: dict[int, int] | None = None) -> list[_ApiVersion]:
    caps = api_max or {}
    return [
        ApiVersionsResponse.ApiVersion(api_key=s.key, min_version=s.advertised_min_version,
                                       max_version=min(s.max_version, caps.get(s.key, s.max_version)))
        for s in sorted(SERVED.values(), key=lambda s: s.key)
    ]


def _wrong_node(body: ApiVersionsRequest, version: int, cluster_id: str | None, node_id: int | None) -> bool:
    """KIP-1242 (ApiVersions v5): the client names the cluster and node it believes it is
    talking to -- both learned from an earlier Metadata answer -- so that a node id or address
    reused by another cluster or node is noticed at once. The check is Kafka 4.4's broker's
    (KafkaApis ``clusterIdOrNodeIdIsInvalid``): only when ClusterId is given (the NodeId is
    not checked alone), and a ClusterId or NodeId that differs from ours is a mismatch.

    A Kafka 4.4 *controller* (ControllerApis) does not check at all. kraftnode's listener
    also answers the broker-facing APIs (Produce, Fetch, Metadata naming kraftnode's own
    nodes), so clients learn our cluster id and node ids from our Metadata and the broker's
    check is the one that protects them; a controller client that sends the fields names
    this node's own cluster id and node id, which pass. ``cluster_id``/``node_id`` None:
    the caller does not check (the check is skipped)."""
    if version < 5 or body.cluster_id is None or cluster_id is None or node_id is None:
        return False
    return body.cluster_id != cluster_id or body.node_id != node_id


def answer(request: Request, features: FeatureView, cluster_id: str | None = None,
           node_id: int | None = None) -> tuple[ApiVersionsResponse, int]:
    """Return (response, version to encode it at). ``cluster_id`` and ``node_id`` are this
    node's, for the KIP-1242 check of v5 (:func:`_wrong_node`)."""
    if request.body is None:  # a version we do not support: downgrade to v0
        spec = SERVED[API_VERSIONS]
        return ApiVersionsResponse(
            error_code=Errors.UNSUPPORTED_VERSION,
            api_keys=[ApiVersionsResponse.ApiVersion(
                api_key=API_VERSIONS, min_version=spec.min_version, max_version=spec.max_version)],
        ), 0
    version = request.api_version
    body = request.body
    assert isinstance(body, ApiVersionsRequest)
    if version >= 3 and not (
        _SOFTWARE_RE.fullmatch(body.client_software_name or "")
        and _SOFTWARE_RE.fullmatch(body.client_software_version or "")
    ):
        return ApiVersionsResponse(error_code=Errors.INVALID_REQUEST), version
    if _wrong_node(body, version, cluster_id, node_id):
        # Kafka's ApiVersionsRequest.getErrorResponse: the error and the throttle time, no
        # api keys; the client closes the connection and rebootstraps
        return ApiVersionsResponse(error_code=Errors.REBOOTSTRAP_REQUIRED), version
    supported = [
        ApiVersionsResponse.SupportedFeatureKey(name=name, min_version=lo, max_version=hi)
        for name, (lo, hi) in ((n, features.supported[n]) for n in java_feature_order(sorted(features.supported), 16))
        # Before v4, clients cannot read a feature whose min version is 0 (KIP-1022).
        if version >= 4 or lo != 0
    ]
    # A finalized level of 0 means "not enabled": Kafka never lists it, at any version
    # (FinalizedFeatures.setFinalizedLevel removes a feature set to 0; FeaturesDelta drops a
    # FeatureLevelRecord of level 0). So a static quorum (kraft.version 0) reports only
    # metadata.version, as a Kafka controller does, to describeFeatures() and kafka-features.sh.
    finalized = [
        ApiVersionsResponse.FinalizedFeatureKey(name=name, max_version_level=lvl,
                                                min_version_level=lvl)
        for name, lvl in ((n, features.finalized[n]) for n in java_feature_order(
            [n for n in sorted(features.finalized) if n != features_mod.METADATA_VERSION]
            + [features_mod.METADATA_VERSION] * (features_mod.METADATA_VERSION in features.finalized), 8))
        if lvl != 0
    ]
    return ApiVersionsResponse(
        error_code=Errors.NONE,
        api_keys=_api_keys(features.api_max),
        throttle_time_ms=0,
        supported_features=supported,
        finalized_features_epoch=features.finalized_epoch,
        finalized_features=finalized,
        zk_migration_ready=False,
    ), version
