"""Pre-encoded frames for the hottest reply: a successful single send (SEND_MESSAGE,
SEND_MESSAGE_V2) to a request with a JSON header.

The bytes are exactly those of ``RemotingCommand.response(SUCCESS, None, ext).encode()`` with the
send reply's ext fields (a test holds them equal): the frame prefix, then

    {"code":0,"extFields":{"msgId":"<32 hex>","queueId":"<n>","queueOffset":"<n>",
     "MSG_REGION":"<region>","TRACE_ON":"<true|false>"},"flag":1,"language":"JAVA",
     "opaque":<n>,"serializeTypeCurrentRPC":"JSON","version":<CURRENT_VERSION>}

built with one ``%`` format instead of a dict, ``orjson.dumps`` and a message id encode.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from itertools import chain, repeat

import orjson

from rocketlite.protocol.codes import CURRENT_VERSION, RPC_TYPE_RESPONSE
from rocketlite.protocol.command import FRAME_PREFIX, RESPONSE_LANGUAGE

_PORT = struct.Struct(">i")
_CACHED_IDS = 1024  # batches up to this many messages keep their ids Struct


def _json_str(s: str) -> bytes:
    """``s`` as a JSON string literal, escaped as orjson escapes it; % doubled for the format."""
    return orjson.dumps(s).replace(b"%", b"%%")


class SendOkFrames:
    """Success replies of one store (its host and port make the message ids)."""

    def __init__(self, store_host: bytes, store_port: int, region: str, trace_on: bool) -> None:
        # encode_message_id: (host + port + offset).hex().upper(); host and port never change.
        self._id_head = store_host + _PORT.pack(store_port)
        id_prefix = self._id_head.hex().upper().encode()
        self._id_head_format = f"{len(self._id_head)}sq"
        self._id_size = len(self._id_head) + 8
        self._ids_structs: dict[int, struct.Struct] = {}
        self._format = (
            b'{"code":0,"extFields":{"msgId":"' + id_prefix + b'%016X","queueId":"%d",'
            b'"queueOffset":"%d","MSG_REGION":' + _json_str(region)
            + b',"TRACE_ON":' + (b'"true"' if trace_on else b'"false"')
            + b'},"flag":' + str(RPC_TYPE_RESPONSE).encode()
            + b',"language":' + _json_str(RESPONSE_LANGUAGE)
            + b',"opaque":%d,"serializeTypeCurrentRPC":"JSON","version":'
            + str(CURRENT_VERSION).encode() + b"}"
        )

    def message_ids(self, commit_log_offsets: Sequence[int]) -> str:
        """The comma-separated ids of a batch reply: every id packed by one Struct, then one
        ``hex`` with a separator every id (C-level passes, no per-id formatting)."""
        n = len(commit_log_offsets)
        if n == 0:
            return ""
        ids = self._ids_structs.get(n)
        if ids is None:
            ids = struct.Struct(">" + self._id_head_format * n)
            if n <= _CACHED_IDS:
                self._ids_structs[n] = ids
        packed = ids.pack(*chain.from_iterable(zip(repeat(self._id_head, n), commit_log_offsets,
                                                   strict=True)))
        return packed.hex(",", self._id_size).upper()

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
