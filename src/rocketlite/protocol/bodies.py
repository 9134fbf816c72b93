"""JSON command bodies as dataclasses, read and written the way fastjson does.

Each class mirrors a Java body class (``remoting/.../protocol/route``, ``heartbeat``, ``body``,
``common/TopicConfig``); attribute names are the JSON property names. ``to_json(legacy=...)`` and
``from_json(data)`` go through :mod:`rocketlite.protocol.fastjson`; ``to_obj``/``from_obj`` work on
parsed JSON. The conversion is declarative: each class's schema is built once from its type hints.

Reading, as fastjson does:

- Unknown properties are ignored; a missing or ``null`` property takes the field's default (the Java
  field's initial value); a field without a default is required (BodyError naming it).
- ``int`` fields accept numbers and numeric strings (C++ sends ``"subVersion":"1795..."``), within the
  Java type's range (``Int32``/``Int64``); ``str`` fields accept numbers and booleans (as text);
  ``bool`` fields accept ``true``/``false``, ``0``/``1`` and those as strings.
- Enums accept their name or their ordinal (C++ sends ``"consumeType":1``); they are written by name.
- ``dict[int, str]`` (``BrokerData.brokerAddrs``) accepts quoted (``{"0":..}``) and bare (``{0:..}``)
  keys. ``dict[MessageQueue, X]`` (``ConsumeStats.offsetTable``...) has object keys, as fastjson
  writes them: ``{{"brokerName":"b","queueId":0,"topic":"t"}:..}`` (not standard JSON).
  ``float`` fields (Java ``double``) accept numbers and numeric strings. Java
  ``Set<String|Integer|MessageQueue>`` are Python sets, written as sorted arrays.

Writing: ``None`` fields are left out (fastjson skips nulls); keys sorted; ``legacy=True`` writes
integer map keys bare for clients older than V4_9_4 (see ``fastjson``).

Every malformed input raises :class:`~rocketlite.common.errors.BodyError` with the path of the bad
value (e.g. ``HeartbeatData.consumerDataSet[0].consumeType``).
"""

from __future__ import annotations

import dataclasses
import re
import struct
import time
import types
import typing
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Annotated, Any, ClassVar, NamedTuple, Self

from rocketlite.common.errors import BodyError
from rocketlite.formats.javahash import java_string_hash
from rocketlite.protocol import fastjson
from rocketlite.protocol.headers import Int32, Int64, IntRange

__all__ = [
    "BrokerData",
    "ClusterInfo",
    "ConsumeFromWhere",
    "ConsumeType",
    "ConsumerData",
    "DataVersion",
    "GetConsumerListByGroupResponseBody",
    "HeartbeatData",
    "JsonBody",
    "KVTable",
    "LockBatchRequestBody",
    "LockBatchResponseBody",
    "MessageModel",
    "MessageQueue",
    "ProducerData",
    "QueueData",
    "RegisterBrokerBody",
    "SubscriptionData",
    "TopicConfig",
    "TopicConfigSerializeWrapper",
    "TopicFilterType",
    "TopicList",
    "TopicRouteData",
    "UnlockBatchRequestBody",
]


# ---------------------------------------------------------------------------------------------- enums


class ConsumeType(Enum):
    """``heartbeat/ConsumeType``; values are the Java ordinals."""

    CONSUME_ACTIVELY = 0
    CONSUME_PASSIVELY = 1
    CONSUME_POP = 2


class MessageModel(Enum):
    """``heartbeat/MessageModel``; values are the Java ordinals."""

    BROADCASTING = 0
    CLUSTERING = 1


class ConsumeFromWhere(Enum):
    """``common/consumer/ConsumeFromWhere``; values are the Java ordinals."""

    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1
    CONSUME_FROM_MIN_OFFSET = 2
    CONSUME_FROM_MAX_OFFSET = 3
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5


class TopicFilterType(Enum):
    """``common/TopicFilterType``; values are the Java ordinals."""

    SINGLE_TAG = 0
    MULTI_TAG = 1


# ----------------------------------------------------------------------------------- schema machinery

_Decoder = Callable[[Any, str], Any]
_Encoder = Callable[[Any], Any]
_INT64 = IntRange("Long", -(2**63), 2**63 - 1)
_INT_TEXT = re.compile(r"[+-]?[0-9]{1,40}")
_BOOL_TEXT = {"true": True, "false": False, "1": True, "0": False}


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int | float):
        return f"the number {v!r}"
    if isinstance(v, str):
        return f"the string {v[:40]!r}"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, list):
        return "an array"
    return type(v).__name__


def _bad(path: str, expected: str, v: Any) -> BodyError:
    return BodyError(f"{path}: expected {expected}, got {_kind(v)}")


def _ident(v: Any) -> Any:
    return v


def _pass(v: Any, path: str) -> Any:
    return v


def _int_decoder(rng: IntRange) -> _Decoder:
    lo, hi, what = rng.lo, rng.hi, f"a Java {rng.java_type}"

    def decode(v: Any, path: str) -> Any:
        if type(v) is int:
            n = v
        elif isinstance(v, str) and _INT_TEXT.fullmatch(v):
            n = int(v)
        else:
            raise _bad(path, what, v)
        if not lo <= n <= hi:
            raise _bad(path, what, v)
        return n

    return decode


def _decode_str(v: Any, path: str) -> Any:
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return str(v)
    raise _bad(path, "a string", v)


def _decode_bool(v: Any, path: str) -> Any:
    if isinstance(v, bool):
        return v
    if type(v) is int and v in (0, 1):
        return v == 1
    if isinstance(v, str):
        b = _BOOL_TEXT.get(v.lower())
        if b is not None:
            return b
    raise _bad(path, "a boolean", v)


def _decode_float(v: Any, path: str) -> Any:
    if isinstance(v, int | float) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            pass
    raise _bad(path, "a number", v)


def _key_converter(kt: Any) -> tuple[_Decoder, _Encoder]:
    """Map keys: ``int`` (quoted or bare), ``str``, or a body class such as ``MessageQueue``,
    which fastjson writes as an object key (``{{"brokerName":..}:5}``, a ``fastjson.ObjectKey``
    once parsed)."""
    if kt is int:
        return _int_decoder(_INT64), _ident
    if isinstance(kt, type) and issubclass(kt, JsonBody):
        body: type[JsonBody] = kt

        def decode_key(k: Any, path: str) -> Any:
            if not isinstance(k, fastjson.ObjectKey):
                raise _bad(path, f"a {body.__name__} object", k)
            return body.from_obj(k.to_dict(), path)

        def encode_key(k: Any) -> Any:
            return fastjson.ObjectKey.from_mapping(k.to_obj())

        return decode_key, encode_key
    return _decode_str, _ident


def _enum_converter(tp: type[Enum]) -> tuple[_Decoder, _Encoder]:
    members = list(tp)

    def decode(v: Any, path: str) -> Any:
        if isinstance(v, str):
            m = tp.__members__.get(v)
            if m is not None:
                return m
            if v.isdigit() and v.isascii():
                v = int(v)
        if type(v) is int and 0 <= v < len(members):
            return members[v]
        raise _bad(path, f"a {tp.__name__} name or ordinal", v)

    def encode(v: Any) -> Any:
        return v.name

    return decode, encode


def _sorted(values: Any) -> list[Any]:
    try:
        return sorted(values)
    except TypeError:
        return sorted(values, key=repr)


def _converter(tp: Any) -> tuple[_Decoder, _Encoder]:  # noqa: C901  (one branch per kind of type)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return _pass, _ident
    if origin in (typing.Union, types.UnionType):
        (inner,) = (a for a in args if a is not type(None))
        dec, enc = _converter(inner)

        def decode_optional(v: Any, path: str) -> Any:
            return None if v is None else dec(v, path)

        def encode_optional(v: Any) -> Any:
            return None if v is None else enc(v)

        return decode_optional, encode_optional
    if origin is Annotated:
        rng = next(m for m in tp.__metadata__ if isinstance(m, IntRange))
        return _int_decoder(rng), _ident
    if tp is int:
        return _int_decoder(_INT64), _ident
    if tp is str:
        return _decode_str, _ident
    if tp is bool:
        return _decode_bool, _ident
    if tp is float:
        return _decode_float, _ident
    if isinstance(tp, type) and issubclass(tp, Enum):
        return _enum_converter(tp)
    if isinstance(tp, type) and issubclass(tp, JsonBody):
        body: type[JsonBody] = tp
        return body.from_obj, _to_obj
    if origin is list or origin is set:
        (item,) = args
        idec, ienc = _converter(item)
        if origin is list:

            def decode_list(v: Any, path: str) -> Any:
                if not isinstance(v, list):
                    raise _bad(path, "an array", v)
                return [idec(x, f"{path}[{i}]") for i, x in enumerate(v)]

            return decode_list, lambda v: [ienc(x) for x in v]

        def decode_set(v: Any, path: str) -> Any:
            if not isinstance(v, list):
                raise _bad(path, "an array", v)
            return {idec(x, f"{path}[{i}]") for i, x in enumerate(v)}

        return decode_set, lambda v: [ienc(x) for x in _sorted(v)]
    if origin is dict:
        kt, vt = args
        kdec, kenc = _key_converter(kt)
        vdec, venc = _converter(vt)

        def decode_dict(v: Any, path: str) -> Any:
            if not isinstance(v, dict):
                raise _bad(path, "an object", v)
            return {kdec(k, f"{path} key"): vdec(x, f"{path}[{k!r}]") for k, x in v.items()}

        if kenc is _ident:
            return decode_dict, lambda v: {k: venc(x) for k, x in v.items()}
        return decode_dict, lambda v: {kenc(k): venc(x) for k, x in v.items()}
    raise TypeError(f"unsupported body field type {tp!r}")  # pragma: no cover - a bug in this module


class _Prop(NamedTuple):
    key: str
    attr: str
    decode: _Decoder
    encode: _Encoder
    required: bool


_SCHEMAS: dict[type, tuple[_Prop, ...]] = {}


def _schema(cls: type) -> tuple[_Prop, ...]:
    schema = _SCHEMAS.get(cls)
    if schema is None:
        hints = typing.get_type_hints(cls, include_extras=True)
        props = []
        for f in dataclasses.fields(cls):
            dec, enc = _converter(hints[f.name])
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            props.append(_Prop(f.metadata.get("key", f.name), f.name, dec, enc, required))
        schema = _SCHEMAS[cls] = tuple(props)
    return schema


def _to_obj(body: Any) -> Any:
    result: dict[str, Any] = body.to_obj()
    return result


class JsonBody:
    """Base of the JSON bodies: ``to_json``/``from_json`` and ``to_obj``/``from_obj``."""

    __slots__ = ()

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Parse a body (standard JSON or fastjson's forms); BodyError if malformed."""
        return cls.from_obj(fastjson.loads(data), cls.__name__)

    @classmethod
    def from_obj(cls, obj: Any, path: str = "") -> Self:
        """Build from parsed JSON; ``path`` prefixes error messages."""
        path = path or cls.__name__
        if not isinstance(obj, dict):
            raise _bad(path, "an object", obj)
        kwargs: dict[str, Any] = {}
        for p in _SCHEMAS.get(cls) or _schema(cls):
            v = obj.get(p.key)
            if v is None:
                if p.required:
                    raise BodyError(f"{path}.{p.key} is missing")
                continue
            kwargs[p.attr] = p.decode(v, f"{path}.{p.key}")
        return cls(**kwargs)

    def to_obj(self) -> dict[str, Any]:
        """The JSON object (plain dicts and lists), None fields left out."""
        out: dict[str, Any] = {}
        for p in _SCHEMAS.get(type(self)) or _schema(type(self)):
            v = getattr(self, p.attr)
            if v is not None:
                out[p.key] = p.encode(v)
        return out

    def to_json(self, *, legacy: bool = False) -> bytes:
        """Serialize; ``legacy`` writes integer map keys unquoted (old clients, see fastjson)."""
        return fastjson.dumps(self.to_obj(), legacy=legacy)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


_I32_DECODE = _int_decoder(IntRange("Integer", -(2**31), 2**31 - 1))
_FILTER_TYPE_DECODE = _enum_converter(TopicFilterType)[0]
_STR_MAP_DECODE = _converter(dict[str, str])[0]
_STR_LIST_DECODE = _converter(list[str])[0]

# ---------------------------------------------------------------------------------------------- route


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue(JsonBody):
    """``common/message/MessageQueue`` ``{"brokerName","queueId","topic"}``: hashable, ordered by
    topic, broker name, queue id."""

    topic: str
    brokerName: str
    queueId: Int32


@dataclass(slots=True, kw_only=True)
class QueueData(JsonBody):
    """``route/QueueData``: one broker's queues of a topic."""

    brokerName: str
    readQueueNums: Int32 = 0
    writeQueueNums: Int32 = 0
    perm: Int32 = 0
    topicSysFlag: Int32 = 0


@dataclass(slots=True, kw_only=True)
class BrokerData(JsonBody):
    """``route/BrokerData``; ``brokerAddrs`` maps broker id (0 = master) to ``ip:port``."""

    brokerName: str
    cluster: str | None = None
    brokerAddrs: dict[int, str] = field(default_factory=dict)
    enableActingMaster: bool = False
    zoneName: str | None = None


@dataclass(slots=True, kw_only=True)
class TopicRouteData(JsonBody):
    """``route/TopicRouteData``, the body of GET_ROUTEINFO_BY_TOPIC's reply.

    ``topicQueueMappingByBroker`` (static topics) is kept as parsed JSON.
    """

    queueDatas: list[QueueData] = field(default_factory=list)
    brokerDatas: list[BrokerData] = field(default_factory=list)
    filterServerTable: dict[str, list[str]] = field(default_factory=dict)
    orderTopicConf: str | None = None
    topicQueueMappingByBroker: dict[str, Any] | None = None


@dataclass(slots=True, kw_only=True)
class ClusterInfo(JsonBody):
    """``body/ClusterInfo``, the reply to GET_BROKER_CLUSTER_INFO."""

    brokerAddrTable: dict[str, BrokerData] = field(default_factory=dict)
    clusterAddrTable: dict[str, set[str]] = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class TopicList(JsonBody):
    """``body/TopicList``."""

    topicList: set[str] = field(default_factory=set)
    brokerAddr: str | None = None


@dataclass(slots=True, kw_only=True)
class KVTable(JsonBody):
    """``body/KVTable`` (REGISTER_BROKER's reply, GET_KVLIST_BY_NAMESPACE)."""

    table: dict[str, str] = field(default_factory=dict)


# -------------------------------------------------------------------------------- topics and register


@dataclass(slots=True, kw_only=True)
class DataVersion(JsonBody):
    """``DataVersion``: a topic table's version (``counter`` is an AtomicLong in Java)."""

    stateVersion: Int64 = 0
    timestamp: Int64 = field(default_factory=_now_ms)
    counter: Int64 = 0


@dataclass(slots=True, kw_only=True)
class TopicConfig(JsonBody):
    """``common/TopicConfig``; defaults are Java's (16 queues, perm 6 = read|write)."""

    topicName: str
    readQueueNums: Int32 = 16
    writeQueueNums: Int32 = 16
    perm: Int32 = 6
    topicFilterType: TopicFilterType = TopicFilterType.SINGLE_TAG
    topicSysFlag: Int32 = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)

    def encode_line(self) -> str:
        """``TopicConfig.encode()``: ``name read write perm filterType attributesJson``, space-separated
        (used by the compressed RegisterBrokerBody; it drops ``topicSysFlag`` and ``order``)."""
        attrs = fastjson.dumps(self.attributes).decode()
        filter_type = self.topicFilterType.name
        queues = f"{self.readQueueNums} {self.writeQueueNums}"
        return f"{self.topicName} {queues} {self.perm} {filter_type} {attrs}"

    @classmethod
    def decode_line(cls, line: str) -> TopicConfig:
        """``TopicConfig.decode()``. Unparseable attributes are dropped, as Java does; a line with
        fewer than five fields is a BodyError (Java would fail on the null topic name)."""
        parts = line.split(" ")
        if len(parts) < 5 or not parts[0]:
            raise BodyError(f"TopicConfig line has {len(parts)} fields, needs 5: {line[:80]!r}")
        path = f"TopicConfig {parts[0]!r}"
        attributes: dict[str, str] = {}
        rest = " ".join(parts[5:]).strip()
        if rest:
            try:
                attributes = _STR_MAP_DECODE(fastjson.loads(rest), path)
            except BodyError:
                attributes = {}
        return cls(
            topicName=parts[0],
            readQueueNums=_I32_DECODE(parts[1], f"{path} readQueueNums"),
            writeQueueNums=_I32_DECODE(parts[2], f"{path} writeQueueNums"),
            perm=_I32_DECODE(parts[3], f"{path} perm"),
            topicFilterType=_FILTER_TYPE_DECODE(parts[4], f"{path} topicFilterType"),
            attributes=attributes,
        )


@dataclass(slots=True, kw_only=True)
class TopicConfigSerializeWrapper(JsonBody):
    """``body/TopicConfigSerializeWrapper``, with the fields of 5.x's
    ``TopicConfigAndMappingSerializeWrapper`` (static-topic mappings, kept as parsed JSON; None when
    absent, as in 4.x bodies)."""

    topicConfigTable: dict[str, TopicConfig] = field(default_factory=dict)
    dataVersion: DataVersion = field(default_factory=DataVersion)
    topicQueueMappingInfoMap: dict[str, Any] | None = None
    topicQueueMappingDetailMap: dict[str, Any] | None = None
    mappingDataVersion: DataVersion | None = None


@dataclass(slots=True, kw_only=True)
class ConsumerOffsetSerializeWrapper(JsonBody):
    """``body/ConsumerOffsetSerializeWrapper``, the body of GET_ALL_CONSUMER_OFFSET (43): every
    committed offset, keyed ``topic@group`` then queue id. Java answers with
    ``consumerOffset.json``'s content, whose queue ids fastjson writes as bare integers
    (``to_json(legacy=True)``). ``dataVersion`` is absent in 4.x bodies."""

    offsetTable: dict[str, dict[int, int]] = field(default_factory=dict)
    dataVersion: DataVersion | None = None


@dataclass(slots=True, kw_only=True)
class DelayOffsetSerializeWrapper(JsonBody):
    """``delayOffset.json``'s content, the body of GET_ALL_DELAY_OFFSET (45): delay level to
    the next SCHEDULE_TOPIC_XXXX queue offset to deliver (a String to Java's client, which
    writes it to the slave's file as is)."""

    offsetTable: dict[int, int] = field(default_factory=dict)


_I32 = struct.Struct(">i")
MAX_INFLATED = 256 * 1024 * 1024


@dataclass(slots=True, kw_only=True)
class RegisterBrokerBody(JsonBody):
    """``body/RegisterBrokerBody``, the body of REGISTER_BROKER: JSON, or with the header's
    ``compressed=true`` this layout, zlib-deflated as one stream (``DeflaterOutputStream``, level 9;
    all integers big-endian int32):

    ======================  ==========  ===================================================
    field                   size        content
    ======================  ==========  ===================================================
    dataVersionLen          4           length of the next field
    dataVersion             n           ``DataVersion`` JSON
    topicCount              4           number of topic entries
    per topic: len          4           length of the next field
    per topic: line         n           ``TopicConfig.encode()``: ``name read write perm
                                        filterType attributesJson`` (UTF-8, space-separated;
                                        no topicSysFlag, no order)
    filterServerListLen     4           length of the next field
    filterServerList        n           JSON array of strings
    mappingCount            4           (brokers >= V5_0_0) number of mapping entries
    per mapping: len, json  4 + n       ``TopicQueueMappingInfo`` JSON
    ======================  ==========  ===================================================

    The NameServer reads the mapping section only from brokers >= V5_0_0; :meth:`decode` reads it
    whenever the bytes are there.
    """

    topicConfigSerializeWrapper: TopicConfigSerializeWrapper = field(
        default_factory=TopicConfigSerializeWrapper
    )
    filterServerList: list[str] = field(default_factory=list)

    def encode(self, *, compressed: bool, legacy: bool = False) -> bytes:
        """The body as REGISTER_BROKER carries it (``compressed`` as in the request header)."""
        if not compressed:
            return self.to_json(legacy=legacy)
        wrapper = self.topicConfigSerializeWrapper
        parts: list[bytes] = []

        def chunk(data: bytes) -> None:
            parts.append(_I32.pack(len(data)))
            parts.append(data)

        chunk(wrapper.dataVersion.to_json())
        parts.append(_I32.pack(len(wrapper.topicConfigTable)))
        for tc in wrapper.topicConfigTable.values():
            chunk(tc.encode_line().encode("utf-8"))
        chunk(fastjson.dumps(self.filterServerList))
        mappings = wrapper.topicQueueMappingInfoMap or {}
        parts.append(_I32.pack(len(mappings)))
        for info in mappings.values():
            chunk(fastjson.dumps(info))
        return zlib.compress(b"".join(parts), 9)

    @classmethod
    def decode(cls, data: bytes, *, compressed: bool, max_inflated: int = MAX_INFLATED) -> RegisterBrokerBody:
        """Parse either form; a compressed body may inflate to at most ``max_inflated`` bytes."""
        if not compressed:
            return cls.from_json(data)
        try:
            inflater = zlib.decompressobj()
            raw = inflater.decompress(data, max_inflated + 1)
        except zlib.error as e:
            raise BodyError(f"compressed RegisterBrokerBody: {e}") from None
        if len(raw) > max_inflated:
            raise BodyError(f"compressed RegisterBrokerBody inflates beyond {max_inflated} bytes")
        return cls._decode_inflated(raw)

    @classmethod
    def _decode_inflated(cls, raw: bytes) -> RegisterBrokerBody:
        pos = 0
        end = len(raw)

        def read_int(what: str) -> int:
            nonlocal pos
            if end - pos < 4:
                raise BodyError(f"compressed RegisterBrokerBody: truncated at {what} (offset {pos})")
            (n,) = _I32.unpack_from(raw, pos)
            pos += 4
            return int(n)

        def read_chunk(what: str) -> bytes:
            nonlocal pos
            n = read_int(f"{what} length")
            if n < 0 or n > end - pos:
                raise BodyError(
                    f"compressed RegisterBrokerBody: {what} length {n} at offset {pos - 4} "
                    f"overruns the {end}-byte body"
                )
            pos += n
            return raw[pos - n : pos]

        def text(b: bytes, what: str) -> str:
            try:
                return b.decode("utf-8")
            except UnicodeDecodeError:
                raise BodyError(f"compressed RegisterBrokerBody: {what} is not UTF-8") from None

        version = DataVersion.from_json(read_chunk("dataVersion"))
        count = read_int("topic count")
        if count < 0 or count * 4 > end - pos:
            raise BodyError(f"compressed RegisterBrokerBody: {count} topics cannot fit in {end - pos} bytes")
        table: dict[str, TopicConfig] = {}
        for i in range(count):
            tc = TopicConfig.decode_line(text(read_chunk(f"topic {i}"), f"topic {i}"))
            table[tc.topicName] = tc
        filters_obj = fastjson.loads(read_chunk("filterServerList"))
        filters: list[str] = _STR_LIST_DECODE(filters_obj, "RegisterBrokerBody.filterServerList")
        mappings: dict[str, Any] | None = None
        if end - pos >= 4:
            n = read_int("mapping count")
            if n < 0 or n * 4 > end - pos:
                raise BodyError(
                    f"compressed RegisterBrokerBody: {n} mappings cannot fit in {end - pos} bytes"
                )
            mappings = {}
            for i in range(n):
                info = fastjson.loads(read_chunk(f"mapping {i}"))
                topic = info.get("topic") if isinstance(info, dict) else None
                mappings[topic if isinstance(topic, str) else str(i)] = info
        wrapper = TopicConfigSerializeWrapper(
            topicConfigTable=table, dataVersion=version, topicQueueMappingInfoMap=mappings or None
        )
        return cls(topicConfigSerializeWrapper=wrapper, filterServerList=filters)


# ------------------------------------------------------------------------------------------ heartbeat


@dataclass(slots=True, kw_only=True)
class SubscriptionData(JsonBody):
    """``heartbeat/SubscriptionData``. ``codeSet`` holds Java ``String.hashCode()`` of each tag;
    ``subString`` looks like ``"TagA || TagB"`` or ``"*"``; ``expressionType`` is TAG or SQL92."""

    topic: str
    subString: str | None = None
    classFilterMode: bool = False
    tagsSet: set[str] = field(default_factory=set)
    codeSet: set[Int32] = field(default_factory=set)
    subVersion: Int64 = field(default_factory=_now_ms)
    expressionType: str = "TAG"
    filterClassSource: str | None = None

    SUB_ALL: ClassVar[str] = "*"

    @classmethod
    def from_expression(cls, topic: str, expression: str | None, expression_type: str = "TAG",
                        sub_version: int | None = None) -> SubscriptionData:
        """Java's ``FilterAPI.build``: ``"*"``, empty or None subscribe to every tag; otherwise
        ``"TagA || TagB"`` gives the tags and their hash codes."""
        sub = cls(topic=topic, subString=cls.SUB_ALL, expressionType=expression_type or "TAG")
        if sub_version is not None:
            sub.subVersion = sub_version
        text = (expression or "").strip()
        if text and text != cls.SUB_ALL and sub.expressionType == "TAG":
            for tag in text.split("||"):
                tag = tag.strip()
                if tag:
                    sub.tagsSet.add(tag)
                    sub.codeSet.add(java_string_hash(tag))
            sub.subString = text
        elif text and sub.expressionType != "TAG":
            sub.subString = text
        return sub

    @property
    def matches_all(self) -> bool:
        return self.expressionType == "TAG" and (
            not self.subString or self.subString.strip() == self.SUB_ALL)

    def with_codes(self) -> SubscriptionData:
        """This subscription with ``codeSet`` filled from ``subString`` when a client sent only
        the string (the C++ client does)."""
        if self.codeSet or self.matches_all or self.expressionType != "TAG":
            return self
        built = SubscriptionData.from_expression(self.topic, self.subString, self.expressionType,
                                                 self.subVersion)
        return dataclasses.replace(self, tagsSet=built.tagsSet, codeSet=built.codeSet)


@dataclass(slots=True, kw_only=True)
class ConsumerData(JsonBody):
    """``heartbeat/ConsumerData``: one consumer group of a client."""

    groupName: str
    consumeType: ConsumeType | None = None
    messageModel: MessageModel | None = None
    consumeFromWhere: ConsumeFromWhere | None = None
    subscriptionDataSet: list[SubscriptionData] = field(default_factory=list)
    unitMode: bool = False


@dataclass(slots=True, kw_only=True)
class ProducerData(JsonBody):
    """``heartbeat/ProducerData``."""

    groupName: str


@dataclass(slots=True, kw_only=True)
class HeartbeatData(JsonBody):
    """``heartbeat/HeartbeatData``, the body of HEART_BEAT (34)."""

    clientID: str
    producerDataSet: list[ProducerData] = field(default_factory=list)
    consumerDataSet: list[ConsumerData] = field(default_factory=list)
    heartbeatFingerprint: Int32 = 0
    withoutSub: bool = False


# ---------------------------------------------------------------------------------------- lock, groups


@dataclass(slots=True, kw_only=True)
class LockBatchRequestBody(JsonBody):
    """``body/LockBatchRequestBody`` (LOCK_BATCH_MQ, 41)."""

    consumerGroup: str | None = None
    clientId: str | None = None
    onlyThisBroker: bool = False
    mqSet: set[MessageQueue] = field(default_factory=set)


@dataclass(slots=True, kw_only=True)
class LockBatchResponseBody(JsonBody):
    """``body/LockBatchResponseBody``: the queues the broker locked for the client."""

    lockOKMQSet: set[MessageQueue] = field(default_factory=set)


@dataclass(slots=True, kw_only=True)
class UnlockBatchRequestBody(JsonBody):
    """``body/UnlockBatchRequestBody`` (UNLOCK_BATCH_MQ, 42)."""

    consumerGroup: str | None = None
    clientId: str | None = None
    onlyThisBroker: bool = False
    mqSet: set[MessageQueue] = field(default_factory=set)


@dataclass(slots=True, kw_only=True)
class GetConsumerListByGroupResponseBody(JsonBody):
    """``header/GetConsumerListByGroupResponseBody`` (GET_CONSUMER_LIST_BY_GROUP's reply)."""

    consumerIdList: list[str] = field(default_factory=list)
