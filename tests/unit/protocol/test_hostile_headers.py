"""Hostile frames: whatever a peer sends, the decoders raise ``ProtocolError`` (for one frame, or
for the stream) and nothing else, and a bad frame never takes the good frames of the same read
with it (issue 17, part 4)."""

from __future__ import annotations

import contextlib
import struct
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketlite.common.errors import ProtocolError
from rocketlite.protocol import command
from rocketlite.protocol.command import FrameDecoder, RemotingCommand, decode_frame

GOOD = RemotingCommand.request(10, {"k": "v"}).encode()


def frame(header: bytes, body: bytes = b"", stype: int = 0) -> bytes:
    return struct.pack(">iI", 4 + len(header) + len(body), (stype << 24) | len(header)) + header + body


def nested(depth: int, leaf: str = "1", kind: str = "object") -> str:
    if kind == "object":
        return '{"a":' * depth + leaf + "}" * depth
    return "[" * depth + leaf + "]" * depth


def header_with(field: str, value: str, opaque: int = 5) -> bytes:
    return f'{{"code":10,"opaque":{opaque},"flag":0,"{field}":{value}}}'.encode()


@pytest.mark.parametrize("kind", ["object", "array"])
@pytest.mark.parametrize("depth", [255, 600, 1000])
def test_deeply_nested_ext_value_fails_its_frame_only(kind: str, depth: int) -> None:
    # ~600 levels made _to_str raise TypeError('Recursion limit reached') out of feed, which
    # dropped the good frames of the same read and left the stream in a broken state
    bad = frame(header_with("extFields", '{"x":' + nested(depth, kind=kind) + "}"))
    items = FrameDecoder().feed(GOOD + bad + GOOD)
    assert [type(i) for i in items] == [RemotingCommand, ProtocolError, RemotingCommand]
    err = items[1]
    assert isinstance(err, ProtocolError) and err.opaque == 5  # answerable: SYSTEM_ERROR
    assert "cannot be written as text" in str(err)


def test_deeply_nested_remark_and_a_split_frame() -> None:
    bad = frame(header_with("remark", nested(700)))
    decoder = FrameDecoder()
    stream = GOOD + bad + GOOD
    cut = len(GOOD) + 100  # the bad frame straddles two feeds: decoded from the buffer
    items = decoder.feed(stream[:cut]) + decoder.feed(stream[cut:])
    assert [type(i) for i in items] == [RemotingCommand, ProtocolError, RemotingCommand]
    with pytest.raises(ProtocolError):
        decode_frame(bad[4:])


def test_nesting_orjson_can_write_is_kept_as_json_text() -> None:
    value = nested(254)
    [cmd] = FrameDecoder().feed(frame(header_with("extFields", '{"x":' + value + "}")))
    assert isinstance(cmd, RemotingCommand)
    assert orjson.loads(cmd.ext_fields["x"]) == orjson.loads(value)


def test_beyond_orjsons_parse_depth_is_an_unreadable_header() -> None:
    bad = frame(header_with("extFields", '{"x":' + nested(1100) + "}"))
    items = FrameDecoder().feed(GOOD + bad + GOOD)
    assert [type(i) for i in items] == [RemotingCommand, ProtocolError, RemotingCommand]
    assert isinstance(items[1], ProtocolError) and items[1].opaque is None  # closes the connection


def test_any_codec_failure_becomes_that_frames_protocol_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real = command._json_command

    def flaky(header: Any, body: bytes) -> RemotingCommand:
        if b'"boom"' in bytes(header):
            raise RecursionError("maximum recursion depth exceeded")
        return real(header, body)

    monkeypatch.setattr(command, "_json_command", flaky)
    bad = frame(header_with("remark", '"boom"'))
    items = FrameDecoder().feed(GOOD + bad + GOOD)
    assert [type(i) for i in items] == [RemotingCommand, ProtocolError, RemotingCommand]
    assert "RecursionError" in str(items[1])
    decoder = FrameDecoder()  # and through the buffered path
    items = decoder.feed(bad[:10]) + decoder.feed(bad[10:] + GOOD)
    assert [type(i) for i in items] == [ProtocolError, RemotingCommand]
    with pytest.raises(ProtocolError, match="RecursionError"):
        decode_frame(bad[4:])


def test_memory_error_is_not_disguised(monkeypatch: pytest.MonkeyPatch) -> None:
    def oom(header: Any, body: bytes) -> RemotingCommand:
        raise MemoryError

    monkeypatch.setattr(command, "_json_command", oom)
    with pytest.raises(MemoryError):
        FrameDecoder().feed(GOOD)


# -- fuzz -------------------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=30,
)


def deep_json(draw: st.DrawFn) -> str:
    depth = draw(st.integers(1, 20) | st.integers(250, 1100))
    leaf = orjson.dumps(draw(JSON), option=orjson.OPT_NON_STR_KEYS).decode() \
        if draw(st.booleans()) else "1"
    return nested(depth, leaf, draw(st.sampled_from(["object", "array"])))


@st.composite
def json_headers(draw: st.DrawFn) -> bytes:
    """A JSON header: mostly well formed, with any value in any field, nested or not."""
    fields: dict[str, str] = {}
    for name in ("code", "opaque", "flag", "version", "language", "remark", "extFields"):
        choice = draw(st.sampled_from(["plain", "plain", "plain", "omit", "json", "deep"]))
        if choice == "plain":
            fields[name] = {"code": "10", "opaque": "7", "flag": "0", "version": "1",
                            "language": '"JAVA"', "remark": '"r"', "extFields": '{"a":"b"}'}[name]
        elif choice == "json":
            fields[name] = orjson.dumps(draw(JSON), option=orjson.OPT_NON_STR_KEYS).decode()
        elif choice == "deep":
            fields[name] = deep_json(draw)
    if "extFields" not in fields and draw(st.booleans()):
        fields["extFields"] = '{"x":' + deep_json(draw) + "}"
    return ("{" + ",".join(f'"{k}":{v}' for k, v in fields.items()) + "}").encode()


def only_protocol_errors(stream: bytes, cuts: list[int]) -> None:
    decoder = FrameDecoder(1 << 20)
    pos = 0
    for cut in [*sorted(set(cuts)), len(stream)]:
        try:
            items = decoder.feed(stream[pos:cut])
        except ProtocolError:
            return
        assert all(isinstance(i, RemotingCommand | ProtocolError) for i in items)
        pos = cut


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.lists(st.integers(0, 400), max_size=5))
def test_fuzz_random_bytes(data: bytes, cuts: list[int]) -> None:
    only_protocol_errors(data, [c for c in cuts if c <= len(data)])
    with contextlib.suppress(ProtocolError):
        decode_frame(data)


@settings(max_examples=300, deadline=None)
@given(json_headers(), st.binary(max_size=16), st.sampled_from([0, 1, 2]), st.integers(0, 2000))
def test_fuzz_json_headers(header: bytes, body: bytes, stype: int, cut: int) -> None:
    data = GOOD + frame(header, body, stype) + GOOD
    only_protocol_errors(data, [min(cut, len(data))])
    items = FrameDecoder(1 << 20).feed(data)
    assert isinstance(items[0], RemotingCommand) and isinstance(items[-1], RemotingCommand)
    assert len(items) == 3  # the frame in the middle never takes its neighbours with it
    with contextlib.suppress(ProtocolError):
        decode_frame(data[len(GOOD) + 4 : -len(GOOD)])


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=13, max_size=120), st.binary(max_size=8))
def test_fuzz_binary_headers(header: bytes, body: bytes) -> None:
    items = FrameDecoder(1 << 20).feed(GOOD + frame(header, body, 1) + GOOD)
    assert len(items) == 3 and isinstance(items[0], RemotingCommand)
