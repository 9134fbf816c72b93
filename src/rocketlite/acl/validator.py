"""The check a Remoting request passes before its processor runs (``PlainPermissionManager
.validate``): a global white-listed address passes; otherwise the request must name a known
``AccessKey``; an address on the account's ``whiteRemoteAddress`` passes; otherwise the
``Signature`` must match, an admin code needs an ``admin`` account, and every resource the request
touches needs its permission (the account's own for that topic or group, else its default).

``check`` returns None when the request may run, else the reason it may not, which the server
sends back as the NO_PERMISSION remark.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from rocketlite.acl.config import Account, AclConfig
from rocketlite.acl.perm import ADMIN_CODES, check_permission, describe, is_group, needed, perm_name
from rocketlite.acl.sign import ACCESS_KEY, SIGNATURE, request_signature
from rocketlite.common.errors import FormatError


def check(config: AclConfig, peer_ip: str, code: int, ext: Mapping[str, str],
          body: bytes | None) -> str | None:
    """None if the request may run, else why not (see the module's docstring)."""
    for pattern in config.global_white:
        if pattern.match(peer_ip):
            return None
    ak = ext.get(ACCESS_KEY)
    if ak is None:
        return f"No accessKey is configured: request code {code} from {peer_ip} is not signed"
    account = config.accounts.get(ak)
    if account is None:
        return f"No acl config for accessKey {ak}"
    if account.white_address.match(peer_ip):
        return None
    sig = ext.get(SIGNATURE)
    expected = request_signature(ext, body, account.secret_key)
    if sig is None or not sig.isascii() or not hmac.compare_digest(sig, expected):
        return f"Check signature failed for accessKey={ak}"
    if code in ADMIN_CODES and not account.admin:
        return f"No permission: request code {code} needs an admin account, accessKey {ak} is not"
    try:
        need = needed(code, ext, body)
    except FormatError as e:
        return f"No permission: request code {code} cannot be checked: {e}"
    return permitted(account, need)


def permitted(account: Account, need: Mapping[str, int]) -> str | None:
    """None if ``account`` holds every permission ``need`` names (its own for that topic or
    group, else its default; an admin without perms of its own holds all), else why not."""
    if not need or (account.admin and not account.perms):
        return None
    for resource, perm in need.items():
        owned = account.perms.get(resource)
        if owned is None:
            owned = account.default_group_perm if is_group(resource) else account.default_topic_perm
        if not check_permission(perm, owned):
            return (f"No permission: {perm_name(perm)} on {describe(resource)} for accessKey "
                    f"{account.access_key} (it has {perm_name(owned)})")
    return None


@dataclass(frozen=True, slots=True)
class GrpcRefusal:
    """Why a gRPC call may not run; ``authenticated``: the caller is known (its permissions
    fall short: FORBIDDEN) or not (UNAUTHORIZED)."""

    authenticated: bool
    reason: str


def check_grpc(config: AclConfig, peer_ip: str, authorization: str | None, date_time: str | None,
               need: Mapping[str, int]) -> GrpcRefusal | None:
    """The 5.x clients' ``authorization`` metadata (``MQv2-HMAC-SHA1 Credential=AK,
    SignedHeaders=x-mq-date-time, Signature=HEX``: HmacSHA1 of the ``x-mq-date-time`` value) and
    the permissions ``need`` names, checked as ``check`` does a Remoting request's."""
    for pattern in config.global_white:
        if pattern.match(peer_ip):
            return None
    if not authorization:
        return GrpcRefusal(False, f"No accessKey is configured: the call from {peer_ip} carries "
                                  "no authorization")
    fields = parse_authorization(authorization)
    ak = fields.get("Credential", "").split("/")[0]
    account = config.accounts.get(ak)
    if account is None:
        return GrpcRefusal(False, f"No acl config for accessKey {ak or '(none)'}")
    if account.white_address.match(peer_ip):
        return None
    sig = fields.get("Signature", "").lower()
    expected = hmac.new(account.secret_key.encode("utf-8"), (date_time or "").encode("utf-8"),
                        hashlib.sha1).hexdigest()
    if not date_time or not hmac.compare_digest(sig.encode(), expected.encode()):
        return GrpcRefusal(False, f"Check signature failed for accessKey={ak}")
    reason = permitted(account, need)
    return None if reason is None else GrpcRefusal(True, reason)


def parse_authorization(value: str) -> dict[str, str]:
    """``MQv2-HMAC-SHA1 Credential=AK, SignedHeaders=x-mq-date-time, Signature=HEX`` as a dict
    of its fields (the algorithm under ``Algorithm``)."""
    algorithm, _, rest = value.strip().partition(" ")
    out = {"Algorithm": algorithm}
    for part in rest.split(","):
        key, sep, val = part.strip().partition("=")
        if sep:
            out[key] = val.strip()
    return out
