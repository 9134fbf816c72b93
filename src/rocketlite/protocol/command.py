"""The Remoting frame and its ``RemotingCommand``, sans I/O: bytes in, commands out.

One frame per command; all integers are big-endian (``NettyEncoder``/``NettyDecoder`` and
``RemotingCommand.encode``/``decode`` in apache/rocketmq):

======  ============  ==========  =============================================================
offset  field         bytes       notes
======  ============  ==========  =============================================================
0       length        4           int32 = 4 + headerLen + bodyLen (does not count itself)
4       oriHeaderLen  4           ``(serializeType << 24) | headerLen``: type 0 JSON, 1 ROCKETMQ;
                                  headerLen is 24 bits
8       header        headerLen   JSON object, or the ROCKETMQ layout below
8+h     body          bodyLen     the rest of the frame (may be empty)
======  ============  ==========  =============================================================

The ROCKETMQ binary header (``RocketMQSerializable``):

======  ============  ==========  =============================================================
offset  field         bytes       notes
======  ============  ==========  =============================================================
0       code          2           int16 (Java truncates larger codes; we refuse them)
2       language      1           int8 ``LanguageCode`` value
3       version       2           int16 ``MQVersion`` ordinal
5       opaque        4           int32
9       flag          4           int32; bit 0 response, bit 1 oneway
13      remarkLen     4           int32; 0 means no remark (null)
17      remark        remarkLen   UTF-8
17+r    extLen        4           int32 byte length of the entries that follow
21+r    entries       extLen      repeated: int16 keyLen, key (UTF-8), int32 valLen, value (UTF-8)
======  ============  ==========  =============================================================

A zero-length string decodes as null in Java, so an empty remark travels as "no remark"; an empty ext
value decodes here as ``""`` (Java: null, i.e. the field is absent).

The JSON header is what fastjson writes for ``RemotingCommand`` (fields sorted, nulls omitted)::

    {"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":3,
     "serializeTypeCurrentRPC":"JSON","version":479}

Reading is lenient the way the clients need it: ``language`` may be a name or an ordinal (unknown
values become ``"OTHER"``, a missing one ``"JAVA"``, Java's default); ``extFields`` values may be
strings, numbers, booleans or null (ali-ons, C++) and come out as strings (``true``/``false``,
integral floats without ``.0``; null drops the key); ``remark`` may be absent, null or ``""``;
``flag`` and ``version`` default to 0; ``serializeTypeCurrentRPC`` is ignored. ``code`` and
``opaque`` are required integers, and every integer must fit an int32.

Writing: keys in fastjson's order, ``remark`` and an empty ``extFields`` omitted (Java sends null
for both when unset; a null map also spares the Java client's ``@CFNotNull`` check), ext values
always strings. A reply uses the request's serialize type (ali-ons and the C++ client read the
second int32 as the header length without masking the type byte, so a JSON request needs a JSON
reply) and says ``"language":"JAVA"`` like a Java broker: ali-ons ignores the field, the C++ client
stores it without looking, Java parses it into its enum and Go maps unknown names to "unknown";
``JAVA`` is what every client has been seen to accept.

Errors: see ``FrameDecoder``.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import orjson

from rocketlite.common import native
from rocketlite.common.errors import FrameTooLargeError, HeaderTooLargeError, ProtocolError
from rocketlite.protocol.codes import (
    CURRENT_VERSION,
    RPC_ONEWAY,
    RPC_TYPE_RESPONSE,
    LanguageCode,
    SerializeType,
)

__all__ = [
    "BINARY_FIXED",
    "BINARY_FIXED_SIZE",
    "FRAME_MAX_LENGTH",
    "FRAME_PREFIX",
    "FRAME_PREFIX_SIZE",
    "RESPONSE_LANGUAGE",
    "ExtFieldsLimitError",
    "FrameDecoder",
    "RemotingCommand",
    "decode_frame",
]

FRAME_MAX_LENGTH: Final = 16 * 1024 * 1024
"""``NettyDecoder``'s default ``com.rocketmq.remoting.frameMaxLength``. Like Netty's
``LengthFieldBasedFrameDecoder`` it bounds the whole frame *including* its 4-byte length field."""

FRAME_PREFIX: Final = struct.Struct(">iI")
"""length, oriHeaderLen."""
FRAME_PREFIX_SIZE: Final = 8

BINARY_FIXED: Final = struct.Struct(">hbhii")
"""code, language, version, opaque, flag: the fixed part of a ROCKETMQ header."""
BINARY_FIXED_SIZE: Final = 13

RESPONSE_LANGUAGE: Final = "JAVA"
"""The ``language`` of the replies ``RemotingCommand.response`` builds (see the module docstring)."""

_LENGTH = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_INT32_MIN: Final = -0x80000000
_INT32_MAX: Final = 0x7FFFFFFF
_INT16_MIN: Final = -0x8000
_INT16_MAX: Final = 0x7FFF
_HEADER_LEN_MAX: Final = 0xFFFFFF
_JSON: Final = int(SerializeType.JSON)
_ROCKETMQ: Final = int(SerializeType.ROCKETMQ)

_LANGUAGE_NAMES: Final = frozenset(LanguageCode.__members__)
_LANGUAGE_BY_VALUE: Final = tuple(m.name for m in sorted(LanguageCode))
_LANGUAGE_VALUE: Final = {m.name: int(m) for m in LanguageCode}
_OTHER: Final = LanguageCode.OTHER.name

_loads = orjson.loads
_dumps = orjson.dumps
_JSONDecodeError = orjson.JSONDecodeError
_JSONEncodeError = orjson.JSONEncodeError


@dataclass(slots=True, repr=False)
class RemotingCommand:
    """One Remoting request or response. ``ext_fields`` is the flattened custom header (string values
    only); ``language`` is a ``LanguageCode`` name; ``serialize_type`` a ``SerializeType`` value.

    Integers must fit their fields: int32 everywhere in JSON; ``code`` and ``version`` int16 in a
    ROCKETMQ header. ``encode`` refuses what does not fit (``ProtocolError``)."""

    code: int
    language: str = "PYTHON"
    version: int = CURRENT_VERSION
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    serialize_type: int = _JSON

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: dict[str, str] | None = None,
        body: bytes = b"",
        *,
        oneway: bool = False,
    ) -> RemotingCommand:
        """A request (opaque 0: the connection assigns one). ``ext_fields`` is used, not copied."""
        return cls(
            int(code),
            "PYTHON",
            CURRENT_VERSION,
            0,
            RPC_ONEWAY if oneway else 0,
            None,
            {} if ext_fields is None else ext_fields,
            body,
            _JSON,
        )

    def response(
        self,
        code: int = 0,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: bytes = b"",
    ) -> RemotingCommand:
        """The reply to this request: same opaque and serialize type, response flag set."""
        return RemotingCommand(
            int(code),
            RESPONSE_LANGUAGE,
            CURRENT_VERSION,
            self.opaque,
            RPC_TYPE_RESPONSE,
            remark,
            {} if ext_fields is None else ext_fields,
            body,
            self.serialize_type,
        )

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RPC_TYPE_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & RPC_ONEWAY)

    def encode_parts(self) -> tuple[bytes, bytes]:
        """(length + oriHeaderLen + header, body): write both, in order, without joining them.

        Raises ``ProtocolError`` for a command that cannot be framed: an unknown serialize type, a
        number that does not fit its field, text that is not encodable as UTF-8 (lone surrogates),
        a header above 16 MiB or a frame above 2 GiB. ``max_frame`` is the transport's business."""
        stype = self.serialize_type
        try:
            if stype == _JSON:
                header = self._json_header()
            elif stype == _ROCKETMQ:
                header = self._binary_header()
            else:
                raise ProtocolError(f"cannot encode serialize type {stype!r}")
        except (_JSONEncodeError, UnicodeEncodeError) as e:
            raise ProtocolError(f"cannot encode the header of command {self.code}: {e}") from e
        hlen = len(header)
        if hlen > _HEADER_LEN_MAX:
            raise ProtocolError(f"header of {hlen} bytes does not fit the 24-bit header length")
        length = 4 + hlen + len(self.body)
        if length > _INT32_MAX:
            raise ProtocolError(f"frame of {length} bytes does not fit the int32 length")
        return FRAME_PREFIX.pack(length, (stype << 24) | hlen) + header, self.body

    def encode(self) -> bytes:
        """The whole frame, length field included."""
        head, body = self.encode_parts()
        return head + body if body else head

    def _json_header(self) -> bytes:
        ext: dict[str, str] = self.ext_fields
        for v in ext.values():
            if v.__class__ is not str:
                ext = _coerce_ext(ext)
                break
        obj: dict[str, object] = {"code": self.code}
        if ext:
            obj["extFields"] = ext
        obj["flag"] = self.flag
        obj["language"] = self.language
        obj["opaque"] = self.opaque
        if self.remark is not None:
            obj["remark"] = self.remark
        obj["serializeTypeCurrentRPC"] = "JSON"
        obj["version"] = self.version
        try:
            return _dumps(obj)
        except _JSONEncodeError:  # a key that is not a str
            obj["extFields"] = _coerce_ext(ext)
            return _dumps(obj)

    def _binary_header(self) -> bytes:
        if not _INT16_MIN <= self.code <= _INT16_MAX:
            raise ProtocolError(f"code {self.code} does not fit the ROCKETMQ header's int16")
        if not _INT16_MIN <= self.version <= _INT16_MAX:
            raise ProtocolError(f"version {self.version} does not fit the ROCKETMQ header's int16")
        if not (_INT32_MIN <= self.opaque <= _INT32_MAX and _INT32_MIN <= self.flag <= _INT32_MAX):
            raise ProtocolError(f"opaque {self.opaque} or flag {self.flag} does not fit an int32")
        remark = self.remark.encode() if self.remark else b""
        parts = [
            BINARY_FIXED.pack(
                self.code,
                _LANGUAGE_VALUE.get(self.language, LanguageCode.OTHER),
                self.version,
                self.opaque,
                self.flag,
            ),
            _I32.pack(len(remark)),
            remark,
            b"",  # the ext fields length, once known
        ]
        ext_len = 0
        pack16 = _I16.pack
        pack32 = _I32.pack
        for k, v in self.ext_fields.items():
            if v.__class__ is not str or k.__class__ is not str:
                sv = _to_str(v)
                if sv is None:
                    continue
                key = _to_str(k)
                k, v = "null" if key is None else key, sv
            kb = k.encode()
            vb = v.encode()
            klen = len(kb)
            if klen > _INT16_MAX:
                raise ProtocolError(f"ext field name of {klen} bytes does not fit the int16 length")
            parts += (pack16(klen), kb, pack32(len(vb)), vb)
            ext_len += 6 + klen + len(vb)
        parts[3] = pack32(ext_len)
        return b"".join(parts)

    def __repr__(self) -> str:
        body = self.body
        shown = repr(body[:64]) + ("..." if len(body) > 64 else "")
        return (
            f"RemotingCommand(code={self.code!r}, language={self.language!r}, version={self.version!r}, "
            f"opaque={self.opaque!r}, flag={self.flag!r}, remark={self.remark!r}, "
            f"ext_fields={self.ext_fields!r}, body=<{len(body)} bytes: {shown}>, "
            f"serialize_type={self.serialize_type!r})"
        )


def _to_str(v: object) -> str | None:
    """An ext value as Java's ``toString()`` of what fastjson parsed would spell it."""
    if v.__class__ is str:
        return v
    if v is None:
        return None
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(int(v))
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() else repr(v)
    if isinstance(v, str):
        return str(v)
    try:  # a list or object (JSON text, as fastjson's toString writes it)
        return _dumps(v, default=str).decode()
    except _JSONEncodeError as e:  # nested deeper than orjson writes (254 levels)
        raise ProtocolError(f"header value cannot be written as text: {e}") from None


def _coerce_ext(ext: dict[str, object] | dict[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in ext.items():
        s = _to_str(v)
        if s is not None:
            key = _to_str(k)
            out["null" if key is None else key] = s
    return out


def text_ext_fields(ext: dict[str, str]) -> dict[str, str]:
    """``ext`` as the wire carries it (text values, null ones left out; ``ext`` itself when it is
    all text already): what a request signature covers."""
    for v in ext.values():
        if v.__class__ is not str:
            return _coerce_ext(ext)
    return ext


def _language(v: object) -> str:
    if v.__class__ is int and 0 <= v < len(_LANGUAGE_BY_VALUE):
        return _LANGUAGE_BY_VALUE[v]
    if v.__class__ is str and v in _LANGUAGE_NAMES:
        return v
    return _OTHER


def _json_command(header: bytes | memoryview, body: bytes) -> RemotingCommand:
    try:
        obj = _loads(header)
    except _JSONDecodeError as e:
        raise ProtocolError(f"JSON header is not valid UTF-8 JSON: {e}") from None
    if obj.__class__ is not dict:
        raise ProtocolError(f"JSON header is a {type(obj).__name__}, not an object")
    get = obj.get
    opaque = get("opaque")
    if opaque.__class__ is not int or not _INT32_MIN <= opaque <= _INT32_MAX:
        raise ProtocolError(f"JSON header has no int32 opaque: {opaque!r}")
    flag = get("flag", 0)
    if flag.__class__ is not int or not _INT32_MIN <= flag <= _INT32_MAX:
        raise ProtocolError(f"JSON header has a non-int32 flag: {flag!r}")
    reply = None if flag & 3 else opaque
    code = get("code")
    if code.__class__ is not int or not _INT32_MIN <= code <= _INT32_MAX:
        raise ProtocolError(f"JSON header has no int32 code: {code!r}", opaque=reply)
    version = get("version", 0)
    if version.__class__ is not int or not _INT32_MIN <= version <= _INT32_MAX:
        raise ProtocolError(f"JSON header has a non-int32 version: {version!r}", opaque=reply)
    language = get("language", "JAVA")
    if language.__class__ is not str or language not in _LANGUAGE_NAMES:
        language = _language(language)
    remark = get("remark")
    ext = get("extFields")
    try:
        if remark is not None and remark.__class__ is not str:
            remark = _to_str(remark)
        if ext is None:
            ext = {}
        elif ext.__class__ is dict:
            for v in ext.values():
                if v.__class__ is not str:
                    ext = _coerce_ext(ext)
                    break
        else:
            raise ProtocolError(f"JSON header's extFields is a {type(ext).__name__}, not an object")
    except ProtocolError as e:
        raise ProtocolError(str(e), opaque=reply) from None
    return RemotingCommand(code, language, version, opaque, flag, remark, ext, body, _JSON)


def _binary_command(header: bytes, body: bytes) -> RemotingCommand:
    if len(header) < BINARY_FIXED_SIZE:
        raise ProtocolError(f"ROCKETMQ header of {len(header)} bytes is shorter than its fixed 13 bytes")
    code, language, version, opaque, flag = BINARY_FIXED.unpack_from(header)
    try:
        remark, ext = _binary_variable(header)
    except ProtocolError as e:
        raise ProtocolError(str(e), opaque=None if flag & 3 else opaque) from None
    except UnicodeDecodeError as e:
        raise ProtocolError(
            f"ROCKETMQ header holds invalid UTF-8: {e}", opaque=None if flag & 3 else opaque
        ) from None
    lang = _LANGUAGE_BY_VALUE[language] if 0 <= language < len(_LANGUAGE_BY_VALUE) else _OTHER
    return RemotingCommand(code, lang, version, opaque, flag, remark, ext, body, _ROCKETMQ)


def _binary_variable(buf: bytes) -> tuple[str | None, dict[str, str]]:
    """The remark and ext fields of a ROCKETMQ header (after its fixed part)."""
    pos = BINARY_FIXED_SIZE
    end = len(buf)
    unpack16 = _I16.unpack_from
    unpack32 = _I32.unpack_from
    if end - pos < 4:
        raise ProtocolError("ROCKETMQ header ends before its remark length")
    (rlen,) = unpack32(buf, pos)
    pos += 4
    if rlen < 0 or rlen > end - pos:
        raise ProtocolError(f"ROCKETMQ remark length {rlen} overruns the header ({end - pos} bytes left)")
    remark = buf[pos : pos + rlen].decode() if rlen else None
    pos += rlen
    if end - pos < 4:
        raise ProtocolError("ROCKETMQ header ends before its ext fields length")
    (ext_len,) = unpack32(buf, pos)
    pos += 4
    if ext_len < 0 or ext_len > end - pos:
        raise ProtocolError(
            f"ROCKETMQ ext fields length {ext_len} overruns the header ({end - pos} bytes left)"
        )
    if pos + ext_len != end:
        raise ProtocolError(f"ROCKETMQ header has {end - pos - ext_len} bytes after its ext fields")
    ext: dict[str, str] = {}
    while pos < end:
        if end - pos < 6:
            raise ProtocolError(f"ROCKETMQ ext entry of {end - pos} bytes is shorter than its two lengths")
        (klen,) = unpack16(buf, pos)
        kstart = pos + 2
        kend = kstart + klen
        if klen < 0 or end - kend < 4:
            raise ProtocolError(f"ROCKETMQ ext key length {klen} overruns the ext fields")
        (vlen,) = unpack32(buf, kend)
        vstart = kend + 4
        pos = vstart + vlen
        if vlen < 0 or pos > end:
            raise ProtocolError(f"ROCKETMQ ext value length {vlen} overruns the ext fields")
        ext[buf[kstart:kend].decode()] = buf[vstart:pos].decode()
    return remark, ext


def _decode_py(buf: bytes | bytearray | memoryview, start: int, end: int) -> RemotingCommand:
    """The command in ``buf[start:end]``, a frame without its length field."""
    if end - start < 4:
        raise ProtocolError(f"frame of {end - start} bytes is too short for its header length field")
    (ori,) = _U32.unpack_from(buf, start)
    hstart = start + 4
    hlen = ori & _HEADER_LEN_MAX
    hend = hstart + hlen
    if hend > end:
        raise ProtocolError(f"header length {hlen} exceeds the {end - hstart} bytes left in the frame")
    body = buf[hend:end] if hend < end else b""
    if body.__class__ is not bytes:
        body = bytes(body)
    stype = ori >> 24
    if stype == _JSON:
        return _json_command(buf[hstart:hend], body)  # type: ignore[arg-type]
    if stype == _ROCKETMQ:
        header = buf[hstart:hend]
        return _binary_command(header if header.__class__ is bytes else bytes(header), body)
    raise ProtocolError(f"unknown serialize type {stype} (header length field {ori:#010x})")


def _undecodable(e: Exception) -> ProtocolError:
    """A codec failure that is not a ``ProtocolError`` (a bug, or input nobody foresaw) as the
    frame's error: the frame is lost, the stream goes on; no opaque, so a server closes."""
    return ProtocolError(f"undecodable frame: {type(e).__name__}: {e}")


def decode_frame(frame: bytes | bytearray | memoryview) -> RemotingCommand:
    """Decode one frame given *without* its 4-byte length field. Raises ``ProtocolError`` (and
    ``MemoryError``), nothing else."""
    try:
        return _decode(frame, 0, len(frame))
    except (ProtocolError, MemoryError):
        raise
    except Exception as e:
        raise _undecodable(e) from e


class ExtFieldsLimitError(ProtocolError):
    """A request whose header has more ext fields than the decoder's ``max_ext_fields``
    (``maxExtFields``): decoded, but not to be run. ``command`` is the request, ``count`` its ext
    fields, ``limit`` the bound. ``opaque`` is None for a oneway request, as for any
    ``ProtocolError``; yet the stream is sound, so a server answers a two-way request (with this
    message as the remark), lets a oneway one go, and keeps the connection either way."""

    def __init__(self, command: RemotingCommand, limit: int) -> None:
        self.command = command
        self.count = len(command.ext_fields)
        self.limit = limit
        super().__init__(f"the request header has {self.count} ext fields, above maxExtFields "
                         f"({limit})", opaque=None if command.flag & RPC_ONEWAY else command.opaque)


def _decode_item(frame: bytes) -> RemotingCommand | ProtocolError:
    try:
        return _decode(frame, 4, len(frame))
    except ProtocolError as e:
        return e
    except MemoryError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever the codec raised is this frame's error
        return _undecodable(e)


class FrameDecoder:
    """Splits a byte stream into commands.

    ``feed(data)`` buffers what it is given and returns, in order, one item per complete frame: the
    ``RemotingCommand``, or the ``ProtocolError`` that frame's header raised. Such an error is
    *recoverable*: the frame was well delimited, the decoder goes on with the next one, and the
    error's ``opaque`` (when not None) is the request a server should answer with an error. Any
    other exception decoding a frame raises (a header nested too deep, a codec bug) becomes that
    frame's ``ProtocolError`` too (without an opaque); only ``MemoryError`` passes through.

    Errors that lose the frame boundary are *fatal* and raised: a negative length
    (``ProtocolError``) or one above ``max_frame`` (``FrameTooLargeError``, raised as soon as the
    4-byte length arrives, before any of the frame is buffered). The stream is then unusable: close
    the connection. Frames that completed in the same ``feed`` call before the bad length are
    dropped with it, and every later ``feed`` raises ``ProtocolError``.

    ``max_frame`` bounds the whole frame including the length field, as Netty does: the largest
    accepted length value is ``max_frame - 4``. ``max_header`` bounds a frame's header: a larger
    one is not decoded (no JSON parse of megabytes of junk) and the frame's item is a
    ``HeaderTooLargeError`` without an opaque. ``max_ext_fields`` bounds a request's ext fields,
    counted as its header is decoded (the dict it built; responses are not bounded): the item of a
    request with more is an ``ExtFieldsLimitError`` holding the request, so the dispatch loop
    never counts them. The default bounds nothing (no header of 16 MiB has that many fields).

    Cost: frames that arrive whole inside one ``data`` are decoded straight from it; only a frame
    split across feeds is buffered (appended, so a large frame in many small pieces is linear) and
    copied out once when complete. Bodies are always copied into the command.
    """

    __slots__ = ("_buf", "_error", "_max_ext_fields", "_max_header", "_max_length", "max_frame")

    def __init__(self, max_frame: int = FRAME_MAX_LENGTH, max_header: int = _HEADER_LEN_MAX,
                 max_ext_fields: int = _HEADER_LEN_MAX) -> None:
        if max_frame < 8:
            raise ValueError(f"max_frame must be at least 8 bytes, not {max_frame}")
        if max_header < 0:
            raise ValueError(f"max_header must not be negative, not {max_header}")
        if max_ext_fields < 0:
            raise ValueError(f"max_ext_fields must not be negative, not {max_ext_fields}")
        self.max_frame = max_frame
        self._max_length = max_frame - 4
        self._max_header = max_header
        self._max_ext_fields = max_ext_fields
        self._buf = bytearray()
        self._error: ProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes held back waiting for the rest of their frame."""
        return len(self._buf)

    def discard(self) -> None:
        """Forget the partial frame (the stream is being closed): its memory goes at once."""
        self._buf = bytearray()

    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand | ProtocolError]:
        if self._error is not None:
            raise ProtocolError(f"the stream broke earlier: {self._error}")
        if data.__class__ is not bytes:
            data = bytes(data)
        out: list[RemotingCommand | ProtocolError] = []
        try:
            pos = self._finish_buffered(data, out) if self._buf else 0
            if pos >= 0:
                pos = _split(self, data, pos, out)
                if pos < len(data):
                    self._buf += memoryview(data)[pos:]
        except ProtocolError as e:  # only stream-fatal errors escape
            self._error = e
            self._buf = bytearray()
            raise
        return out

    def _finish_buffered(self, data: bytes, out: list[RemotingCommand | ProtocolError]) -> int:
        """Complete the frame held in the buffer from the head of ``data``: returns where the rest of
        ``data`` starts, or -1 when all of ``data`` went into the buffer. Only this one frame that
        straddles two feeds is copied out of the buffer; the frames after it decode from ``data``."""
        buf = self._buf
        pos = 0
        if len(buf) < 4:
            pos = 4 - len(buf)
            buf += data[:pos]
            if len(buf) < 4:
                return -1
        (length,) = _LENGTH.unpack_from(buf, 0)
        self._check_length(length)
        need: int = length + 4 - len(buf)
        if len(data) - pos < need:
            buf += data if pos == 0 else data[pos:]  # pos <= 3
            return -1
        buf += memoryview(data)[pos : pos + need]
        frame = bytes(buf)
        buf.clear()
        if length >= 4 and (hlen := _U32.unpack_from(frame, 4)[0] & _HEADER_LEN_MAX) > self._max_header:
            out.append(self._header_too_large(hlen))
        else:
            item = _decode_item(frame)
            if (isinstance(item, RemotingCommand) and not item.flag & 1
                    and len(item.ext_fields) > self._max_ext_fields):
                item = self._too_many_ext_fields(item)
            out.append(item)
        return pos + need

    def _header_too_large(self, hlen: int) -> HeaderTooLargeError:
        return HeaderTooLargeError(f"header of {hlen} bytes is above maxHeaderBytes "
                                   f"({self._max_header}): frame skipped")

    def _too_many_ext_fields(self, cmd: RemotingCommand) -> ExtFieldsLimitError:
        return ExtFieldsLimitError(cmd, self._max_ext_fields)

    def _check_length(self, length: int) -> None:
        if length > self._max_length:
            raise FrameTooLargeError(
                f"frame length {length} + 4 exceeds the maximum frame of {self.max_frame} bytes"
            )
        if length < 0:
            raise ProtocolError(f"negative frame length {length}")


def _split_py(decoder: FrameDecoder, data: bytes, pos: int,
              out: list[RemotingCommand | ProtocolError]) -> int:
    """Decode every complete frame of ``data`` from ``pos``; returns where the incomplete rest starts."""
    n = len(data)
    max_length = decoder._max_length
    max_header = decoder._max_header
    max_ext = decoder._max_ext_fields
    unpack_from = _LENGTH.unpack_from
    append = out.append
    while n - pos >= 4:
        (length,) = unpack_from(data, pos)
        if not 0 <= length <= max_length:
            decoder._check_length(length)
        start = pos + 4
        end = start + length
        if end > n:
            break
        if length >= 4 and (hlen := _U32.unpack_from(data, start)[0] & _HEADER_LEN_MAX) > max_header:
            append(decoder._header_too_large(hlen))
            pos = end
            continue
        try:
            cmd = _decode(data, start, end)
        except ProtocolError as e:
            append(e)
        except MemoryError:
            raise
        except Exception as e:  # noqa: BLE001 - inline, not _decode_item: no call per frame
            append(_undecodable(e))
        else:  # counted as decoded, as the compiled twin counts the dict it built
            append(cmd if cmd.flag & 1 or len(cmd.ext_fields) <= max_ext
                   else decoder._too_many_ext_fields(cmd))
        pos = end
    return pos


# The compiled twins (``_command_c.pyx``: the common well-formed frame in C, anything unusual
# through ``_json_command``/``_binary_command``), unless ROCKETLITE_PURE or not built.
_decode: Callable[[bytes | bytearray | memoryview, int, int], RemotingCommand] = _decode_py
_split: Callable[[FrameDecoder, bytes, int, list[RemotingCommand | ProtocolError]], int] = _split_py
_c = native.load("rocketlite.protocol._command_c")
if _c is not None:
    _CODEC = _c.Codec(
        RemotingCommand, [f.name for f in dataclasses.fields(RemotingCommand)], _loads,
        # the module's pure functions as bound when called (tests substitute failing ones)
        lambda header, body: _json_command(header, body),
        lambda header, body: _binary_command(header, body),
        ProtocolError, _undecodable, _LANGUAGE_NAMES, _LANGUAGE_BY_VALUE, _OTHER)
    _decode = _CODEC.decode
    _split = _CODEC.split
