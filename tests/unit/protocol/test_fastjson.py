"""fastjson-compatible JSON: orjson for standard JSON, a bounded lenient parser for fastjson's forms."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.common.errors import BodyError
from rocketlite.protocol import fastjson
from rocketlite.protocol.fastjson import ObjectKey, dumps, freeze, loads

i64 = st.integers(-(2**63), 2**63 - 1)
scalars = st.one_of(
    st.none(), st.booleans(), i64, st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20)
)


def json_values(keys: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        scalars,
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)),
        max_leaves=20,
    )


# ------------------------------------------------------------------------------------------- reading


def test_standard_json_is_plain() -> None:
    assert loads(b'{"a":[1,2.5,"x",null,true,false],"b":{"0":"y"}}') == {
        "a": [1, 2.5, "x", None, True, False],
        "b": {"0": "y"},
    }
    assert loads('{"k": "v"}') == {"k": "v"}
    assert loads(bytearray(b"[1]")) == [1]
    assert loads(memoryview(b"[1]")) == [1]


def test_bare_integer_keys() -> None:
    # PROTOCOL.md 2.3 quirk 1: fastjson writes HashMap<Long,String> keys unquoted
    assert loads(b'{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"}}') == {
        "brokerAddrs": {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}
    }
    assert loads(b"{-1:2, 10 : 3}") == {-1: 2, 10: 3}
    assert loads(b'{1.5:"f",true:1,false:0,null:"n"}') == {1.5: "f", True: 1, False: 0, None: "n"}


def test_object_keys_from_protocol_md() -> None:
    # PROTOCOL.md 2.3 quirk 3, verbatim
    data = b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:5}}'
    parsed = loads(data)
    ((key, value),) = parsed["offsetTable"].items()
    assert value == 5
    assert isinstance(key, ObjectKey)
    assert key == ObjectKey((("brokerName", "b"), ("queueId", 0), ("topic", "t")))
    assert key.to_dict() == {"brokerName": "b", "queueId": 0, "topic": "t"}
    # members are sorted, so the order on the wire does not matter
    assert key == ObjectKey.from_mapping({"topic": "t", "queueId": 0, "brokerName": "b"})
    assert hash(key) == hash(ObjectKey.from_mapping({"queueId": 0, "topic": "t", "brokerName": "b"}))
    assert parsed["offsetTable"][ObjectKey.from_mapping({"topic": "t", "brokerName": "b", "queueId": 0})] == 5


def test_nested_and_array_keys_are_frozen() -> None:
    parsed = loads(b'{{"a":{"b":[1,{"c":2}]},"z":[]}:1, [1,[2]]:2, {}:3, []:4}')
    keys = list(parsed)
    assert keys[0] == ObjectKey.from_mapping({"a": {"b": [1, {"c": 2}]}, "z": []})
    inner = keys[0].to_dict()["a"]
    assert isinstance(inner, ObjectKey)
    assert inner.to_dict()["b"] == (1, ObjectKey((("c", 2),)))
    assert keys[1] == (1, (2,))
    assert keys[2] == ObjectKey(()) and keys[3] == ()
    assert ObjectKey(()) != () and ObjectKey((("a", 1),)) != (("a", 1),)
    assert list(parsed.values()) == [1, 2, 3, 4]


def test_values_inside_object_keys_stay_values() -> None:
    # only keys are frozen; an object used as a value next to an object key stays a dict
    parsed = loads(b'{{"k":1}:{"v":[1,2]}}')
    assert parsed == {ObjectKey((("k", 1),)): {"v": [1, 2]}}


def test_freeze() -> None:
    assert freeze({"b": [1, {"x": 1}], "a": 2}) == ObjectKey((("a", 2), ("b", (1, ObjectKey((("x", 1),))))))
    assert freeze(5) == 5
    assert repr(ObjectKey.from_mapping({"a": 1})) == "ObjectKey({'a': 1})"


@given(json_values(st.text(max_size=10)))
def test_lenient_parser_matches_json_on_standard_input(value: Any) -> None:
    text = json.dumps(value)
    assert fastjson._parse_lenient(text, fastjson.MAX_DEPTH) == json.loads(text)
    spaced = json.dumps(value, indent=2)
    assert fastjson._parse_lenient(spaced, fastjson.MAX_DEPTH) == json.loads(spaced)


def test_lenient_strings_accept_escapes_and_raw_control_characters() -> None:
    assert loads('{1:"a\\u0001b\\n\\"q\\"","x":"\x02"}') == {1: 'a\x01b\n"q"', "x": "\x02"}


# ------------------------------------------------------------------------------------------- writing


def test_dumps_standard_sorts_and_quotes_integer_keys() -> None:
    assert dumps({"b": 1, "a": {0: "x", 1: "y"}}) == b'{"a":{"0":"x","1":"y"},"b":1}'


def test_dumps_legacy_writes_integer_keys_bare_in_numeric_order() -> None:
    obj = {"brokerAddrs": {10: "c", 0: "a", 2: "b"}, "a": ["x"], "z": {"0": "quoted"}}
    assert dumps(obj, legacy=True) == b'{"a":["x"],"brokerAddrs":{0:"a",2:"b",10:"c"},"z":{"0":"quoted"}}'


def test_dumps_object_keys_sets_and_big_ints() -> None:
    key = ObjectKey.from_mapping({"topic": "t", "queueId": 0, "brokerName": "b"})
    expected = b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:5}}'
    assert dumps({"offsetTable": {key: 5}}) == expected
    assert dumps({"offsetTable": {key: 5}}, legacy=True) == expected
    assert dumps({"s": {3, 1, 2}}) == b'{"s":[1,2,3]}'
    assert dumps({"s": frozenset({"b", "a"})}) == b'{"s":["a","b"]}'
    assert dumps([2**70, -(2**70)]) == b"[1180591620717411303424,-1180591620717411303424]"
    assert dumps({(1, 2): "t"}) == b'{[1,2]:"t"}'
    assert dumps({True: 1, None: 2}, legacy=True) == b"{null:2,true:1}"
    assert (
        dumps({1.5: 1, "x": [None, 1.25, "é\u0001"]}, legacy=True)
        == '{"x":[null,1.25,"é\\u0001"],1.5:1}'.encode()
    )


def test_dumps_rejects_what_json_cannot_hold() -> None:
    with pytest.raises(TypeError):
        dumps({"a": object()})
    with pytest.raises(TypeError):
        dumps({object(): 1}, legacy=True)


@given(json_values(st.text(max_size=10)))
def test_round_trip_standard(value: Any) -> None:
    assert loads(dumps(value)) == value
    assert loads(dumps(value, legacy=True)) == value


@given(json_values(st.one_of(st.text(max_size=10), i64)))
def test_round_trip_legacy_keeps_integer_keys(value: Any) -> None:
    assert loads(dumps(value, legacy=True)) == value


@given(json_values(st.integers(-1000, 1000)))
def test_standard_form_turns_integer_keys_into_strings(value: Any) -> None:
    def stringify(v: Any) -> Any:
        if isinstance(v, dict):
            return {str(k): stringify(x) for k, x in v.items()}
        if isinstance(v, list):
            return [stringify(x) for x in v]
        return v

    assert loads(dumps(value)) == stringify(value)


object_keys = st.dictionaries(
    st.sampled_from(["brokerName", "queueId", "topic"]), st.one_of(st.text(max_size=5), i64), min_size=1
).map(ObjectKey.from_mapping)


@given(st.dictionaries(object_keys, scalars, max_size=5), st.booleans())
def test_round_trip_object_keys(table: dict[ObjectKey, Any], legacy: bool) -> None:
    assert loads(dumps({"offsetTable": table}, legacy=legacy)) == {"offsetTable": table}


# ----------------------------------------------------------------------------------- hostile input


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"   ",
        b"{",
        b"[1,",
        b"[1 2]",
        b'{"a" 1}',
        b'{"a":1,}',
        b"{1:}",
        b"{:1}",
        b"nul",
        b"tru",
        b'"abc',
        b'{"a":1}x',
        b"[1]]",
        b"\xff\xfe",
        b"{a:1}",
        b"'a'",
        b"01",
        b"-",
        b"NaN",
        b'{"a":"\\x"}',
        b"{{1:2}}",
    ],
)
def test_malformed_json_raises_body_error(data: bytes) -> None:
    with pytest.raises(BodyError):
        loads(data)


@pytest.mark.parametrize("opener", [b"[", b'{"a":', b"{", b"{1:{"])
def test_deep_nesting_is_a_body_error_not_recursion(opener: bytes) -> None:
    with pytest.raises(BodyError, match=r"nested deeper|depth|malformed"):
        loads(opener * 200_000)


def test_depth_limit_is_configurable() -> None:
    assert loads(b"{1:" * 5 + b"0" + b"}" * 5, max_depth=5) == {1: {1: {1: {1: {1: 0}}}}}
    with pytest.raises(BodyError, match="nested deeper than 4"):
        loads(b"{1:" * 5 + b"0" + b"}" * 5, max_depth=4)


def test_size_limit() -> None:
    with pytest.raises(BodyError, match="exceeds the limit"):
        loads(b"[" + b"1," * 100 + b"1]", max_size=100)
    with pytest.raises(BodyError, match="exceeds the limit"):
        loads(b" " * (fastjson.MAX_SIZE + 1))


@given(st.binary(max_size=200))
def test_random_bytes_parse_or_raise_body_error(data: bytes) -> None:
    with contextlib.suppress(BodyError):
        loads(data)


@given(st.text(alphabet='{}[]:,"0123 -.etrufalsn\\xé', max_size=80))
def test_random_json_like_text_parses_or_raises_body_error(text: str) -> None:
    with contextlib.suppress(BodyError):
        loads(text)
