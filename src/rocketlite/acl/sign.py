"""Request signatures, as RocketMQ's ``AclClientRPCHook`` and ``AclUtils`` make them.

The signed content is the values of the request's ext fields sorted by name (Java's ``TreeMap``),
without ``Signature`` itself (and without ``_UNIQUE_KEY_QUERY``, which the broker leaves out),
concatenated as UTF-8, followed by the body bytes; the signature is Base64 of HmacSHA1 over it,
keyed by the secret key's UTF-8 bytes. The client puts ``AccessKey`` (and ``SecurityToken``) in
the ext fields before signing, so they are signed too.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"
_UNSIGNED = frozenset((SIGNATURE, UNIQUE_MSG_QUERY_FLAG))
_JOIN_MAX = 256 * 1024  # bodies up to this size are signed joined to the header text


def content(ext: Mapping[str, str], body: bytes | None) -> bytes:
    """What a request's signature covers: sorted ext values (not the signature's), then the body."""
    text = _signed_text(ext)
    return text + body if body else text


def _signed_text(ext: Mapping[str, str]) -> bytes:
    return "".join([ext[k] for k in sorted(ext) if k not in _UNSIGNED]).encode("utf-8", "surrogatepass")


def signature(data: bytes, secret_key: str) -> str:
    """``AclUtils.calSignature``: Base64 of HmacSHA1(secret key, data)."""
    return request_signature({}, data, secret_key)


def request_signature(ext: Mapping[str, str], body: bytes | None, secret_key: str) -> str:
    """The signature of a request with ``ext`` and ``body``: ``signature(content(ext, body))``
    (a large body is not copied)."""
    key, text = secret_key.encode("utf-8"), _signed_text(ext)
    if not body or len(body) <= _JOIN_MAX:  # one C call: cheaper than the copy it costs
        digest = hmac.digest(key, text + body if body else text, "sha1")
    else:
        mac = hmac.new(key, text, hashlib.sha1)
        mac.update(body)
        digest = mac.digest()
    return base64.b64encode(digest).decode("ascii")


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
