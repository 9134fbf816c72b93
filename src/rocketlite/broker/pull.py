"""PULL_MESSAGE (11): read a batch from one queue, with long polling and tag filtering.

Checks, in Java's order: broker readable, subscription group known (or auto-created) and allowed to
consume, topic known and readable, queue id within the read queues, subscription (from the request
when its SUBSCRIPTION flag is set, else the one registered by HEART_BEAT; SUBSCRIPTION_NOT_EXIST or
SUBSCRIPTION_NOT_LATEST when missing or older than the request's ``subVersion``).

Store status to response code (``PullMessageProcessor``):

=========================================  ===========================================
FOUND                                      SUCCESS (0), body = raw records back to back
NO_MATCHED_MESSAGE, MESSAGE_WAS_REMOVING   PULL_RETRY_IMMEDIATELY (20)
NO_MATCHED_LOGIC_QUEUE, NO_MESSAGE_IN_QUEUE  PULL_NOT_FOUND (19) at offset 0, else OFFSET_MOVED (21)
OFFSET_FOUND_NULL, OFFSET_OVERFLOW_ONE     PULL_NOT_FOUND (19)
OFFSET_OVERFLOW_BADLY, OFFSET_TOO_SMALL    PULL_OFFSET_MOVED (21), nextBeginOffset corrected
=========================================  ===========================================

On a SLAVE an offset beyond the queue's end (or a queue it does not have yet) is no reason to move
the consumer: it answers PULL_NOT_FOUND at the requested offset, held like any other, until
replication brings the messages (Java answers PULL_RETRY_IMMEDIATELY at the same offset, which
makes a consumer of a slave without its master spin).

PULL_NOT_FOUND with the SUSPEND flag is held (``long_polling``) for ``suspendTimeoutMillis``
(``shortPollingTimeMills`` when long polling is off) and answered when messages arrive or time is
up. With COMMIT_OFFSET the request's ``commitOffset`` is stored as the group's offset first (on a
master only: a slave's offsets are its master's, synced by ``ha.slave_sync``).

``suggestWhichBrokerId`` (Java's, with ``slaveReadEnable``): when the last message read lies more
than ``in_memory_bytes`` behind the CommitLog's end the consumer is "reading from disk" and is told
to pull from the group's ``whichBrokerWhenConsumeSlowly`` (1, a slave), otherwise from the group's
``brokerId`` (0, the master). ``in_memory_bytes`` is Java's rule, ``accessMessageInMemoryMaxRatio``
(40) % of the machine's physical memory. A master with no slave connected always answers the
group's ``brokerId``: there is nowhere else to read.
Tag filtering compares ConsumeQueue tag hashes with the subscription's ``codeSet``; clients filter
again by tag string, as in RocketMQ.
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
from collections import OrderedDict
from typing import TYPE_CHECKING

from rocketlite.broker.config import PERM_READ
from rocketlite.formats.message_record import OFFSETS_AT
from rocketlite.protocol.bodies import MessageModel, SubscriptionData
from rocketlite.protocol.codes import PullSysFlag, RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import PullMessageRequestHeader
from rocketlite.remoting.connection import Connection
from rocketlite.store.get_message import GetMessageStatus

if TYPE_CHECKING:
    from rocketlite.broker.broker import Broker

log = logging.getLogger(__name__)

MAX_SUSPEND_MS = 60_000
REHOLD_MIN_S = 0.01  # a held pull woken by unmatched arrivals is held on if this much time is left
SUBSCRIPTION_CACHE = 4096

_ST = GetMessageStatus
_RC = ResponseCode
# The sysFlag bits as plain ints: ``int & IntFlag`` goes through the enum machinery (microseconds).
_COMMIT_OFFSET = int(PullSysFlag.COMMIT_OFFSET)
_SUSPEND = int(PullSysFlag.SUSPEND)
_SUBSCRIPTION = int(PullSysFlag.SUBSCRIPTION)
_PHYS = struct.Struct(">q")
_PHYS_AT = OFFSETS_AT + 8  # PHYSICALOFFSET follows QUEUEOFFSET
ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO = 40  # Java's accessMessageInMemoryMaxRatio (percent)


def total_physical_memory() -> int:
    """The machine's RAM in bytes (0 when the platform does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


# On a slave, offsets beyond its queues are not corrected (Java's nextOffsetCorrection without
# offsetCheckInSlave): replication may simply not have brought the messages yet.
_AHEAD_OF_SLAVE = frozenset({_ST.OFFSET_OVERFLOW_BADLY, _ST.NO_MATCHED_LOGIC_QUEUE,
                             _ST.NO_MESSAGE_IN_QUEUE})
_CODES = {
    _ST.FOUND: _RC.SUCCESS,
    _ST.NO_MATCHED_MESSAGE: _RC.PULL_RETRY_IMMEDIATELY,
    _ST.MESSAGE_WAS_REMOVING: _RC.PULL_RETRY_IMMEDIATELY,
    _ST.OFFSET_FOUND_NULL: _RC.PULL_NOT_FOUND,
    _ST.OFFSET_OVERFLOW_ONE: _RC.PULL_NOT_FOUND,
    _ST.OFFSET_OVERFLOW_BADLY: _RC.PULL_OFFSET_MOVED,
    _ST.OFFSET_TOO_SMALL: _RC.PULL_OFFSET_MOVED,
}


class PullProcessor:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.config = broker.config
        self.store = broker.store
        self._subs: OrderedDict[tuple[str, str, str], SubscriptionData] = OrderedDict()
        # A consumer whose last message read is more than this behind the CommitLog's end is
        # told to read from a slave (tests lower it).
        ram = total_physical_memory() or 8 << 30
        self.in_memory_bytes = ram * ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO // 100

    def register(self) -> None:
        self.broker.server.register(RequestCode.PULL_MESSAGE, self.pull)

    def pull(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        return self.process(conn, cmd, allow_suspend=True)

    def _subscription(self, topic: str, expression: str | None, expression_type: str | None
                      ) -> SubscriptionData:
        key = (topic, expression or "", expression_type or "TAG")
        sub = self._subs.get(key)
        if sub is None:
            sub = SubscriptionData.from_expression(topic, expression, expression_type or "TAG")
            self._subs[key] = sub
            if len(self._subs) > SUBSCRIPTION_CACHE:
                self._subs.popitem(last=False)
        return sub

    def _check(self, cmd: RemotingCommand, h: PullMessageRequestHeader
               ) -> SubscriptionData | RemotingCommand:
        b = self.broker
        if not b.config.broker_permission & PERM_READ:
            return cmd.response(_RC.NO_PERMISSION,
                                f"the broker[{b.config.broker_name}] pulling message is forbidden")
        group = b.subscriptions.get(h.consumerGroup)
        if group is None:
            return cmd.response(_RC.SUBSCRIPTION_GROUP_NOT_EXIST, b.subscriptions.missing(
                h.consumerGroup, f"subscription group [{h.consumerGroup}] does not exist"))
        if not group.consumeEnable:
            return cmd.response(_RC.NO_PERMISSION,
                                f"subscription group no permission, {h.consumerGroup}")
        tc = b.topics.get(h.topic)
        if tc is None:
            return cmd.response(_RC.TOPIC_NOT_EXIST,
                                f"topic[{h.topic}] not exist, apply first please!")
        if not tc.perm & PERM_READ:
            return cmd.response(_RC.NO_PERMISSION,
                                f"the topic[{h.topic}] pulling message is forbidden")
        if not 0 <= h.queueId < tc.readQueueNums:
            return cmd.response(_RC.SYSTEM_ERROR,
                                f"queueId[{h.queueId}] is illegal, topic:[{h.topic}] "
                                f"topicConfig.readQueueNums:[{tc.readQueueNums}]")
        if h.sysFlag & _SUBSCRIPTION:
            if h.expressionType not in (None, "", "TAG"):
                return cmd.response(_RC.SYSTEM_ERROR,
                                    f"the broker does not support filtering by "
                                    f"{h.expressionType}")
            return self._subscription(h.topic, h.subscription, h.expressionType)
        info = b.consumers.get(h.consumerGroup)
        if info is None:
            return cmd.response(_RC.SUBSCRIPTION_NOT_EXIST,
                                f"the consumer's group info does not exist: {h.consumerGroup}")
        if info.message_model is MessageModel.BROADCASTING and not group.consumeBroadcastEnable:
            return cmd.response(_RC.NO_PERMISSION,
                                f"the consumer group[{h.consumerGroup}] can not consume by "
                                "broadcast way")
        sub = info.subscriptions.get(h.topic)
        if sub is None:
            return cmd.response(_RC.SUBSCRIPTION_NOT_EXIST,
                                f"the consumer's subscription does not exist: {h.topic}")
        if sub.subVersion < h.subVersion:
            return cmd.response(_RC.SUBSCRIPTION_NOT_LATEST,
                                "the consumer's subscription is not the latest")
        return sub

    def process(self, conn: Connection, cmd: RemotingCommand, allow_suspend: bool,
                offset: int | None = None) -> RemotingCommand | None:
        """Run a pull; ``offset`` (a held pull's re-run) replaces the request's queue offset."""
        h = PullMessageRequestHeader.from_ext(cmd.ext_fields)
        sub = self._check(cmd, h)
        if isinstance(sub, RemotingCommand):
            return sub
        cfg = self.config
        max_count = min(max(h.maxMsgNums, 1), cfg.max_transfer_count)
        max_bytes = cfg.max_transfer_bytes
        if h.maxMsgBytes is not None and h.maxMsgBytes > 0:
            max_bytes = min(max_bytes, h.maxMsgBytes)
        tag_filter = None if sub.matches_all else sub.codeSet.__contains__
        start = h.queueOffset if offset is None else offset
        result = self.store.get_message(h.topic, h.queueId, start, max_count, max_bytes,
                                        tag_filter)
        status = result.status
        code = _CODES.get(status)
        next_begin = result.next_begin_offset
        if code is None:  # NO_MATCHED_LOGIC_QUEUE, NO_MESSAGE_IN_QUEUE
            code = _RC.PULL_OFFSET_MOVED if start != 0 else _RC.PULL_NOT_FOUND
        if code == _RC.PULL_OFFSET_MOVED and status in _AHEAD_OF_SLAVE and self.broker.slave:
            # A slave behind its master: the offset is not wrong, the messages are on their
            # way. Held as "no new message" at the same offset (the consumer's offset is kept).
            code, next_begin = _RC.PULL_NOT_FOUND, start
        if allow_suspend and h.sysFlag & _COMMIT_OFFSET and not self.broker.slave:
            self.broker.offsets.commit(h.consumerGroup, h.topic, h.queueId, h.commitOffset)
        if code == _RC.PULL_NOT_FOUND and allow_suspend and h.sysFlag & _SUSPEND:
            timeout_ms = h.suspendTimeoutMillis if cfg.long_polling_enable \
                else cfg.short_polling_time_mills
            timeout_ms = min(max(timeout_ms, 0), MAX_SUSPEND_MS)
            if self._hold(conn, cmd, h, timeout_ms / 1000):
                return None
        if result.sizes:
            self.broker.stats.got_messages += len(result.sizes)
            if (metrics := self.broker.metrics) is not None:
                metrics.fold_pull(h.consumerGroup, h.topic, h.queueId, len(result.sizes),
                                  len(result.body), next_begin)
        return cmd.response(code, status.value, {
            "suggestWhichBrokerId": self._suggest(h.consumerGroup, result.body, result.sizes),
            "nextBeginOffset": str(next_begin),
            "minOffset": str(result.min_offset),
            "maxOffset": str(result.max_offset),
        }, result.body)

    def _suggest(self, group: str, body: bytes, sizes: list[int]) -> str:
        """``suggestWhichBrokerId`` for a pull that read ``body`` (see the module doc)."""
        sgc = self.broker.subscriptions.table.get(group)
        home = sgc.brokerId if sgc is not None else 0
        if not sizes:
            return str(home)
        last_phys = _PHYS.unpack_from(body, len(body) - sizes[-1] + _PHYS_AT)[0]
        if self.store.commitlog.max_offset - last_phys <= self.in_memory_bytes:
            return str(home)
        ha = self.broker.ha_server
        if not self.broker.slave and (ha is None or not ha.slave_connected):
            return str(home)
        return str(sgc.whichBrokerWhenConsumeSlowly if sgc is not None else 1)

    def _hold(self, conn: Connection, cmd: RemotingCommand, h: PullMessageRequestHeader,
              timeout_s: float) -> bool:
        """Hold the pull until messages arrive or ``timeout_s`` runs out. Arrivals the
        subscription does not match (other tags) do not answer it: it is held on, from past
        them, for the rest of its time (Java checks the tag code before waking a pull)."""
        store, hold = self.store, self.broker.hold
        key = (h.topic, h.queueId)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        offset = h.queueOffset

        def current_end() -> int:
            return store.max_offset_in_queue(h.topic, h.queueId)

        def run() -> None:
            nonlocal offset
            if not conn.is_open:
                return
            try:
                reply = self.process(conn, cmd, allow_suspend=False, offset=offset)
            except Exception as e:
                log.exception("held pull of %s:%d failed", h.topic, h.queueId)
                reply = cmd.response(_RC.SYSTEM_ERROR, f"{type(e).__name__}: {e}")
            if reply is None:
                return
            remaining = deadline - loop.time()
            if reply.code == _RC.PULL_RETRY_IMMEDIATELY and remaining > REHOLD_MIN_S:
                offset = int(reply.ext_fields["nextBeginOffset"])
                if hold.hold(key, offset, remaining, wake, current_end):
                    return
            conn.send(reply)

        def wake() -> None:
            # released by an arrival or the timeout: read and answer once the client has read
            # its earlier replies (a client that reads none gets no more of them)
            conn.when_writable(run)

        return hold.hold(key, offset, timeout_s, wake, current_end)
