"""The fast signing paths against the reference: a producer's signed send frames
(``send_sign.SignedSendFrame``: the signature computed from the template's fields, the frame
encoded once) and ``request_signature`` (cached HMAC state, field order cached per header shape)
must sign exactly what ``AclClientRPCHook`` signs: HmacSHA1 over the sorted values of the decoded
fields (without ``Signature``), then the body."""

from __future__ import annotations

import base64
import hashlib
import hmac

from hypothesis import given
from hypothesis import strategies as st

from rocketlite.acl.config import parse_acl
from rocketlite.acl.sign import Credentials, request_signature
from rocketlite.acl.validator import check
from rocketlite.client.send_codec import SendFrame
from rocketlite.client.send_sign import SignedSendFrame, send_frame
from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.command import decode_frame

text = st.text(st.characters(exclude_categories=["Cs"]), max_size=30)
names = st.text(st.characters(codec="ascii", categories=["L", "N"]), min_size=1, max_size=20)
keys = st.text(st.characters(codec="ascii", categories=["L", "N", "P"]), min_size=6, max_size=20)
int64 = st.integers(-(2**63), 2**63 - 1)


def reference(ext: dict[str, str], body: bytes | None, secret: str) -> str:
    """AclUtils.combineRequestContent + calSignature, spelled out."""
    data = "".join(v for k, v in sorted(ext.items())
                   if k not in ("Signature", "_UNIQUE_KEY_QUERY")).encode("utf-8")
    digest = hmac.new(secret.encode(), data + (body or b""), hashlib.sha1).digest()
    return base64.b64encode(digest).decode()


@given(group=names, topic=names, broker=names, queue_id=st.integers(0, 1023), nums=st.integers(1, 64),
       sys_flag=int64, born=int64, flag=int64, props=text, body=st.binary(max_size=300),
       batch=st.booleans(), ak=keys, sk=keys, token=st.none() | text)
def test_signed_send_frame_is_the_signed_plain_frame(
        group: str, topic: str, broker: str, queue_id: int, nums: int, sys_flag: int, born: int,
        flag: int, props: str, body: bytes, batch: bool, ak: str, sk: str, token: str | None) -> None:
    creds = Credentials(ak, sk, token)
    args = (group, topic, "TBW102", nums, queue_id, broker, batch)
    signed = decode_frame(SignedSendFrame(*args, creds).frame(7, sys_flag, born, flag,
                                                             props.encode(), body)[4:])
    plain = decode_frame(SendFrame(*args).frame(7, sys_flag, born, flag, props.encode(), body)[4:])
    ext = dict(signed.ext_fields)
    assert ext.pop("Signature") == reference(signed.ext_fields, body, sk)
    assert ext.pop("AccessKey") == ak
    assert ext.pop("SecurityToken", None) == token
    assert ext == plain.ext_fields
    assert (signed.code, signed.opaque, signed.flag, signed.body) == (plain.code, 7, 0, body)
    assert signed.code == (RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2)


@given(topic=names, body=st.binary(max_size=64), wrong=st.booleans())
def test_the_broker_accepts_a_signed_frame_and_no_other(topic: str, body: bytes, wrong: bool) -> None:
    config = parse_acl({"accounts": [{"accessKey": "producer", "secretKey": "secret-1",
                                      "defaultTopicPerm": "PUB"}]})
    creds = Credentials("producer", "secret-2" if wrong else "secret-1")
    frame = send_frame("G", topic, "TBW102", 4, 0, "b", False, creds)
    cmd = decode_frame(frame.frame(1, 0, 1, 0, b"", body)[4:])
    reason = check(config, "10.0.0.1", cmd.code, cmd.ext_fields, cmd.body)
    assert (reason is not None) == wrong
    assert send_frame("G", topic, "TBW102", 4, 0, "b", False, None).__class__ is SendFrame


@given(ext=st.dictionaries(st.sampled_from(["AccessKey", "Signature", "_UNIQUE_KEY_QUERY", "a",
                                            "b", "topic", "Zed", "é", "queueId"]), text),
       body=st.none() | st.binary(max_size=100), sk=keys, reverse=st.booleans())
def test_request_signature_is_the_reference(ext: dict[str, str], body: bytes | None, sk: str,
                                            reverse: bool) -> None:
    shaped = dict(reversed(ext.items())) if reverse else ext  # the same keys in another order
    assert request_signature(shaped, body, sk) == reference(ext, body, sk)
    assert request_signature(ext, body, sk) == reference(ext, body, sk)
