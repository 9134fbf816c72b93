"""The producer's send frames signed for an ACL broker, without the generic codec.

A signature covers the ext fields' values sorted by name, then the body (``acl.sign``). A send
frame's fields are known before it is encoded (``send_codec.SendFrame``'s one-letter names, all
sorting after ``AccessKey`` and ``SecurityToken``), so ``SignedSendFrame.frame`` hashes them
straight from the template's fixed values and the message's varying ones, and writes the frame
once, with ``AccessKey`` (``SecurityToken``) and ``Signature`` as its first ext entries: the same
request a signed generic command is (checked by a hypothesis test: the broker's check of the
decoded frame passes), without decoding and encoding it again.

``send_frame`` is the template a producer uses for a lane: plain without credentials (that path
is unchanged), signed with them.
"""

from __future__ import annotations

import binascii
import struct
from typing import Final, Protocol

from rocketlite.acl.sign import ACCESS_KEY, SECURITY_TOKEN, SIGNATURE, Credentials, keyed
from rocketlite.client.send_codec import SendFrame
from rocketlite.common.errors import ProtocolError

__all__ = ["FrameTemplate", "SignedSendFrame", "send_frame"]

_HEAD: Final = struct.Struct(">iIhbhiiii")
"""length, oriHeaderLen, code, language, version, opaque, flag, remarkLen, extLen."""
_HEAD_SIZE: Final = 29  # the ext entries follow (a send frame has no remark)
_SIG_LEN: Final = 28  # Base64 of a 20-byte HmacSHA1
_HEADER_LEN_MAX: Final = 0xFFFFFF
_INT32_MAX: Final = 0x7FFFFFFF


class FrameTemplate(Protocol):
    """One lane's send frames (``send_codec.SendFrame`` or ``SignedSendFrame``)."""

    def frame(self, opaque: int, sys_flag: int, born_ms: int, flag: int, properties: bytes,
              body: bytes) -> bytes: ...


def _key(key: str, value_len: int) -> bytes:
    """An ext entry's key and the length of its value (which follows)."""
    kb = key.encode()
    return struct.pack(">h", len(kb)) + kb + struct.pack(">i", value_len)


def _entry(key: str, value: str) -> bytes:
    vb = value.encode()
    return _key(key, len(vb)) + vb


class SignedSendFrame:
    """``SendFrame(...)``'s frames with the ``AccessKey`` (``SecurityToken``) and ``Signature``
    of ``credentials`` (see the module docstring)."""

    __slots__ = ("_auth", "_frame", "_grow", "_mac", "_post", "_pre")

    def __init__(self, group: str, topic: str, create_topic_key: str, default_queue_nums: int,
                 queue_id: int, broker_name: str, batch: bool, credentials: Credentials) -> None:
        self._frame = SendFrame(group, topic, create_topic_key, default_queue_nums, queue_id,
                                broker_name, batch)
        token = credentials.security_token
        # the values in name order: AccessKey, SecurityToken, a..e | f g h i | j k m n
        self._pre = "".join((credentials.access_key, token or "", group, topic, create_topic_key,
                             str(default_queue_nums), str(queue_id))).encode()
        self._post = "".join(("0", "false", "true" if batch else "false", broker_name)).encode()
        self._mac = keyed(credentials.secret_key)
        auth = _entry(ACCESS_KEY, credentials.access_key)
        if token is not None:
            auth += _entry(SECURITY_TOKEN, token)
        self._auth = auth + _key(SIGNATURE, _SIG_LEN)  # the signature's 28 bytes follow
        self._grow = len(self._auth) + _SIG_LEN

    def frame(self, opaque: int, sys_flag: int, born_ms: int, flag: int, properties: bytes,
              body: bytes) -> bytes:
        data = self._frame.frame(opaque, sys_flag, born_ms, flag, properties, body)
        mac = self._mac.copy()
        mac.update(b"".join((self._pre, b"%d" % sys_flag, b"%d" % born_ms, b"%d" % flag,
                             properties, self._post)))
        if body:
            mac.update(body)
        length, hlen, code, lang, version, opaque_, flag_, remark_len, ext_len = _HEAD.unpack_from(data)
        grow = self._grow
        if (hlen & _HEADER_LEN_MAX) + grow > _HEADER_LEN_MAX or length + grow > _INT32_MAX:
            raise ProtocolError(f"a signed frame of {length + grow} bytes (header "
                                f"{(hlen & _HEADER_LEN_MAX) + grow}) does not fit the Remoting frame")
        return b"".join((
            _HEAD.pack(length + grow, hlen + grow, code, lang, version, opaque_, flag_, remark_len,
                       ext_len + grow),
            self._auth, binascii.b2a_base64(mac.digest(), newline=False),
            memoryview(data)[_HEAD_SIZE:]))


def send_frame(group: str, topic: str, create_topic_key: str, default_queue_nums: int,
               queue_id: int, broker_name: str, batch: bool,
               credentials: Credentials | None) -> FrameTemplate:
    """A lane's template: ``SendFrame``, signed when there are ``credentials``."""
    if credentials is None:
        return SendFrame(group, topic, create_topic_key, default_queue_nums, queue_id, broker_name,
                         batch)
    return SignedSendFrame(group, topic, create_topic_key, default_queue_nums, queue_id,
                           broker_name, batch, credentials)
