"""The producer's send codec (``client/send_codec.py``) against its compiled twin (``_send_c``)
and against the generic command codec: a lane's frame is byte for byte what
``RemotingCommand.encode()`` writes for the same SEND_MESSAGE_V2 header, and decodes back to it;
``send_reply`` and ``uniq_key`` give the same results on both paths."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nativehelp import twin
from rocketlite.client import send_codec as ref
from rocketlite.client.errors import MQClientError
from rocketlite.client.message import Message
from rocketlite.client.producer import Producer, SendResult, SendStatus
from rocketlite.client.send_types import _AsyncSend
from rocketlite.common.errors import ProtocolError
from rocketlite.protocol.bodies import MessageQueue
from rocketlite.protocol.codes import CURRENT_VERSION, RequestCode, SerializeType
from rocketlite.protocol.command import RemotingCommand, decode_frame

C = twin("rocketlite.client._send_c")

I64 = st.integers(-(2**63), 2**63 - 1)
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


@st.composite
def lanes(draw: st.DrawFn) -> tuple[str, str, str, int, int, str, bool]:
    return (draw(text), draw(text), draw(text), draw(st.integers(-(2**31), 2**31 - 1)),
            draw(st.integers(-(2**31), 2**31 - 1)), draw(text), draw(st.booleans()))


def generic(lane: tuple[str, str, str, int, int, str, bool], opaque: int, sys_flag: int, born: int,
            flag: int, properties: bytes, body: bytes) -> RemotingCommand:
    group, topic, key, nums, qid, broker, batch = lane
    ext = {"a": group, "b": topic, "c": key, "d": str(nums), "e": str(qid), "f": str(sys_flag),
           "g": str(born), "h": str(flag), "i": properties.decode(), "j": "0", "k": "false",
           "m": "true" if batch else "false", "n": broker}
    cmd = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2,
                                  ext, body)
    cmd.opaque = opaque
    cmd.serialize_type = int(SerializeType.ROCKETMQ)
    return cmd


@given(lanes(), st.integers(0, 2**31 - 1), I64, I64, I64, text.map(str.encode), st.binary(max_size=64))
def test_frame_is_the_generic_encoding(lane: tuple[str, str, str, int, int, str, bool], opaque: int,
                                       sys_flag: int, born: int, flag: int, properties: bytes,
                                       body: bytes) -> None:
    want = generic(lane, opaque, sys_flag, born, flag, properties, body)
    got_c = C.SendFrame(*lane).frame(opaque, sys_flag, born, flag, properties, body)
    got_py = ref.SendFramePy(*lane).frame(opaque, sys_flag, born, flag, properties, body)
    assert got_c == got_py == want.encode()
    back = decode_frame(got_c[4:])
    assert (back.code, back.language, back.version, back.opaque, back.flag, back.remark) == \
        (want.code, "PYTHON", CURRENT_VERSION, opaque, 0, None)
    assert back.ext_fields == want.ext_fields
    assert back.body == body


def test_a_frame_that_does_not_fit_is_refused_on_both_paths() -> None:
    lane = ("g", "T", "TBW102", 4, 0, "b", False)
    huge = b"x" * 0x1000000
    for frame in (C.SendFrame(*lane), ref.SendFramePy(*lane)):
        with pytest.raises(ProtocolError, match="24-bit"):
            frame.frame(1, 0, 0, 0, huge, b"body")
        with pytest.raises(OverflowError):
            frame.frame(1, 0, 2**63, 0, b"", b"body")


ints = st.one_of(st.integers(-(2**64), 2**64).map(str), st.text("+-0123456789", max_size=21),
                 st.text(max_size=5), st.sampled_from(["2147483647", "2147483648", "-2147483648",
                                                       "-2147483649", "9223372036854775807",
                                                       "9223372036854775808", "٣", "1_0", " 1"]))


@given(st.dictionaries(st.sampled_from(["msgId", "queueId", "queueOffset", "transactionId",
                                        "MSG_REGION", "other"]), st.text(max_size=10)),
       st.none() | ints, st.none() | ints)
def test_send_reply(ext: dict[str, str], queue_id: str | None, queue_offset: str | None) -> None:
    if queue_id is not None:
        ext["queueId"] = queue_id
    if queue_offset is not None:
        ext["queueOffset"] = queue_offset
    got = C.send_reply(ext)
    assert got == ref.send_reply_py(ext)
    if got is not None:
        assert (got[1], got[2]) == (int(ext["queueId"]), int(ext["queueOffset"]))


def test_send_reply_reads_the_header() -> None:
    ext = {"msgId": "0A00", "queueId": "3", "queueOffset": "-1", "MSG_REGION": "r", "TRACE_ON": "true"}
    assert C.send_reply(ext) == ref.send_reply_py(ext) == ("0A00", 3, -1, None, "r")
    for bad in ({"queueId": "3", "queueOffset": "1"}, {**ext, "queueId": "2147483648"},
                {**ext, "queueOffset": ""}, {**ext, "queueId": "1.0"}):
        assert C.send_reply(bad) is ref.send_reply_py(bad) is None


@given(st.text("0123456789ABCDEF", max_size=24), I64, I64)
def test_uniq_key(prefix: str, since: int, counter: int) -> None:
    got = C.uniq_key(prefix, since, counter)
    assert got == ref.uniq_key_py(prefix, since, counter)
    assert got == prefix + (since & 0xFFFFFFFF).to_bytes(4, "big").hex().upper() + \
        (counter & 0xFFFF).to_bytes(2, "big").hex().upper()


@given(st.dictionaries(st.sampled_from(["msgId", "transactionId", "MSG_REGION", "recallHandle",
                                        "other"]),
                       st.text(max_size=8)),
       st.none() | ints, st.none() | ints, st.integers(0, 8), st.sampled_from(list(SendStatus)))
def test_result_reader(ext: dict[str, str], queue_id: str | None, queue_offset: str | None, sent_to: int,
                       status: SendStatus) -> None:
    if queue_id is not None:
        ext["queueId"] = queue_id
    if queue_offset is not None:
        ext["queueOffset"] = queue_offset
    mq = MessageQueue("T", "broker-a", sent_to)
    got = C.ResultReader(SendResult, MessageQueue).read(ext, status, "UNIQ", mq)
    want = ref.ResultReaderPy(SendResult, MessageQueue).read(ext, status, "UNIQ", mq)
    assert got == want
    if want is not None:
        assert type(got) is SendResult and type(got.queue) is MessageQueue
        assert (got.queue is mq) == (want.queue is mq) == (want.queue.queueId == sent_to)
        assert hash(got) == hash(want) and hash(got.queue) == hash(want.queue)
        with pytest.raises(AttributeError):
            got.msg_id = "x"  # type: ignore[misc]  # still frozen


def test_result_reader_needs_slots() -> None:
    class Plain:
        queueId = 0

    with pytest.raises((TypeError, KeyError)):
        C.ResultReader(Plain, MessageQueue)


@given(st.text("0123456789ABCDEF", max_size=24), st.integers(0, 2**20),
       st.lists(st.floats(0, 2e12, allow_nan=False), min_size=1, max_size=20))
def test_uniq_keys(prefix: str, counter: int, times: list[float]) -> None:
    rolls: list[list[float]] = [[], []]

    def roller(i: int) -> Callable[[float], tuple[float, float]]:
        def roll(now_ms: float) -> tuple[float, float]:  # months of 2^31 ms from 0
            rolls[i].append(now_ms)
            start = now_ms // 2**31 * 2**31
            return start, start + 2**31
        return roll

    c = C.UniqKeys(prefix, counter, roller(0))
    py = ref.UniqKeysPy(prefix, counter, roller(1))
    got = [c.at(t) for t in times]
    assert got == [py.at(t) for t in times]
    assert rolls[0] == rolls[1]
    assert got[0] == ref.uniq_key_py(prefix, int(times[0] - times[0] // 2**31 * 2**31), counter)
    for gen in (c, py):
        keys = [*gen.many(2), gen.next()]
        assert len(set(keys)) == 3 and all(k.startswith(prefix) and len(k) == len(prefix) + 12 for k in keys)


def test_uniq_keys_pass_on_a_failing_roll() -> None:
    def roll(now_ms: float) -> tuple[float, float]:
        raise ValueError("no month")

    for gen in (C.UniqKeys("AB", 0, roll), ref.UniqKeysPy("AB", 0, roll)):
        with pytest.raises(ValueError, match="no month"):
            gen.next()


class _Keys:
    """A deterministic UniqKeys for the preparers: the same ids in the same order."""

    def __init__(self) -> None:
        self.n = 0

    def next(self) -> str:
        self.n += 1
        return f"{self.n:032X}"


@st.composite
def messages(draw: st.DrawFn) -> tuple[Message, bool]:
    """A message and whether it has nothing beyond topic, body and flag."""
    msg = Message(draw(st.sampled_from(["T", "Other", "bad topic"])),
                  draw(st.sampled_from([b"", b"x", b"x" * 100, bytearray(b"xy"), "text"])),
                  flag=draw(st.sampled_from([0, 7, -(2**31), 2**31 - 1, 2**31, True])))
    plain = draw(st.booleans())
    if not plain:
        field, value = draw(st.sampled_from([
            ("tags", "TagA"), ("tags", ""), ("keys", "k1 k2"), ("keys", []), ("properties", {"a": "b"}),
            ("delay_level", 3), ("delay_level", -1), ("deliver_time_ms", 1), ("wait_store_msg_ok", False),
            ("uniq_key", "0A000001000000000000000000000001")]))
        setattr(msg, field, value)
    return msg, plain


@given(st.lists(messages(), min_size=1, max_size=8), st.sampled_from([50, 100, 4 * 1024 * 1024]),
       st.sampled_from([2, 100, 4096]))
def test_plain_prep(msgs: list[tuple[Message, bool]], max_size: int, compress_over: int) -> None:
    """Equal prepared sends from both twins, each equal to the producer's general path but for
    its UNIQ_KEY; None for what that path refuses, compresses or gives more properties, and
    never for a plain message the general path prepares alike."""
    producer = Producer("g", max_message_size=max_size, compress_over=compress_over)
    producer._valid_topics.add("T")
    c = C.PlainPrep(Message, _AsyncSend, _Keys(), producer._valid_topics)
    py = ref.PlainPrepPy(Message, _AsyncSend, _Keys(), producer._valid_topics)
    for msg, plain in msgs:
        got = c.prepare(msg, max_size, compress_over)
        assert got == py.prepare(msg, max_size, compress_over)
        try:
            want = producer._prepare(msg, _AsyncSend)
        except MQClientError:
            assert got is None
            continue
        if got is None:
            assert not plain or msg.topic != "T" or want.sys_flag or type(msg.body) is not bytes \
                or type(msg.flag) is not int
            continue
        assert type(got) is _AsyncSend
        assert got.properties == f"UNIQ_KEY\x01{got.uniq_key}\x02" and got.wire == got.properties.encode()
        got.uniq_key, got.properties, got.wire = want.uniq_key, want.properties, want.wire
        assert got == want
