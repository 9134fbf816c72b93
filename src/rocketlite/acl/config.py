"""``plain_acl.yml`` in RocketMQ 4.x's schema, parsed and checked::

    globalWhiteRemoteAddresses: ["10.10.103.*", "192.168.0.*"]
    accounts:
      - accessKey: RocketMQ
        secretKey: 12345678
        whiteRemoteAddress: 192.168.0.*
        admin: false
        defaultTopicPerm: DENY
        defaultGroupPerm: SUB
        topicPerms: [topicA=DEFAULT, topicB=PUB|SUB, topicC=SUB]
        groupPerms: [groupA=DENY, groupB=PUB|SUB]

Keys and secrets must be at least 6 characters (as RocketMQ requires); an access key appears
once. Missing default permissions are DENY. Anything else wrong is a ``FormatError`` that names
the account and the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from rocketlite.acl.address import AddressPattern, parse_address
from rocketlite.acl.perm import parse_perm, parse_resource_perms
from rocketlite.common.errors import FormatError

MIN_KEY_LENGTH = 6


@dataclass(frozen=True, slots=True)
class Account:
    access_key: str
    secret_key: str
    white_address: AddressPattern = field(default_factory=lambda: parse_address(None))
    admin: bool = False
    default_topic_perm: int = parse_perm(None)
    default_group_perm: int = parse_perm(None)
    perms: dict[str, int] = field(default_factory=dict)  # topics, and groups as retry topics


@dataclass(frozen=True, slots=True)
class AclConfig:
    global_white: tuple[AddressPattern, ...] = ()
    accounts: dict[str, Account] = field(default_factory=dict)


def load_acl(path: Path) -> AclConfig:
    """Read and check ``path``; ``FormatError`` (or ``OSError``) says what is wrong."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise FormatError(f"{path}: not YAML: {e}") from None
    except UnicodeDecodeError as e:
        raise FormatError(f"{path}: not UTF-8 text: {e}") from None
    try:
        return parse_acl(data)
    except FormatError as e:
        raise FormatError(f"{path}: {e}") from None


def parse_acl(data: object) -> AclConfig:
    """The configuration a parsed ``plain_acl.yml`` document describes."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise FormatError("the document is not a mapping")
    white = data.get("globalWhiteRemoteAddresses") or []
    if not isinstance(white, list):
        raise FormatError("globalWhiteRemoteAddresses is not a list")
    raw_accounts = data.get("accounts") or []
    if not isinstance(raw_accounts, list):
        raise FormatError("accounts is not a list")
    accounts: dict[str, Account] = {}
    for i, raw in enumerate(raw_accounts):
        account = _account(raw, i)
        if account.access_key in accounts:
            raise FormatError(f"accessKey {account.access_key!r} appears twice")
        accounts[account.access_key] = account
    return AclConfig(tuple(parse_address(str(w)) for w in white if w is not None), accounts)


def _account(raw: object, index: int) -> Account:
    if not isinstance(raw, dict):
        raise FormatError(f"accounts[{index}] is not a mapping")
    ak, sk = raw.get("accessKey"), raw.get("secretKey")
    where = f"accounts[{index}] ({ak!r})"
    for name, key in (("accessKey", ak), ("secretKey", sk)):
        if key is None or len(str(key)) < MIN_KEY_LENGTH:
            raise FormatError(f"{where}: {name} is missing or shorter than {MIN_KEY_LENGTH} characters")
    admin = raw.get("admin", False)
    if not isinstance(admin, bool):
        admin = str(admin).strip().lower() == "true"
    perms = parse_resource_perms(raw.get("topicPerms"), group=False, where=f"{where} topicPerms")
    perms.update(parse_resource_perms(raw.get("groupPerms"), group=True, where=f"{where} groupPerms"))
    return Account(
        access_key=str(ak), secret_key=str(sk),
        white_address=parse_address(_text(raw.get("whiteRemoteAddress"))),
        admin=admin,
        default_topic_perm=parse_perm(_text(raw.get("defaultTopicPerm"))),
        default_group_perm=parse_perm(_text(raw.get("defaultGroupPerm"))),
        perms=perms,
    )


def _text(v: object) -> str | None:
    return None if v is None else str(v)
