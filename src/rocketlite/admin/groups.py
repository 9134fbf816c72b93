"""Consumer and producer groups: ``consumerProgress``, ``consumerConnection``,
``producerConnection``, ``updateSubGroup`` and ``deleteSubGroup``.

``consumer_progress``: each queue's broker offset (its max offset), the group's committed offset,
the lag (``diff``) and the store time of the last consumed message, from GET_CONSUME_STATS (208)
on every master the NameServer knows; with the group's online members (GET_CONSUMER_CONNECTION_LIST,
203). Without a group, every group a broker knows: those of its subscription-group table (201) and
those with a retry topic (``%RETRY%<group>``, what mqadmin lists). ``consumeTps`` is the broker's
figure, as it answers it.

``update_sub_group`` changes only the settings it is given: it starts from the broker's current
config of the group (GET_SUBSCRIPTIONGROUP_CONFIG, 352; Java's defaults for a new group), unlike
mqadmin, which sends its own defaults for every option left out.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from rocketlite.admin.errors import AdminError
from rocketlite.admin.session import AdminSession, decode, route_masters
from rocketlite.protocol.admin_bodies import (
    ClientConnection,
    ConsumerConnection,
    ConsumeStats,
    ProducerConnection,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
)
from rocketlite.protocol.admin_headers import (
    DeleteSubscriptionGroupRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
)
from rocketlite.protocol.codes import RequestCode, ResponseCode

RETRY_PREFIX = "%RETRY%"
_GROUP = re.compile(r"[%|a-zA-Z0-9_-]{1,255}", re.ASCII)

SUB_GROUP_FIELDS = frozenset(f.name for f in dataclasses.fields(SubscriptionGroupConfig)) - {
    "groupName", "attributes"}
"""The settings ``update_sub_group`` may change (SubscriptionGroupConfig's fields)."""


@dataclasses.dataclass(slots=True)
class QueueProgress:
    """One queue of a group: ``diff`` = ``broker_offset - consumer_offset``; ``last_timestamp``
    the store time of the last consumed message (0: none)."""

    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    diff: int
    last_timestamp: int


@dataclasses.dataclass(slots=True)
class GroupProgress:
    """A group's queues and totals; ``online`` counts its connected members (0: offline)."""

    group: str
    online: int
    consume_type: str | None
    message_model: str | None
    consume_tps: float
    diff_total: int
    queues: list[QueueProgress]


@dataclasses.dataclass(slots=True)
class SubGroupUpdate:
    """One broker that took ``updateSubGroup``'s config (the config it now holds)."""

    address: str
    config: SubscriptionGroupConfig


def check_group(group: str) -> None:
    """Java's ``TopicValidator.validateGroup``, checked before anything is sent."""
    if _GROUP.fullmatch(group) is None:
        raise AdminError(f"group {group!r} is invalid: 1-255 characters of letters, digits, "
                         "%, |, _ or -")


async def _groups_known(session: AdminSession, masters: list[str]) -> set[str]:
    """Every group of the masters' subscription tables and of the retry topics."""
    groups: set[str] = set()
    for addr in masters:
        reply = await session.call(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        groups.update(decode(SubscriptionGroupWrapper, reply, addr,
                             "subscription group table").subscriptionGroupTable)
    groups.update(t[len(RETRY_PREFIX):] for t in await session.topics()
                  if t.startswith(RETRY_PREFIX))
    return groups


async def broker_connection(session: AdminSession, addr: str,
                            group: str) -> ConsumerConnection | None:
    """The group's members as the broker ``addr`` sees them; None when it has none."""
    reply = await session.call(
        addr, RequestCode.GET_CONSUMER_CONNECTION_LIST,
        GetConsumerConnectionListRequestHeader(consumerGroup=group),
        accept=(ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE))
    if reply.code != ResponseCode.SUCCESS:
        return None
    return decode(ConsumerConnection, reply, addr, "consumer connection list")


async def _connection(session: AdminSession, group: str,
                      masters: list[str]) -> ConsumerConnection | None:
    """The group's members as the masters see them (their union); None when it is offline."""
    merged: ConsumerConnection | None = None
    for addr in masters:
        cc = await broker_connection(session, addr, group)
        if cc is None:
            continue
        if merged is None:
            merged = cc
        else:
            merged.connectionSet |= cc.connectionSet
            merged.subscriptionTable.update(cc.subscriptionTable)
    return merged


async def connection_count(session: AdminSession, group: str, masters: list[str]) -> int:
    """How many members of ``group`` the masters see online."""
    cc = await _connection(session, group, masters)
    return len(cc.connectionSet) if cc is not None else 0


async def _progress(session: AdminSession, group: str, masters: dict[str, str]) -> GroupProgress:
    queues: list[QueueProgress] = []
    tps = 0.0
    for addr in masters.values():
        reply = await session.call(addr, RequestCode.GET_CONSUME_STATS,
                                   GetConsumeStatsRequestHeader(consumerGroup=group))
        stats = decode(ConsumeStats, reply, addr, "consume stats")
        tps += stats.consumeTps
        for mq, w in stats.offsetTable.items():
            queues.append(QueueProgress(mq.topic, mq.brokerName, mq.queueId, w.brokerOffset,
                                        w.consumerOffset, w.brokerOffset - w.consumerOffset,
                                        w.lastTimestamp))
    queues.sort(key=lambda q: (q.topic, q.broker_name, q.queue_id))
    cc = await _connection(session, group, list(masters.values()))
    return GroupProgress(
        group, len(cc.connectionSet) if cc is not None else 0,
        cc.consumeType.name if cc is not None and cc.consumeType is not None else None,
        cc.messageModel.name if cc is not None and cc.messageModel is not None else None,
        tps, sum(q.diff for q in queues), queues)


async def consumer_progress(session: AdminSession, group: str | None = None) -> list[GroupProgress]:
    """The progress of ``group``, or of every group the brokers know (module doc), by name."""
    masters = await session.all_masters()
    if not masters:
        raise AdminError("no master broker is registered at the NameServer")
    if group is not None:
        check_group(group)
        progress = await _progress(session, group, masters)
        if not progress.queues and not progress.online:
            raise AdminError(f"group {group!r} has no committed offsets on any broker and no "
                             "online member")
        return [progress]
    names = await _groups_known(session, list(masters.values()))
    return [await _progress(session, g, masters) for g in sorted(names)]


async def consumer_connection(session: AdminSession, group: str) -> ConsumerConnection:
    """The group's online members (every master's view, merged) and their subscriptions."""
    check_group(group)
    cc = await _connection(session, group, list((await session.all_masters()).values()))
    if cc is None:
        raise AdminError(f"consumer group {group!r} is not online (no broker has a member)")
    return cc


async def producer_connection(session: AdminSession, group: str,
                              topic: str) -> list[ClientConnection]:
    """The producers of ``group`` connected to the masters of ``topic``, by client id."""
    check_group(group)
    found: set[ClientConnection] = set()
    for addr in route_masters(await session.route(topic)).values():
        reply = await session.call(addr, RequestCode.GET_PRODUCER_CONNECTION_LIST,
                                   GetProducerConnectionListRequestHeader(producerGroup=group),
                                   accept=(ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR))
        if reply.code == ResponseCode.SUCCESS:
            found |= decode(ProducerConnection, reply, addr, "producer connection list").connectionSet
    if not found:
        raise AdminError(f"producer group {group!r} has no connection to the brokers of "
                         f"topic {topic!r}")
    return sorted(found)


async def _current(session: AdminSession, addr: str, group: str) -> SubscriptionGroupConfig:
    reply = await session.call(addr, RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG,
                               GetSubscriptionGroupConfigRequestHeader(group=group),
                               accept=(ResponseCode.SUCCESS,
                                       ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST))
    if reply.code != ResponseCode.SUCCESS:
        return SubscriptionGroupConfig(groupName=group)
    return decode(SubscriptionGroupConfig, reply, addr, "subscription group config")


async def update_sub_group(session: AdminSession, group: str, changes: dict[str, Any], *,
                           broker_addr: str | None = None,
                           cluster: str | None = None) -> list[SubGroupUpdate]:
    """Create ``group`` or change the settings in ``changes`` (SubscriptionGroupConfig field ->
    value) on ``broker_addr`` or every master of ``cluster``; the others keep their value."""
    check_group(group)
    unknown = sorted(set(changes) - SUB_GROUP_FIELDS)
    if unknown:
        raise AdminError(f"not a subscription group setting: {', '.join(unknown)}")
    out = []
    for addr in await session.targets(broker_addr, cluster):
        sgc = dataclasses.replace(await _current(session, addr, group), **changes)
        await session.call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                           body=sgc.to_json())
        out.append(SubGroupUpdate(addr, sgc))
    return out


async def delete_sub_group(session: AdminSession, group: str, *, broker_addr: str | None = None,
                           cluster: str | None = None, clean_offset: bool = False) -> list[str]:
    """Delete ``group``'s settings (with ``clean_offset`` its committed offsets too) on
    ``broker_addr`` or every master of ``cluster``; the addresses done. A group none of them
    knows (settings or retry topic) is an ``AdminError``."""
    check_group(group)
    header = DeleteSubscriptionGroupRequestHeader(groupName=group, cleanOffset=clean_offset)
    done = []
    targets = await session.targets(broker_addr, cluster)
    if group not in await _groups_known(session, targets):  # a typo must not read as "deleted"
        raise AdminError(f"group {group!r} does not exist on {', '.join(targets) or 'any broker'}"
                         ": nothing deleted")
    for addr in targets:
        await session.call(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, header)
        done.append(addr)
    return done
