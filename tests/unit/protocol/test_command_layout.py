"""The Remoting frame and ROCKETMQ header layouts match their docstring tables, and the constants match
apache/rocketmq."""

from __future__ import annotations

import re

from rocketlite.protocol import codes
from rocketlite.protocol import command as cmdmod
from rocketlite.protocol.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from rocketlite.protocol.command import RemotingCommand

_ROW = re.compile(r"^(\d+(?:\+\w+)?)\s+(\w+)\s+(\w+)\s")


def _tables(doc: str) -> list[list[tuple[str, str, str]]]:
    """The rows (offset, field, bytes) of each RST simple table in a docstring."""
    tables: list[list[tuple[str, str, str]]] = []
    rows: list[tuple[str, str, str]] = []
    borders = 0
    for line in doc.splitlines():
        if line.startswith("======"):
            borders += 1
            if borders == 3:  # top, under the titles, bottom
                tables.append(rows)
                rows, borders = [], 0
            continue
        m = _ROW.match(line)
        if borders == 2 and m:
            rows.append((m.group(1), m.group(2), m.group(3)))
    return tables


def _fixed_prefix(rows: list[tuple[str, str, str]]) -> list[tuple[int, str, int]]:
    """The leading rows whose offset and size are plain numbers; checks offsets are cumulative."""
    out: list[tuple[int, str, int]] = []
    expected = 0
    for off, name, size in rows:
        if not (off.isdigit() and size.isdigit()):
            break
        assert int(off) == expected, f"{name} documented at offset {off}, expected {expected}"
        out.append((int(off), name, int(size)))
        expected += int(size)
    return out


def test_docstring_tables_match_structs() -> None:
    assert cmdmod.__doc__ is not None
    frame, binary = _tables(cmdmod.__doc__)
    frame_fixed = _fixed_prefix(frame)
    assert [name for _, name, _ in frame_fixed] == ["length", "oriHeaderLen"]
    assert sum(size for *_, size in frame_fixed) == cmdmod.FRAME_PREFIX.size == cmdmod.FRAME_PREFIX_SIZE == 8
    bin_fixed = _fixed_prefix(binary)
    names = [name for _, name, _ in bin_fixed]
    assert names == ["code", "language", "version", "opaque", "flag", "remarkLen"]
    # BINARY_FIXED covers everything before remarkLen.
    assert bin_fixed[-1][0] == cmdmod.BINARY_FIXED.size == cmdmod.BINARY_FIXED_SIZE == 13
    assert [name for _, name, _ in binary][-3:] == ["remark", "extLen", "entries"]


def test_binary_header_bytes_at_documented_offsets() -> None:
    cmd = RemotingCommand(
        code=0x0102,
        language="CPP",
        version=0x0304,
        opaque=0x05060708,
        flag=0x090A0B0C,
        remark="rk",
        ext_fields={"k": "vv"},
        serialize_type=SerializeType.ROCKETMQ,
    )
    frame = cmd.encode()
    h = frame[8:]
    assert frame[:4] == (len(frame) - 4).to_bytes(4, "big")
    assert frame[4] == 1 and int.from_bytes(frame[5:8], "big") == len(h)
    assert h[0:2] == b"\x01\x02" and h[2] == 1 and h[3:5] == b"\x03\x04"
    assert h[5:9] == b"\x05\x06\x07\x08" and h[9:13] == b"\x09\x0a\x0b\x0c"
    assert h[13:17] == (2).to_bytes(4, "big") and h[17:19] == b"rk"
    assert h[19:23] == (2 + 1 + 4 + 2).to_bytes(4, "big")
    assert h[23:] == b"\x00\x01k\x00\x00\x00\x02vv"


def test_flag_bits_and_version() -> None:
    assert codes.RPC_TYPE_RESPONSE == 1 << 0
    assert codes.RPC_ONEWAY == 1 << 1
    assert codes.CURRENT_VERSION == codes.MQVersion.V5_3_3 == 479
    assert codes.MQVersion.V4_9_4 == 401
    assert codes.MQVersion.V3_4_9 == 121
    assert codes.MQVersion.V3_1_8 == 63
    assert SerializeType.JSON == 0 and SerializeType.ROCKETMQ == 1


def test_language_codes() -> None:
    assert [(m.name, m.value) for m in LanguageCode] == [
        ("JAVA", 0), ("CPP", 1), ("DOTNET", 2), ("PYTHON", 3), ("DELPHI", 4), ("ERLANG", 5),
        ("RUBY", 6), ("OTHER", 7), ("HTTP", 8), ("GO", 9), ("PHP", 10), ("OMS", 11), ("RUST", 12),
        ("NODE_JS", 13),
    ]  # fmt: skip


def test_request_codes_from_protocol_doc() -> None:
    expected = {
        "GET_ROUTEINFO_BY_TOPIC": 105, "GET_KV_CONFIG": 101, "PUT_KV_CONFIG": 100, "DELETE_KV_CONFIG": 102,
        "REGISTER_BROKER": 103, "UNREGISTER_BROKER": 104, "BROKER_HEARTBEAT": 904,
        "GET_BROKER_CLUSTER_INFO": 106, "GET_ALL_TOPIC_LIST_FROM_NAMESERVER": 206, "HEART_BEAT": 34,
        "UNREGISTER_CLIENT": 35, "SEND_MESSAGE": 10, "SEND_MESSAGE_V2": 310, "SEND_BATCH_MESSAGE": 320,
        "PULL_MESSAGE": 11, "QUERY_CONSUMER_OFFSET": 14, "UPDATE_CONSUMER_OFFSET": 15,
        "GET_CONSUMER_LIST_BY_GROUP": 38, "GET_MAX_OFFSET": 30, "GET_MIN_OFFSET": 31,
        "SEARCH_OFFSET_BY_TIMESTAMP": 29, "GET_EARLIEST_MSG_STORETIME": 32, "CONSUMER_SEND_MSG_BACK": 36,
        "END_TRANSACTION": 37, "CHECK_TRANSACTION_STATE": 39, "LOCK_BATCH_MQ": 41, "UNLOCK_BATCH_MQ": 42,
        "QUERY_MESSAGE": 12, "VIEW_MESSAGE_BY_ID": 33, "UPDATE_AND_CREATE_TOPIC": 17,
        "NOTIFY_CONSUMER_IDS_CHANGED": 40, "GET_CONSUMER_RUNNING_INFO": 307,
        "RESET_CONSUMER_CLIENT_OFFSET": 220, "GET_CONSUME_STATS": 208, "GET_TOPIC_STATS_INFO": 202,
        "DELETE_TOPIC_IN_BROKER": 215, "DELETE_TOPIC_IN_NAMESRV": 216, "GET_ALL_TOPIC_CONFIG": 21,
        "GET_BROKER_RUNTIME_INFO": 28, "GET_KVLIST_BY_NAMESPACE": 219, "GET_TOPICS_BY_CLUSTER": 224,
        "POP_MESSAGE": 200050, "ACK_MESSAGE": 200051,
    }  # fmt: skip
    for name, value in expected.items():
        assert RequestCode[name] == value, name
    assert len({m.value for m in RequestCode}) == len(RequestCode)  # no aliases


def test_response_codes_from_protocol_doc() -> None:
    expected = {
        "SUCCESS": 0, "SYSTEM_ERROR": 1, "SYSTEM_BUSY": 2, "REQUEST_CODE_NOT_SUPPORTED": 3,
        "TRANSACTION_FAILED": 4, "FLUSH_DISK_TIMEOUT": 10, "SLAVE_NOT_AVAILABLE": 11,
        "FLUSH_SLAVE_TIMEOUT": 12, "MESSAGE_ILLEGAL": 13, "SERVICE_NOT_AVAILABLE": 14,
        "VERSION_NOT_SUPPORTED": 15, "NO_PERMISSION": 16, "TOPIC_NOT_EXIST": 17, "TOPIC_EXIST_ALREADY": 18,
        "PULL_NOT_FOUND": 19, "PULL_RETRY_IMMEDIATELY": 20, "PULL_OFFSET_MOVED": 21, "QUERY_NOT_FOUND": 22,
        "SUBSCRIPTION_PARSE_FAILED": 23, "SUBSCRIPTION_NOT_EXIST": 24, "SUBSCRIPTION_NOT_LATEST": 25,
        "SUBSCRIPTION_GROUP_NOT_EXIST": 26, "FILTER_DATA_NOT_EXIST": 27, "FILTER_DATA_NOT_LATEST": 28,
        "INVALID_PARAMETER": 29, "TRANSACTION_SHOULD_COMMIT": 200, "TRANSACTION_SHOULD_ROLLBACK": 201,
        "TRANSACTION_STATE_UNKNOW": 202, "CONSUMER_NOT_ONLINE": 206, "NO_MESSAGE": 208, "POLLING_FULL": 209,
        "POLLING_TIMEOUT": 210,
    }  # fmt: skip
    for name, value in expected.items():
        assert ResponseCode[name] == value, name
    assert len({m.value for m in ResponseCode}) == len(ResponseCode)
