"""The client's side of GET_CONSUMER_RUNNING_INFO: the per-topic figures (one-minute window on an
injected clock), a ProcessQueue's state as ProcessQueueInfo, and the reply to the request
(properties added, jstack on request, an unknown group refused as Java refuses it)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from rocketlite.client import running_info
from rocketlite.client.consume_stats import WINDOW_S, ConsumeStatsTracker
from rocketlite.client.process_queue import ProcessQueue
from rocketlite.protocol.admin_headers import GetConsumerRunningInfoRequestHeader
from rocketlite.protocol.bodies import ConsumerData, ConsumeType, MessageQueue, SubscriptionData
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.running_info import ConsumerRunningInfo, ConsumeStatus, ProcessQueueInfo


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_figures_over_the_last_minute() -> None:
    clock = Clock()
    s = ConsumeStatsTracker(clock)
    assert s.status("T") == ConsumeStatus()
    clock.t += 10  # 10 s old: rates per second of its life
    s.pulled("T", 32, 0.004)
    s.pulled("T", 8, 0.002)
    s.consumed("T", 30, True, 0.010)
    s.consumed("T", 10, False, 0.030)
    st = s.status("T")
    assert st.pullRT == pytest.approx(3.0) and st.pullTPS == pytest.approx(4.0)
    assert st.consumeRT == pytest.approx(20.0)
    assert st.consumeOKTPS == pytest.approx(3.0) and st.consumeFailedTPS == pytest.approx(1.0)
    assert st.consumeFailedMsgs == 10
    clock.t += 100  # past the window: rates fall to 0, the failed count stays
    s.consumed("T", 6, True, 0.001)
    st = s.status("T")
    assert st.consumeOKTPS == pytest.approx(6 / WINDOW_S) and st.pullTPS == 0.0
    assert st.pullRT == 0.0 and st.consumeFailedMsgs == 10
    assert s.status("Other") == ConsumeStatus()


@dataclass
class Msg:
    queue_offset: int
    body: bytes


def test_process_queue_info() -> None:
    clock = Clock()
    pq: ProcessQueue[Msg] = ProcessQueue(clock=clock)
    pq.put([Msg(o, b"x" * 10) for o in (5, 6, 7, 8)])
    pq.take(2)  # orderly: 5 and 6 are being consumed
    pq.locked = True
    info = running_info.process_queue_info(pq, 5)
    assert (info.commitOffset, info.cachedMsgCount, info.cachedMsgMinOffset,
            info.cachedMsgMaxOffset) == (5, 2, 7, 8)
    assert (info.transactionMsgCount, info.transactionMsgMinOffset,
            info.transactionMsgMaxOffset) == (2, 5, 6)
    assert info.locked and not info.droped and info.cachedMsgSizeInMiB == 0
    assert abs(info.lastConsumeTimestamp - info.lastPullTimestamp) <= 1  # same instant
    empty = running_info.process_queue_info(ProcessQueue(clock=clock), -1)
    assert (empty.cachedMsgCount, empty.cachedMsgMinOffset, empty.transactionMsgCount) == (0, 0, 0)


class FakeConsumer:
    def __init__(self) -> None:
        self.mq = MessageQueue(topic="T", brokerName="b", queueId=0)

    def running_info(self) -> ConsumerRunningInfo:
        return running_info.build({"consumerGroup": "G", "flag": True},
                                  {"T": SubscriptionData.from_expression("T", "*")},
                                  {self.mq: ProcessQueueInfo(commitOffset=3)}, None, 42)

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(groupName="G", consumeType=ConsumeType.CONSUME_PASSIVELY)


def _ask(group: str, jstack: bool) -> RemotingCommand:
    h = GetConsumerRunningInfoRequestHeader(consumerGroup=group, clientId="c", jstackEnable=jstack)
    return RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, h.to_ext())


def test_answer() -> None:
    consumers = {"G": FakeConsumer()}
    r = running_info.answer(_ask("G", False), consumers, ["a:1", "b:2"])
    assert r.code == ResponseCode.SUCCESS
    info = ConsumerRunningInfo.from_json(r.body)
    assert info.properties["PROP_NAMESERVER_ADDR"] == "a:1;b:2;"
    assert info.properties["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
    assert info.properties["PROP_CONSUMER_START_TIMESTAMP"] == "42"
    assert info.properties["PROP_CLIENT_VERSION"].startswith("V5_3_3 (rocketlite ")
    assert info.properties["flag"] == "true" and info.jstack is None
    assert info.mqTable == {consumers["G"].mq: ProcessQueueInfo(commitOffset=3)}
    dumped = ConsumerRunningInfo.from_json(running_info.answer(_ask("G", True), consumers, []).body)
    assert dumped.jstack is not None and "test_answer" in dumped.jstack  # this very frame
    r = running_info.answer(_ask("Other", False), consumers, [])
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR,
                                  "The Consumer Group <Other> not exist in this consumer")
