"""The per-request check (PlainPermissionManager.validate) over a parsed plain_acl.yml."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from rocketlite.acl.config import parse_acl
from rocketlite.acl.perm import PUB
from rocketlite.acl.sign import Credentials
from rocketlite.acl.validator import GrpcRefusal, check, check_grpc, parse_authorization
from rocketlite.common.errors import FormatError
from rocketlite.protocol.codes import RequestCode

DOC = {
    "globalWhiteRemoteAddresses": ["10.10.103.*"],
    "accounts": [
        {"accessKey": "RocketMQ", "secretKey": "12345678", "whiteRemoteAddress": "192.168.0.*",
         "admin": False, "defaultTopicPerm": "DENY", "defaultGroupPerm": "SUB",
         "topicPerms": ["topicA=DENY", "topicB=PUB|SUB", "topicC=SUB"],
         "groupPerms": ["groupA=DENY", "groupB=PUB|SUB"]},
        {"accessKey": "rocketmq2", "secretKey": "12345678", "admin": True},
    ],
}
USER = Credentials("RocketMQ", "12345678")
ADMIN = Credentials("rocketmq2", "12345678")
PEER = "127.0.0.1"


def signed(creds: Credentials, ext: dict[str, str], body: bytes | None = None) -> dict[str, str]:
    out = dict(ext)
    creds.sign(out, body)
    return out


def test_user_permissions() -> None:
    cfg = parse_acl(DOC)
    send = {"a": "pg", "b": "topicB"}
    assert check(cfg, PEER, RequestCode.SEND_MESSAGE_V2, signed(USER, send), None) is None
    reason = check(cfg, PEER, RequestCode.SEND_MESSAGE_V2, signed(USER, {"a": "pg", "b": "topicC"}),
                   None)
    assert reason == "No permission: PUB on topic topicC for accessKey RocketMQ (it has SUB)"
    # a topic not listed: defaultTopicPerm (DENY)
    assert "PUB on topic other" in (check(cfg, PEER, RequestCode.SEND_MESSAGE_V2,
                                          signed(USER, {"a": "pg", "b": "other"}), None) or "")
    pull = {"topic": "topicC", "consumerGroup": "groupX"}  # groupX: defaultGroupPerm SUB
    assert check(cfg, PEER, RequestCode.PULL_MESSAGE, signed(USER, pull), None) is None
    denied_group = {"topic": "topicC", "consumerGroup": "groupA"}
    assert check(cfg, PEER, RequestCode.PULL_MESSAGE, signed(USER, denied_group), None) == (
        "No permission: SUB on group groupA for accessKey RocketMQ (it has DENY)")
    # a message sent back to the retry topic is checked against the group's permission
    back = {"a": "groupA", "b": "%RETRY%groupA"}
    assert "SUB on group groupA" in (check(cfg, PEER, RequestCode.SEND_MESSAGE_V2,
                                           signed(USER, back), None) or "")


def test_signature_and_keys() -> None:
    cfg = parse_acl(DOC)
    ext = signed(USER, {"a": "pg", "b": "topicB"}, b"body")
    assert check(cfg, PEER, RequestCode.SEND_MESSAGE_V2, ext, b"body") is None
    assert check(cfg, PEER, RequestCode.SEND_MESSAGE_V2, ext, b"other body") == (
        "Check signature failed for accessKey=RocketMQ")
    wrong = signed(Credentials("RocketMQ", "wrong-secret"), {"a": "pg", "b": "topicB"})
    assert check(cfg, PEER, RequestCode.SEND_MESSAGE_V2, wrong, None) == (
        "Check signature failed for accessKey=RocketMQ")
    unknown = signed(Credentials("nobody1", "12345678"), {"a": "pg", "b": "topicB"})
    assert check(cfg, PEER, RequestCode.SEND_MESSAGE_V2, unknown, None) == (
        "No acl config for accessKey nobody1")
    assert "not signed" in (check(cfg, PEER, RequestCode.SEND_MESSAGE_V2, {"b": "topicB"}, None) or "")


def test_white_addresses_pass_without_signature() -> None:
    cfg = parse_acl(DOC)
    assert check(cfg, "10.10.103.7", RequestCode.UPDATE_AND_CREATE_TOPIC, {}, None) is None
    # the account's own white address: its requests pass without a signature
    assert check(cfg, "192.168.0.9", RequestCode.SEND_MESSAGE_V2,
                 {"AccessKey": "RocketMQ", "b": "topicA"}, None) is None
    assert check(cfg, "192.168.1.9", RequestCode.SEND_MESSAGE_V2,
                 {"AccessKey": "RocketMQ", "b": "topicA"}, None) is not None


def test_admin_codes_need_admin() -> None:
    cfg = parse_acl(DOC)
    create = {"topic": "new", "readQueueNums": "4"}
    assert check(cfg, PEER, RequestCode.UPDATE_AND_CREATE_TOPIC, signed(USER, create), None) == (
        "No permission: request code 17 needs an admin account, accessKey RocketMQ is not")
    assert check(cfg, PEER, RequestCode.UPDATE_AND_CREATE_TOPIC, signed(ADMIN, create), None) is None
    # an admin with no perms of its own may do anything
    assert check(cfg, PEER, RequestCode.SEND_MESSAGE_V2, signed(ADMIN, {"b": "x"}), None) is None


@pytest.mark.parametrize(("doc", "message"), [
    ([1], "not a mapping"),
    ({"accounts": [{"accessKey": "short", "secretKey": "12345678"}]}, "accessKey is missing or shorter"),
    ({"accounts": [{"accessKey": "abcdefg", "secretKey": "12345678"},
                   {"accessKey": "abcdefg", "secretKey": "87654321"}]}, "appears twice"),
    ({"accounts": [{"accessKey": "abcdefg", "secretKey": "12345678", "topicPerms": "x=PUB"}]},
     "topicPerms is not a list"),
    ({"globalWhiteRemoteAddresses": ["1.2.3"]}, "address pattern"),
])
def test_bad_documents(doc: object, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        parse_acl(doc)


def grpc_auth(ak: str, sk: str, date_time: str, *, upper: bool = False) -> str:
    """As rocketmq-python-client 5.1.2's Signature.metadata builds it (lower-case hex; the Java
    client writes upper-case)."""
    sig = hmac.new(sk.encode(), date_time.encode(), hashlib.sha1).hexdigest()
    sig = sig.upper() if upper else sig
    return f"MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={sig}"


def test_grpc_authorization() -> None:
    cfg = parse_acl(DOC)
    dt = "20261127T150000Z"
    need = {"topicB": PUB}
    assert check_grpc(cfg, PEER, grpc_auth("RocketMQ", "12345678", dt), dt, need) is None
    assert check_grpc(cfg, PEER, grpc_auth("RocketMQ", "12345678", dt, upper=True), dt, need) is None
    wrong = check_grpc(cfg, PEER, grpc_auth("RocketMQ", "wrong-secret", dt), dt, need)
    assert wrong == GrpcRefusal(False, "Check signature failed for accessKey=RocketMQ")
    other_time = check_grpc(cfg, PEER, grpc_auth("RocketMQ", "12345678", dt), "20261127T150001Z",
                            need)
    assert other_time is not None and not other_time.authenticated
    assert check_grpc(cfg, PEER, None, dt, need) == GrpcRefusal(
        False, "No accessKey is configured: the call from 127.0.0.1 carries no authorization")
    denied = check_grpc(cfg, PEER, grpc_auth("RocketMQ", "12345678", dt), dt, {"topicC": PUB})
    assert denied == GrpcRefusal(True, "No permission: PUB on topic topicC for accessKey RocketMQ "
                                       "(it has SUB)")
    assert check_grpc(cfg, "10.10.103.1", None, None, need) is None  # the global white list


def test_parse_authorization() -> None:
    assert parse_authorization("MQv2-HMAC-SHA1 Credential=ak, SignedHeaders=x-mq-date-time, "
                               "Signature=abc") == {
        "Algorithm": "MQv2-HMAC-SHA1", "Credential": "ak", "SignedHeaders": "x-mq-date-time",
        "Signature": "abc"}
