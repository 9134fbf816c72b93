"""The compiled frame decoder against the pure one: the same commands, or the same errors (message
and opaque), for well-formed frames of both serializations, unusual JSON headers the pure decoder
coerces, hostile headers and random bytes; and the same split of a read into frames, with the
same ``maxExtFields`` decision (the same ``ExtFieldsLimitError``, holding the same request)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nativehelp import twin
from rocketlite.common.errors import FrameTooLargeError, ProtocolError
from rocketlite.protocol import command as ref
from rocketlite.protocol.codes import SerializeType
from strategies import commands, ext_limit_frames, json_headers

C = twin("rocketlite.protocol._command_c")
CODEC = C.Codec(ref.RemotingCommand, [f.name for f in ref.dataclasses.fields(ref.RemotingCommand)],
                ref._loads, ref._json_command, ref._binary_command, ProtocolError, ref._undecodable,
                ref._LANGUAGE_NAMES, ref._LANGUAGE_BY_VALUE, ref._OTHER)


def frame(header: bytes, body: bytes = b"", stype: int = 0) -> bytes:
    return struct.pack(">iI", 4 + len(header) + len(body), (stype << 24) | len(header)) + header + body


def same(item: object) -> object:
    if isinstance(item, ref.ExtFieldsLimitError):
        return (type(item).__name__, str(item), item.opaque, item.command, item.count, item.limit)
    if isinstance(item, ProtocolError):
        return (type(item).__name__, str(item), item.opaque)
    return item


def outcome(decode: object, data: bytes) -> object:
    try:
        return same(decode(data, 4, len(data)))  # type: ignore[operator]
    except ProtocolError as e:
        return same(e)


frames = st.one_of(
    (commands(SerializeType.JSON) | commands(SerializeType.ROCKETMQ)).map(lambda c: c.encode()),
    st.builds(frame, json_headers(), st.binary(max_size=16), st.sampled_from([0, 1, 2])),
    st.builds(frame, st.binary(max_size=80), st.binary(max_size=8), st.sampled_from([0, 1, 3])),
)


@given(frames)
def test_decode(data: bytes) -> None:
    assert outcome(CODEC.decode, data) == outcome(ref._decode_py, data)


@given(st.lists(frames, max_size=6), st.binary(max_size=12),
       st.one_of(st.just(0xFFFFFF), st.integers(0, 100)))
def test_split(parts: list[bytes], tail: bytes, max_header: int) -> None:
    data = b"".join(parts) + tail
    got: list[object] = []
    want: list[object] = []
    try:
        pos_c = CODEC.split(ref.FrameDecoder(1 << 16, max_header), data, 0, got)
    except ProtocolError as e:
        pos_c = same(e)
    try:
        pos_py = ref._split_py(ref.FrameDecoder(1 << 16, max_header), data, 0, want)
    except ProtocolError as e:
        pos_py = same(e)
    assert (pos_c, [same(i) for i in got]) == (pos_py, [same(i) for i in want])


@given(st.lists(ext_limit_frames(), min_size=1, max_size=4), st.sampled_from([0, 1]))
def test_split_limits_ext_fields_alike(limited: list[tuple[bytes, int]], which: int) -> None:
    """Frames at, below and above a limit (either serialize type, usual and coerced headers): the
    same items from both splits, and a request refused exactly when its decoded ext fields (as
    ``decode_frame`` gives them, no limit) are more than the limit."""
    limit = limited[which % len(limited)][1]
    data = b"".join(f for f, _ in limited)
    got: list[object] = []
    want: list[object] = []
    assert CODEC.split(ref.FrameDecoder(1 << 16, 0xFFFFFF, limit), data, 0, got) == len(data)
    assert ref._split_py(ref.FrameDecoder(1 << 16, 0xFFFFFF, limit), data, 0, want) == len(data)
    assert [same(i) for i in got] == [same(i) for i in want]
    for (f, _), item in zip(limited, got, strict=True):
        cmd = ref.decode_frame(f[4:])
        refused = not cmd.flag & 1 and len(cmd.ext_fields) > limit
        assert isinstance(item, ref.ExtFieldsLimitError) is refused
        if isinstance(item, ref.ExtFieldsLimitError):
            assert item.command == cmd and item.count == len(cmd.ext_fields) and item.limit == limit
            assert item.opaque == (None if cmd.flag & 2 else cmd.opaque)
        else:
            assert item == cmd


def test_a_bad_length_is_the_decoders_fatal_error() -> None:
    for length, err in ((-1, ProtocolError), (1 << 20, FrameTooLargeError)):
        with pytest.raises(err):
            CODEC.split(ref.FrameDecoder(1 << 16), struct.pack(">i", length) + bytes(8), 0, [])
