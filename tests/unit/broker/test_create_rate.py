"""The auto-create token bucket (``broker/create_rate.py``) and the limit counters it feeds: a
minute's worth at once, then the rate, each refusal counted once; and the managers that use it
refuse a creation past it with a remark that names the limit."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.create_rate import CreateRate
from rocketlite.broker.subscriptions import SubscriptionGroupManager
from rocketlite.broker.topics import AUTO_CREATE_TOPIC, TopicConfigManager, TopicNotExistError
from rocketlite.remoting.limits import LimitCounts


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_a_minutes_worth_at_once_then_the_rate() -> None:
    clock, counts = Clock(), LimitCounts()
    rate = CreateRate(60, "autocreate_topic", "autoCreateTopicsPerMinute", counts, clock=clock)
    assert [rate.take() for _ in range(61)] == [True] * 60 + [False]
    assert counts.get("autocreate_topic") == 1
    clock.t += 0.5  # half a token
    assert not rate.take()
    clock.t += 0.5
    assert rate.take() and not rate.take()
    clock.t += 3600  # refills to a minute's worth, no more
    assert sum(rate.take() for _ in range(100)) == 60
    assert counts.get("autocreate_topic") == 1 + 1 + 1 + 40
    assert counts.get("autocreate_group") == 0


def test_counts_only_what_was_hit() -> None:
    counts = LimitCounts()
    counts.hit("inflight")
    counts.hit("inflight")
    assert (counts.get("inflight"), counts.get("connections")) == (2, 0)
    assert counts.counts == {"inflight": 2}


def test_a_rate_must_be_positive() -> None:
    with pytest.raises(ValueError, match="autoCreateGroupsPerMinute=0"):
        CreateRate(0, "autocreate_group", "autoCreateGroupsPerMinute", LimitCounts())


def test_topics_past_the_rate_are_not_created(tmp_path: Path) -> None:
    topics = TopicConfigManager(BrokerConfig(), tmp_path / "topics.json")
    counts = LimitCounts()
    topics.create_rate = CreateRate(2, "autocreate_topic", "autoCreateTopicsPerMinute", counts,
                                    clock=Clock())
    assert topics.create_in_send("T1", AUTO_CREATE_TOPIC, 4) is not None
    assert topics.create_in_send("T2", AUTO_CREATE_TOPIC, 4) is not None
    assert topics.create_in_send("T1", AUTO_CREATE_TOPIC, 4) is not None  # exists: no token
    with pytest.raises(TopicNotExistError, match=r"topic\[T3\].*autoCreateTopicsPerMinute=2"):
        topics.create_in_send("T3", AUTO_CREATE_TOPIC, 4)
    assert "T3" not in topics.table and counts.get("autocreate_topic") == 1


def test_groups_past_the_rate_are_not_created(tmp_path: Path) -> None:
    groups = SubscriptionGroupManager(tmp_path / "subscriptionGroup.json")
    groups.create_rate = CreateRate(1, "autocreate_group", "autoCreateGroupsPerMinute",
                                    LimitCounts(), clock=Clock())
    assert groups.get("G1") is not None
    assert groups.get("G2") is None and "G2" not in groups.table
    assert "autoCreateGroupsPerMinute=1" in groups.missing("G2", "does not exist")
    groups.auto_create = False  # then a missing group is just missing
    assert groups.missing("G2", "does not exist") == "does not exist"
