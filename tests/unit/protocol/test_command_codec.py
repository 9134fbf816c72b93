"""RemotingCommand encoding and decode_frame: round trips, what real clients send, and bad headers."""

from __future__ import annotations

import struct

import orjson
import pytest
from hypothesis import given

from rocketlite.common.errors import FormatError, FrameTooLargeError, ProtocolError
from rocketlite.protocol.codes import CURRENT_VERSION, RequestCode, ResponseCode, SerializeType
from rocketlite.protocol.command import RemotingCommand, decode_frame
from strategies import commands


def json_frame(header: bytes | str, body: bytes = b"", stype: int = 0) -> bytes:
    """A frame without its length field, around a hand-written header."""
    h = header.encode() if isinstance(header, str) else header
    return struct.pack(">I", (stype << 24) | len(h)) + h + body


def roundtrip(cmd: RemotingCommand) -> RemotingCommand:
    frame = cmd.encode()
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    return decode_frame(frame[4:])


# -- round trips -------------------------------------------------------------------------------


@given(commands(SerializeType.JSON))
def test_json_roundtrip(cmd: RemotingCommand) -> None:
    assert roundtrip(cmd) == cmd


@given(commands(SerializeType.ROCKETMQ))
def test_binary_roundtrip(cmd: RemotingCommand) -> None:
    expected = RemotingCommand(
        cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag,
        cmd.remark or None,  # a zero-length remark means null on the wire
        cmd.ext_fields, cmd.body, cmd.serialize_type,
    )  # fmt: skip
    assert roundtrip(cmd) == expected


@given(commands(SerializeType.JSON) | commands(SerializeType.ROCKETMQ))
def test_encode_parts_join_to_encode(cmd: RemotingCommand) -> None:
    head, body = cmd.encode_parts()
    assert body is cmd.body  # handed over, not copied
    assert head + body == cmd.encode()


def test_non_ascii_and_empty_values() -> None:
    cmd = RemotingCommand.request(10, {"topic": "主题-ü", "": "", "k": "é\x00\n\"\\"}, body=b"\x00\xff")
    cmd.remark = "备注 ✓"
    assert roundtrip(cmd) == cmd
    cmd.serialize_type = SerializeType.ROCKETMQ
    assert roundtrip(cmd) == cmd


# -- constructors -----------------------------------------------------------------------------


def test_request_and_response() -> None:
    req = RemotingCommand.request(RequestCode.PULL_MESSAGE, {"topic": "T"}, b"b")
    assert (req.code, req.flag, req.opaque, req.version) == (11, 0, 0, CURRENT_VERSION)
    assert req.language == "PYTHON"
    assert type(req.code) is int and req.serialize_type == SerializeType.JSON
    assert not req.is_response and not req.is_oneway
    assert RemotingCommand.request(40, oneway=True).is_oneway
    assert RemotingCommand.request(40).ext_fields == {}

    req.opaque = 77
    req.serialize_type = SerializeType.ROCKETMQ
    resp = req.response(ResponseCode.PULL_NOT_FOUND, "no new message", {"nextBeginOffset": "5"}, b"x")
    assert resp.is_response and not resp.is_oneway
    assert (resp.code, resp.opaque, resp.flag, resp.remark) == (19, 77, 1, "no new message")
    assert (resp.language, resp.version, resp.serialize_type) == ("JAVA", 479, SerializeType.ROCKETMQ)
    assert resp.ext_fields == {"nextBeginOffset": "5"} and resp.body == b"x"
    plain = req.response()
    assert (plain.code, plain.remark, plain.ext_fields, plain.body) == (0, None, {}, b"")


def test_repr_shortens_the_body() -> None:
    text = repr(RemotingCommand.request(10, body=b"x" * 100_000))
    assert len(text) < 400 and "100000 bytes" in text


# -- the JSON header as clients write and read it ---------------------------------------------


def test_java_request_from_protocol_doc() -> None:
    header = (
        '{"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":3,'
        '"serializeTypeCurrentRPC":"JSON","version":479}'
    )
    cmd = decode_frame(json_frame(header))
    assert cmd == RemotingCommand(
        code=105, language="JAVA", version=479, opaque=3, flag=0, remark=None,
        ext_fields={"topic": "T"}, body=b"", serialize_type=SerializeType.JSON,
    )  # fmt: skip
    # Java's fastjson writes exactly these bytes for this command (nulls omitted, keys sorted).
    assert cmd.encode()[8:] == header.encode()


def test_response_json_matches_the_doc_form() -> None:
    req = decode_frame(json_frame('{"code":310,"opaque":9,"flag":0,"language":"JAVA","version":121}'))
    resp = req.response(0, ext_fields={"msgId": "0A", "queueId": "1", "queueOffset": "7"})
    frame = resp.encode()
    assert frame[4:8] == struct.pack(">I", len(frame) - 8)  # type byte 0: ali-ons reads it unmasked
    assert frame[8:] == (
        b'{"code":0,"extFields":{"msgId":"0A","queueId":"1","queueOffset":"7"},"flag":1,"language":"JAVA",'
        b'"opaque":9,"serializeTypeCurrentRPC":"JSON","version":479}'
    )
    # The doc's working response (extFields last) decodes too.
    doc = (
        '{"code":0,"flag":1,"language":"JAVA","opaque":9,"serializeTypeCurrentRPC":"JSON","version":479,'
        '"extFields":{"msgId":"0A"}}'
    )
    assert decode_frame(json_frame(doc)).ext_fields == {"msgId": "0A"}


def test_remark_written_when_set_and_empty_ext_omitted() -> None:
    resp = RemotingCommand.request(1).response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "nope")
    assert orjson.loads(resp.encode()[8:]) == {
        "code": 3, "flag": 1, "language": "JAVA", "opaque": 0, "remark": "nope",
        "serializeTypeCurrentRPC": "JSON", "version": 479,
    }  # fmt: skip


def test_ali_ons_numbers_and_booleans_become_strings() -> None:
    header = (
        '{"code":310,"language":"JAVA","opaque":12,"flag":0,"version":121,'
        '"extFields":{"a":"PID","e":0,"k":false,"m":true,"commitOffset":-1,"g":1700000000123,"x":null}}'
    )
    cmd = decode_frame(json_frame(header, b"body"))
    assert cmd.ext_fields == {
        "a": "PID", "e": "0", "k": "false", "m": "true", "commitOffset": "-1", "g": "1700000000123",
    }  # fmt: skip
    assert (cmd.version, cmd.body, cmd.remark) == (121, b"body", None)


def test_cpp_client_header() -> None:
    # jsoncpp's FastWriter: remark always present (""), mixed string/number values, trailing newline.
    header = (
        '{"code":10,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"","batch":"1",'
        '"commitOffset":"-1","queueId":0,"unitMode":"0"},"flag":0,"language":"CPP","opaque":7,'
        '"remark":"","version":63}\n'
    )
    cmd = decode_frame(json_frame(header))
    assert cmd.language == "CPP" and cmd.remark == "" and cmd.version == 63
    assert cmd.ext_fields["queueId"] == "0" and cmd.ext_fields["batch"] == "1"
    assert cmd.ext_fields["unitMode"] == "0" and cmd.ext_fields["AccessKey"] == ""


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("5", "5"), (5, "5"), (5.0, "5"), (-0.0, "0"), (1.5, "1.5"), (True, "true"), (False, "false"),
        ({"a": [1, "b"]}, '{"a":[1,"b"]}'), ([], "[]"),
    ],
)  # fmt: skip
def test_ext_value_coercion(value: object, expected: str) -> None:
    header = orjson.dumps({"code": 1, "opaque": 2, "extFields": {"v": value}})
    assert decode_frame(json_frame(header)).ext_fields == {"v": expected}


@pytest.mark.parametrize(
    ("language", "expected"),
    [
        ('"JAVA"', "JAVA"), ('"CPP"', "CPP"), ('"NODE_JS"', "NODE_JS"), ("0", "JAVA"), ("1", "CPP"),
        ("3", "PYTHON"), ("9", "GO"), ("12", "RUST"), ("13", "NODE_JS"), ("14", "OTHER"), ("-1", "OTHER"),
        ('"KLINGON"', "OTHER"), ('"java"', "OTHER"), ("null", "OTHER"), ("true", "OTHER"), ("[1]", "OTHER"),
    ],
)  # fmt: skip
def test_language_name_or_ordinal(language: str, expected: str) -> None:
    cmd = decode_frame(json_frame(f'{{"code":1,"opaque":2,"language":{language}}}'))
    assert cmd.language == expected


def test_defaults_for_missing_fields() -> None:
    cmd = decode_frame(json_frame('{"code":34,"opaque":1}', b"{}"))
    assert (cmd.language, cmd.version, cmd.flag, cmd.remark, cmd.ext_fields) == ("JAVA", 0, 0, None, {})
    assert cmd.body == b"{}"


@pytest.mark.parametrize(("remark", "expected"), [("", None), ('"remark":null,', None), ('"remark":"",', "")])
def test_remark_absent_null_or_empty(remark: str, expected: str | None) -> None:
    assert decode_frame(json_frame(f'{{{remark}"code":0,"opaque":1,"flag":1}}')).remark == expected


def test_serialize_type_field_is_ignored() -> None:
    header = '{"code":1,"opaque":2,"serializeTypeCurrentRPC":"ROCKETMQ"}'
    assert decode_frame(json_frame(header)).serialize_type == SerializeType.JSON


def test_non_string_ext_values_are_written_as_strings() -> None:
    ext = {"queueId": 3, "flag": True, "gone": None, 7: "seven", "": 1.0}
    cmd = RemotingCommand.request(10, ext)  # type: ignore[arg-type]
    expected = {"queueId": "3", "flag": "true", "7": "seven", "": "1"}
    assert orjson.loads(cmd.encode()[8:])["extFields"] == expected
    cmd.serialize_type = SerializeType.ROCKETMQ
    assert roundtrip(cmd).ext_fields == expected
    only_key = RemotingCommand.request(10, {7: "seven"})  # type: ignore[dict-item]
    assert roundtrip(only_key).ext_fields == {"7": "seven"}


def test_memoryview_and_bytearray_frames() -> None:
    cmd = RemotingCommand.request(10, {"a": "b"}, b"body")
    inner = cmd.encode()[4:]
    assert decode_frame(memoryview(inner)) == cmd == decode_frame(bytearray(inner))
    cmd.serialize_type = SerializeType.ROCKETMQ
    inner = cmd.encode()[4:]
    assert decode_frame(memoryview(inner)) == cmd == decode_frame(bytearray(inner))


# -- bad frames -------------------------------------------------------------------------------


def test_error_hierarchy() -> None:
    assert issubclass(ProtocolError, FormatError)
    assert issubclass(FrameTooLargeError, ProtocolError)
    assert ProtocolError("x").opaque is None


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (b"", "too short"),
        (b"\x00\x00\x01", "too short"),
        (struct.pack(">I", 10) + b"{}", "header length 10 exceeds"),
        (json_frame(b"{}", stype=2), "unknown serialize type 2"),
        (json_frame(b"{}", stype=0xFF), "unknown serialize type 255"),
        (json_frame(b""), "not valid UTF-8 JSON"),
        (json_frame(b'{"code":1,"opaque":2,"remark":"\xff"}'), "not valid UTF-8 JSON"),
        (json_frame(b'{"code":1,"opaque":2,"remark":"\\ud800"}'), "not valid UTF-8 JSON"),
        (json_frame(b"{code:1,opaque:2}"), "not valid UTF-8 JSON"),
        (json_frame(b'{"code":1,"opaque":2'), "not valid UTF-8 JSON"),
        (json_frame(b"\xef\xbb\xbf{}"), "not valid UTF-8 JSON"),
        (json_frame(b"[1,2]"), "list, not an object"),
        (json_frame(b'"text"'), "str, not an object"),
        (json_frame(b"null"), "NoneType, not an object"),
        (json_frame(b'{"code":1}'), "no int32 opaque: None"),
        (json_frame(b'{"code":1,"opaque":"2"}'), "no int32 opaque: '2'"),
        (json_frame(b'{"code":1,"opaque":2.0}'), "no int32 opaque"),
        (json_frame(b'{"code":1,"opaque":true}'), "no int32 opaque"),
        (json_frame(b'{"code":1,"opaque":2147483648}'), "no int32 opaque"),
        (json_frame(b'{"code":1,"opaque":2,"flag":"0"}'), "non-int32 flag"),
    ],
)
def test_bad_frames_without_opaque(frame: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message) as info:
        decode_frame(frame)
    assert info.value.opaque is None
    assert type(info.value) is ProtocolError


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ('{"opaque":42}', "no int32 code: None"),
        ('{"opaque":42,"code":"105"}', "no int32 code: '105'"),
        ('{"opaque":42,"code":105.5}', "no int32 code"),
        ('{"opaque":42,"code":false}', "no int32 code"),
        ('{"opaque":42,"code":-2147483649}', "no int32 code"),
        ('{"opaque":42,"code":1,"version":"479"}', "non-int32 version"),
        ('{"opaque":42,"code":1,"extFields":[]}', "extFields is a list"),
        ('{"opaque":42,"code":1,"extFields":"a=b"}', "extFields is a str"),
    ],
)
def test_bad_request_headers_carry_the_opaque(header: str, message: str) -> None:
    with pytest.raises(ProtocolError, match=message) as info:
        decode_frame(json_frame(header))
    assert info.value.opaque == 42


@pytest.mark.parametrize("flag", [1, 2, 3])
def test_no_opaque_to_answer_for_responses_and_oneway(flag: int) -> None:
    with pytest.raises(ProtocolError) as info:
        decode_frame(json_frame(f'{{"opaque":42,"flag":{flag}}}'))
    assert info.value.opaque is None


def _binary(fixed_flag: int = 0, rest: bytes = struct.pack(">ii", 0, 0)) -> bytes:
    return struct.pack(">hbhii", 10, 1, 63, 42, fixed_flag) + rest


def _entry(key: bytes, value: bytes) -> bytes:
    return struct.pack(">h", len(key)) + key + struct.pack(">i", len(value)) + value


def _ext(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return struct.pack(">i", len(body)) + body


@pytest.mark.parametrize(
    ("rest", "message"),
    [
        (b"", "ends before its remark length"),
        (b"\x00\x00", "ends before its remark length"),
        (struct.pack(">i", 5) + b"abc", "remark length 5 overruns"),
        (struct.pack(">i", -1), "remark length -1 overruns"),
        (struct.pack(">i", 0), "ends before its ext fields length"),
        (struct.pack(">ii", 0, 1), "ext fields length 1 overruns"),
        (struct.pack(">ii", 0, -6), "ext fields length -6 overruns"),
        (struct.pack(">i", 0) + _ext(_entry(b"k", b"v")) + b"\x00", "1 bytes after its ext fields"),
        (struct.pack(">i", 0) + _ext(b"\x00\x01k"), "shorter than its two lengths"),
        (struct.pack(">i", 0) + _ext(struct.pack(">h", 9) + b"k" + struct.pack(">i", 0)), "key length 9"),
        (struct.pack(">i", 0) + _ext(struct.pack(">h", -1) + b"k" + struct.pack(">i", 0)), "key length -1"),
        (struct.pack(">i", 0) + _ext(struct.pack(">h", 1) + b"k" + struct.pack(">i", 4) + b"v"), "value len"),
        (struct.pack(">i", 0) + _ext(struct.pack(">h", 1) + b"k" + struct.pack(">i", -1)), "value len"),
        (struct.pack(">i", 0) + _ext(_entry(b"k", b"v"), b"\x00"), "shorter than its two lengths"),
        (struct.pack(">i", 1) + b"\xff" + _ext(), "invalid UTF-8"),
        (struct.pack(">i", 0) + _ext(_entry(b"\xc3", b"v")), "invalid UTF-8"),
        (struct.pack(">i", 0) + _ext(_entry(b"k", b"\xed\xa0\x80")), "invalid UTF-8"),
    ],
)
def test_bad_binary_headers(rest: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message) as info:
        decode_frame(json_frame(_binary(0, rest), stype=1))
    assert info.value.opaque == 42
    with pytest.raises(ProtocolError, match=message) as info:
        decode_frame(json_frame(_binary(1, rest), stype=1))
    assert info.value.opaque is None


def test_truncated_binary_fixed_part() -> None:
    with pytest.raises(ProtocolError, match="shorter than its fixed 13 bytes") as info:
        decode_frame(json_frame(_binary()[:12], stype=1))
    assert info.value.opaque is None


def test_binary_zero_lengths_and_unknown_language() -> None:
    frame = json_frame(
        struct.pack(">hbhii", -5, 99, -1, -7, 0) + struct.pack(">i", 0) + _ext(_entry(b"", b"")), stype=1
    )
    cmd = decode_frame(frame)
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.remark) == (-5, "OTHER", -1, -7, None)
    assert cmd.ext_fields == {"": ""} and cmd.serialize_type == SerializeType.ROCKETMQ


# -- commands that cannot be encoded ------------------------------------------------------------


@pytest.mark.parametrize(
    ("cmd", "message"),
    [
        (RemotingCommand(RequestCode.POP_MESSAGE, serialize_type=1), "code 200050 does not fit"),
        (RemotingCommand(1, version=40000, serialize_type=1), "version 40000 does not fit"),
        (RemotingCommand(1, opaque=2**31, serialize_type=1), "does not fit an int32"),
        (RemotingCommand(1, serialize_type=2), "cannot encode serialize type 2"),
        (RemotingCommand(1, remark="\ud800"), "cannot encode the header"),
        (RemotingCommand(1, ext_fields={"k": "\udfff"}, serialize_type=1), "cannot encode the header"),
        (RemotingCommand(1, ext_fields={"k" * 40000: "v"}, serialize_type=1), "name of 40000 bytes"),
        (RemotingCommand(1, remark="r" * 0x1000000), "24-bit header length"),
    ],
)
def test_unencodable_commands(cmd: RemotingCommand, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        cmd.encode()


def test_pop_codes_travel_in_json() -> None:
    cmd = RemotingCommand.request(RequestCode.POP_MESSAGE, {"topic": "T"})
    assert roundtrip(cmd).code == 200050
