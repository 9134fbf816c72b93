"""The compiled message decoder against the pure ``_run_py``: the same messages and the same stop
position for runs of records of every shape (IPv4 and IPv6 hosts, V1 and V2 topics, compressed,
negative offsets), damaged records (body bytes, lengths, CRC) and trailing garbage; and
``decode_messages`` gives the same result on either path."""

from __future__ import annotations

import gc
import sys

from hypothesis import given
from hypothesis import strategies as st

from nativehelp import twin
from rocketlite.client import message as ref
from rocketlite.formats import message_record as rec
from rocketlite.formats.properties import encode_properties
from strategies import records

C = twin("rocketlite.client._message_c")
DECODER = C.Decoder(ref.MessageExt, ref.MessageExt.DECODED, ref.MessageExt.LAZY, rec.crc32)


@st.composite
def common_records(draw: st.DrawFn, lowest_offset: int = -5) -> bytes:
    """Mostly the shape the compiled path takes, with odd property strings and a UNIQ_KEY now
    and then."""
    m = draw(records())
    m.sys_flag &= ~(rec.SYSFLAG_BORNHOST_V6 | rec.SYSFLAG_STOREHOST_V6 | rec.SYSFLAG_COMPRESSED)
    m.born_host, m.store_host = m.born_host[:4].ljust(4, b"\0"), m.store_host[:4].ljust(4, b"\0")
    m.topic = m.topic[:100]
    m.magic = rec.MAGIC_V1
    if draw(st.booleans()):
        m.properties_text = draw(st.text(alphabet="\x01\x02ab\u00e9", max_size=30))
    if draw(st.booleans()):
        m.properties_text += encode_properties({"UNIQ_KEY": draw(st.text("0123456789ABCDEF", max_size=32))})
    m.commit_log_offset = draw(st.integers(lowest_offset, 2**40))
    return m.encode()


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    parts = draw(st.lists(common_records() | records().map(lambda m: m.encode()), max_size=6))
    data = bytearray(b"".join(parts))
    if data and draw(st.booleans()):  # damage one byte anywhere
        i = draw(st.integers(0, len(data) - 1))
        data[i] ^= draw(st.integers(1, 255))
    return bytes(data) + draw(st.binary(max_size=10))


@given(streams(), st.booleans(), st.sampled_from(["", "broker-a"]))
def test_run(data: bytes, verify_crc: bool, broker: str) -> None:
    got: list[ref.MessageExt] = []
    want: list[ref.MessageExt] = []
    assert (DECODER.run(data, 0, len(data), broker, verify_crc, got), got) == \
        (ref._run_py(data, 0, len(data), broker, verify_crc, want), want)


@given(st.lists(common_records(lowest_offset=0), min_size=1, max_size=5))
def test_a_run_of_common_records_is_taken_whole(parts: list[bytes]) -> None:
    data = b"".join(parts)
    got: list[ref.MessageExt] = []
    assert DECODER.run(data, 0, len(data), "b", True, got) == len(data)
    assert got == ref.decode_messages(data, "b")


@given(st.lists(common_records(lowest_offset=0), min_size=1, max_size=3))
def test_the_twin_leaves_properties_hosts_and_ids_to_first_access(parts: list[bytes]) -> None:
    data = b"".join(parts)
    got: list[ref.MessageExt] = []
    DECODER.run(data, 0, len(data), "b", False, got)
    want = ref.decode_messages(data, "b", verify_crc=False)
    for m, w in zip(got, want, strict=True):
        assert all(getattr(m, name) is None for name in ref.MessageExt.LAZY)
        assert (m.msg_id, m.offset_msg_id, m.born_host, m.store_host) == \
            (w.msg_id, w.offset_msg_id, w.born_host, w.store_host)
        assert m.properties == w.properties and m._properties is m.properties  # parsed once
        m.properties["TAGS"] = "t"  # the parsed dict is the message's own, as a built one's is
        assert m.tags == "t"


@given(st.lists(common_records(lowest_offset=0), min_size=1, max_size=3))
def test_decoded_messages_are_left_out_of_the_cycle_collector(parts: list[bytes]) -> None:
    """Like msgspec's ``Struct(gc=False)``: a decoded message holds no container that could
    close a cycle, so the collector is spared walking it (the pure path's are tracked)."""
    data = b"".join(parts)
    got: list[ref.MessageExt] = []
    DECODER.run(data, 0, len(data), "b", False, got)
    assert got and not any(gc.is_tracked(m) for m in got)
    assert all(gc.is_tracked(m) for m in ref.decode_messages(data, "b", verify_crc=False)
               if ref._run is ref._run_py)
    topic = got[0].topic
    holders = sum(m.topic is topic for m in got)
    before = sys.getrefcount(topic)
    del got  # reference counting still frees them: the topic loses a holder per message
    assert before - sys.getrefcount(topic) == holders


class _NotSlotted:
    __slots__ = ("topic",)
    body = property(lambda self: b"")


class _OwnNew:
    __slots__ = tuple(ref.MessageExt.DECODED) + tuple(ref.MessageExt.LAZY)

    def __new__(cls) -> _OwnNew:
        return super().__new__(cls)


def test_the_decoder_refuses_a_class_whose_fields_are_not_plain_slots() -> None:
    for cls, reason in ((_NotSlotted, "is not a slot"), (_OwnNew, "object.__new__")):
        try:
            C.Decoder(cls, ref.MessageExt.DECODED, ref.MessageExt.LAZY, rec.crc32)
        except TypeError as e:
            assert reason in str(e)
        else:
            raise AssertionError(f"{cls.__name__} was accepted")
