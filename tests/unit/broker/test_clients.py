"""ConsumerManager and ProducerManager: registration, change flags, subscriptions, closed and
silent channels (with a fake clock)."""

from __future__ import annotations

import pytest

from rocketlite.broker.clients import ConsumerManager, ProducerManager
from rocketlite.protocol.bodies import (
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    SubscriptionData,
)


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def sub(topic: str, expr: str = "*", version: int = 1) -> SubscriptionData:
    return SubscriptionData.from_expression(topic, expr, sub_version=version)


def register(m: ConsumerManager, group: str, channel: object, client_id: str,
             *subs: SubscriptionData) -> bool:
    return m.register(group, channel, client_id, "JAVA", 479, ConsumeType.CONSUME_PASSIVELY,
                      MessageModel.CLUSTERING, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, subs)


def test_register_reports_membership_changes() -> None:
    m = ConsumerManager(clock=Clock())
    assert register(m, "G", "ch1", "c1", sub("T"))
    assert not register(m, "G", "ch1", "c1", sub("T"))  # a plain heartbeat
    assert register(m, "G", "ch2", "c2", sub("T"))
    assert sorted(m.client_ids("G")) == ["c1", "c2"]
    assert m.client_ids("other") == []
    info = m.get("G")
    assert info is not None and info.message_model is MessageModel.CLUSTERING
    assert info.consume_type is ConsumeType.CONSUME_PASSIVELY
    # a reconnected client on the same channel object with a new id counts as a change
    assert register(m, "G", "ch2", "c2-again", sub("T"))
    assert sorted(m.client_ids("G")) == ["c1", "c2-again"]


def test_subscription_updates() -> None:
    m = ConsumerManager(clock=Clock())
    register(m, "G", "ch", "c", sub("T", "TagA", 10))
    s = m.subscription("G", "T")
    assert s is not None and s.subString == "TagA"
    # an older version is ignored
    assert not register(m, "G", "ch", "c", sub("T", "TagB", 5))
    s = m.subscription("G", "T")
    assert s is not None and s.subString == "TagA"
    # a newer version with a new expression replaces it and is a change
    assert register(m, "G", "ch", "c", sub("T", "TagB || TagC", 11))
    s = m.subscription("G", "T")
    assert s is not None and s.tagsSet == {"TagB", "TagC"}
    # a newer version of the same expression is taken silently
    assert not register(m, "G", "ch", "c", sub("T", "TagB || TagC", 12))
    s = m.subscription("G", "T")
    assert s is not None and s.subVersion == 12
    # a new topic, and a topic dropped
    assert register(m, "G", "ch", "c", sub("T", "TagB || TagC", 12), sub("U"))
    assert register(m, "G", "ch", "c", sub("U"))
    assert m.subscription("G", "T") is None and m.subscription("G", "U") is not None
    assert m.subscription("nope", "U") is None


def test_unregister_and_channel_closed() -> None:
    m = ConsumerManager(clock=Clock())
    register(m, "G1", "a", "ca", sub("T"))
    register(m, "G2", "a", "ca", sub("T"))
    register(m, "G1", "b", "cb", sub("T"))
    assert m.unregister("G1", "b") and not m.unregister("G1", "b")
    assert not m.unregister("missing", "a")
    assert sorted(m.channel_closed("a")) == ["G1", "G2"]
    assert m.get("G1") is None and m.get("G2") is None  # empty groups are dropped
    assert m.channel_closed("a") == []


def test_scan_expired_with_a_fake_clock() -> None:
    clock = Clock()
    m = ConsumerManager(channel_expired_ms=120_000, clock=clock)
    register(m, "G1", "old", "c-old", sub("T"))
    register(m, "G2", "old", "c-old", sub("T"))
    clock.now += 60_000
    register(m, "G1", "new", "c-new", sub("T"))
    clock.now += 60_000  # "old" is exactly at the limit: still alive
    assert m.scan_expired() == []
    clock.now += 1
    expired = m.scan_expired()
    assert len(expired) == 1
    channel, groups = expired[0]
    assert channel == "old" and sorted(groups) == ["G1", "G2"]
    assert m.client_ids("G1") == ["c-new"] and m.get("G2") is None
    # a heartbeat refreshes the member
    clock.now += 100_000
    register(m, "G1", "new", "c-new", sub("T"))
    clock.now += 100_000
    assert m.scan_expired() == []
    clock.now += 20_001
    assert [ch for ch, _ in m.scan_expired()] == ["new"]
    assert m.groups == {}


def test_group_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    from rocketlite.broker import clients

    monkeypatch.setattr(clients, "MAX_CHANNELS_PER_GROUP", 2)
    monkeypatch.setattr(clients, "MAX_GROUPS", 2)
    m = ConsumerManager(clock=Clock())
    register(m, "G", "a", "a", sub("T"))
    register(m, "G", "b", "b", sub("T"))
    with pytest.raises(ValueError, match="members"):
        register(m, "G", "c", "c", sub("T"))
    register(m, "H", "a", "a", sub("T"))
    with pytest.raises(ValueError, match="groups"):
        register(m, "I", "a", "a", sub("T"))


def test_producers() -> None:
    clock = Clock()
    m = ProducerManager(channel_expired_ms=1000, clock=clock)
    m.register("P", "a", "ca", "JAVA", 1)
    m.register("P", "b", "cb", "CPP", 1)
    m.register("Q", "a", "ca", "JAVA", 1)
    assert set(m.channels("P")) == {"a", "b"} and m.channels("none") == []
    m.unregister("P", "b")
    assert m.channels("P") == ["a"]
    m.channel_closed("a")
    assert m.groups == {}
    m.register("P", "a", "ca", "JAVA", 1)
    clock.now += 500
    m.register("P", "b", "cb", "JAVA", 1)
    clock.now += 501
    assert m.scan_expired() == ["a"]
    assert m.channels("P") == ["b"]
    m.unregister("missing", "b")  # no error
