"""The compiled ``split_frames`` / ``split_messages`` (``proxy.h2._frames_c``) against the pure
``_split_frames_py`` / ``_split_messages_py``: the same frames, messages, bytes used and refusals
for any input, well-formed or not, from bytes and from a bytearray."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from nativehelp import twin
from rocketlite.proxy.h2 import frames as ref

C = twin("rocketlite.proxy.h2._frames_c")


@st.composite
def frame_streams(draw: st.DrawFn) -> bytes:
    out = b""
    for _ in range(draw(st.integers(0, 6))):
        payload = draw(st.binary(max_size=40))
        out += ref.frame_header(draw(st.sampled_from([len(payload), len(payload) + 3, 70_000])),
                                draw(st.integers(0, 255)), draw(st.integers(0, 255)),
                                draw(st.integers(0, (1 << 32) - 1)) & 0xFFFFFFFF) + payload
    return out[:draw(st.integers(0, len(out)))] if draw(st.booleans()) else out


@st.composite
def message_streams(draw: st.DrawFn) -> bytes:
    out = b""
    for _ in range(draw(st.integers(0, 6))):
        payload = draw(st.binary(max_size=40))
        out += bytes([draw(st.sampled_from([0, 0, 0, 1, 255]))]) + \
            draw(st.sampled_from([len(payload), len(payload) + 2, 1 << 31])).to_bytes(4, "big") \
            + payload
    return out[:draw(st.integers(0, len(out)))] if draw(st.booleans()) else out


@given(frame_streams(), st.sampled_from([0, 16, 16_384, 65_535]), st.booleans())
def test_split_frames(data: bytes, max_size: int, as_bytearray: bool) -> None:
    buf = bytearray(data) if as_bytearray else data
    assert C.split_frames(buf, max_size) == ref._split_frames_py(buf, max_size)


@given(message_streams(), st.sampled_from([0, 16, 1 << 20]), st.booleans())
def test_split_messages(data: bytes, max_size: int, as_bytearray: bool) -> None:
    buf = bytearray(data) if as_bytearray else data
    assert C.split_messages(buf, max_size) == ref._split_messages_py(buf, max_size)


@given(st.binary(max_size=64))
def test_any_bytes(data: bytes) -> None:
    assert C.split_frames(data, 30) == ref._split_frames_py(data, 30)
    assert C.split_messages(data, 30) == ref._split_messages_py(data, 30)
