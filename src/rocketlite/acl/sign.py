"""Request signatures, as RocketMQ's ``AclClientRPCHook`` and ``AclUtils`` make them.

The signed content is the values of the request's ext fields sorted by name (Java's ``TreeMap``),
without ``Signature`` itself (and without ``_UNIQUE_KEY_QUERY``, which the broker leaves out),
concatenated as UTF-8, followed by the body bytes; the signature is Base64 of HmacSHA1 over it,
keyed by the secret key's UTF-8 bytes. The client puts ``AccessKey`` (and ``SecurityToken``) in
the ext fields before signing, so they are signed too.

Signing is on every request of an ACL client and every check of an ACL broker, so its per-request
work is kept to the HMAC itself: the keyed HMAC state is made once per secret key and copied
(``keyed``: a one-shot ``hmac.digest`` sets the key up again each time, several times the cost
of hashing a small request), and the sorted field order is worked out once per header shape
(the keys in the order a header decodes them: a producer's headers all share one).
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from operator import itemgetter
from typing import Protocol

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"
_UNSIGNED = frozenset((SIGNATURE, UNIQUE_MSG_QUERY_FLAG))
_CACHE_MAX = 1024  # header shapes, secret keys: a bound, not a working-set size


class Mac(Protocol):
    """An HMAC state (``hmac.HMAC`` or OpenSSL's own)."""

    def copy(self) -> Mac: ...
    def update(self, data: bytes, /) -> None: ...
    def digest(self) -> bytes: ...


try:  # OpenSSL's HMAC object itself: its copy() skips the Python wrapper's
    from _hashlib import hmac_new as _hmac_new

    def _new_mac(key: bytes) -> Mac:
        return _hmac_new(key, digestmod="sha1")
except ImportError:  # pragma: no cover - a Python built without OpenSSL
    def _new_mac(key: bytes) -> Mac:
        return hmac.new(key, digestmod=hashlib.sha1)

_keyed: dict[str, Mac] = {}


def keyed(secret_key: str) -> Mac:
    """The HMAC-SHA1 state keyed by ``secret_key`` with nothing hashed yet: ``copy()`` it."""
    mac = _keyed.get(secret_key)
    if mac is None:
        if len(_keyed) >= _CACHE_MAX:
            _keyed.clear()
        mac = _keyed[secret_key] = _new_mac(secret_key.encode("utf-8"))
    return mac


def encode_signature(digest: bytes) -> str:
    """Base64 of a digest, as the ``Signature`` field spells it."""
    return binascii.b2a_base64(digest, newline=False).decode("ascii")


_Values = Callable[[Mapping[str, str]], tuple[str, ...]]
_shapes: dict[tuple[str, ...], _Values] = {}


def _no_values(ext: Mapping[str, str]) -> tuple[str, ...]:
    return ()


def _signed_values(ext: Mapping[str, str]) -> tuple[str, ...]:
    """The values the signature covers, in order (the getter cached per header shape)."""
    shape = tuple(ext)
    get = _shapes.get(shape)
    if get is None:
        keys = sorted(k for k in shape if k not in _UNSIGNED)
        if len(_shapes) >= _CACHE_MAX:
            _shapes.clear()
        if not keys:
            get = _no_values
        elif len(keys) == 1:
            one = keys[0]
            get = lambda e: (e[one],)  # noqa: E731 - itemgetter of one key returns no tuple
        else:
            get = itemgetter(*keys)
        _shapes[shape] = get
    return get(ext)


def content(ext: Mapping[str, str], body: bytes | None) -> bytes:
    """What a request's signature covers: sorted ext values (not the signature's), then the body."""
    text = _signed_text(ext)
    return text + body if body else text


def _signed_text(ext: Mapping[str, str]) -> bytes:
    return "".join(_signed_values(ext)).encode("utf-8", "surrogatepass")


def signature(data: bytes, secret_key: str) -> str:
    """``AclUtils.calSignature``: Base64 of HmacSHA1(secret key, data)."""
    mac = keyed(secret_key).copy()
    mac.update(data)
    return encode_signature(mac.digest())


def request_signature(ext: Mapping[str, str], body: bytes | None, secret_key: str) -> str:
    """The signature of a request with ``ext`` and ``body``: ``signature(content(ext, body))``
    (the body is not copied)."""
    mac = keyed(secret_key).copy()
    mac.update(_signed_text(ext))
    if body:
        mac.update(body)
    return encode_signature(mac.digest())


@dataclass(frozen=True, slots=True)
class Credentials:
    """An account's keys as a client holds them (``SessionCredentials``)."""

    access_key: str
    secret_key: str
    security_token: str | None = None

    @classmethod
    def of(cls, value: Credentials | tuple[str, str] | tuple[str, str, str | None]) -> Credentials:
        """Credentials from ``(access_key, secret_key[, security_token])`` or as they are."""
        if isinstance(value, Credentials):
            return value
        if not 2 <= len(value) <= 3 or not all(isinstance(v, str) for v in value[:2]):
            raise ValueError("credentials are (access_key, secret_key) or "
                             "(access_key, secret_key, security_token)")
        token = value[2] if len(value) == 3 else None
        return cls(value[0], value[1], token)

    def sign(self, ext: dict[str, str], body: bytes | None) -> None:
        """Add ``AccessKey`` (``SecurityToken``) and the ``Signature`` of the request to ``ext``."""
        ext[ACCESS_KEY] = self.access_key
        if self.security_token is not None:
            ext[SECURITY_TOKEN] = self.security_token
        ext.pop(SIGNATURE, None)
        ext[SIGNATURE] = request_signature(ext, body, self.secret_key)
