"""mqadmin's requests that a broker passes on to one client (Java's
``AdminBrokerProcessor.callConsumer``): GET_CONSUMER_RUNNING_INFO (307, mqadmin
``consumerStatus``). The broker finds the connection of ``clientId`` among the online members of
``consumerGroup``, sends it the same request (code, header fields, body) and answers with the
client's reply as it came: its code, remark, header fields and body (a ConsumerRunningInfo).

Refusals, Java's codes and remarks:

- no such member online: SYSTEM_ERROR "The Consumer <G> <ID> not online";
- a client older than V3_1_8_SNAPSHOT: SYSTEM_ERROR "... too low to finish ...";
- no reply within ``CALL_CLIENT_TIMEOUT_S``: CONSUME_MSG_TIMEOUT "consumer <G> <ID> Timeout: ...";
  ali-ons 3.x, for one, answers no broker request at all;
- the connection failing meanwhile: SYSTEM_ERROR "invoke consumer <G> <ID> Exception: ...".

A member connected through the gRPC front has no Remoting connection to ask: SYSTEM_ERROR saying
so (Java's proxy asks 5.x clients over their telemetry stream instead).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rocketlite.common.errors import RemotingError, RemotingTimeoutError
from rocketlite.protocol.admin_headers import GetConsumerRunningInfoRequestHeader
from rocketlite.protocol.codes import MQVersion, RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.connection import Connection

if TYPE_CHECKING:
    from rocketlite.broker.broker import Broker

log = logging.getLogger(__name__)

RC = ResponseCode
CALL_CLIENT_TIMEOUT_S = 3.0
"""How long the broker waits for the client (Java waits 10 s; mqadmin gives up after 5 s, so a
silent client is reported as such instead of as a broker timeout)."""


class ClientCalls:
    """The Remoting handlers that relay an admin request to one client."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.timeout_s = CALL_CLIENT_TIMEOUT_S

    def register(self) -> None:
        self.broker.server.register(RequestCode.GET_CONSUMER_RUNNING_INFO, self.running_info)

    async def running_info(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = GetConsumerRunningInfoRequestHeader.from_ext(cmd.ext_fields)
        return await self.call_consumer(cmd, h.consumerGroup, h.clientId)

    async def call_consumer(self, cmd: RemotingCommand, group: str,
                            client_id: str) -> RemotingCommand:
        """Send ``cmd`` on to ``client_id`` of ``group``; its reply as the reply to ``cmd``."""
        info = self.broker.consumers.get(group)
        member = next((c for c in info.channels.values() if c.client_id == client_id),
                      None) if info is not None else None
        if member is None:
            return cmd.response(RC.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
        if member.version < MQVersion.V3_1_8_SNAPSHOT:
            return cmd.response(RC.SYSTEM_ERROR, (
                f"The Consumer <{client_id}> Version <{member.version}> too low to finish, please "
                "upgrade it to V3_1_8_SNAPSHOT"))
        ch = member.channel
        if not isinstance(ch, Connection):
            return cmd.response(RC.SYSTEM_ERROR, (
                f"The Consumer <{group}> <{client_id}> is connected over gRPC: it cannot be asked "
                f"request {cmd.code}"))
        forward = RemotingCommand.request(cmd.code, dict(cmd.ext_fields), bytes(cmd.body or b""))
        try:
            reply = await ch.request(forward, self.timeout_s)
        except RemotingTimeoutError as e:
            return cmd.response(RC.CONSUME_MSG_TIMEOUT,
                                f"consumer <{group}> <{client_id}> Timeout: {e}")
        except RemotingError as e:
            return cmd.response(RC.SYSTEM_ERROR,
                                f"invoke consumer <{group}> <{client_id}> Exception: {e}")
        log.debug("relayed request %d to %s of %s: %d", cmd.code, client_id, group, reply.code)
        return cmd.response(reply.code, reply.remark, dict(reply.ext_fields), bytes(reply.body or b""))
