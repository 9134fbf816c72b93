"""ACL on the gRPC front (both server implementations): the 5.x clients' ``authorization``
metadata checked against the broker's plain_acl.yml; UNAUTHORIZED for a caller that is not
authenticated, FORBIDDEN for missing permissions, and nothing of a refused call runs."""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from consumehelp import collect, make_topic, queue, receive_req, resource
from grpchelp import GrpcEnv, client_metadata, grpc_world
from sendhelp import Stream, message, producer_settings, records, wait_records

from rocketlite.proxy.acl import needs
from rocketlite.proxy.pb import definition_pb2 as pb
from rocketlite.proxy.pb import service_pb2 as spb

C = pb.Code
ACL = """
accounts:
  - accessKey: grpc-user
    secretKey: grpc-user-secret
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
  - accessKey: grpc-pub
    secretKey: grpc-pub-secret
    defaultTopicPerm: PUB
"""


def signed(ak: str, sk: str, date_time: str | None = None) -> tuple[tuple[str, str], ...]:
    """The metadata rocketmq-python-client 5.1.2 sends with credentials (its Signature.metadata)."""
    dt = date_time or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    sig = hmac.new(sk.encode(), dt.encode(), hashlib.sha1).hexdigest()
    return (*client_metadata(), ("x-mq-date-time", dt), (
        "authorization", f"MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={sig}"))


USER = signed("grpc-user", "grpc-user-secret")
PUB_ONLY = signed("grpc-pub", "grpc-pub-secret")
WRONG = signed("grpc-user", "not-the-secret")


@pytest.fixture
async def acl_g(tmp_path: Path) -> AsyncIterator[GrpcEnv]:
    (tmp_path / "plain_acl.yml").write_text(ACL)
    async with grpc_world(tmp_path / "store", {"aclEnable": "true",
                                               "aclFile": str(tmp_path / "plain_acl.yml")}) as env:
        make_topic(env.broker, "AclT")
        yield env


async def send(g: GrpcEnv, md: tuple[tuple[str, str], ...], body: bytes) -> spb.SendMessageResponse:
    return await g.stub.SendMessage(spb.SendMessageRequest(messages=[message("AclT", body)]),
                                    timeout=5, metadata=md)


async def test_signed_send_is_stored_and_a_wrong_or_missing_signature_is_unauthorized(
        acl_g: GrpcEnv) -> None:
    r = await send(acl_g, USER, b"signed")
    assert r.status.code == C.OK, r.status
    assert [rec.body for rec in await wait_records(acl_g, "AclT", 1)] == [b"signed"]
    for md, why in ((WRONG, "Check signature failed for accessKey=grpc-user"),
                    (client_metadata(), "carries no authorization"),
                    (signed("nobody-key", "whatever"), "No acl config for accessKey nobody-key")):
        r = await send(acl_g, md, b"refused")
        assert r.status.code == C.UNAUTHORIZED and why in r.status.message, r.status
    assert [rec.body for rec in records(acl_g, "AclT")] == [b"signed"]  # nothing else stored
    assert acl_g.broker.acl is not None and acl_g.broker.acl.denied == 3


async def test_missing_permissions_are_forbidden(acl_g: GrpcEnv) -> None:
    here = pb.Endpoints(scheme=pb.AddressScheme.IPv4,
                        addresses=[pb.Address(host="127.0.0.1", port=acl_g.front.port)])
    route = await acl_g.stub.QueryRoute(spb.QueryRouteRequest(topic=resource("AclT"), endpoints=here),
                                        timeout=5, metadata=PUB_ONLY)
    assert route.status.code == C.OK, route.status  # ANY: PUB is enough to find the topic
    rs = await collect(acl_g.stub.ReceiveMessage(receive_req("AclT"), timeout=5, metadata=PUB_ONLY))
    assert len(rs) == 1 and rs[0].status.code == C.FORBIDDEN, rs
    assert rs[0].status.message == (
        "No permission: SUB on topic AclT for accessKey grpc-pub (it has PUB)")
    ack = await acl_g.stub.AckMessage(spb.AckMessageRequest(
        group=resource("G"), topic=resource("AclT"),
        entries=[spb.AckMessageEntry(message_id="x", receipt_handle="y")]), timeout=5,
        metadata=PUB_ONLY)
    assert ack.status.code == C.FORBIDDEN and "for accessKey grpc-pub" in ack.status.message


async def test_telemetry_needs_a_valid_signature(acl_g: GrpcEnv) -> None:
    for md, code in ((WRONG, C.UNAUTHORIZED), (PUB_ONLY, C.OK)):
        stream = Stream(acl_g, md)
        try:
            await stream.send(spb.TelemetryCommand(settings=producer_settings("AclT")))
            first = await stream.recv()
        finally:
            await stream.close()
        assert first.status.code == code, first


def test_what_each_call_needs() -> None:
    assert needs("SendMessage", spb.SendMessageRequest(messages=[message("T")])) == {"T": 4}
    assert needs("ReceiveMessage", receive_req("T", group="G")) == {"T": 8, "%RETRY%G": 8}
    assert needs("QueryRoute", spb.QueryRouteRequest(topic=resource("T"))) == {"T": 2}
    assert needs("QueryOffset", spb.QueryOffsetRequest(message_queue=queue("T"))) == {"T": 8}
    assert needs("Heartbeat", spb.HeartbeatRequest()) == {}
