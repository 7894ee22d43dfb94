"""ConsumerGroupHeartbeat v1 (Kafka 4.0+) in the sans-IO coordinator: KIP-848's
SubscribedTopicRegex with RE2/J semantics and INVALID_REGULAR_EXPRESSION, KIP-1082's
consumer-made member ids, and ConsumerGroupDescribe v1's MemberType (KIP-1099).

The answers and messages are Kafka 4.x's GroupMetadataManager's; librdkafka's new consumer
(``group.protocol=consumer``) speaks v1 only, so these are what it meets first."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from kraftnode.groups import GroupConfig, GroupCoordinator
from kraftnode.groups.regex import InvalidRegex, compile_regex, matching_topics
from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w

TOPIC = "__cluster_metadata"
TOPIC_ID = uuid.UUID(int=1)
ORDERS_ID = uuid.UUID(int=2)
CFG = GroupConfig(rebalance_protocols=("classic", "consumer"), consumer_session_timeout_ms=3000,
                  consumer_heartbeat_interval_ms=500)
R = w.ConsumerGroupHeartbeatRequest


class Cluster:
    """The topics the coordinator sees; a test adds one to see a regex pick it up."""

    def __init__(self) -> None:
        self.topics: dict[str, tuple[uuid.UUID, int]] = {TOPIC: (TOPIC_ID, 1)}
        self.coordinator = GroupCoordinator(CFG, lambda: dict(self.topics))
        self.records: list[Any] = []
        self.now = 0

    def hb(self, member: str, epoch: int, *, version: int = 1, names: list[str] | None = None,
           regex: str | None = None, owned: list[tuple[uuid.UUID, list[int]]] | None = None,
           rebalance: int = -1, new_id: str = "coordinator-made") -> Any:
        self.now += 10
        q = R(group_id="g", member_id=member, member_epoch=epoch, instance_id=None, rack_id=None,
              rebalance_timeout_ms=rebalance, subscribed_topic_names=names, subscribed_topic_regex=regex,
              server_assignor=None,
              topic_partitions=None if owned is None else
              [R.TopicPartitions(topic_id=t, partitions=ps) for t, ps in owned])
        result = self.coordinator.consumer_group_heartbeat("t", q, "cli", "/127.0.0.1", new_id, self.now,
                                                           version)
        self.records.append(result.records)
        return dict(result.replies)["t"]

    def join(self, member: str, **kw: Any) -> Any:
        return self.hb(member, 0, owned=[], rebalance=5000, **kw)

    def describe(self) -> Any:
        return self.coordinator.consumer_group_describe(["g"], {TOPIC_ID: TOPIC, ORDERS_ID: "orders-1"})[0]


def _assigned(resp: Any) -> list[tuple[uuid.UUID, list[int]]]:
    return [(t.topic_id, list(t.partitions)) for t in resp.assignment.topic_partitions]


# ------------------------------------------------------------------ KIP-1082 member ids

def test_v1_requires_the_consumer_to_make_its_member_id() -> None:
    c = Cluster()
    a = c.join("", names=[TOPIC])
    assert (a.error_code, a.error_message) == (Errors.INVALID_REQUEST, "MemberId can't be empty.")
    assert c.records[-1] == []
    # v0 still lets the coordinator make it
    a0 = c.join("", names=[TOPIC], version=0)
    assert a0.error_code == 0 and a0.member_id == "coordinator-made"
    # v1 keeps the id the consumer made
    b = c.join("consumer-made-id", names=[TOPIC])
    assert b.error_code == 0 and b.member_id == "consumer-made-id"


def test_v1_join_needs_names_or_regex_but_either_may_be_empty() -> None:
    c = Cluster()
    a = c.join("m1")
    assert a.error_code == Errors.INVALID_REQUEST
    assert a.error_message == ("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null "
                               "when (re-)joining.")
    # an empty list (or an empty regex) joins the group subscribed to nothing
    b = c.join("m1", names=[])
    assert b.error_code == 0 and b.member_epoch == 1 and _assigned(b) == []
    e = c.join("m2", regex="")
    assert e.error_code == 0 and _assigned(e) == []


# ------------------------------------------------------------------ KIP-848 regex

def test_regex_subscription_is_assigned_the_matching_topic() -> None:
    c = Cluster()
    a = c.join("m1", regex="^__cluster.*")
    assert a.error_code == 0 and a.member_epoch == 1
    assert _assigned(a) == [(TOPIC_ID, [0])]
    d = c.describe()
    (m,) = d.members
    assert (m.subscribed_topic_regex, m.subscribed_topic_names, m.member_type) == ("^__cluster.*", [], 1)
    assert d.group_state == "Stable"
    # a regex-only full heartbeat (after an error, say) gets the whole assignment again
    full = c.hb("m1", 1, regex="^__cluster.*", owned=[(TOPIC_ID, [0])], rebalance=5000)
    assert full.error_code == 0 and _assigned(full) == [(TOPIC_ID, [0])]
    # a plain heartbeat changes nothing and says nothing of the assignment
    same = c.hb("m1", 1)
    assert same.error_code == 0 and same.member_epoch == 1 and same.assignment is None
    assert c.records[-1] == []


def test_regex_matches_whole_names_with_re2_semantics() -> None:
    c = Cluster()
    # RE2/J's matches(): "cluster" is inside the name but is not the name
    a = c.join("m1", regex="cluster")
    assert a.error_code == 0 and _assigned(a) == []
    # both names and a regex: the union
    b = c.join("m2", names=[TOPIC], regex="cluster")
    assert b.error_code == 0


@pytest.mark.parametrize("pattern, description", [
    ("(abc", "missing closing )"),
    ("[a-", "missing closing ]"),
    ("*a", "missing argument to repetition operator"),
    ("a**", "invalid nested repetition operator"),
    ("x{2,1}", "invalid repeat count"),
    ("[z-a]", "invalid character class range"),
    ("\\8", "invalid escape sequence"),
    # Python's re accepts both of these: RE2 (and RE2/J) have no lookaround, no backreferences
    ("(?=__)__cluster_metadata", "invalid or unsupported Perl syntax"),
    ("(a)\\1", "invalid escape sequence"),
    ("abc)", "regexp/syntax: internal error"),
])
def test_an_invalid_regex_is_invalid_regular_expression(pattern: str, description: str) -> None:
    c = Cluster()
    a = c.join("m1", regex=pattern)
    assert a.error_code == Errors.INVALID_REGULAR_EXPRESSION == 128
    assert a.error_message == f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {description}."
    assert c.records[-1] == []        # refused before anything is written: the member is not admitted
    ok = c.join("m2", names=[TOPIC])
    assert ok.error_code == 0 and [m.member_id for m in c.describe().members] == ["m2"]


def test_python_re_would_have_accepted_what_re2_refuses() -> None:
    """Why the regex engine matters: these compile in Python's ``re`` (so a coordinator using
    it would admit the member) but RE2/J, and therefore Kafka, refuses them."""
    for pattern in ("(?=__)__cluster_metadata", "(a)\\1", "(?<!x)__cluster_metadata"):
        re.compile(pattern)
        with pytest.raises(InvalidRegex):
            compile_regex(pattern)
    # and RE2 has syntax Python's re lacks: Unicode classes
    assert matching_topics("\\pL+", ["orders", "t-1"]) == {"orders"}
    with pytest.raises(re.error):
        re.compile("\\pL+")


def test_changing_to_an_invalid_regex_keeps_the_member_as_it_was() -> None:
    c = Cluster()
    a = c.join("m1", regex="^__cluster.*")
    epoch = c.describe().group_epoch
    bad = c.hb("m1", a.member_epoch, regex="[")
    assert bad.error_code == Errors.INVALID_REGULAR_EXPRESSION and c.records[-1] == []
    d = c.describe()
    assert d.group_epoch == epoch and d.members[0].subscribed_topic_regex == "^__cluster.*"


def test_a_topic_that_appears_and_matches_is_assigned_at_the_next_heartbeat() -> None:
    c = Cluster()
    a = c.join("m1", regex="orders-.*")
    assert a.error_code == 0 and _assigned(a) == []
    epoch = c.describe().group_epoch
    c.topics["orders-1"] = (ORDERS_ID, 2)
    b = c.hb("m1", a.member_epoch)
    assert b.error_code == 0 and b.member_epoch > a.member_epoch
    assert _assigned(b) == [(ORDERS_ID, [0, 1])]
    assert c.describe().group_epoch == epoch + 1
    # the regex changes away from the topic: it is revoked (the member still owns it)
    c2 = c.hb("m1", b.member_epoch, regex="^__cluster.*", owned=[(ORDERS_ID, [0, 1])])
    assert c2.error_code == 0 and _assigned(c2) == []
    c3 = c.hb("m1", c2.member_epoch, owned=[])
    assert _assigned(c3) == [(TOPIC_ID, [0])]


def test_a_new_coordinator_replays_the_regex_subscription() -> None:
    c = Cluster()
    a = c.join("m1", regex="^__cluster.*")
    latest: dict[bytes, bytes | None] = {}
    for records in c.records:
        latest.update(records)
    new = GroupCoordinator(CFG, lambda: {TOPIC: (TOPIC_ID, 1)})
    new.replay_all(latest.items())
    new.on_loaded(1_000)
    d = new.consumer_group_describe(["g"], {TOPIC_ID: TOPIC})[0]
    assert d.members[0].subscribed_topic_regex == "^__cluster.*" and d.group_state == "Stable"
    q = R(group_id="g", member_id="m1", member_epoch=a.member_epoch, instance_id=None, rack_id=None,
          rebalance_timeout_ms=-1, subscribed_topic_names=None, subscribed_topic_regex=None,
          server_assignor=None, topic_partitions=None)
    r = new.consumer_group_heartbeat("t", q, "cli", "/127.0.0.1", "x", 1_100, 1)
    resp = dict(r.replies)["t"]
    assert resp.error_code == 0 and resp.member_epoch == a.member_epoch and r.records == []


def test_describe_v1_member_type_and_v0_wire() -> None:
    """MemberType is written at v1 only (ignorable): a v0 answer is v0's bytes."""
    c = Cluster()
    c.join("m1", names=[TOPIC])
    d = w.ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=[c.describe()])
    assert d.groups[0].members[0].member_type == 1
    v1 = w.ConsumerGroupDescribeResponse.decode(d.encode(1), 1)
    v0 = w.ConsumerGroupDescribeResponse.decode(d.encode(0), 0)
    assert v1.groups[0].members[0].member_type == 1 and v0.groups[0].members[0].member_type == -1
