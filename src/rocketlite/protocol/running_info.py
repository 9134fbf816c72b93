"""``body/ConsumerRunningInfo``: what a consumer client answers GET_CONSUMER_RUNNING_INFO (307),
which the broker relays to mqadmin ``consumerStatus``; declared like
:mod:`rocketlite.protocol.bodies` (same codecs, Java's property names).

``mqTable`` and ``mqPopTable`` are keyed by ``MessageQueue`` objects, as Java's fastjson writes
them (not standard JSON; :mod:`rocketlite.protocol.fastjson` reads and writes it). Timestamps
are ms since the epoch; ``ConsumeStatus`` figures are Java doubles (written with a fraction).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rocketlite.protocol.bodies import JsonBody, MessageQueue, SubscriptionData
from rocketlite.protocol.headers import Int32, Int64

__all__ = [
    "PROP_CLIENT_VERSION",
    "PROP_CONSUMER_START_TIMESTAMP",
    "PROP_CONSUME_ORDERLY",
    "PROP_CONSUME_TYPE",
    "PROP_NAMESERVER_ADDR",
    "PROP_THREADPOOL_CORE_SIZE",
    "ConsumeStatus",
    "ConsumerRunningInfo",
    "PopProcessQueueInfo",
    "ProcessQueueInfo",
]

# ConsumerRunningInfo's property keys (Java's constants; note the one without an underscore)
PROP_NAMESERVER_ADDR = "PROP_NAMESERVER_ADDR"
PROP_THREADPOOL_CORE_SIZE = "PROP_THREADPOOL_CORE_SIZE"
PROP_CONSUME_ORDERLY = "PROP_CONSUMEORDERLY"
PROP_CONSUME_TYPE = "PROP_CONSUME_TYPE"
PROP_CLIENT_VERSION = "PROP_CLIENT_VERSION"
PROP_CONSUMER_START_TIMESTAMP = "PROP_CONSUMER_START_TIMESTAMP"


@dataclass(slots=True, kw_only=True)
class ProcessQueueInfo(JsonBody):
    """``body/ProcessQueueInfo``: one queue a push consumer works on. ``commitOffset`` is the
    offset it will commit; ``cachedMsg*`` what it has pulled and not yet consumed (min/max 0
    when none); ``transactionMsg*`` the batch an orderly consumer is running; ``locked`` and
    ``tryUnlockTimes`` orderly consumption's broker lock. ``droped`` is Java's spelling."""

    commitOffset: Int64 = 0
    cachedMsgMinOffset: Int64 = 0
    cachedMsgMaxOffset: Int64 = 0
    cachedMsgCount: Int32 = 0
    cachedMsgSizeInMiB: Int32 = 0
    transactionMsgMinOffset: Int64 = 0
    transactionMsgMaxOffset: Int64 = 0
    transactionMsgCount: Int32 = 0
    locked: bool = False
    tryUnlockTimes: Int64 = 0
    lastLockTimestamp: Int64 = 0
    droped: bool = False
    lastPullTimestamp: Int64 = 0
    lastConsumeTimestamp: Int64 = 0


@dataclass(slots=True, kw_only=True)
class PopProcessQueueInfo(JsonBody):
    """``body/PopProcessQueueInfo``: one queue a consumer pops from (5.x pop mode)."""

    waitAckCount: Int32 = 0
    droped: bool = False
    lastPopTimestamp: Int64 = 0


@dataclass(slots=True, kw_only=True)
class ConsumeStatus(JsonBody):
    """``body/ConsumeStatus``: a topic's figures over the last minute: pull and consume round
    trip (ms), pulled messages and consumed (OK, failed) messages per second, and the failed
    messages counted over that minute."""

    pullRT: float = 0.0
    pullTPS: float = 0.0
    consumeRT: float = 0.0
    consumeOKTPS: float = 0.0
    consumeFailedTPS: float = 0.0
    consumeFailedMsgs: Int64 = 0


@dataclass(slots=True, kw_only=True)
class ConsumerRunningInfo(JsonBody):
    """``body/ConsumerRunningInfo``: the consumer's settings (``properties``, Java's field
    names and the ``PROP_*`` keys), its subscriptions, its queues (``mqTable``; ``mqPopTable``
    in pop mode), per topic its ``statusTable`` figures, and with ``jstackEnable`` a dump of its
    threads (``jstack``)."""

    properties: dict[str, str] = field(default_factory=dict)
    subscriptionSet: list[SubscriptionData] = field(default_factory=list)
    mqTable: dict[MessageQueue, ProcessQueueInfo] = field(default_factory=dict)
    mqPopTable: dict[MessageQueue, PopProcessQueueInfo] = field(default_factory=dict)
    statusTable: dict[str, ConsumeStatus] = field(default_factory=dict)
    userConsumerInfo: dict[str, str] = field(default_factory=dict)
    jstack: str | None = None
