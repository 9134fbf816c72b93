"""Sends that arrive in one read are appended together (one store call) at the read's end and
answered after it; an illegal message among them is answered alone, the others are stored."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from test_broker import TIMEOUT, Env, running

from remotinghelp import connect, written
from rocketlite.protocol.bodies import TopicConfig
from rocketlite.protocol.codes import RequestCode, ResponseCode, SerializeType
from rocketlite.protocol.command import FrameDecoder, RemotingCommand
from rocketlite.protocol.headers import SendMessageRequestHeader
from rocketlite.store.message import MessageToStore
from rocketlite.store.message_store import MessageStore

pytestmark = pytest.mark.integration


def frame(opaque: int, body: bytes, *, binary: bool = False, topic: str = "ReadBatch",
          queue_id: int = 0, properties: str = "") -> bytes:
    h = SendMessageRequestHeader(
        producerGroup="PG", topic=topic, defaultTopic="TBW102", defaultTopicQueueNums=1,
        queueId=queue_id, sysFlag=0, bornTimestamp=int(time.time() * 1000), flag=0,
        properties=properties)
    cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, h.to_v2_ext(), body)
    if binary:
        cmd.serialize_type = SerializeType.ROCKETMQ
    cmd.opaque = opaque
    return cmd.encode()


def count_puts(store: MessageStore) -> list[int]:
    """The sizes of ``store.put_messages`` calls from now on (the list fills as they happen)."""
    calls: list[int] = []
    put = store.put_messages

    def counting(msgs: Sequence[MessageToStore]):  # type: ignore[no-untyped-def]
        calls.append(len(msgs))
        return put(msgs)

    store.put_messages = counting  # type: ignore[method-assign]
    return calls


async def exchange(env: Env, frames: list[bytes]) -> dict[int, RemotingCommand]:
    """Write ``frames`` at once; the replies by opaque."""
    reader, writer = await asyncio.open_connection("127.0.0.1", env.broker.port)
    try:
        writer.write(b"".join(frames))
        decoder = FrameDecoder()
        got: dict[int, RemotingCommand] = {}
        async with asyncio.timeout(TIMEOUT):
            while len(got) < len(frames):
                for item in decoder.feed(await reader.read(65536)):
                    assert isinstance(item, RemotingCommand)
                    got[item.opaque] = item
        return got
    finally:
        writer.close()


async def test_one_read_one_append_and_a_bad_message_answered_alone(tmp_path: Path) -> None:
    async with running(tmp_path / "store") as env:
        store = env.broker.store
        calls = count_puts(store)
        assert (await exchange(env, [frame(1, b"first")]))[1].code == ResponseCode.SUCCESS
        calls.clear()
        got = await exchange(env, [frame(10 + i, b"m%d" % i, binary=i % 5 == 0)
                                   for i in range(20)])
        assert calls == [20]  # one append for the read
        offsets = sorted(int(r.ext_fields["queueOffset"]) for r in got.values())
        assert offsets == list(range(1, 21))
        assert all(r.code == ResponseCode.SUCCESS for r in got.values())
        assert got[10].serialize_type == SerializeType.ROCKETMQ  # answered in its own header
        calls.clear()
        # an oversized message: the read's append fails, each is retried alone
        frames = [frame(100 + i, b"x" * 70_000 if i == 3 else b"ok%d" % i) for i in range(6)]
        got = await exchange(env, frames)
        assert calls[0] == 6 and calls[1:] == [1] * 6
        assert got[103].code == ResponseCode.MESSAGE_ILLEGAL and got[103].remark
        ok = [got[100 + i] for i in range(6) if i != 3]
        assert all(r.code == ResponseCode.SUCCESS for r in ok)
        assert [int(r.ext_fields["queueOffset"]) for r in ok] == list(range(21, 26))
        for i, r in zip([0, 1, 2, 4, 5], ok, strict=True):
            m = store.look_message(int(r.ext_fields["msgId"][-16:], 16))
            assert m is not None and m.body == b"ok%d" % i


async def test_sends_off_the_usual_path_are_checked_as_before(tmp_path: Path) -> None:
    """Single sends that are not the usual case (a read-only queue id, a negative one, a read-only
    topic, a delay level) take the checks one by one, in the same read as usual ones."""
    async with running(tmp_path / "store") as env:
        env.broker.topics.update(TopicConfig(topicName="ReadBatch", readQueueNums=4,
                                             writeQueueNums=2))
        env.broker.topics.update(TopicConfig(topicName="ReadOnly", perm=4))
        frames = [
            frame(1, b"usual"),
            frame(2, b"read queue", queue_id=3),  # < readQueueNums: taken, as Java does
            frame(3, b"no such queue", queue_id=4),
            frame(4, b"any queue", queue_id=-1),
            frame(5, b"read-only topic", topic="ReadOnly"),
            frame(6, b"delayed", properties="DELAY\x012\x02"),
            frame(7, b"usual again", queue_id=1),
        ]
        got = await exchange(env, frames)
        assert got[1].code == ResponseCode.SUCCESS and got[1].ext_fields["queueId"] == "0"
        assert got[2].code == ResponseCode.SUCCESS and got[2].ext_fields["queueId"] == "3"
        assert got[3].code == ResponseCode.SYSTEM_ERROR and "queueId[4]" in (got[3].remark or "")
        assert got[4].code == ResponseCode.SUCCESS and got[4].ext_fields["queueId"] in ("0", "1")
        assert got[5].code == ResponseCode.NO_PERMISSION
        assert got[6].code == ResponseCode.SUCCESS and got[6].ext_fields["queueId"] == "0"
        assert got[7].code == ResponseCode.SUCCESS and got[7].ext_fields["queueId"] == "1"
        delayed = env.broker.store.look_message(int(got[6].ext_fields["msgId"][-16:], 16))
        assert delayed is not None and delayed.topic == "SCHEDULE_TOPIC_XXXX"  # diverted
        store = env.broker.store
        assert store.look_message(int(got[2].ext_fields["msgId"][-16:], 16)).queue_id == 3  # type: ignore[union-attr]


async def test_one_producer_is_answered_at_its_reads_end_many_share_an_append(
        tmp_path: Path) -> None:
    """A connection whose sends came alone last time is answered within its read (no loop hop);
    connections read in the same loop iteration share one append, answered after it."""
    async with running(tmp_path / "store") as env:
        store = env.broker.store
        calls = count_puts(store)
        a, b = env.broker.server._make_connection(), env.broker.server._make_connection()
        ta, tb = connect(a), connect(b)
        a.data_received(b"".join(frame(i, b"a") for i in range(3)))
        assert ta.writes == []  # a new producer: appended at the end of the loop iteration
        await asyncio.sleep(0)
        assert calls == [3] and len(ta.writes) == 1
        for n in (2, 5):  # now alone: appended and answered at the end of each read
            a.data_received(b"".join(frame(i, b"a") for i in range(n)))
            assert calls[-1] == n and len(written(ta)) == 3 + (2 if n == 5 else 0) + n
        calls.clear()
        b.data_received(frame(50, b"b"))  # another producer: waits for the iteration's end
        a.data_received(frame(51, b"a"))  # ... and a's send joins its append
        assert calls == [] and len(tb.writes) == 0
        await asyncio.sleep(0)
        assert calls == [2]
        assert [r.opaque for r in written(tb)] == [50]
        assert written(ta)[-1].opaque == 51
        assert all(r.code == ResponseCode.SUCCESS for r in written(ta) + written(tb))
        a.data_received(frame(60, b"a"))  # the last batch was shared: a waits again
        assert calls == [2]
        await asyncio.sleep(0)
        assert calls == [2, 1] and written(ta)[-1].opaque == 60
        a.data_received(frame(61, b"a"))  # alone again: answered within its read
        assert calls == [2, 1, 1] and written(ta)[-1].opaque == 61
        for conn in (a, b):  # fake transports: nothing tells the broker they closed
            conn.connection_lost(None)


async def test_a_long_read_of_one_producer_is_answered_in_chunks(tmp_path: Path) -> None:
    """Of a producer's read of more than ``RUN_CHUNK`` sends, the first ``RUN_CHUNK`` are appended
    and their replies written before the rest are worked on (the producer refills its window
    meanwhile), the rest in one append: every send answered once, in order, offsets consecutive."""
    from rocketlite.broker.send import RUN_CHUNK

    async with running(tmp_path / "store") as env:
        store = env.broker.store
        calls = count_puts(store)
        a = env.broker.server._make_connection()
        ta = connect(a)
        try:
            a.data_received(frame(0, b"first"))
            await asyncio.sleep(0)  # a new producer: appended at the end of the loop iteration
            calls.clear()
            n = 2 * RUN_CHUNK + RUN_CHUNK // 2
            before = len(ta.writes)
            a.data_received(b"".join(frame(1 + i, b"m%d" % i) for i in range(n)))
            assert calls == [RUN_CHUNK, n - RUN_CHUNK]
            assert len(ta.writes) - before == 2  # the first chunk's replies within the read
            replies = written(ta)[1:]
            assert [r.opaque for r in replies] == list(range(1, n + 1))
            assert all(r.code == ResponseCode.SUCCESS for r in replies)
            assert [int(r.ext_fields["queueOffset"]) for r in replies] == list(range(1, n + 1))
        finally:
            a.connection_lost(None)  # a fake transport: nothing tells the broker it closed


async def test_a_message_that_fails_alone_for_another_reason_is_answered_and_the_rest_stored(
        tmp_path: Path) -> None:
    from rocketlite.common.errors import MessageIllegalError

    async with running(tmp_path / "store") as env:
        store = env.broker.store
        put = store.put_messages

        def failing(msgs: Sequence[MessageToStore]):  # type: ignore[no-untyped-def]
            if len(msgs) > 1:
                raise MessageIllegalError("one of them is illegal")  # the read's append
            if msgs[0].body == b"boom":
                raise RuntimeError("a bug in the store")
            return put(msgs)

        assert (await exchange(env, [frame(1, b"first")]))[1].code == ResponseCode.SUCCESS
        store.put_messages = failing  # type: ignore[method-assign]
        got = await exchange(env, [frame(20 + i, b"boom" if i == 1 else b"ok%d" % i)
                                   for i in range(4)])
        assert got[21].code == ResponseCode.SYSTEM_ERROR and "a bug in the store" in got[21].remark
        assert all(got[20 + i].code == ResponseCode.SUCCESS for i in (0, 2, 3))


async def test_a_read_of_usual_and_other_sends_is_stored_in_request_order(tmp_path: Path) -> None:
    """The usual sends of a read are taken as a run; the others (lenient forms the header decoder
    coerces, a new topic, a bad header) take the per-request path in between: every message lands
    in request order, oneway ones unanswered, V1 and V2, JSON and binary headers alike."""
    async with running(tmp_path / "store") as env:
        env.broker.topics.update(TopicConfig(topicName="ReadBatch", readQueueNums=1,
                                             writeQueueNums=1))

        def v1(opaque: int, body: bytes, **ext: str) -> bytes:
            h = SendMessageRequestHeader(
                producerGroup="PG", topic="ReadBatch", defaultTopic="TBW102",
                defaultTopicQueueNums=1, queueId=0, sysFlag=0, bornTimestamp=1, flag=0)
            cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE, {**h.to_ext(), **ext}, body)
            cmd.opaque = opaque
            return cmd.encode()

        def v2(opaque: int, body: bytes, *, oneway: bool = False, **ext: str) -> bytes:
            cmd = FrameDecoder().feed(frame(opaque, body))[0]
            assert isinstance(cmd, RemotingCommand)
            cmd.ext_fields.update(ext)
            if oneway:
                cmd.flag |= 0x2
            return cmd.encode()

        frames = [
            v2(1, b"m0"), v1(2, b"m1"), v2(3, b"m2", e="+0"), v2(4, b"m3", k="TRUE"),
            v2(5, b"m4", oneway=True), v1(6, b"m5", queueId=" 0"), v2(7, b"m6", g="x"),
            v1(8, b"m7", unitMode="1"), frame(9, b"m8", binary=True), v2(10, b"m9", e="00"),
        ]
        reader, writer = await asyncio.open_connection("127.0.0.1", env.broker.port)
        try:
            writer.write(b"".join(frames))
            decoder = FrameDecoder()
            got: list[RemotingCommand] = []
            async with asyncio.timeout(TIMEOUT):
                while len(got) < 9:
                    got += decoder.feed(await reader.read(65536))  # type: ignore[arg-type]
        finally:
            writer.close()
        by = {r.opaque: r for r in got}
        assert 5 not in by  # oneway
        assert by[6].code == by[7].code == ResponseCode.SYSTEM_ERROR  # bad Int32 / Int64
        assert "queueId" in (by[6].remark or "") and "'g'" in (by[7].remark or "")
        ok = [1, 2, 3, 4, 8, 9, 10]
        assert all(by[o].code == ResponseCode.SUCCESS for o in ok)
        assert [int(by[o].ext_fields["queueOffset"]) for o in ok] == [0, 1, 2, 3, 5, 6, 7]
        store = env.broker.store
        bodies = [store.look_message(int(by[o].ext_fields["msgId"][-16:], 16)).body  # type: ignore[union-attr]
                  for o in ok]
        assert bodies == [b"m0", b"m1", b"m2", b"m3", b"m7", b"m8", b"m9"]
