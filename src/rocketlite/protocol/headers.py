"""Typed custom headers: a command's ext fields (``dict[str, str]``) <-> frozen dataclasses.

One dataclass per Java ``CommandCustomHeader`` (``remoting/.../protocol/header/*.java`` and
``header/namesrv/*.java``); attribute names are the Java field names, which are the wire keys
(a few keys that are not identifiers use ``field(metadata={"key": ...})``).

Reading (``Header.from_ext``), per field type:

- ``str``: taken as is (``""`` included: C++ sends ``""`` for unused groups).
- ``Int32`` / ``Int64`` (``int``): optional sign and ASCII digits (``"-1"``), in the Java type's range.
- ``bool``: ``true``/``false``/``1``/``0`` in any case (the C++ clients send ``"0"``/``"1"``).
- A field without a default is required (``@CFNotNull``, or a response field the Java client reads
  unconditionally): missing means :class:`~rocketlite.common.errors.HeaderError` naming it. A
  ``None`` default means nullable; other defaults are the Java field's initial value.
- An optional non-string field given ``""`` counts as absent (Java logs the parse failure and leaves
  the field null); any other unparseable value raises ``HeaderError`` naming the field and the value.
- Unknown keys (RpcRequestHeader's ``ns``/``nsd``/``oway``/``lo``, C++'s ``AccessKey``,
  ``Signature``...) are ignored.

Writing (``Header.to_ext``): every non-None field as a string (booleans as ``true``/``false``).

Each class's field table is built once, on first use, from its type hints, and compiled into a
straight-line decoder and encoder (as ``dataclasses`` builds ``__init__``): the send and pull headers
are on the hot path.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, NamedTuple, Self

from rocketlite.common import native
from rocketlite.common.errors import HeaderError


class IntRange(NamedTuple):
    """The range of a Java integer type, attached to ``int`` with ``Annotated``."""

    java_type: str
    lo: int
    hi: int


Int32 = Annotated[int, IntRange("Integer", -(2**31), 2**31 - 1)]
"""A Java ``int``/``Integer``."""
Int64 = Annotated[int, IntRange("Long", -(2**63), 2**63 - 1)]
"""A Java ``long``/``Long`` (plain ``int`` means the same)."""

_INT64 = IntRange("Long", -(2**63), 2**63 - 1)
_STR, _INT, _BOOL = 0, 1, 2
_INT_TEXT = re.compile(r"[+-]?[0-9]{1,40}")
_BOOLS = {"true": True, "false": False, "1": True, "0": False}


class _Field(NamedTuple):
    key: str  # wire key
    attr: str  # dataclass attribute
    kind: int
    lo: int
    hi: int
    java_type: str
    required: bool


def _field_table(cls: type, keys: Mapping[str, str] | None = None) -> tuple[_Field, ...]:
    hints = typing.get_type_hints(cls, include_extras=True)
    out: list[_Field] = []
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        args = typing.get_args(tp)
        if typing.get_origin(tp) in (typing.Union, types.UnionType):  # X | None
            tp = next(a for a in args if a is not type(None))
        rng = _INT64
        if typing.get_origin(tp) is Annotated:
            tp, rng = typing.get_args(tp)[0], next(a for a in tp.__metadata__ if isinstance(a, IntRange))
        if tp is str:
            kind = _STR
        elif tp is bool:
            kind = _BOOL
        elif tp is int:
            kind = _INT
        else:  # pragma: no cover - a programming error in this module
            raise TypeError(f"{cls.__name__}.{f.name}: unsupported header type {tp!r}")
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        key = f.metadata.get("key", f.name)
        if keys is not None:
            key = keys.get(f.name, key)
        out.append(_Field(key, f.name, kind, rng.lo, rng.hi, rng.java_type, required))
    return tuple(out)


def _as_text(value: object) -> str:
    """Defensive: ext values should be strings, but tolerate what a JSON header may carry."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_ABSENT: Any = object()


def _missing(cls: type, key: str) -> HeaderError:
    return HeaderError(f"{cls.__name__}: required field {key!r} is missing", field=key)


def _slow_int(cls: type, f: _Field, v: str) -> Any:
    """An int field that missed the digits-only fast path: sign, range, ``""``, garbage."""
    if _INT_TEXT.fullmatch(v):
        n = int(v)
        if f.lo <= n <= f.hi:
            return n
    if v == "" and not f.required:
        return _ABSENT
    raise HeaderError(
        f"{cls.__name__}: field {f.key!r} is not a Java {f.java_type}: {v!r}", field=f.key, value=v
    )


def _slow_bool(cls: type, f: _Field, v: str) -> Any:
    b = _BOOLS.get(v.lower())
    if b is not None:
        return b
    if v == "" and not f.required:
        return _ABSENT
    raise HeaderError(f"{cls.__name__}: field {f.key!r} is not a boolean: {v!r}", field=f.key, value=v)


class _Codec(NamedTuple):
    decode: Callable[[Mapping[str, str]], Any]
    encode: Callable[[Any], dict[str, str]]


def _defaults(cls: type) -> dict[str, Any]:
    """Each field's default (``dataclasses.MISSING`` for a required one), by attribute name."""
    return {f.name: f.default for f in dataclasses.fields(cls)}


def _compile(cls: type, table: tuple[_Field, ...]) -> _Codec:
    """Straight-line ``from_ext``/``to_ext`` for one class and key set (as dataclasses does for
    ``__init__``): one ``ext.get`` and a digits-only fast path per field, no per-field dispatch."""
    defaults = _defaults(cls)
    env: dict[str, Any] = {
        "_cls": cls, "_table": table, "_text": _as_text, "_missing": _missing, "_slow_int": _slow_int,
        "_slow_bool": _slow_bool, "_BOOLS": _BOOLS, "_ABSENT": _ABSENT, "_str": str,
        "_new": object.__new__, "_set": object.__setattr__, "_defaults": defaults,
    }
    dec = ["def decode(ext):", "    get = ext.get"]
    for i, f in enumerate(table):
        var = f"f{i}"
        dec.append(f"    v = get({f.key!r})")
        if f.required:
            dec.append(f"    if v is None: raise _missing(_cls, {f.key!r})")
        else:
            dec.append(f"    if v is None: {var} = _defaults[{f.attr!r}]")
            dec.append("    else:")
        ind = "    " if f.required else "        "
        dec.append(f"{ind}if v.__class__ is not _str: v = _text(v)")
        if f.kind == _STR:
            dec.append(f"{ind}{var} = v")
        elif f.kind == _INT:
            digits = len(str(f.hi)) - 1  # any run of this many digits is in range
            dec.append(f"{ind}if v.isdigit() and v.isascii() and len(v) <= {digits}: {var} = int(v)")
            dec.append(f"{ind}else:")
            dec.append(f"{ind}    {var} = _slow_int(_cls, _table[{i}], v)")
            if not f.required:
                dec.append(f"{ind}    if {var} is _ABSENT: {var} = _defaults[{f.attr!r}]")
        else:
            dec.append(f"{ind}{var} = _BOOLS.get(v)")
            dec.append(f"{ind}if {var} is None:")
            dec.append(f"{ind}    {var} = _slow_bool(_cls, _table[{i}], v)")
            if not f.required:
                dec.append(f"{ind}    if {var} is _ABSENT: {var} = _defaults[{f.attr!r}]")
    dec.append("    o = _new(_cls)")
    for i, f in enumerate(table):
        slot = cls.__dict__.get(f.attr)
        if slot is not None and type(slot).__name__ == "member_descriptor":
            # The slot's own setter: what object.__setattr__ ends up calling, minus the lookup.
            env[f"_d{i}"] = slot.__set__
            dec.append(f"    _d{i}(o, f{i})")
        else:
            dec.append(f"    _set(o, {f.attr!r}, f{i})")
    dec.append("    return o")
    enc = ["def encode(self):", "    d = {}"]
    for f in table:
        conv = {_STR: "v", _INT: "_str(v)", _BOOL: "'true' if v else 'false'"}[f.kind]
        enc.append(f"    v = self.{f.attr}")
        enc.append(f"    if v is not None: d[{f.key!r}] = {conv}")
    enc.append("    return d")
    exec("\n".join(dec) + "\n\n" + "\n".join(enc), env)
    return _Codec(env["decode"], env["encode"])


_HELPERS = (_as_text, _missing, _slow_int, _slow_bool, _BOOLS, _ABSENT)
_c = native.load("rocketlite.protocol._headers_c")


def _build(cls: type, table: tuple[_Field, ...]) -> _Codec:
    """The codec of one class and key set: ``_compile``'s, with the compiled twin of its decoder
    (``_headers_c.Decoder``, same results and errors) when the compiled core runs."""
    codec = _compile(cls, table)
    if _c is not None:
        codec = codec._replace(decode=_c.Decoder(cls, table, _defaults(cls), _HELPERS))
    return codec


_CODECS: dict[type, _Codec] = {}
_V2_CODECS: dict[type, _Codec] = {}


def _codec(cls: type) -> _Codec:
    codec = _CODECS.get(cls)
    if codec is None:
        codec = _CODECS[cls] = _build(cls, _field_table(cls))
    return codec


class Header:
    """Base of the typed headers: ``from_ext`` / ``to_ext`` driven by the dataclass fields."""

    __slots__ = ()

    @classmethod
    def from_ext(cls, ext: Mapping[str, str]) -> Self:
        """Parse ext fields; raises HeaderError naming the field that is missing or malformed."""
        result: Self = (_CODECS.get(cls) or _codec(cls)).decode(ext)
        return result

    def to_ext(self) -> dict[str, str]:
        """The ext fields: every non-None field as a string."""
        cls = type(self)
        return (_CODECS.get(cls) or _codec(cls)).encode(self)

    @classmethod
    def wire_keys(cls) -> tuple[str, ...]:
        """The wire keys this header reads and writes."""
        return tuple(f.key for f in _field_table(cls))


# ------------------------------------------------------------------------------------------ broker: send


@dataclass(frozen=True, slots=True, kw_only=True)
class SendMessageRequestHeader(Header):
    """SEND_MESSAGE (10) / SEND_MESSAGE_V2 (310) / SEND_BATCH_MESSAGE (320) request.

    ``from_v2_ext``/``to_v2_ext`` read and write ``SendMessageRequestHeaderV2``'s one-letter keys
    (a producerGroup ... n brokerName). ``bname`` is RpcRequestHeader's broker name, V2's ``n``.
    """

    producerGroup: str
    topic: str
    defaultTopic: str
    defaultTopicQueueNums: Int32
    queueId: Int32
    sysFlag: Int32
    bornTimestamp: Int64
    flag: Int32
    properties: str | None = None
    reconsumeTimes: Int32 | None = None
    unitMode: bool | None = None
    batch: bool | None = None
    maxReconsumeTimes: Int32 | None = None
    bname: str | None = None

    V2_KEYS: ClassVar[Mapping[str, str]] = {
        "producerGroup": "a",
        "topic": "b",
        "defaultTopic": "c",
        "defaultTopicQueueNums": "d",
        "queueId": "e",
        "sysFlag": "f",
        "bornTimestamp": "g",
        "flag": "h",
        "properties": "i",
        "reconsumeTimes": "j",
        "unitMode": "k",
        "maxReconsumeTimes": "l",
        "batch": "m",
        "bname": "n",
    }

    @classmethod
    def from_v2_ext(cls, ext: Mapping[str, str]) -> Self:
        """Parse SendMessageRequestHeaderV2's one-letter ext fields."""
        result: Self = (_V2_CODECS.get(cls) or _v2_codec(cls)).decode(ext)
        return result

    def to_v2_ext(self) -> dict[str, str]:
        """The one-letter ext fields of SendMessageRequestHeaderV2."""
        cls = type(self)
        return (_V2_CODECS.get(cls) or _v2_codec(cls)).encode(self)


def _v2_codec(cls: type[SendMessageRequestHeader]) -> _Codec:
    codec = _V2_CODECS[cls] = _build(cls, _field_table(cls, cls.V2_KEYS))
    return codec


@dataclass(frozen=True, slots=True, kw_only=True)
class SendMessageResponseHeader(Header):
    """Reply to a send. The Java broker also adds ext ``MSG_REGION`` and ``TRACE_ON`` (not fields)."""

    msgId: str
    queueId: Int32
    queueOffset: Int64
    transactionId: str | None = None
    batchUniqId: str | None = None
    recallHandle: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerSendMsgBackRequestHeader(Header):
    """CONSUMER_SEND_MSG_BACK (36); ``offset`` is the CommitLog physical offset."""

    offset: Int64
    group: str
    delayLevel: Int32
    originMsgId: str | None = None
    originTopic: str | None = None
    unitMode: bool = False
    maxReconsumeTimes: Int32 | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class EndTransactionRequestHeader(Header):
    """END_TRANSACTION (37); commitOrRollback: 0 unknown, 8 commit, 12 rollback."""

    producerGroup: str
    tranStateTableOffset: Int64
    commitLogOffset: Int64
    commitOrRollback: Int32
    msgId: str
    topic: str | None = None
    fromTransactionCheck: bool = False
    transactionId: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckTransactionStateRequestHeader(Header):
    """CHECK_TRANSACTION_STATE (39), broker to producer."""

    tranStateTableOffset: Int64
    commitLogOffset: Int64
    topic: str | None = None
    msgId: str | None = None
    transactionId: str | None = None
    offsetMsgId: str | None = None


# ------------------------------------------------------------------------------------------ broker: pull


@dataclass(frozen=True, slots=True, kw_only=True)
class PullMessageRequestHeader(Header):
    """PULL_MESSAGE (11). ``proxyFrowardClientId`` is spelled as in Java."""

    consumerGroup: str
    topic: str
    queueId: Int32
    queueOffset: Int64
    maxMsgNums: Int32
    sysFlag: Int32
    commitOffset: Int64
    suspendTimeoutMillis: Int64
    subVersion: Int64
    subscription: str | None = None
    expressionType: str | None = None
    maxMsgBytes: Int32 | None = None
    requestSource: Int32 | None = None
    proxyFrowardClientId: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PullMessageResponseHeader(Header):
    """Reply to PULL_MESSAGE; the first four are read unconditionally by the Java client."""

    suggestWhichBrokerId: Int64
    nextBeginOffset: Int64
    minOffset: Int64
    maxOffset: Int64
    offsetDelta: Int64 | None = None
    topicSysFlag: Int32 | None = None
    groupSysFlag: Int32 | None = None
    forbiddenType: Int32 | None = None


# ------------------------------------------------------------------------------------ broker: pop (5.x)


@dataclass(frozen=True, slots=True, kw_only=True)
class PopMessageRequestHeader(Header):
    """POP_MESSAGE (200050). ``queueId`` -1: every readable queue; ``initMode`` 0 LAST, 1 MIN;
    ``expType``/``exp`` the subscription (TAG, ``"*"`` when absent)."""

    consumerGroup: str
    topic: str
    queueId: Int32
    maxMsgNums: Int32
    invisibleTime: Int64
    pollTime: Int64
    bornTime: Int64
    initMode: Int32
    expType: str | None = None
    exp: str | None = None
    order: bool = False
    attemptId: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PopMessageResponseHeader(Header):
    """Reply to POP_MESSAGE; the client builds each message's extraInfo from these."""

    popTime: Int64
    invisibleTime: Int64
    reviveQid: Int32
    restNum: Int64
    startOffsetInfo: str | None = None
    msgOffsetInfo: str | None = None
    orderCountInfo: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AckMessageRequestHeader(Header):
    """ACK_MESSAGE (200051); ``offset`` is the message's queue offset."""

    consumerGroup: str
    topic: str
    queueId: Int32
    extraInfo: str
    offset: Int64


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangeInvisibleTimeRequestHeader(Header):
    """CHANGE_MESSAGE_INVISIBLETIME (200053)."""

    consumerGroup: str
    topic: str
    queueId: Int32
    extraInfo: str
    offset: Int64
    invisibleTime: Int64


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangeInvisibleTimeResponseHeader(Header):
    """Reply to CHANGE_MESSAGE_INVISIBLETIME: the new handle's pop time, invisible time and
    revive queue."""

    popTime: Int64
    invisibleTime: Int64
    reviveQid: Int32


# --------------------------------------------------------------------------------------- broker: offsets


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryConsumerOffsetRequestHeader(Header):
    """QUERY_CONSUMER_OFFSET (14)."""

    consumerGroup: str
    topic: str
    queueId: Int32
    setZeroIfNotFound: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryConsumerOffsetResponseHeader(Header):
    offset: Int64


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateConsumerOffsetRequestHeader(Header):
    """UPDATE_CONSUMER_OFFSET (15); ali-ons sends commitOffset -1 for untouched queues."""

    consumerGroup: str
    topic: str
    queueId: Int32
    commitOffset: Int64


@dataclass(frozen=True, slots=True, kw_only=True)
class GetMaxOffsetRequestHeader(Header):
    """GET_MAX_OFFSET (30); ``committed`` is 5.x (a primitive defaulting to true)."""

    topic: str
    queueId: Int32
    committed: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class GetMaxOffsetResponseHeader(Header):
    offset: Int64


@dataclass(frozen=True, slots=True, kw_only=True)
class GetMinOffsetRequestHeader(Header):
    """GET_MIN_OFFSET (31)."""

    topic: str
    queueId: Int32


@dataclass(frozen=True, slots=True, kw_only=True)
class GetMinOffsetResponseHeader(Header):
    offset: Int64


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchOffsetRequestHeader(Header):
    """SEARCH_OFFSET_BY_TIMESTAMP (29). ``boundaryType`` (5.x): Java's ``BoundaryType.getType`` reads
    ``upper`` in any case as UPPER and anything else as LOWER; see :attr:`upper_boundary`."""

    topic: str
    queueId: Int32
    timestamp: Int64
    boundaryType: str | None = None

    @property
    def upper_boundary(self) -> bool:
        return self.boundaryType is not None and self.boundaryType.lower() == "upper"


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchOffsetResponseHeader(Header):
    offset: Int64


@dataclass(frozen=True, slots=True, kw_only=True)
class GetEarliestMsgStoretimeRequestHeader(Header):
    """GET_EARLIEST_MSG_STORETIME (32)."""

    topic: str
    queueId: Int32


@dataclass(frozen=True, slots=True, kw_only=True)
class GetEarliestMsgStoretimeResponseHeader(Header):
    timestamp: Int64


# ------------------------------------------------------------------------------------- broker: messages


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryMessageRequestHeader(Header):
    """QUERY_MESSAGE (12). ``uniqueKeyQuery`` is the ext key ``_UNIQUE_KEY_QUERY``
    (``MixAll.UNIQUE_MSG_QUERY_FLAG``, added next to the header): true for a UNIQ_KEY lookup."""

    topic: str
    key: str
    maxNum: Int32
    beginTimestamp: Int64
    endTimestamp: Int64
    uniqueKeyQuery: bool | None = field(default=None, metadata={"key": "_UNIQUE_KEY_QUERY"})


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryMessageResponseHeader(Header):
    indexLastUpdateTimestamp: Int64
    indexLastUpdatePhyoffset: Int64


@dataclass(frozen=True, slots=True, kw_only=True)
class ViewMessageRequestHeader(Header):
    """VIEW_MESSAGE_BY_ID (33): ``offset`` is the physical offset from the offset msgId."""

    offset: Int64
    topic: str | None = None


# -------------------------------------------------------------------------------------- broker: clients


@dataclass(frozen=True, slots=True, kw_only=True)
class GetConsumerListByGroupRequestHeader(Header):
    """GET_CONSUMER_LIST_BY_GROUP (38)."""

    consumerGroup: str


@dataclass(frozen=True, slots=True, kw_only=True)
class UnregisterClientRequestHeader(Header):
    """UNREGISTER_CLIENT (35); C++ sends ``""`` for the group it does not unregister."""

    clientID: str
    producerGroup: str | None = None
    consumerGroup: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NotifyConsumerIdsChangedRequestHeader(Header):
    """NOTIFY_CONSUMER_IDS_CHANGED (40), broker to client."""

    consumerGroup: str


# ----------------------------------------------------------------------------------------- broker: admin


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTopicRequestHeader(Header):
    """UPDATE_AND_CREATE_TOPIC (17). ``attributes`` is a string such as ``+k=v,-k2``."""

    topic: str
    defaultTopic: str
    readQueueNums: Int32
    writeQueueNums: Int32
    perm: Int32
    topicFilterType: str
    topicSysFlag: Int32 | None = None
    order: bool = False
    attributes: str | None = None
    force: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopicRequestHeader(Header):
    """DELETE_TOPIC_IN_BROKER (215) / DELETE_TOPIC_IN_NAMESRV (216)."""

    topic: str


# -------------------------------------------------------------------------------------------- namesrv


@dataclass(frozen=True, slots=True, kw_only=True)
class GetRouteInfoRequestHeader(Header):
    """GET_ROUTEINFO_BY_TOPIC (105)."""

    topic: str
    acceptStandardJsonOnly: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterBrokerRequestHeader(Header):
    """REGISTER_BROKER (103). ``compressed``: the body uses RegisterBrokerBody's deflated layout."""

    brokerName: str
    brokerAddr: str
    clusterName: str
    haServerAddr: str
    brokerId: Int64
    heartbeatTimeoutMillis: Int64 | None = None
    enableActingMaster: bool | None = None
    compressed: bool = False
    bodyCrc32: Int32 = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterBrokerResponseHeader(Header):
    haServerAddr: str | None = None
    masterAddr: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UnRegisterBrokerRequestHeader(Header):
    """UNREGISTER_BROKER (104)."""

    brokerName: str
    brokerAddr: str
    clusterName: str
    brokerId: Int64


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerHeartbeatRequestHeader(Header):
    """BROKER_HEARTBEAT (904). ``heartbeatTimeoutMills`` is spelled as in Java."""

    clusterName: str
    brokerAddr: str
    brokerName: str
    brokerId: Int64 | None = None
    epoch: Int32 | None = None
    maxOffset: Int64 | None = None
    confirmOffset: Int64 | None = None
    heartbeatTimeoutMills: Int64 | None = None
    electionPriority: Int32 | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GetKVConfigRequestHeader(Header):
    """GET_KV_CONFIG (101)."""

    namespace: str
    key: str


@dataclass(frozen=True, slots=True, kw_only=True)
class GetKVConfigResponseHeader(Header):
    value: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PutKVConfigRequestHeader(Header):
    """PUT_KV_CONFIG (100)."""

    namespace: str
    key: str
    value: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteKVConfigRequestHeader(Header):
    """DELETE_KV_CONFIG (102)."""

    namespace: str
    key: str


@dataclass(frozen=True, slots=True, kw_only=True)
class GetKVListByNamespaceRequestHeader(Header):
    """GET_KVLIST_BY_NAMESPACE (219)."""

    namespace: str
