"""The pre-encoded send reply is byte for byte what the generic encoder writes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocketlite.formats.message_id import encode_message_id
from rocketlite.protocol.codes import ResponseCode, SerializeType
from rocketlite.protocol.command import RemotingCommand, decode_frame
from rocketlite.protocol.replies import SendOkFrames

INT32 = st.integers(-(2**31), 2**31 - 1)
HOSTS = st.sampled_from([b"\x7f\x00\x00\x01", b"\x0a\x00\x00\xfe", bytes(range(16))])


def generic(host: bytes, port: int, region: str, trace_on: bool, opaque: int, queue_id: int,
            commit_log_offset: int, queue_offset: int,
            serialize_type: SerializeType = SerializeType.JSON) -> bytes:
    request = RemotingCommand.request(310, {})
    request.opaque = opaque
    request.serialize_type = serialize_type
    return request.response(ResponseCode.SUCCESS, None, {
        "msgId": encode_message_id(host, port, commit_log_offset),
        "queueId": str(queue_id),
        "queueOffset": str(queue_offset),
        "MSG_REGION": region,
        "TRACE_ON": "true" if trace_on else "false",
    }).encode()


@given(host=HOSTS, port=st.integers(0, 65535), opaque=INT32, queue_id=st.integers(0, 2**31 - 1),
       commit_log_offset=st.integers(0, 2**63 - 1), queue_offset=st.integers(0, 2**63 - 1),
       region=st.sampled_from(["DefaultRegion", 'a "quoted" 100% región\x01']),
       trace_on=st.booleans())
def test_send_ok_frame_equals_the_generic_encoding(
    host: bytes, port: int, opaque: int, queue_id: int, commit_log_offset: int,
    queue_offset: int, region: str, trace_on: bool,
) -> None:
    frames = SendOkFrames(host, port, region, trace_on)
    frame = frames.frame(opaque, queue_id, commit_log_offset, queue_offset)
    assert frame == generic(host, port, region, trace_on, opaque, queue_id, commit_log_offset,
                            queue_offset)
    reply = decode_frame(frame[4:])
    assert reply.is_response and reply.opaque == opaque
    assert reply.ext_fields["msgId"] == encode_message_id(host, port, commit_log_offset)


@given(host=HOSTS, port=st.integers(0, 65535), replies=st.lists(st.tuples(
    INT32, st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1)),
    max_size=40))
def test_frames_of_many_replies_join_to_their_frames(
    host: bytes, port: int, replies: list[tuple[int, int, int, int]],
) -> None:
    frames = SendOkFrames(host, port, "DefaultRegion", True)
    assert b"".join(frames.frames(replies)) == b"".join(frames.frame(*r) for r in replies)
    assert len(frames.frames(iter(replies))) == 2 * len(replies)


@given(host=HOSTS, port=st.integers(0, 65535),
       offsets=st.lists(st.integers(0, 2**63 - 1), max_size=1100))
def test_batch_message_ids(host: bytes, port: int, offsets: list[int]) -> None:
    ids = SendOkFrames(host, port, "R", True).message_ids(offsets)
    assert ids == ",".join(encode_message_id(host, port, off) for off in offsets)


def test_batch_message_ids_of_a_large_batch() -> None:
    host = b"\x0a\x00\x00\x01"
    offsets = list(range(0, 3000 * 97, 97))  # more ids than the Struct cache keeps
    frames = SendOkFrames(host, 10911, "R", True)
    for _ in range(2):
        assert frames.message_ids(offsets) == ",".join(
            encode_message_id(host, 10911, off) for off in offsets)


@given(host=HOSTS, port=st.integers(0, 65535), opaque=INT32, queue_id=st.integers(0, 2**31 - 1),
       commit_log_offset=st.integers(0, 2**63 - 1), queue_offset=st.integers(0, 2**63 - 1),
       region=st.sampled_from(["DefaultRegion", 'a "quoted" 100% región\x01']),
       trace_on=st.booleans())
def test_binary_send_ok_frame_equals_the_generic_encoding(
    host: bytes, port: int, opaque: int, queue_id: int, commit_log_offset: int,
    queue_offset: int, region: str, trace_on: bool,
) -> None:
    frames = SendOkFrames(host, port, region, trace_on)
    frame = frames.binary_frame(opaque, queue_id, commit_log_offset, queue_offset)
    assert frame == generic(host, port, region, trace_on, opaque, queue_id, commit_log_offset,
                            queue_offset, SerializeType.ROCKETMQ)
    reply = decode_frame(frame[4:])
    assert reply.is_response and reply.opaque == opaque and reply.serialize_type == SerializeType.ROCKETMQ
    many = [(opaque, queue_id, commit_log_offset, queue_offset)] * 3
    assert b"".join(frames.binary_frames(many)) == frame * 3
