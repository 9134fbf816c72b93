"""Permissions, as RocketMQ's ``Permission`` and ``PlainAccessResource.parse`` define them: the
bits an account holds on a topic or group, and those a request needs.

A group's permission is held, and checked, under its retry topic's name (``%RETRY%<group>``), so
a request on a retry topic is checked against the group's permission (``groupPerms``,
``defaultGroupPerm``), never against the topics'.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from rocketlite.common.errors import FormatError
from rocketlite.protocol.bodies import HeartbeatData
from rocketlite.protocol.codes import RequestCode

DENY = 1
ANY = 1 << 1
PUB = 1 << 2
SUB = 1 << 3

RETRY_PREFIX = "%RETRY%"
_Add = Callable[[str | None, int], None]
_NAMES = {"DENY": DENY, "ANY": ANY, "PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB,
          "SUB|PUB": PUB | SUB}

ADMIN_CODES = frozenset(int(c) for c in (
    RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.UPDATE_AND_CREATE_TOPIC_LIST,
    RequestCode.UPDATE_BROKER_CONFIG, RequestCode.DELETE_TOPIC_IN_BROKER,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST, RequestCode.DELETE_SUBSCRIPTIONGROUP,
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, RequestCode.UPDATE_AND_CREATE_STATIC_TOPIC,
    # the NameServer's writes
    RequestCode.DELETE_TOPIC_IN_NAMESRV, RequestCode.PUT_KV_CONFIG, RequestCode.DELETE_KV_CONFIG,
    RequestCode.UPDATE_NAMESRV_CONFIG,
))
"""Request codes only an ``admin`` account may send (RocketMQ's ``Permission.ADMIN_CODE``, with
the offset reset, the list forms and the NameServer's topic, KV and config writes added)."""


def parse_perm(text: str | None) -> int:
    """``Permission.parsePermFromString``: an unknown or missing name is DENY."""
    if text is None:
        return DENY
    return _NAMES.get(text.strip().upper(), DENY)


def perm_name(perm: int) -> str:
    if perm & DENY:
        return "DENY"
    if perm & ANY:
        return "ANY"
    names = [n for n, bit in (("PUB", PUB), ("SUB", SUB)) if perm & bit]
    return "|".join(names) or "DENY"


def check_permission(needed: int, owned: int) -> bool:
    """``Permission.checkPermission``: DENY refuses all; ANY needs PUB or SUB; else a shared bit."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def parse_resource_perms(entries: object, *, group: bool, where: str) -> dict[str, int]:
    """``topicPerms``/``groupPerms`` (``["name=PUB|SUB", ...]``) by resource name (groups under
    their retry topic's name)."""
    if entries is None:
        return {}
    if not isinstance(entries, list):
        raise FormatError(f"{where} is not a list")
    out: dict[str, int] = {}
    for entry in entries:
        name, sep, perm = str(entry).partition("=")
        name = name.strip()
        if not sep or not name:
            raise FormatError(f"{where}: {entry!r} is not name=PERM")
        out[retry_topic(name) if group else name] = parse_perm(perm)
    return out


def retry_topic(group: str) -> str:
    return RETRY_PREFIX + group


def is_group(resource: str) -> bool:
    return resource.startswith(RETRY_PREFIX)


def describe(resource: str) -> str:
    """``topic T`` or ``group G`` (a retry topic names its group)."""
    return f"group {resource[len(RETRY_PREFIX):]}" if is_group(resource) else f"topic {resource}"


def needed(code: int, ext: Mapping[str, str], body: bytes | None) -> dict[str, int]:
    """The resources a request touches and the permission each needs (``PlainAccessResource
    .parse``); empty for codes that touch none. A send to a retry topic needs SUB on its group
    (a consumer sending a message back), as RocketMQ checks it."""
    need: dict[str, int] = {}

    def add(resource: str | None, perm: int) -> None:
        if resource:
            need[resource] = need.get(resource, 0) | perm

    get = ext.get
    if code == RequestCode.SEND_MESSAGE or code == RequestCode.SEND_REPLY_MESSAGE:
        _send(add, get("topic"), get("producerGroup"))
    elif code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE,
                  RequestCode.SEND_REPLY_MESSAGE_V2):
        _send(add, get("b"), get("a"))
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        add(get("originTopic"), PUB)
        _group(add, get("group"))
    elif code in (RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE):
        add(get("topic"), SUB)
        _group(add, get("consumerGroup"))
    elif code == RequestCode.QUERY_MESSAGE:
        add(get("topic"), SUB)
    elif code == RequestCode.HEART_BEAT:
        if body:
            for data in HeartbeatData.from_json(body).consumerDataSet:
                _group(add, data.groupName)
                for sub in data.subscriptionDataSet:
                    add(sub.topic, SUB)
    elif code in (RequestCode.UNREGISTER_CLIENT, RequestCode.GET_CONSUMER_LIST_BY_GROUP):
        _group(add, get("consumerGroup"))
    elif code in (RequestCode.UPDATE_CONSUMER_OFFSET, RequestCode.QUERY_CONSUMER_OFFSET):
        _group(add, get("consumerGroup"))
        add(get("topic"), SUB)
    elif code in (RequestCode.POP_MESSAGE, RequestCode.ACK_MESSAGE,
                  RequestCode.CHANGE_MESSAGE_INVISIBLETIME):
        add(get("topic"), SUB)
        _group(add, get("consumerGroup"))
    return need


def _send(add: _Add, topic: str | None, group: str | None) -> None:
    if topic is not None and is_group(topic):
        _group(add, group)
    else:
        add(topic, PUB)


def _group(add: _Add, group: str | None) -> None:
    if group:
        add(retry_topic(group), SUB)
