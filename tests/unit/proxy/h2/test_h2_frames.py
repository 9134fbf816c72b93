"""The HTTP/2 frame and gRPC message layouts of ``proxy.h2.frames`` byte for byte (RFC 9113 4.1,
gRPC's Length-Prefixed-Message), and the splits' handling of partial, oversized and compressed
input."""

from __future__ import annotations

from rocketlite.proxy.h2 import frames as f
from rocketlite.proxy.h2.stream import OK_TRAILERS, RESPONSE_HEADERS, trailers

SPLITS = [("pure", f._split_frames_py, f._split_messages_py),
          ("bound", f.split_frames, f.split_messages)]


def test_frame_header_layout() -> None:
    raw = f.frame(f.HEADERS, f.END_HEADERS | f.END_STREAM, 0x01020304, b"abc")
    assert raw == bytes([0, 0, 3, 1, 0x05, 0x01, 0x02, 0x03, 0x04]) + b"abc"
    assert f.frame_header(0x123456, f.DATA, 0, 7) == bytes([0x12, 0x34, 0x56, 0, 0, 0, 0, 0, 7])
    assert f.window_update(3, 1000) == bytes([0, 0, 4, 8, 0, 0, 0, 0, 3, 0, 0, 0x03, 0xE8])
    assert f.rst_stream(5, f.CANCEL) == bytes([0, 0, 4, 3, 0, 0, 0, 0, 5, 0, 0, 0, 8])
    assert f.goaway(9, f.PROTOCOL_ERROR, b"x") == bytes(
        [0, 0, 9, 7, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1]) + b"x"
    assert f.settings({f.INITIAL_WINDOW_SIZE: 65536}) == bytes(
        [0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 4, 0, 1, 0, 0])
    assert bytes([0, 0, 0, 4, 1, 0, 0, 0, 0]) == f.SETTINGS_ACK
    assert f.ping_ack(b"12345678") == bytes([0, 0, 8, 6, 1, 0, 0, 0, 0]) + b"12345678"
    assert f.parse_settings(bytes([0, 5, 0, 0, 0x40, 0, 0, 3, 0, 0, 0, 100])) == [
        (f.MAX_FRAME_SIZE, 16384), (f.MAX_CONCURRENT_STREAMS, 100)]


def test_message_layout() -> None:
    assert f.message(b"hello") == b"\x00\x00\x00\x00\x05hello"
    assert f.message(b"") == b"\x00\x00\x00\x00\x00"


def test_response_header_blocks_decode_as_grpc_expects() -> None:
    import hpack

    d = hpack.Decoder()
    assert list(d.decode(RESPONSE_HEADERS)) == [(":status", "200"),
                                                 ("content-type", "application/grpc")]
    assert list(d.decode(OK_TRAILERS)) == [("grpc-status", "0")]
    assert list(d.decode(trailers(8, "too big: 100% ü"))) == [
        ("grpc-status", "8"), ("grpc-message", "too big: 100%25 %C3%BC")]
    assert not d.header_table.dynamic_entries  # nothing indexed: the blocks are constants


def test_split_frames() -> None:
    a = f.frame(f.PING, 0, 0, b"12345678")
    b = f.frame(f.DATA, f.END_STREAM, 1, b"xyz")
    for name, split, _ in SPLITS:
        assert split(a + b, 16384) == ([(6, 0, 0, b"12345678"), (0, 1, 1, b"xyz")],
                                       len(a + b), 0), name
        assert split(bytearray(a + b[:-1]), 16384) == ([(6, 0, 0, b"12345678")], len(a), 0), name
        assert split(a[:8], 16384) == ([], 0, 0), name
        big = f.frame_header(16385, f.DATA, 0, 1)
        assert split(a + big, 16384) == ([(6, 0, 0, b"12345678")], len(a), 16385), name
        reserved = bytes([0, 0, 0, 4, 0, 0x80, 0, 0, 0])  # the reserved bit is ignored
        assert split(reserved, 16384) == ([(4, 0, 0, b"")], 9, 0), name


def test_split_messages() -> None:
    m = f.message(b"abc") + f.message(b"")
    for name, _, split in SPLITS:
        assert split(m, 100) == ([b"abc", b""], len(m), 0), name
        assert split(m[:-1], 100) == ([b"abc"], 8, 0), name
        assert split(b"\x01\x00\x00\x00\x01a", 100) == ([], 0, -1), name  # compressed
        assert split(f.message(b"x" * 101), 100) == ([], 0, 101), name
