"""Permissions: parsing (Permission.parsePermFromString), checking, and what each request needs
(PlainAccessResource.parse)."""

from __future__ import annotations

import pytest

from rocketlite.acl.perm import (
    ANY,
    DENY,
    PUB,
    SUB,
    check_permission,
    needed,
    parse_perm,
    parse_resource_perms,
)
from rocketlite.common.errors import FormatError
from rocketlite.protocol.bodies import ConsumerData, HeartbeatData, SubscriptionData
from rocketlite.protocol.codes import RequestCode


@pytest.mark.parametrize(("text", "perm"), [
    ("PUB", PUB), ("SUB", SUB), ("PUB|SUB", PUB | SUB), ("SUB|PUB", PUB | SUB), ("ANY", ANY),
    ("DENY", DENY), ("pub", PUB), ("nonsense", DENY), (None, DENY),
])
def test_parse_perm(text: str | None, perm: int) -> None:
    assert parse_perm(text) == perm


def test_check_permission() -> None:
    assert check_permission(PUB, PUB | SUB)
    assert not check_permission(SUB, PUB)
    assert check_permission(ANY, SUB) and check_permission(ANY, PUB)
    assert not check_permission(ANY, DENY)
    assert not check_permission(PUB, DENY | PUB)  # DENY wins


def test_resource_perms_put_groups_under_their_retry_topic() -> None:
    assert parse_resource_perms(["topicA=PUB", " topicB = PUB|SUB"], group=False, where="t") == {
        "topicA": PUB, "topicB": PUB | SUB}
    assert parse_resource_perms(["g1=SUB"], group=True, where="g") == {"%RETRY%g1": SUB}
    with pytest.raises(FormatError, match="is not name=PERM"):
        parse_resource_perms(["justname"], group=False, where="t")


def test_needed_per_request_code() -> None:
    assert needed(RequestCode.SEND_MESSAGE_V2, {"a": "pg", "b": "T"}, None) == {"T": PUB}
    assert needed(RequestCode.SEND_BATCH_MESSAGE, {"a": "pg", "b": "T"}, None) == {"T": PUB}
    assert needed(RequestCode.SEND_MESSAGE, {"topic": "T", "producerGroup": "pg"}, None) == {"T": PUB}
    # a send to a retry topic (a message sent back) needs SUB on the group, not PUB on a topic
    assert needed(RequestCode.SEND_MESSAGE_V2, {"a": "G", "b": "%RETRY%G"}, None) == {
        "%RETRY%G": SUB}
    assert needed(RequestCode.PULL_MESSAGE, {"topic": "T", "consumerGroup": "G"}, None) == {
        "T": SUB, "%RETRY%G": SUB}
    assert needed(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "G", "originTopic": "T"}, None) == {
        "T": PUB, "%RETRY%G": SUB}
    assert needed(RequestCode.UPDATE_CONSUMER_OFFSET, {"topic": "T", "consumerGroup": "G"},
                  None) == {"T": SUB, "%RETRY%G": SUB}
    assert needed(RequestCode.QUERY_MESSAGE, {"topic": "T"}, None) == {"T": SUB}
    assert needed(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"}, None) == {
        "%RETRY%G": SUB}
    assert needed(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}, None) == {}


def test_heartbeat_needs_sub_on_each_subscription_and_group() -> None:
    hb = HeartbeatData(clientID="c", consumerDataSet=[ConsumerData(
        groupName="G", subscriptionDataSet=[SubscriptionData(topic="T1"), SubscriptionData(topic="T2")])])
    assert needed(RequestCode.HEART_BEAT, {}, hb.to_json()) == {"%RETRY%G": SUB, "T1": SUB, "T2": SUB}
    producer_only = HeartbeatData(clientID="c")
    assert needed(RequestCode.HEART_BEAT, {}, producer_only.to_json()) == {}
