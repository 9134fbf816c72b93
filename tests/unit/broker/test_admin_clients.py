"""GET_CONSUMER_RUNNING_INFO's refusals that need no socket (``broker/admin_clients``): a member
too old to be asked (below V3_1_8_SNAPSHOT) and one connected through the gRPC front (no
Remoting connection), each with its reason; an unknown member is Java's "not online"."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

from rocketlite.broker.admin_clients import ClientCalls
from rocketlite.broker.clients import ConsumerManager
from rocketlite.protocol.admin_headers import GetConsumerRunningInfoRequestHeader
from rocketlite.protocol.codes import MQVersion, RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.connection import Connection


def _ask(client_id: str) -> RemotingCommand:
    h = GetConsumerRunningInfoRequestHeader(consumerGroup="G", clientId=client_id)
    return RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, h.to_ext())


def test_refusals_without_asking_the_client() -> None:
    consumers = ConsumerManager()
    for channel, cid, version in (("grpc-stream-1", "grpc@1", int(MQVersion.V5_3_3)),
                                  ("old-channel", "old@1", int(MQVersion.V3_1_8_SNAPSHOT) - 1)):
        consumers.register("G", channel, cid, "JAVA", version, None, None, None, [])
    calls = ClientCalls(cast(Any, SimpleNamespace(consumers=consumers)))

    def ask(cid: str) -> RemotingCommand:
        return asyncio.run(calls.running_info(cast(Connection, None), _ask(cid)))

    r = ask("grpc@1")
    assert r.code == ResponseCode.SYSTEM_ERROR and r.remark is not None
    assert r.remark.startswith("The Consumer <G> <grpc@1> is connected over gRPC")
    r = ask("old@1")
    assert r.code == ResponseCode.SYSTEM_ERROR and r.remark is not None
    assert "too low to finish, please upgrade it to V3_1_8_SNAPSHOT" in r.remark
    r = ask("nobody@1")
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "The Consumer <G> <nobody@1> not online")
