"""Pre-encoded frames for the hottest reply: a successful single send (SEND_MESSAGE,
SEND_MESSAGE_V2), to a request with a JSON header (``frame``, ``frames``) or a ROCKETMQ one
(``binary_frame``, ``binary_frames``: rocketlite's producer and the C++ client send those).

The bytes are exactly those of ``RemotingCommand.response(SUCCESS, None, ext).encode()`` with the
send reply's ext fields (a test holds them equal): the frame prefix, then, for JSON,

    {"code":0,"extFields":{"msgId":"<32 hex>","queueId":"<n>","queueOffset":"<n>",
     "MSG_REGION":"<region>","TRACE_ON":"<true|false>"},"flag":1,"language":"JAVA",
     "opaque":<n>,"serializeTypeCurrentRPC":"JSON","version":<CURRENT_VERSION>}

built with one ``%`` format instead of a dict, ``orjson.dumps`` and a message id encode; for
ROCKETMQ, the fixed part (code 0, language, version, opaque, flag 1, no remark) and the same ext
fields in the same order, each ``[int16 key length][key][int32 value length][value]``, with only
the opaque, the message id's offset, the queue id and the queue offset written per reply.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import orjson

from rocketlite.protocol.codes import CURRENT_VERSION, RPC_TYPE_RESPONSE, LanguageCode, SerializeType
from rocketlite.protocol.command import FRAME_PREFIX, RESPONSE_LANGUAGE
from rocketlite.protocol.message_batch import message_ids

_PORT = struct.Struct(">i")
# frame prefix (length, oriHeaderLen) + the ROCKETMQ header's fixed part (code, language,
# version, opaque, flag) + the remark's length (0) + the ext fields' length
_BINARY_HEAD = struct.Struct(">iIhbhiiii")
_BINARY_TYPE = int(SerializeType.ROCKETMQ) << 24
_I32 = struct.Struct(">i").pack


def _binary_field(key: str, value: bytes | None) -> bytes:
    """A ROCKETMQ ext field; with ``value`` None only its key and no length (written per reply)."""
    k = key.encode()
    head = struct.pack(">h", len(k)) + k
    return head if value is None else head + _I32(len(value)) + value


def _json_str(s: str) -> bytes:
    """``s`` as a JSON string literal, escaped as orjson escapes it; % doubled for the format."""
    return orjson.dumps(s).replace(b"%", b"%%")


class SendOkLayout(NamedTuple):
    """``SendOkFrames.layout()``: a JSON reply is ``FRAME_PREFIX`` (length, header length), then
    ``json_parts`` joined by the message id's CommitLog offset (``%016X``), the queue id, the
    queue offset and the opaque (``%d``); a ROCKETMQ one is ``>iIhbhiiii`` (length,
    ``binary_type | header length``, code 0, ``language``, ``version``, opaque, ``flag``, remark
    length 0, ext length ``fixed_ext`` + the two numbers' digits), ``bin_id`` + ``%016X``,
    ``bin_qid`` + int32 length + digits, ``bin_qoff`` + int32 length + digits, ``bin_tail``;
    its header length is ``fixed_header`` + the two numbers' digits."""

    json_parts: tuple[bytes, ...]
    bin_id: bytes
    bin_qid: bytes
    bin_qoff: bytes
    bin_tail: bytes
    fixed_ext: int
    fixed_header: int
    language: int
    version: int
    flag: int
    binary_type: int


class SendOkFrames:
    """Success replies of one store (its host and port make the message ids)."""

    def __init__(self, store_host: bytes, store_port: int, region: str, trace_on: bool) -> None:
        # encode_message_id: (host + port + offset).hex().upper(); host and port never change.
        self._id_head = store_host + _PORT.pack(store_port)
        id_prefix = self._id_head.hex().upper().encode()
        self._format = (
            b'{"code":0,"extFields":{"msgId":"' + id_prefix + b'%016X","queueId":"%d",'
            b'"queueOffset":"%d","MSG_REGION":' + _json_str(region)
            + b',"TRACE_ON":' + (b'"true"' if trace_on else b'"false"')
            + b'},"flag":' + str(RPC_TYPE_RESPONSE).encode()
            + b',"language":' + _json_str(RESPONSE_LANGUAGE)
            + b',"opaque":%d,"serializeTypeCurrentRPC":"JSON","version":'
            + str(CURRENT_VERSION).encode() + b"}"
        )

        # ROCKETMQ: msgId is always as long as the host and port make it, region and trace fixed
        id_len = len(id_prefix) + 16
        self._bin_id = _binary_field("msgId", None) + _I32(id_len) + id_prefix
        self._bin_tail = (_binary_field("MSG_REGION", region.encode())
                          + _binary_field("TRACE_ON", b"true" if trace_on else b"false"))
        self._bin_qid = _binary_field("queueId", None)
        self._bin_qoff = _binary_field("queueOffset", None)
        fixed_ext = len(self._bin_id) + 16 + len(self._bin_qid) + 4 + len(self._bin_qoff) + 4 \
            + len(self._bin_tail)
        self._bin_fixed = (fixed_ext, fixed_ext + 13 + 4 + 4)  # ext, header without the numbers
        self._bin_language = int(LanguageCode[RESPONSE_LANGUAGE])

    def layout(self) -> SendOkLayout:
        """The constant pieces of the replies, for an encoder that writes them itself (the
        broker's compiled reply writer; ``tests/unit/native/test_send_run_twin.py`` holds its
        output equal to ``frames`` and ``binary_frames``)."""
        # the JSON header's text around its four numbers: %016X, then three %d; %% stands for %
        # (a NUL never does: JSON escapes it)
        parts = tuple(p.replace(b"\0", b"%")
                      for p in re.split(rb"%016X|%d", self._format.replace(b"%%", b"\0")))
        fixed_ext, fixed_header = self._bin_fixed
        return SendOkLayout(parts, self._bin_id, self._bin_qid, self._bin_qoff, self._bin_tail,
                            fixed_ext, fixed_header, self._bin_language, CURRENT_VERSION,
                            RPC_TYPE_RESPONSE, _BINARY_TYPE)

    def message_ids(self, commit_log_offsets: Sequence[int]) -> str:
        """The comma-separated ids of a batch reply (``message_batch.message_ids``: one pass)."""
        return message_ids(self._id_head, commit_log_offsets)

    def frame(self, opaque: int, queue_id: int, commit_log_offset: int, queue_offset: int) -> bytes:
        header = self._format % (commit_log_offset, queue_id, queue_offset, opaque)
        n = len(header)
        return FRAME_PREFIX.pack(n + 4, n) + header

    def frames(self, replies: Iterable[tuple[int, int, int, int]]) -> list[bytes]:
        """``frame`` of every (opaque, queue id, CommitLog offset, queue offset), in one call:
        the pieces, each frame's prefix then its header, for one joined write."""
        fmt = self._format
        pack = FRAME_PREFIX.pack
        out: list[bytes] = []
        put = out.append
        for opaque, queue_id, commit_log_offset, queue_offset in replies:
            header = fmt % (commit_log_offset, queue_id, queue_offset, opaque)
            n = len(header)
            put(pack(n + 4, n))
            put(header)
        return out

    def binary_frame(self, opaque: int, queue_id: int, commit_log_offset: int,
                     queue_offset: int) -> bytes:
        """``frame`` for a request whose header is ROCKETMQ-serialized."""
        return b"".join(self.binary_frames(((opaque, queue_id, commit_log_offset, queue_offset),)))

    def binary_frames(self, replies: Iterable[tuple[int, int, int, int]]) -> list[bytes]:
        """``frames`` for requests whose headers are ROCKETMQ-serialized."""
        fixed_ext, fixed_header = self._bin_fixed
        head, lang, tail = _BINARY_HEAD.pack, self._bin_language, self._bin_tail
        bin_id, bin_qid, bin_qoff = self._bin_id, self._bin_qid, self._bin_qoff
        out: list[bytes] = []
        put = out.append
        for opaque, queue_id, commit_log_offset, queue_offset in replies:
            qid = b"%d" % queue_id
            qoff = b"%d" % queue_offset
            n = len(qid) + len(qoff)
            hlen = fixed_header + n
            put(head(4 + hlen, _BINARY_TYPE | hlen, 0, lang, CURRENT_VERSION, opaque,
                     RPC_TYPE_RESPONSE, 0, fixed_ext + n))
            put(b"".join((bin_id, b"%016X" % commit_log_offset, bin_qid, _I32(len(qid)), qid,
                          bin_qoff, _I32(len(qoff)), qoff, tail)))
        return out
