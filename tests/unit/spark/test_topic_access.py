"""The topic source's pull loop without a broker: a fake queue answers pulls as the broker does
(32 messages at most, tag filtering by scanning, OFFSET_MOVED below the minimum, skipped units
whose CommitLog bytes are gone), and ``TopicAccess.pull_range`` must hand out exactly the range."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from rocketlite.client.broker_api import PullResult, PullStatus
from rocketlite.client.message import MessageExt
from rocketlite.formats.properties import TAGS
from rocketlite.protocol.bodies import MessageQueue
from rocketlite.spark.offsets import DataLossError, QueueKey, QueueRange
from rocketlite.spark.topic_access import PullSpec, TopicAccess, is_internal_topic, take_pull

Q = QueueKey("T", "broker-a", 0)


def message(offset: int, tag: str | None) -> MessageExt:
    props = {TAGS: tag} if tag else {}
    return MessageExt("T", b"m%d" % offset, props, 0, offset, offset * 100, 0, 0, 0, 0, "h:1", "h:2", 0, 0, 0,
                      f"id{offset}", f"id{offset}", "broker-a")


class FakeQueue:
    """Queue offsets [lo, hi); ``removed`` offsets point at deleted CommitLog bytes."""

    def __init__(self, lo: int, hi: int, *, tag: Any = None, removed: range = range(0),
                 cap: int = 32) -> None:
        self.lo, self.hi, self.removed, self.cap = lo, hi, removed, cap
        self.tag = tag or (lambda i: None)
        self.pulls: list[tuple[int, int]] = []
        self.in_flight = self.max_in_flight = 0

    async def pull(self, group: str, mq: MessageQueue, offset: int, max_nums: int, *,
                   expression: str | None = "*") -> PullResult:
        self.pulls.append((offset, max_nums))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        await asyncio.sleep(0)
        self.in_flight -= 1
        lo, hi = self.lo, self.hi
        if offset < lo:
            return PullResult(PullStatus.OFFSET_ILLEGAL, lo, lo, hi, [])
        if offset >= hi:
            return PullResult(PullStatus.NO_NEW_MSG if offset == hi else PullStatus.OFFSET_ILLEGAL,
                              offset if offset == hi else hi, lo, hi, [])
        tags = None if expression in (None, "*") else {t.strip() for t in expression.split("||")}
        msgs: list[MessageExt] = []
        pos, scanned = offset, 0
        while pos < hi and len(msgs) < min(max_nums, self.cap) and scanned < 800:
            scanned += 1
            if pos in self.removed:
                pass
            elif tags is None or self.tag(pos) in tags:
                msgs.append(message(pos, self.tag(pos)))
            pos += 1
        if msgs:
            return PullResult(PullStatus.FOUND, pos, lo, hi, msgs)
        return PullResult(PullStatus.NO_MATCHED_MSG, pos, lo, hi, [])


def read(queue: FakeQueue, start: int, end: int, **spec: Any) -> list[int]:
    access = TopicAccess("127.0.0.1:1")
    try:
        access.api = queue  # type: ignore[assignment]
        out: list[int] = []
        for msgs in access.pull_range(QueueRange("T", "broker-a", 0, start, end), PullSpec(**spec)):
            out += [m.queue_offset for m in msgs]
        return out
    finally:
        access.close()


def test_reads_exactly_the_range_with_pulls_in_flight() -> None:
    queue = FakeQueue(0, 1000)
    assert read(queue, 10, 905) == list(range(10, 905))
    assert queue.max_in_flight > 1  # pipelined
    assert all(n <= 1000 for _, n in queue.pulls) and queue.pulls[0] == (10, 895)


def test_tag_filter_keeps_matching_messages_inside_the_range() -> None:
    queue = FakeQueue(0, 500, tag=lambda i: "a" if i % 3 == 0 else "b")
    got = read(queue, 7, 400, expression="a", tags=frozenset({"a"}))
    assert got == [i for i in range(7, 400) if i % 3 == 0]
    assert queue.max_in_flight == 1  # the next start is unknown: no speculation


def test_start_below_the_minimum_fails_or_skips(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(DataLossError, match=r"offsets 5\.\.99 are gone"):
        read(FakeQueue(100, 200), 5, 150)
    with caplog.at_level(logging.WARNING, "rocketlite.spark.topic_access"):
        assert read(FakeQueue(100, 200), 5, 150, fail_on_data_loss=False) == list(range(100, 150))
    assert "failOnDataLoss=false" in caplog.text
    assert read(FakeQueue(100, 200), 5, 80, fail_on_data_loss=False) == []  # all of it is gone


def test_units_of_deleted_commitlog_bytes_are_data_loss() -> None:
    # Inside a pull's messages (the broker skips such units and reads on), and across whole pulls.
    for removed in (range(40, 50), range(40, 90), range(250)):
        queue = FakeQueue(0, 300, removed=removed)
        with pytest.raises(DataLossError, match=rf"offsets {removed.start}\.\.{removed.stop - 1} are gone"):
            read(queue, 0, 300)
        kept = [*range(removed.start), *range(removed.stop, 300)]
        assert read(queue, 0, 300, fail_on_data_loss=False) == kept
    # Deleted units beyond the range's end are not this range's loss.
    assert read(FakeQueue(0, 300, removed=range(20, 30)), 0, 20) == list(range(20))


def test_a_queue_ending_below_the_range_is_data_loss() -> None:
    with pytest.raises(DataLossError, match="the queue ends at offset 50, below offset 80"):
        read(FakeQueue(0, 50), 0, 80)
    assert read(FakeQueue(0, 50), 0, 80, fail_on_data_loss=False) == list(range(50))


def test_take_pull_statuses() -> None:
    spec = PullSpec()
    found = PullResult(PullStatus.FOUND, 12, 0, 100, [message(i, None) for i in range(8, 12)])
    nxt, msgs = take_pull(found, spec, Q, 8, 10)
    assert nxt == 12 and [m.queue_offset for m in msgs] == [8, 9]  # past the range's end: dropped
    # Not readable yet below the max (OFFSET_FOUND_NULL): pull the same offset again.
    assert take_pull(PullResult(PullStatus.NO_NEW_MSG, 5, 0, 10, []), spec, Q, 5, 10) == (5, [])


def test_internal_topics() -> None:
    assert is_internal_topic("%RETRY%G") and is_internal_topic("TBW102") and is_internal_topic("rmq_sys_x")
    assert not is_internal_topic("TopicA")


def test_stopping_early_ends_the_pulls_in_flight() -> None:
    queue = FakeQueue(0, 1000)
    access = TopicAccess("127.0.0.1:1")
    access.api = queue  # type: ignore[assignment]
    pulls = access.pull_range(QueueRange("T", "broker-a", 0, 0, 1000), PullSpec())
    first = next(pulls)
    pulls.close()
    access.close()
    assert [m.queue_offset for m in first] == list(range(32))
    assert len(queue.pulls) < 10
    access.close()  # twice is harmless
