"""What a client instance needs of the producers and consumers registered on it: their topics
(whose routes it keeps), a route when it changes, and, from a consumer, its heartbeat data, its
periodic rebalance and offset persistence, and its answers to brokers' requests (a check-back, an
offset reset, running info)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from rocketlite.protocol.bodies import ConsumerData, MessageQueue, TopicRouteData
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.running_info import ConsumerRunningInfo


class ProducerPeer(Protocol):
    group: str

    def topics(self) -> Iterable[str]: ...

    def on_route(self, topic: str, route: TopicRouteData) -> None: ...

    def on_check_transaction(self, addr: str, cmd: RemotingCommand) -> None: ...


class ConsumerPeer(Protocol):
    group: str

    def topics(self) -> Iterable[str]: ...

    def on_route(self, topic: str, route: TopicRouteData) -> None: ...

    def consumer_data(self) -> ConsumerData: ...

    async def rebalance(self) -> None: ...

    async def persist_offsets(self) -> None: ...

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None: ...

    def running_info(self) -> ConsumerRunningInfo: ...
