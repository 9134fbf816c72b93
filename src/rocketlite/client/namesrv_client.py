"""A client's requests to the NameServers: each asked in turn from the one that answered last
(failover), and the two questions a client asks them (a topic's route, every topic's name)."""

from __future__ import annotations

from rocketlite.client.errors import MQBrokerError, MQClientError
from rocketlite.common.errors import FormatError, RemotingError
from rocketlite.protocol.bodies import TopicList, TopicRouteData
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import GetRouteInfoRequestHeader
from rocketlite.remoting.client import RemotingClient


class NameServers:
    """The NameServers at ``addrs``, reached over ``remoting`` with ``timeout`` per request."""

    def __init__(self, addrs: list[str], remoting: RemotingClient, timeout: float) -> None:
        self.addrs = addrs
        self.remoting = remoting
        self.timeout = timeout
        self._index = 0

    async def invoke(self, cmd: RemotingCommand) -> RemotingCommand:
        """Ask the NameServers in turn, starting with the one that answered last."""
        errors = []
        n = len(self.addrs)
        for i in range(n):
            addr = self.addrs[(self._index + i) % n]
            try:
                reply = await self.remoting.invoke(addr, cmd, self.timeout)
            except RemotingError as e:
                errors.append(f"{addr}: {e}")
                self.remoting.drop(addr)
                continue
            self._index = (self._index + i) % n
            return reply
        raise MQClientError("no NameServer answered: " + "; ".join(errors))

    async def fetch_route(self, topic: str) -> TopicRouteData | None:
        """The NameServer's route for ``topic``; None when it has none (TOPIC_NOT_EXIST)."""
        header = GetRouteInfoRequestHeader(topic=topic)
        reply = await self.invoke(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                          header.to_ext()))
        if reply.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        if reply.code != ResponseCode.SUCCESS:
            raise MQBrokerError(reply.code, reply.remark, "the NameServer")
        try:
            return TopicRouteData.from_json(reply.body)
        except FormatError as e:
            raise MQClientError(f"the NameServer's route for {topic!r} is malformed: {e}") from e

    async def fetch_topic_list(self) -> set[str]:
        """Every topic the NameServer knows (GET_ALL_TOPIC_LIST_FROM_NAMESERVER), system ones too."""
        reply = await self.invoke(RemotingCommand.request(
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
        if reply.code != ResponseCode.SUCCESS:
            raise MQBrokerError(reply.code, reply.remark, "the NameServer")
        try:
            return set(TopicList.from_json(reply.body).topicList)
        except FormatError as e:
            raise MQClientError(f"the NameServer's topic list is malformed: {e}") from e
