"""Hostile frames: whatever a peer sends, the decoders raise ``ProtocolError`` (for one frame, or
for the stream) and nothing else, and a bad frame never takes the good frames of the same read
with it (issue 17, part 4)."""

from __future__ import annotations

import contextlib
import itertools
import struct
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketlite.common.errors import HeaderTooLargeError, ProtocolError
from rocketlite.protocol import command
from rocketlite.protocol.command import ExtFieldsLimitError, FrameDecoder, RemotingCommand, decode_frame
from strategies import ext_limit_frames, json_headers, nested

GOOD = RemotingCommand.request(10, {"k": "v"}).encode()


def frame(header: bytes, body: bytes = b"", stype: int = 0) -> bytes:
    return struct.pack(">iI", 4 + len(header) + len(body), (stype << 24) | len(header)) + header + body


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
    # A remark that is not a string: the compiled decoder hands such a header to _json_command too.
    bad = frame(header_with("remark", '["boom"]'))
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
        FrameDecoder().feed(frame(header_with("remark", "[1]")))


# -- fuzz -------------------------------------------------------------------------------------

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


def test_a_header_above_max_header_is_skipped_undecoded() -> None:
    big = RemotingCommand.request(10, {f"k{i}": "v" * 10 for i in range(50)}).encode()
    hlen = struct.unpack_from(">I", big, 4)[0] & 0xFFFFFF
    for cuts in ([], [len(GOOD) + 7], [len(GOOD) + 100, len(GOOD) + 200]):  # whole and split
        data = GOOD + big + GOOD
        decoder = FrameDecoder(max_header=hlen - 1)
        items: list[object] = []
        for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True):
            items += decoder.feed(data[a:b])
        assert [type(i) for i in items] == [RemotingCommand, HeaderTooLargeError, RemotingCommand]
        err = items[1]
        assert isinstance(err, HeaderTooLargeError) and err.opaque is None
        assert f"header of {hlen} bytes is above maxHeaderBytes ({hlen - 1})" in str(err)
    assert [type(i) for i in FrameDecoder(max_header=hlen).feed(big)] == [RemotingCommand]


@given(ext_limit_frames(), st.lists(st.integers(1, 200), max_size=3))
def test_a_request_above_max_ext_fields_is_refused_by_the_decoder(
        limited: tuple[bytes, int], cuts: list[int]) -> None:
    """Whole or split across reads (the buffered path), either decoder (ROCKETLITE_PURE=1 runs
    this on the pure one): a request with more ext fields than the limit is its frame's
    ``ExtFieldsLimitError`` holding the decoded request, the frames around it decode, and a
    response or a request within the limit is the command itself."""
    f, limit = limited
    plain = RemotingCommand.request(10).encode()  # no ext fields: within any limit
    data = plain + f + plain
    bounds = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    decoder = FrameDecoder(max_ext_fields=limit)
    items: list[object] = []
    for a, b in itertools.pairwise(bounds):
        items += decoder.feed(data[a:b])
    cmd = decode_frame(f[4:])
    assert items[0] == items[2] == decode_frame(plain[4:]) and len(items) == 3
    if cmd.flag & 1 or len(cmd.ext_fields) <= limit:
        assert items[1] == cmd
    else:
        err = items[1]
        assert isinstance(err, ExtFieldsLimitError) and err.command == cmd
        assert str(err) == f"the request header has {len(cmd.ext_fields)} ext fields, above " \
            f"maxExtFields ({limit})"
        assert err.opaque == (None if cmd.flag & 2 else cmd.opaque)
