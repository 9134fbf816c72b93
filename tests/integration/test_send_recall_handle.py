"""The recall handle of a Remoting send (5.3's ``SendMessageResponseHeader.recallHandle``): a
single send the timer wheel took is answered with it, in whichever serialization the request
used, also when it shares a read with ordinary sends; an ordinary send, a batch and a message to
a retry topic are not. RECALL_MESSAGE takes the handle, and the message is then never
delivered."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from test_broker import TIMEOUT, Env, eventually, running
from test_send_read_batch import frame

from rocketlite.broker.recall import RecallHandle
from rocketlite.broker.timer_divert import TIMER_TOPIC
from rocketlite.client.message import Message
from rocketlite.client.producer import Producer
from rocketlite.formats.properties import encode_properties
from rocketlite.protocol.codes import RequestCode, ResponseCode, SerializeType
from rocketlite.protocol.command import FrameDecoder, RemotingCommand
from rocketlite.protocol.headers import SendMessageRequestHeader
from rocketlite.protocol.message_batch import encode_batch

pytestmark = pytest.mark.integration

TOPIC = "RecallHandleT"
PRECISION = 100
BROKER = {"timerPrecisionMs": str(PRECISION)}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def timer_props(uniq: str, deliver_ms: int) -> str:
    return encode_properties({"UNIQ_KEY": uniq, "TIMER_DELIVER_MS": str(deliver_ms)})


def records(env: Env, topic: str) -> list[str]:
    """The UNIQ_KEYs stored to ``topic``'s queues."""
    out = []
    for qid in range(8):
        cq = env.broker.store.find_queue(topic, qid)
        if cq is None:
            continue
        for phys, _size, _tag in cq.get_units(cq.min_offset, 1000):
            rec = env.broker.store.look_message(phys)
            assert rec is not None
            out.append(rec.properties["UNIQ_KEY"])
    return out


async def exchange(env: Env, frames: list[bytes], replies: int | None = None
                   ) -> dict[int, RemotingCommand]:
    """Write ``frames`` at once (one read for the broker); the replies by opaque, once
    ``replies`` (default: one per frame) came."""
    want = len(frames) if replies is None else replies
    reader, writer = await asyncio.open_connection("127.0.0.1", env.broker.port)
    try:
        writer.write(b"".join(frames))
        decoder = FrameDecoder()
        got: dict[int, RemotingCommand] = {}
        async with asyncio.timeout(TIMEOUT):
            while len(got) < want:
                for item in decoder.feed(await reader.read(65536)):
                    assert isinstance(item, RemotingCommand)
                    got[item.opaque] = item
        return got
    finally:
        writer.close()


async def create_topic(env: Env, topic: str = TOPIC) -> None:
    r = await env.send(topic, b"create", uniq="CREATE")  # auto-created from TBW102
    assert r.code == ResponseCode.SUCCESS, r.remark


async def recall(env: Env, handle: str, topic: str = TOPIC) -> RemotingCommand:
    return await env.call(RequestCode.RECALL_MESSAGE, {
        "topic": topic, "recallHandle": handle, "producerGroup": "PG"})


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
async def test_a_read_of_timer_and_ordinary_sends(tmp_path: Path, flush: str) -> None:
    async with running(tmp_path / "store", BROKER, flushDiskType=flush) as env:
        await create_topic(env)
        due = now_ms() + 60_000
        timer = {2: "UNIQ-JSON", 4: "UNIQ-BIN", 5: "UNIQ-NEXT"}
        frames = [frame(opaque, b"m%d" % opaque, topic=TOPIC, binary=opaque in (3, 4),
                        properties=timer_props(timer[opaque], due) if opaque in timer
                        else encode_properties({"UNIQ_KEY": f"PLAIN-{opaque}"}))
                  for opaque in range(1, 7)]
        got = await exchange(env, frames)
        assert all(r.code == ResponseCode.SUCCESS for r in got.values())
        assert got[4].serialize_type == SerializeType.ROCKETMQ
        for opaque, r in got.items():
            if opaque not in timer:
                assert "recallHandle" not in r.ext_fields
                continue
            h = RecallHandle.decode(r.ext_fields["recallHandle"])
            assert (h.topic, h.broker_name, h.message_id) == (TOPIC, "broker-t", timer[opaque])
            # TIMER_OUT_MS + 1: the slot's time (due rounded down to the precision, one tick
            # less when exact: a due on a tick, 1 time in PRECISION) + 1
            assert int(h.timestamp) == (due - 1) // PRECISION * PRECISION + 1
        # ordinary ones in their topic (after the first send), the timer ones in the wheel
        plain = ["CREATE", "PLAIN-1", "PLAIN-3", "PLAIN-6"]
        await eventually(lambda: sorted(records(env, TOPIC)) == plain)
        await eventually(lambda: sorted(records(env, TIMER_TOPIC)) == sorted(timer.values()))


async def test_the_handle_recalls_the_message(tmp_path: Path) -> None:
    async with running(tmp_path / "store", BROKER) as env:
        await create_topic(env)
        due = now_ms() + 1500
        got = await exchange(env, [
            frame(1, b"gone", topic=TOPIC, properties=timer_props("GONE", due)),
            frame(2, b"kept", topic=TOPIC, properties=timer_props("KEPT", due))])
        r = await recall(env, got[1].ext_fields["recallHandle"])
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert r.ext_fields["msgId"] == "GONE"
        await eventually(lambda: "KEPT" in records(env, TOPIC), timeout=10)
        await asyncio.sleep(max(0.0, (due - now_ms()) / 1000) + 0.5)
        assert "GONE" not in records(env, TOPIC)
        assert env.broker.timer.stats.recalled == 1


async def test_the_clients_send_result_carries_the_handle(tmp_path: Path) -> None:
    async with running(tmp_path / "store", BROKER) as env:
        await create_topic(env)
        due = now_ms() + 1500
        async with Producer("PG", namesrv_addr=env.ns_addr, send_timeout=TIMEOUT) as p:
            plain = await p.send(Message(TOPIC, b"plain"))
            delayed = await p.send(Message(TOPIC, b"delayed", deliver_time_ms=due))
        assert plain.recall_handle is None
        assert delayed.recall_handle is not None
        assert RecallHandle.decode(delayed.recall_handle).message_id == delayed.msg_id
        r = await recall(env, delayed.recall_handle)
        assert r.code == ResponseCode.SUCCESS, r.remark
        await eventually(lambda: plain.msg_id in records(env, TOPIC))
        await asyncio.sleep(max(0.0, (due - now_ms()) / 1000) + 0.5)
        assert delayed.msg_id not in records(env, TOPIC)


async def test_no_handle_for_a_batch_or_a_retry_topic(tmp_path: Path) -> None:
    async with running(tmp_path / "store", BROKER) as env:
        await create_topic(env)
        due = now_ms() + 60_000
        h = SendMessageRequestHeader(
            producerGroup="PG", topic=TOPIC, defaultTopic="TBW102", defaultTopicQueueNums=4,
            queueId=0, sysFlag=0, bornTimestamp=now_ms(), flag=0, properties="", batch=True)
        body = encode_batch([b"a", b"b"], [timer_props("B1", due), timer_props("B2", due)])
        r = await env.call(RequestCode.SEND_BATCH_MESSAGE, h.to_v2_ext(), body)
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert "recallHandle" not in r.ext_fields  # 5.x: never for SEND_BATCH_MESSAGE
        retry = "%RETRY%G1"
        got = await exchange(env, [frame(1, b"r", topic=retry,
                                         properties=timer_props("RETRY-1", due))])
        assert got[1].code == ResponseCode.SUCCESS, got[1].remark
        assert "recallHandle" not in got[1].ext_fields
        await eventually(lambda: "RETRY-1" in records(env, TIMER_TOPIC))  # taken, yet no handle


async def test_oneway_timer_send_is_not_answered(tmp_path: Path) -> None:
    async with running(tmp_path / "store", BROKER) as env:
        await create_topic(env)
        due = now_ms() + 60_000
        h = SendMessageRequestHeader(
            producerGroup="PG", topic=TOPIC, defaultTopic="TBW102", defaultTopicQueueNums=4,
            queueId=0, sysFlag=0, bornTimestamp=now_ms(), flag=0,
            properties=timer_props("ONEWAY", due))
        oneway = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, h.to_v2_ext(), b"o",
                                         oneway=True)
        oneway.opaque = 1
        got = await exchange(env, [oneway.encode(), frame(
            2, b"t", topic=TOPIC, properties=timer_props("ANSWERED", due))], 1)
        assert set(got) == {2}  # the oneway one has no reply; the next one is answered
        assert RecallHandle.decode(got[2].ext_fields["recallHandle"]).message_id == "ANSWERED"
        await eventually(lambda: "ONEWAY" in records(env, TIMER_TOPIC))
