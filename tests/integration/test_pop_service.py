"""PopService in a running broker (loopback, small store): pop, ack, change of invisible time,
revive to the retry topic and to the DLQ, tag filtering, long polling, FIFO batches, errors and a
restart. Time past an invisible time is a moved clock and a revive round run by the test."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from brokerhelp import decode_records
from integration.test_broker import Env, eventually, running
from rocketlite.broker.pop.errors import (
    BadPopRequest,
    GroupNotFound,
    InvalidReceiptHandle,
    NoPermission,
    ReceiptHandleExpired,
    TopicNotFound,
)
from rocketlite.broker.pop.records import REVIVE_GROUP
from rocketlite.broker.pop.service import PopResult, PopService, PopStatus
from rocketlite.broker.subscriptions import SubscriptionGroupConfig
from rocketlite.common.errors import DiskFullError
from rocketlite.formats.properties import encode_properties
from rocketlite.protocol.bodies import SubscriptionData, TopicConfig
from rocketlite.protocol.pop_info import ReceiptHandle
from rocketlite.store.message import MessageToStore
from storehelp import wait_dispatched

pytestmark = pytest.mark.integration

ALL = SubscriptionData.from_expression("T", "*")
INV = 10_000
FAST = {"reviveInterval": "60000", "popAckTimeInterval": "0"}  # rounds run by the tests


class Clock:
    def __init__(self) -> None:
        self.offset = 0

    def __call__(self) -> int:
        return time.time_ns() // 1_000_000 + self.offset


@contextlib.asynccontextmanager
async def pop_env(root: Path, **props: str) -> AsyncIterator[tuple[Env, PopService, Clock]]:
    async with running(root, {**FAST, **props}) as env:
        clock = Clock()
        env.broker.pop.clock = clock
        env.broker.topics.update(TopicConfig(topicName="T", readQueueNums=2, writeQueueNums=2))
        yield env, env.broker.pop, clock


@pytest.fixture
async def pe(tmp_path: Path) -> AsyncIterator[tuple[Env, PopService, Clock]]:
    async with pop_env(tmp_path / "store") as e:
        yield e


def put(env: Env, n: int, queue_id: int = 0, tags: str = "TagA", topic: str = "T") -> None:
    """Store ``n`` messages and wait until they are readable (the dispatcher may be a round
    behind the append)."""
    env.broker.store.put_messages([
        MessageToStore(topic, b"m%d" % i, queue_id, properties=encode_properties({"TAGS": tags}))
        for i in range(n)])
    wait_dispatched(env.broker.store)


async def pop(svc: PopService, queue_id: int = 0, n: int = 32, poll_ms: int = 0,
              sub: SubscriptionData = ALL, group: str = "G", fifo: bool = False) -> PopResult:
    return await svc.pop(group, "T", queue_id, n, INV, poll_ms, sub, fifo=fifo)


async def test_pop_hides_messages_and_writes_a_rocketmq_checkpoint(pe: tuple[Env, PopService, Clock]
                                                                   ) -> None:
    env, svc, _ = pe
    put(env, 3)
    r = await pop(svc, n=2)
    assert r.status is PopStatus.FOUND and len(r.messages) == 2
    m = r.messages[0]
    assert (m.topic, m.queue_id, m.queue_offset, m.delivery_attempt) == ("T", 0, 0, 1)
    assert m.record.body == b"m0" and m.invisible_until_ms == r.pop_time + INV
    h = ReceiptHandle.parse(m.receipt_handle)
    assert (h.ck_queue_offset, h.pop_time, h.invisible_time, h.revive_qid, h.retry,
            h.broker_name, h.queue_id, h.msg_queue_offset) == (
        0, r.pop_time, INV, r.revive_qid, 0, "broker-t", 0, 0)
    assert env.broker.offsets.query("G", "T", 0) == 2  # advanced at pop
    assert [x.record.body for x in (await pop(svc)).messages] == [b"m2"]
    assert (await pop(svc)).status is PopStatus.NO_NEW_MSG
    res = env.broker.store.get_message(svc.revive_topic, r.revive_qid, 0, 1)
    rec = decode_records(res.body)[0]
    assert json.loads(rec.body) == {"so": 0, "pt": r.pop_time, "it": INV, "bm": 0, "n": 2,
                                    "q": 0, "t": "T", "c": "G", "ro": 0, "d": [0, 1],
                                    "bn": "broker-t", "rp": 0}
    assert rec.properties["TAGS"] == "ck"
    assert rec.properties["UNIQ_KEY"] == f"T@0@0@G@{r.pop_time}@broker-t@ck"
    assert env.broker.topics.get(svc.revive_topic).readQueueNums == 8  # type: ignore[union-attr]


async def test_unacked_messages_come_back_through_the_retry_topic(
        pe: tuple[Env, PopService, Clock]) -> None:
    env, svc, clock = pe
    put(env, 3)
    r = await pop(svc)
    svc.ack("G", "T", r.messages[0].receipt_handle)
    svc.ack_many("G", "T", [r.messages[1].receipt_handle])
    assert await svc.revive.round() == 0  # not due yet
    clock.offset += INV + 1
    assert await svc.revive.round() == 1  # only m2 was not acked
    assert env.broker.topics.get("%RETRY%G_T") is not None
    again = await pop(svc, queue_id=-1)
    assert [m.record.body for m in again.messages] == [b"m2"]
    m = again.messages[0]
    assert m.delivery_attempt == 2 and m.topic == "T" and m.record.topic == "%RETRY%G_T"
    props = m.record.properties
    assert props["RETRY_TOPIC"] == "T" and props["1ST_POP_TIME"] == str(r.pop_time)
    assert ReceiptHandle.parse(m.receipt_handle).retry == 1
    svc.ack("G", "T", m.receipt_handle)
    clock.offset += INV + 1
    assert await svc.revive.round() == 0
    assert (await pop(svc, queue_id=-1)).status is PopStatus.NO_NEW_MSG
    q = r.revive_qid
    assert env.broker.offsets.query(REVIVE_GROUP, svc.revive_topic, q) == \
        env.broker.store.max_offset_in_queue(svc.revive_topic, q)


async def test_acks_after_the_invisible_time_and_bad_handles_are_refused(
        pe: tuple[Env, PopService, Clock]) -> None:
    env, svc, clock = pe
    put(env, 1)
    m = (await pop(svc)).messages[0]
    with pytest.raises(InvalidReceiptHandle, match="fields"):
        svc.ack("G", "T", "1 2 3")
    with pytest.raises(InvalidReceiptHandle, match="broker"):
        svc.ack("G", "T", m.receipt_handle.replace("broker-t", "broker-x"))
    with pytest.raises(TopicNotFound):
        svc.ack("G", "Nope", m.receipt_handle)
    clock.offset += INV
    with pytest.raises(ReceiptHandleExpired, match="invisible time ended"):
        svc.ack("G", "T", m.receipt_handle)
    errors = svc.ack_many("G", "T", [m.receipt_handle, "x"])
    assert isinstance(errors[0], ReceiptHandleExpired)
    assert isinstance(errors[1], InvalidReceiptHandle)


async def test_change_invisible_moves_the_revive_time(pe: tuple[Env, PopService, Clock]) -> None:
    env, svc, clock = pe
    put(env, 1)
    m = (await pop(svc)).messages[0]
    new = svc.change_invisible("G", "T", m.receipt_handle, 3 * INV)
    h = ReceiptHandle.parse(new)
    assert h.invisible_time == 3 * INV and h.msg_queue_offset == 0
    clock.offset += INV + 1
    assert await svc.revive.round() == 0  # the old CK is acked
    clock.offset += 2 * INV
    assert await svc.revive.round() == 1
    with pytest.raises(ReceiptHandleExpired):
        svc.change_invisible("G", "T", new, INV)


async def test_tag_filter_and_errors(pe: tuple[Env, PopService, Clock]) -> None:
    env, svc, _ = pe
    put(env, 2, tags="TagB")
    put(env, 2, tags="TagA")
    r = await pop(svc, sub=SubscriptionData.from_expression("T", "TagA"))
    assert [m.queue_offset for m in r.messages] == [2, 3]
    assert env.broker.offsets.query("G", "T", 0) == 4
    with pytest.raises(TopicNotFound):
        await svc.pop("G", "Nope", 0, 1, INV, 0, ALL)
    with pytest.raises(BadPopRequest, match="queueId"):
        await pop(svc, queue_id=5)
    with pytest.raises(BadPopRequest, match="maxMsgNums"):
        await pop(svc, n=33)
    with pytest.raises(BadPopRequest, match="SQL92"):
        await pop(svc, sub=SubscriptionData.from_expression("T", "a > 1", "SQL92"))


async def test_unknown_group_without_auto_create(tmp_path: Path) -> None:
    async with pop_env(tmp_path / "s", autoCreateSubscriptionGroup="false") as (_, svc, _c):
        with pytest.raises(GroupNotFound):
            await pop(svc, group="NoSuchGroup")


async def test_long_poll_is_woken_by_a_send_and_bounded(tmp_path: Path) -> None:
    async with pop_env(tmp_path / "s", maxPopPollingSize="1") as (env, svc, _):
        waiting = asyncio.ensure_future(pop(svc, queue_id=-1, poll_ms=5000))
        await eventually(lambda: svc.polling.count > 0)
        assert (await pop(svc, poll_ms=1000)).status is PopStatus.POLLING_FULL
        t0 = time.monotonic()
        put(env, 1, queue_id=1)
        r = await asyncio.wait_for(waiting, 3)
        assert r.status is PopStatus.FOUND and time.monotonic() - t0 < 1.0
        t0 = time.monotonic()
        r = await pop(svc, poll_ms=200)
        assert r.status is PopStatus.POLLING_NOT_FOUND and time.monotonic() - t0 >= 0.19
        assert svc.polling.count == 0


async def test_long_poll_is_woken_by_a_revive(pe: tuple[Env, PopService, Clock]) -> None:
    env, svc, clock = pe
    put(env, 1)
    await pop(svc)
    await svc.revive.round()  # nothing due yet: the retry topic does not exist before the revive
    waiting = asyncio.ensure_future(pop(svc, queue_id=-1, poll_ms=5000))
    await eventually(lambda: svc.polling.count > 0)
    clock.offset += INV + 1
    assert await svc.revive.round() == 1
    r = await asyncio.wait_for(waiting, 2)
    assert r.messages[0].delivery_attempt == 2


async def test_dead_letter_after_retry_max_times(pe: tuple[Env, PopService, Clock]) -> None:
    env, svc, clock = pe
    env.broker.subscriptions.update(SubscriptionGroupConfig(groupName="G", retryMaxTimes=1))
    put(env, 1)
    attempts = []
    for _ in range(3):
        r = await pop(svc, queue_id=-1)
        attempts += [m.delivery_attempt for m in r.messages]
        clock.offset += INV + 1
        await svc.revive.round()
    assert attempts == [1, 2]
    assert svc.revive.dead == 1 and svc.revive.revived == 1
    dlq = env.broker.topics.get("%DLQ%G")
    assert dlq is not None and dlq.perm & 4  # readable
    res = env.broker.store.get_message("%DLQ%G", 0, 0, 4)
    [rec] = decode_records(res.body)
    assert rec.body == b"m0" and rec.properties["RETRY_TOPIC"] == "T"


async def test_forward_to_dlq_acks(pe: tuple[Env, PopService, Clock]) -> None:
    env, svc, clock = pe
    put(env, 1)
    m = (await pop(svc)).messages[0]
    await svc.forward_to_dlq("G", "T", m.receipt_handle, 16)
    assert env.broker.store.max_offset_in_queue("%DLQ%G", 0) == 1
    clock.offset += INV + 1
    assert await svc.revive.round() == 0


async def test_fifo_one_batch_in_flight_then_redelivered_in_order(
        pe: tuple[Env, PopService, Clock]) -> None:
    env, svc, clock = pe
    put(env, 4)
    r = await pop(svc, n=2, fifo=True)
    assert [m.queue_offset for m in r.messages] == [0, 1] and r.revive_qid == 999
    assert (await pop(svc, n=2, fifo=True)).status is PopStatus.NO_NEW_MSG  # blocked
    assert env.broker.offsets.query("G", "T", 0) == -1  # committed at ack, not at pop
    svc.ack("G", "T", r.messages[0].receipt_handle)
    clock.offset += INV + 1  # m1 not acked in time: the batch is visible again
    r2 = await pop(svc, n=2, fifo=True)
    assert [(m.queue_offset, m.delivery_attempt) for m in r2.messages] == [(1, 2), (2, 1)]
    with pytest.raises(ReceiptHandleExpired):
        svc.ack("G", "T", r.messages[1].receipt_handle)  # the old batch's handle
    for m in r2.messages:
        svc.ack("G", "T", m.receipt_handle)
    assert env.broker.offsets.query("G", "T", 0) == 3
    r3 = await pop(svc, n=2, fifo=True)
    assert [m.queue_offset for m in r3.messages] == [3]


async def test_fifo_waiting_pop_is_woken_by_the_ack(pe: tuple[Env, PopService, Clock]) -> None:
    env, svc, _ = pe
    put(env, 2)
    r = await pop(svc, n=1, fifo=True)
    waiting = asyncio.ensure_future(pop(svc, n=1, fifo=True, poll_ms=5000))
    await eventually(lambda: svc.polling.count > 0)
    svc.ack("G", "T", r.messages[0].receipt_handle)
    r2 = await asyncio.wait_for(waiting, 2)
    assert [m.queue_offset for m in r2.messages] == [1]


async def test_fifo_dead_letter_after_retry_max_times(pe: tuple[Env, PopService, Clock]) -> None:
    env, svc, clock = pe
    env.broker.subscriptions.update(SubscriptionGroupConfig(groupName="G", retryMaxTimes=1))
    put(env, 2)
    seen = []
    for _ in range(3):
        r = await pop(svc, n=1, fifo=True)
        seen += [(m.queue_offset, m.delivery_attempt) for m in r.messages]
        clock.offset += INV + 1
    assert seen == [(0, 1), (0, 2), (1, 1)]
    assert env.broker.store.max_offset_in_queue("%DLQ%G", 0) == 1


async def test_unacked_pops_survive_a_restart(tmp_path: Path) -> None:
    root = tmp_path / "store"
    async with pop_env(root) as (env, svc, _):
        put(env, 2)
        r = await pop(svc)
        svc.ack("G", "T", r.messages[0].receipt_handle)
    async with pop_env(root) as (env, svc, clock):
        clock.offset += INV + 1
        assert await svc.revive.round() == 1
        r2 = await pop(svc, queue_id=-1)
        assert [(m.record.body, m.delivery_attempt) for m in r2.messages] == [(b"m1", 2)]


async def test_a_refused_checkpoint_write_moves_no_offset(
        pe: tuple[Env, PopService, Clock], monkeypatch: pytest.MonkeyPatch) -> None:
    env, svc, _ = pe
    put(env, 2)

    def full(msgs: object) -> None:
        raise DiskFullError("the disk is full (test)")

    with monkeypatch.context() as m:
        m.setattr(svc.store, "put_messages", full)
        with pytest.raises(DiskFullError):
            await pop(svc)
    assert env.broker.offsets.query("G", "T", 0) == -1
    assert [x.record.body for x in (await pop(svc)).messages] == [b"m0", b"m1"]


async def test_a_retry_topic_name_too_long_sends_to_the_dlq(
        pe: tuple[Env, PopService, Clock]) -> None:
    env, svc, clock = pe
    topic, group = "L" * 100, "G" * 30
    env.broker.topics.update(TopicConfig(topicName=topic, readQueueNums=1, writeQueueNums=1))
    put(env, 1, topic=topic)
    r = await svc.pop(group, topic, 0, 1, INV, 0, SubscriptionData.from_expression(topic, "*"))
    assert len(r.messages) == 1
    clock.offset += INV + 1
    assert await svc.revive.round() == 1
    assert svc.revive.dead == 1
    assert env.broker.store.max_offset_in_queue(f"%DLQ%{group}", 0) == 1


async def test_fifo_pop_repeated_with_its_attempt_id_gets_the_batch_again(
        pe: tuple[Env, PopService, Clock]) -> None:
    env, svc, _ = pe
    put(env, 2)
    r = await svc.pop("G", "T", 0, 1, INV, 0, ALL, fifo=True, attempt_id="a1")
    assert [m.queue_offset for m in r.messages] == [0]
    other = await svc.pop("G", "T", 0, 1, INV, 0, ALL, fifo=True, attempt_id="a2")
    assert other.status is PopStatus.NO_NEW_MSG  # blocked for another attempt
    again = await svc.pop("G", "T", 0, 1, INV, 0, ALL, fifo=True, attempt_id="a1")
    assert [(m.queue_offset, m.delivery_attempt) for m in again.messages] == [(0, 1)]
    svc.ack("G", "T", again.messages[0].receipt_handle)
    assert env.broker.offsets.query("G", "T", 0) == 1


async def test_fifo_pops_of_every_queue_take_one_batch_per_queue(
        pe: tuple[Env, PopService, Clock]) -> None:
    env, svc, _ = pe
    put(env, 2, queue_id=0)
    put(env, 2, queue_id=1)
    first = await pop(svc, queue_id=-1, n=1, fifo=True)
    second = await pop(svc, queue_id=-1, n=1, fifo=True)
    assert {first.messages[0].queue_id, second.messages[0].queue_id} == {0, 1}
    assert [m.queue_offset for m in first.messages + second.messages] == [0, 0]
    assert (await pop(svc, queue_id=-1, n=2, fifo=True)).status is PopStatus.NO_NEW_MSG


async def test_revive_keeps_at_most_the_inflight_threshold_of_checkpoints(tmp_path: Path) -> None:
    async with pop_env(tmp_path / "s", reviveQueueNum="1",
                       popInflightMessageThreshold="1") as (env, svc, clock):
        put(env, 1, queue_id=0)
        put(env, 1, queue_id=1)
        await pop(svc, queue_id=0)
        await pop(svc, queue_id=1)
        assert await svc.revive.round() == 0
        assert len(svc.revive.pending[0]) == 1  # reading stopped at the threshold
        clock.offset += INV + 1
        assert await svc.revive.round() == 1  # the first revived; the second read next round
        assert await svc.revive.round() == 1
        assert svc.revive.pending[0] == {} and svc.revive.revived == 2


async def test_fifo_batch_survives_a_restart(tmp_path: Path) -> None:
    root = tmp_path / "store"
    async with pop_env(root) as (env, svc, _):
        put(env, 2)
        r = await pop(svc, n=1, fifo=True)
        assert [m.queue_offset for m in r.messages] == [0]
    async with pop_env(root) as (env, svc, clock):
        assert (await pop(svc, n=1, fifo=True)).status is PopStatus.NO_NEW_MSG  # still hidden
        clock.offset += INV + 1
        again = await pop(svc, n=1, fifo=True)
        assert [(m.queue_offset, m.delivery_attempt) for m in again.messages] == [(0, 2)]


async def test_unreadable_fifo_state_starts_empty(tmp_path: Path) -> None:
    root = tmp_path / "store"
    (root / "config").mkdir(parents=True)
    (root / "config" / "popOrderInfo.json").write_text("{not json", encoding="utf-8")
    (root / "config" / "popOrderInfo.json.bak").write_text('{"batches": [{"g": 1}]}',
                                                           encoding="utf-8")
    async with pop_env(root) as (env, svc, _):
        put(env, 1)
        assert len((await pop(svc, n=1, fifo=True)).messages) == 1


async def test_forbidden_pops(tmp_path: Path) -> None:
    async with pop_env(tmp_path / "s") as (env, svc, _):
        env.broker.subscriptions.update(SubscriptionGroupConfig(groupName="Off",
                                                                consumeEnable=False))
        with pytest.raises(NoPermission, match="may not consume"):
            await pop(svc, group="Off")
        env.broker.topics.update(TopicConfig(topicName="W", readQueueNums=1, writeQueueNums=1,
                                             perm=2))
        with pytest.raises(NoPermission, match="forbidden"):
            await svc.pop("G", "W", 0, 1, INV, 0, ALL)
    async with pop_env(tmp_path / "r", brokerPermission="2") as (_, svc, _c):
        with pytest.raises(NoPermission, match="pop is forbidden"):
            await pop(svc)


async def test_revive_skips_records_that_are_not_rocketmqs(pe: tuple[Env, PopService, Clock]
                                                           ) -> None:
    env, svc, clock = pe
    store = env.broker.store
    junk = [MessageToStore(svc.revive_topic, body, 0, properties=encode_properties({"TAGS": tag}))
            for tag, body in (("ck", b"{not json"), ("ack", b'{"so": "x"}'), ("other", b"{}"))]
    store.put_messages(junk)
    put(env, 1)
    r = await pop(svc)
    assert r.messages
    clock.offset += INV + 1
    for _ in range(8):  # the pop's CK may be in any revive queue
        if svc.revive.revived:
            break
        await svc.revive.round()
    assert svc.revive.revived == 1
    assert env.broker.offsets.query(REVIVE_GROUP, svc.revive_topic, 0) == 3 + (
        1 if r.revive_qid == 0 else 0)


async def test_popped_messages_are_counted_as_messages_out(
        pe: tuple[Env, PopService, Clock]) -> None:
    env, svc, _ = pe
    metrics = env.broker.metrics
    assert metrics is not None
    put(env, 3)
    r = await pop(svc)
    assert len(r.messages) == 3
    assert metrics.messages_out[("T", "G")] == [3, sum(m.record.total_size for m in r.messages)]
    assert not (await pop(svc)).messages
    assert metrics.messages_out[("T", "G")][0] == 3
