"""Limits against abuse (issue 22), each crossed over real sockets on a ``rocketlite start``
process with small limits, each crossing answered as documented and counted in
``rocketlite_limit_rejections_total{limit=...}``, and what stays within the limits served as
before: connections per broker and per client address (closed at accept; a freed slot is taken
again), ext fields per header (SYSTEM_ERROR, the connection goes on), header bytes (the frame
is not decoded: the connection is closed), topics and groups
auto-created per minute (TOPIC_NOT_EXIST / SUBSCRIPTION_GROUP_NOT_EXIST naming the limit),
message and batch bodies (MESSAGE_ILLEGAL). In-flight requests and pending reply bytes are
crossed on an in-process ``RemotingServer`` (the broker's transport) in
``test_connection_limits.py``.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Iterator

import pytest

from brokerhelp import conf_broker, free_port, pull_request, scrape_metrics, send_request
from rocketlite.formats.properties import encode_properties
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand, decode_frame
from rocketlite.protocol.message_batch import encode_batch
from rocketlite.remoting.client import RemotingClient

pytestmark = pytest.mark.integration

LIMITS = {"maxConnections": "6", "maxConnectionsPerAddress": "4", "maxExtFields": "30",
          "maxHeaderBytes": "4096",
          "autoCreateTopicsPerMinute": "3", "autoCreateGroupsPerMinute": "2",
          "maxMessageSize": "1024"}


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """A broker with small limits: its address and metrics port."""
    metrics_port = free_port()
    with conf_broker(tmp_path_factory.mktemp("limits"), metricsPort=str(metrics_port),
                     **LIMITS) as (_, addr):
        yield addr, metrics_port


def rejections(metrics_port: int) -> dict[str, float]:
    return {dict(labels)["limit"]: v for (name, labels), v in scrape_metrics(metrics_port).items()
            if name == "rocketlite_limit_rejections_total"}


def connect(addr: str, source: str) -> socket.socket:
    host, port = addr.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10, source_address=(source, 0))
    return sock


def roundtrip(sock: socket.socket, cmd: RemotingCommand) -> RemotingCommand | None:
    """The reply to ``cmd`` on ``sock``; None when the broker closed the connection instead."""
    try:
        sock.sendall(cmd.encode())
        head = sock.recv(4, socket.MSG_WAITALL)
        if len(head) < 4:
            return None
        (length,) = struct.unpack(">i", head)
        return decode_frame(sock.recv(length, socket.MSG_WAITALL))
    except (ConnectionResetError, BrokenPipeError):
        return None


def served(sock: socket.socket) -> bool:
    r = roundtrip(sock, RemotingCommand.request(9999, {}))
    return r is not None and r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


def test_connections_past_the_per_address_and_broker_limits_are_closed_at_accept(
        limited: tuple[str, int]) -> None:
    addr, metrics_port = limited
    before = rejections(metrics_port)
    socks: list[socket.socket] = []
    try:
        socks += [connect(addr, "127.0.0.1") for _ in range(4)]  # maxConnectionsPerAddress
        assert all(served(s) for s in socks)
        fifth = connect(addr, "127.0.0.1")
        socks.append(fifth)
        assert not served(fifth)
        socks += [connect(addr, "127.0.0.2") for _ in range(2)]  # 6 open: maxConnections
        assert all(served(s) for s in socks[-2:])
        seventh = connect(addr, "127.0.0.3")
        socks.append(seventh)
        assert not served(seventh)
        socks[0].close()  # a slot freed is taken again
        for _ in range(100):  # the broker sees the close a moment later
            again = connect(addr, "127.0.0.1")
            socks.append(again)
            if served(again):
                break
        else:
            raise AssertionError("a freed connection slot was never given again")
        assert served(socks[1])  # those admitted go on being served
    finally:
        for s in socks:
            s.close()
    after = rejections(metrics_port)
    assert after["connections_per_address"] - before["connections_per_address"] >= 1
    assert after["connections"] - before["connections"] >= 1


def test_a_header_with_too_many_ext_fields_is_refused_and_the_connection_goes_on(
        limited: tuple[str, int]) -> None:
    addr, metrics_port = limited
    before = rejections(metrics_port)["ext_fields"]
    with connect(addr, "127.0.0.4") as sock:
        r = roundtrip(sock, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2,
                                                     {f"k{i}": "v" for i in range(31)}, b"x"))
        assert r is not None and r.code == ResponseCode.SYSTEM_ERROR
        assert "31 ext fields, above maxExtFields (30)" in (r.remark or "")
        r = roundtrip(sock, send_request("ExtTopic", b"fine"))  # the same connection
        assert r is not None and r.code == ResponseCode.SUCCESS, r
    assert rejections(metrics_port)["ext_fields"] - before == 1


def test_auto_create_rates_refuse_new_topics_and_groups(limited: tuple[str, int]) -> None:
    addr, metrics_port = limited

    async def run() -> None:
        client = RemotingClient()
        try:
            codes = []
            for i in range(5):
                r = await client.invoke(addr, send_request(f"NewTopic{i}", b"m"), 10)
                codes.append(r.code)
                if r.code != ResponseCode.SUCCESS:
                    assert r.code == ResponseCode.TOPIC_NOT_EXIST
                    assert "autoCreateTopicsPerMinute=3" in (r.remark or ""), r.remark
            # ExtTopic (the test before) may have taken one of the 3 tokens
            assert codes.count(ResponseCode.SUCCESS) in (2, 3) and codes[0] == ResponseCode.SUCCESS
            r = await client.invoke(addr, send_request("NewTopic0", b"again"), 10)
            assert r.code == ResponseCode.SUCCESS  # an existing topic takes no token
            groups = []
            for i in range(4):
                r = await client.invoke(addr, pull_request("NewTopic0", 0, 0, group=f"NewGroup{i}"),
                                        10)
                groups.append(r.code)
                if r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST:
                    assert "autoCreateGroupsPerMinute=2" in (r.remark or ""), r.remark
            assert groups.count(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST) == 2, groups
            r = await client.invoke(addr, pull_request("NewTopic0", 0, 0, group="NewGroup0"), 10)
            assert r.code != ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST  # created: served
        finally:
            await client.close()

    before = rejections(metrics_port)
    asyncio.run(run())
    after = rejections(metrics_port)
    assert after["autocreate_topic"] - before["autocreate_topic"] >= 2
    assert after["autocreate_group"] - before["autocreate_group"] == 2


def test_message_and_batch_bodies_above_max_message_size(limited: tuple[str, int]) -> None:
    addr, metrics_port = limited

    async def run() -> None:
        client = RemotingClient()
        try:
            r = await client.invoke(addr, send_request("NewTopic0", b"x" * 1025), 10)
            assert r.code == ResponseCode.MESSAGE_ILLEGAL
            assert "larger than maxMessageSize 1024" in (r.remark or ""), r.remark
            big = send_request("NewTopic0", encode_batch([b"y" * 400] * 3))  # each fits, not all
            big.code = RequestCode.SEND_BATCH_MESSAGE
            r = await client.invoke(addr, big, 10)
            assert r.code == ResponseCode.MESSAGE_ILLEGAL
            assert "the batch body is" in (r.remark or "") and "maxMessageSize 1024" in (r.remark or "")
            ok = send_request("NewTopic0", encode_batch([b"z" * 300] * 2))
            ok.code = RequestCode.SEND_BATCH_MESSAGE
            r = await client.invoke(addr, ok, 10)
            assert r.code == ResponseCode.SUCCESS, r.remark
            r = await client.invoke(addr, send_request("NewTopic0", b"x" * 1024), 10)
            assert r.code == ResponseCode.SUCCESS, r.remark
        finally:
            await client.close()

    before = rejections(metrics_port)
    asyncio.run(run())
    after = rejections(metrics_port)
    assert after["message_size"] - before["message_size"] == 1
    assert after["batch_size"] - before["batch_size"] == 1


def test_a_header_above_max_header_bytes_closes_the_connection(limited: tuple[str, int]) -> None:
    addr, metrics_port = limited
    before = rejections(metrics_port)["header_bytes"]
    with connect(addr, "127.0.0.5") as sock:
        big = send_request("ExtTopic", b"m", properties=encode_properties({"k": "v" * 5000}))
        assert roundtrip(sock, big) is None
    with connect(addr, "127.0.0.5") as sock:  # a new connection is served
        r = roundtrip(sock, send_request("ExtTopic", b"m", properties=encode_properties({"k": "v" * 3000})))
        assert r is not None and r.code == ResponseCode.SUCCESS, r
    assert rejections(metrics_port)["header_bytes"] - before == 1
