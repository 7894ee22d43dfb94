"""Error responses of the controller APIs, as Kafka's ``AbstractRequest.getErrorResponse``
builds them: the error where each API puts it (per topic, per resource, per entry, or at the top).
Shared by the controller's handlers and the security layer's refusals (security/api_checks.py)."""

from __future__ import annotations

from typing import Any

from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import SERVED

__all__ = ["ERROR_SHAPED", "error_response"]

#: the controller APIs whose error responses :func:`error_response` builds
ERROR_SHAPED = frozenset({19, 20, 33, 37, 38, 39, 40, 41, 43, 44, 45, 46, 49, 56, 58, 62, 63, 64, 67, 73, 94})


def error_response(key: int, v: int, q: Any, code: int, message: str | None = None) -> Any:
    """AbstractRequest.getErrorResponse of the controller APIs: the error where Kafka puts it."""
    R: Any
    if key == 19:
        R = w.CreateTopicsResponse
        return R(throttle_time_ms=0, topics=[R.CreatableTopicResult(name=t.name, error_code=code,
                                                                    error_message=message) for t in q.topics])
    if key == 20:
        R = w.DeleteTopicsResponse
        if v >= 6:
            return R(throttle_time_ms=0, responses=[R.DeletableTopicResult(
                name=t.name, topic_id=t.topic_id, error_code=code, error_message=message) for t in q.topics])
        return R(throttle_time_ms=0, responses=[R.DeletableTopicResult(
            name=n, error_code=code, error_message=message) for n in q.topic_names])
    if key == 37:
        R = w.CreatePartitionsResponse
        return R(throttle_time_ms=0, results=[R.CreatePartitionsTopicResult(
            name=t.name, error_code=code, error_message=message) for t in q.topics])
    if key in (33, 44):
        R = w.AlterConfigsResponse if key == 33 else w.IncrementalAlterConfigsResponse
        return R(throttle_time_ms=0, responses=[R.AlterConfigsResourceResponse(
            error_code=code, error_message=message, resource_type=r.resource_type, resource_name=r.resource_name)
            for r in q.resources])
    if key == 49:
        R = w.AlterClientQuotasResponse
        return R(throttle_time_ms=0, entries=[R.EntryData(error_code=code, error_message=message, entity=[
            R.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])
            for entry in q.entries])
    if key == 43:
        R = w.ElectLeadersResponse
        results = [R.ReplicaElectionResult(topic=t.topic, partition_result=[
            R.PartitionResult(partition_id=p, error_code=code, error_message=message) for p in t.partitions])
            for t in (q.topic_partitions or [])]
        return R(throttle_time_ms=0, error_code=code, replica_election_results=results)
    resp: Any = SERVED[key].response()
    if hasattr(resp, "error_code"):
        resp.error_code = code
    if hasattr(resp, "error_message"):
        resp.error_message = message
    if key in (39, 40):
        resp.expiry_timestamp_ms = -1
    return resp
