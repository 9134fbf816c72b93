"""The broker's view of its clients: consumer groups (members, subscriptions) and producer groups,
fed by HEART_BEAT (34) and UNREGISTER_CLIENT (35), pruned when a connection closes or stays silent
for ``channelExpiredTimeout`` (120 s).

Pure bookkeeping: a channel is any hashable (the broker passes its ``Connection``); methods say
which consumer groups changed membership, and the broker tells each group's members with
NOTIFY_CONSUMER_IDS_CHANGED (40) so they rebalance at once instead of at their next interval.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field

from rocketlite.protocol.bodies import (
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    SubscriptionData,
)

MAX_GROUPS = 100_000
MAX_CHANNELS_PER_GROUP = 10_000
MAX_SUBSCRIPTIONS_PER_GROUP = 10_000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class ClientChannelInfo:
    channel: Hashable
    client_id: str
    language: str
    version: int
    last_update: int


@dataclass(slots=True)
class ConsumerGroupInfo:
    group: str
    consume_type: ConsumeType | None = None
    message_model: MessageModel | None = None
    consume_from_where: ConsumeFromWhere | None = None
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    channels: dict[Hashable, ClientChannelInfo] = field(default_factory=dict)

    def client_ids(self) -> list[str]:
        return [c.client_id for c in self.channels.values()]

    def update_channel(self, info: ClientChannelInfo) -> bool:
        """Add or refresh a member; True if it is new (membership changed)."""
        old = self.channels.get(info.channel)
        if old is None:
            if len(self.channels) >= MAX_CHANNELS_PER_GROUP:
                raise ValueError(f"consumer group {self.group} already has "
                                 f"{MAX_CHANNELS_PER_GROUP} members")
            self.channels[info.channel] = info
            return True
        if old.client_id != info.client_id:
            self.channels[info.channel] = info
            return True
        old.last_update = info.last_update
        return False

    def update_subscriptions(self, subs: Iterable[SubscriptionData]) -> bool:
        """Java's ``updateSubscription``: add new topics, take newer versions, drop topics no
        longer listed. True if anything changed."""
        changed = False
        seen: set[str] = set()
        for sub in subs:
            seen.add(sub.topic)
            old = self.subscriptions.get(sub.topic)
            if old is None:
                if len(self.subscriptions) >= MAX_SUBSCRIPTIONS_PER_GROUP:
                    raise ValueError(f"consumer group {self.group} subscribes to more than "
                                     f"{MAX_SUBSCRIPTIONS_PER_GROUP} topics")
                self.subscriptions[sub.topic] = sub
                changed = True
            elif sub.subVersion > old.subVersion:
                self.subscriptions[sub.topic] = sub
                changed = changed or old.subString != sub.subString
        for topic in [t for t in self.subscriptions if t not in seen]:
            del self.subscriptions[topic]
            changed = True
        return changed


class ConsumerManager:
    def __init__(self, channel_expired_ms: int = 120_000,
                 clock: Callable[[], int] = now_ms) -> None:
        self.groups: dict[str, ConsumerGroupInfo] = {}
        self.channel_expired_ms = channel_expired_ms
        self.clock = clock

    def get(self, group: str) -> ConsumerGroupInfo | None:
        return self.groups.get(group)

    def client_ids(self, group: str) -> list[str]:
        info = self.groups.get(group)
        return info.client_ids() if info else []

    def subscription(self, group: str, topic: str) -> SubscriptionData | None:
        info = self.groups.get(group)
        return info.subscriptions.get(topic) if info else None

    def register(
        self,
        group: str,
        channel: Hashable,
        client_id: str,
        language: str,
        version: int,
        consume_type: ConsumeType | None,
        message_model: MessageModel | None,
        consume_from_where: ConsumeFromWhere | None,
        subscriptions: Iterable[SubscriptionData],
    ) -> bool:
        """Record a consumer's heartbeat; True if the group's members or subscriptions changed."""
        info = self.groups.get(group)
        if info is None:
            if len(self.groups) >= MAX_GROUPS:
                raise ValueError(f"the broker already tracks {MAX_GROUPS} consumer groups")
            info = self.groups[group] = ConsumerGroupInfo(group)
        info.consume_type = consume_type
        info.message_model = message_model
        info.consume_from_where = consume_from_where
        joined = info.update_channel(
            ClientChannelInfo(channel, client_id, language, version, self.clock()))
        subs_changed = info.update_subscriptions(subscriptions)
        return joined or subs_changed

    def unregister(self, group: str, channel: Hashable) -> bool:
        """Remove one member; True if it was a member."""
        info = self.groups.get(group)
        if info is None or info.channels.pop(channel, None) is None:
            return False
        if not info.channels:
            del self.groups[group]
        return True

    def channel_closed(self, channel: Hashable) -> list[str]:
        """Remove a closed connection from every group; the groups that lost a member."""
        return [group for group in list(self.groups) if self.unregister(group, channel)]

    def scan_expired(self) -> list[tuple[Hashable, list[str]]]:
        """Remove members silent for longer than the expiry: (channel, groups it left)."""
        deadline = self.clock() - self.channel_expired_ms
        expired: dict[Hashable, list[str]] = {}
        for group, info in list(self.groups.items()):
            for ch, c in list(info.channels.items()):
                if c.last_update < deadline:
                    self.unregister(group, ch)
                    expired.setdefault(ch, []).append(group)
        return list(expired.items())


class ProducerManager:
    def __init__(self, channel_expired_ms: int = 120_000,
                 clock: Callable[[], int] = now_ms) -> None:
        self.groups: dict[str, dict[Hashable, ClientChannelInfo]] = {}
        self.channel_expired_ms = channel_expired_ms
        self.clock = clock

    def register(self, group: str, channel: Hashable, client_id: str, language: str,
                 version: int) -> None:
        members = self.groups.get(group)
        if members is None:
            if len(self.groups) >= MAX_GROUPS:
                raise ValueError(f"the broker already tracks {MAX_GROUPS} producer groups")
            members = self.groups[group] = {}
        if channel not in members and len(members) >= MAX_CHANNELS_PER_GROUP:
            raise ValueError(f"producer group {group} already has {MAX_CHANNELS_PER_GROUP} members")
        members[channel] = ClientChannelInfo(channel, client_id, language, version, self.clock())

    def unregister(self, group: str, channel: Hashable) -> None:
        members = self.groups.get(group)
        if members is not None:
            members.pop(channel, None)
            if not members:
                del self.groups[group]

    def channel_closed(self, channel: Hashable) -> None:
        for group in list(self.groups):
            self.unregister(group, channel)

    def scan_expired(self) -> list[Hashable]:
        deadline = self.clock() - self.channel_expired_ms
        expired = []
        for group, members in list(self.groups.items()):
            for ch, c in list(members.items()):
                if c.last_update < deadline:
                    self.unregister(group, ch)
                    expired.append(ch)
        return expired

    def channels(self, group: str) -> list[Hashable]:
        return list(self.groups.get(group, {}))
