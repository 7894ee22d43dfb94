"""ApiVersions answers, including Kafka's downgrade for versions we do not know.

A client that asks with a newer ApiVersions version than ours gets a *v0*
response with UNSUPPORTED_VERSION and our ApiVersions range, so it can retry with
a version we speak (KIP-511); everything else about the answer follows Kafka 3.9.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kraftnode.protocol.errors import Errors
from kraftnode.protocol.framing import Request
from kraftnode.protocol.generated import ApiVersionsRequest, ApiVersionsResponse
from kraftnode.protocol.generated.api_versions_response import (
    _ApiVersionsResponse_ApiVersion as _ApiVersion,
)
from kraftnode.protocol.registry import API_VERSIONS, SERVED, VOTE

# KIP-511: ClientSoftwareName/Version must match this (ApiVersionsRequest.isValid()).
_SOFTWARE_RE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")

METADATA_VERSION_3_9 = 21


def version_range(lo: int, hi: int) -> str:
    """A supported range as Kafka's VersionRange.toString prints it in error messages."""
    return str(lo) if lo == hi else f"{lo}-{hi}"


@dataclass
class FeatureView:
    """Supported and finalized feature levels, as ApiVersions reports them."""

    supported: dict[str, tuple[int, int]] = field(
        default_factory=lambda: {
            "kraft.version": (0, 1),
            "metadata.version": (1, METADATA_VERSION_3_9),
        }
    )
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


def answer(request: Request, features: FeatureView) -> tuple[ApiVersionsResponse, int]:
    """Return (response, version to encode it at)."""
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
    supported = [
        ApiVersionsResponse.SupportedFeatureKey(name=name, min_version=lo, max_version=hi)
        for name, (lo, hi) in sorted(features.supported.items())
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
        for name, lvl in sorted(features.finalized.items())
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
