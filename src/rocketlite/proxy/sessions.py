"""The clients the front knows: one ``ClientSession`` per ``x-mq-client-id``, made by its first
Telemetry stream or heartbeat (the settings it reported, its channel, the groups it belongs to)
and kept alive by heartbeats; dropped on NotifyClientTermination, or after ``SESSION_IDLE_S``
without a call (``GrpcFront``'s sweep). Bounded: at most ``MAX_SESSIONS``.

Membership in the broker (``join``/``leave``): a producer is a member of one producer group per
topic it publishes to, named like the topic (the Java proxy's rule: a 5.x producer has no group,
so ``registerProducer(ctx, topicName)``, and SendMessage stores ``PGROUP`` = the topic, so the
transaction check finds the producers of a half message by its topic); a consumer is a member of
its consumer group (``CONSUME_ACTIVELY`` for a SimpleConsumer, ``CONSUME_PASSIVELY`` for a
PushConsumer, clustering, from the last offset), with its subscriptions. The channel registered is
the session's ``TelemetryChannel``, so the broker sees 5.x clients as it sees 4.x ones.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rocketlite.broker.config import PERM_READ, PERM_WRITE
from rocketlite.broker.topics import RETRY_GROUP_TOPIC_PREFIX
from rocketlite.protocol.bodies import (
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    SubscriptionData,
)
from rocketlite.proxy.channels import TelemetryChannel
from rocketlite.proxy.pb import definition_pb2 as pb

if TYPE_CHECKING:
    from rocketlite.broker.broker import Broker

MAX_SESSIONS = 10_000
SESSION_IDLE_S = 120.0
MAX_GROUPS_PER_CLIENT = 1_000  # publishing topics of one producer
CLIENT_VERSION_V5 = 453  # MQVersion.Version.V5_0_0.ordinal(): what Java records for 5.x clients

PRODUCER = pb.ClientType.PRODUCER
PUSH_CONSUMER = pb.ClientType.PUSH_CONSUMER
SIMPLE_CONSUMER = pb.ClientType.SIMPLE_CONSUMER
CONSUMER_TYPES = {PUSH_CONSUMER: ConsumeType.CONSUME_PASSIVELY,
                  SIMPLE_CONSUMER: ConsumeType.CONSUME_ACTIVELY}


@dataclass(slots=True, eq=False)
class ClientSession:
    client_id: str
    channel: TelemetryChannel
    language: str = "OTHER"
    settings: pb.Settings | None = None  # as the client reported them, None before Telemetry
    client_type: int = pb.ClientType.CLIENT_TYPE_UNSPECIFIED
    producer_groups: set[str] = field(default_factory=set)  # the topics it publishes to
    consumer_group: str | None = None
    subscriptions: list[SubscriptionData] = field(default_factory=list)
    last_seen: float = field(default_factory=time.monotonic)

    def join(self, broker: Broker) -> list[str]:
        """(Re-)register this client with the broker's managers (module docstring); a heartbeat
        refreshes the registration. Returns the consumer groups whose membership changed."""
        changed = []
        for pgroup in self.producer_groups:
            broker.producers.register(pgroup, self.channel, self.client_id, self.language,
                                      CLIENT_VERSION_V5)
        group = self.consumer_group
        consume_type = CONSUMER_TYPES.get(self.client_type)  # type: ignore[call-overload]
        if group is not None and consume_type is not None:
            sgc = broker.subscriptions.get(group)
            if sgc is not None:
                retry = RETRY_GROUP_TOPIC_PREFIX + group
                if broker.topics.get(retry) is None:
                    broker.topics.create_plain(retry, max(1, sgc.retryQueueNums),
                                               PERM_READ | PERM_WRITE)
            if broker.consumers.register(
                group, self.channel, self.client_id, self.language, CLIENT_VERSION_V5,
                consume_type, MessageModel.CLUSTERING, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                self.subscriptions,
            ):
                changed.append(group)
        return changed

    def leave(self, broker: Broker) -> list[str]:
        """Unregister from every group; the consumer groups that lost this member."""
        for group in self.producer_groups:
            broker.producers.unregister(group, self.channel)
        return broker.consumers.channel_closed(self.channel)


class Sessions:
    def __init__(self, limit: int = MAX_SESSIONS) -> None:
        self.limit = limit
        self._by_id: dict[str, ClientSession] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def get(self, client_id: str) -> ClientSession | None:
        return self._by_id.get(client_id)

    def touch(self, client_id: str, peer: str = "") -> ClientSession:
        """The session of ``client_id``, made if new; ``OverflowError`` past ``limit``."""
        s = self._by_id.get(client_id)
        if s is None:
            if len(self._by_id) >= self.limit:
                raise OverflowError(f"the front already serves {self.limit} clients")
            s = self._by_id[client_id] = ClientSession(client_id, TelemetryChannel(client_id, peer))
        s.last_seen = time.monotonic()
        return s

    def remove(self, client_id: str) -> ClientSession | None:
        return self._by_id.pop(client_id, None)

    def all(self) -> list[ClientSession]:
        return list(self._by_id.values())

    def expire(self, idle_s: float = SESSION_IDLE_S) -> list[ClientSession]:
        """Drop sessions silent for longer than ``idle_s`` whose Telemetry stream is closed."""
        now = time.monotonic()
        gone = [s for s in self._by_id.values()
                if now - s.last_seen > idle_s and not s.channel.is_open]
        for s in gone:
            del self._by_id[s.client_id]
        return gone
