"""Hypothesis strategies shared by the tests of several layers."""

from __future__ import annotations

import orjson
from hypothesis import strategies as st

from rocketlite.formats import message_record as rec
from rocketlite.formats.properties import encode_properties
from rocketlite.protocol.codes import LanguageCode, SerializeType
from rocketlite.protocol.command import BINARY_FIXED, FRAME_PREFIX, RemotingCommand

i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
hosts = st.one_of(st.binary(min_size=4, max_size=4), st.binary(min_size=16, max_size=16))
topics = st.text(alphabet="abcXYZ019_-%|", min_size=1, max_size=300)


@st.composite
def records(draw: st.DrawFn) -> rec.MessageRecord:
    born = draw(hosts)
    store = draw(hosts)
    sys_flag = draw(st.integers(0, 0xF)) | (rec.SYSFLAG_BORNHOST_V6 if len(born) == 16 else 0)
    sys_flag |= rec.SYSFLAG_STOREHOST_V6 if len(store) == 16 else 0
    body = draw(st.binary(max_size=300))
    topic = draw(topics)
    props = encode_properties(draw(st.dictionaries(
        st.text(alphabet="ABCKEYS_", min_size=1, max_size=8),
        st.text(alphabet="xyz 019", min_size=1, max_size=20), max_size=4)))
    m = rec.MessageRecord(
        total_size=rec.record_size(len(body), len(topic.encode()), len(props.encode()), sys_flag),
        magic=rec.MAGIC_V2 if len(topic) > 127 else rec.MAGIC_V1,
        body_crc=rec.body_crc(body),
        queue_id=draw(st.integers(0, 1000)), flag=draw(i32), queue_offset=draw(i64),
        commit_log_offset=draw(i64), sys_flag=sys_flag, born_timestamp=draw(i64),
        born_host=born, born_port=draw(i32), store_timestamp=draw(i64), store_host=store,
        store_port=draw(i32), reconsume_times=draw(i32), prepared_transaction_offset=draw(i64),
        body=body, topic=topic, properties_text=props,
    )
    return m


# -- Remoting commands and headers ------------------------------------------------------------

INT32 = st.integers(-(2**31), 2**31 - 1)
INT16 = st.integers(-(2**15), 2**15 - 1)
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)  # no lone surrogates: not UTF-8
LANGUAGES = st.sampled_from([m.name for m in LanguageCode])


@st.composite
def commands(draw: st.DrawFn, stype: int) -> RemotingCommand:
    binary = stype == SerializeType.ROCKETMQ
    return RemotingCommand(
        code=draw(INT16 if binary else INT32),
        language=draw(LANGUAGES),
        version=draw(INT16 if binary else INT32),
        opaque=draw(INT32),
        flag=draw(INT32),
        remark=draw(st.none() | TEXT),
        ext_fields=draw(st.dictionaries(TEXT, TEXT, max_size=8)),
        body=draw(st.binary(max_size=300)),
        serialize_type=stype,
    )


def nested(depth: int, leaf: str = "1", kind: str = "object") -> str:
    if kind == "object":
        return '{"a":' * depth + leaf + "}" * depth
    return "[" * depth + leaf + "]" * depth


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=30,
)


def deep_json(draw: st.DrawFn) -> str:
    depth = draw(st.integers(1, 20) | st.integers(250, 1100))
    leaf = orjson.dumps(draw(JSON), option=orjson.OPT_NON_STR_KEYS).decode() \
        if draw(st.booleans()) else "1"
    return nested(depth, leaf, draw(st.sampled_from(["object", "array"])))


@st.composite
def json_headers(draw: st.DrawFn) -> bytes:
    """A JSON header: mostly well formed, with any value in any field, nested or not."""
    fields: dict[str, str] = {}
    for name in ("code", "opaque", "flag", "version", "language", "remark", "extFields"):
        choice = draw(st.sampled_from(["plain", "plain", "plain", "omit", "json", "deep"]))
        if choice == "plain":
            fields[name] = {"code": "10", "opaque": "7", "flag": "0", "version": "1",
                            "language": '"JAVA"', "remark": '"r"', "extFields": '{"a":"b"}'}[name]
        elif choice == "json":
            fields[name] = orjson.dumps(draw(JSON), option=orjson.OPT_NON_STR_KEYS).decode()
        elif choice == "deep":
            fields[name] = deep_json(draw)
    if "extFields" not in fields and draw(st.booleans()):
        fields["extFields"] = '{"x":' + deep_json(draw) + "}"
    return ("{" + ",".join(f'"{k}":{v}' for k, v in fields.items()) + "}").encode()


@st.composite
def ext_limit_frames(draw: st.DrawFn) -> tuple[bytes, int]:
    """A whole frame and a ``maxExtFields`` its ext fields are at, just below or just above:
    requests (two-way, oneway) and responses, in both serialize types; a JSON header's values may
    be numbers, booleans or nulls the decoders coerce (a null drops its key, so counts the header
    does not have), a ROCKETMQ header's keys may repeat (the later value wins: one field)."""
    limit = draw(st.integers(0, 6))
    n = max(0, limit + draw(st.integers(-1, 2)))
    flag = draw(st.sampled_from([0, 1, 2, 3]))
    opaque = draw(i32)
    if draw(st.booleans()):  # JSON, hand-written for the unusual values
        values = st.one_of(TEXT, TEXT, st.integers(-9, 9), st.booleans(), st.none())
        ext = {f"k{i}": draw(values) for i in range(n)}
        header = orjson.dumps({"code": 10, "opaque": opaque, "flag": flag, "extFields": ext})
        stype = SerializeType.JSON
    else:
        keys = draw(st.lists(st.sampled_from("abcdefghi"), min_size=n, max_size=n))
        entries = b"".join(len(k).to_bytes(2, "big") + k.encode() + len(v).to_bytes(4, "big") + v
                           for k in keys for v in [draw(TEXT).encode()])
        header = (BINARY_FIXED.pack(10, 0, 0, opaque, flag) + b"\x00\x00\x00\x00"  # no remark
                  + len(entries).to_bytes(4, "big") + entries)
        stype = SerializeType.ROCKETMQ
    body = draw(st.binary(max_size=8))
    return FRAME_PREFIX.pack(4 + len(header) + len(body), (stype << 24) | len(header)) + header \
        + body, limit
