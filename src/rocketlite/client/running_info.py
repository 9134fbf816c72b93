"""The client's answer to GET_CONSUMER_RUNNING_INFO (307, relayed by a broker for mqadmin
``consumerStatus``), as Java's ``ClientRemotingProcessor.getConsumerRunningInfo``: the
ConsumerRunningInfo of this client's consumer of the group, with the NameServers, consume type
and client version added to its properties and, with ``jstackEnable``, a dump of the process's
threads and of the event loop's tasks in ``jstack`` (Python's, not a JVM's). A group this client
does not consume: SYSTEM_ERROR "The Consumer Group <G> not exist in this consumer".

:func:`process_queue_info` fills a ProcessQueueInfo from a push consumer's ``ProcessQueue``
(Java's ``fillProcessQueueInfo``); its monotonic times become wall-clock ms.
"""

from __future__ import annotations

import asyncio
import io
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from typing import Any, Protocol

from rocketlite import __version__
from rocketlite.client.consume_stats import ConsumeStatsTracker
from rocketlite.client.process_queue import ProcessQueue
from rocketlite.common.errors import FormatError
from rocketlite.protocol.admin_headers import GetConsumerRunningInfoRequestHeader
from rocketlite.protocol.bodies import ConsumerData, MessageQueue, SubscriptionData
from rocketlite.protocol.codes import CURRENT_VERSION, MQVersion, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.running_info import (
    PROP_CLIENT_VERSION,
    PROP_CONSUME_TYPE,
    PROP_CONSUMER_START_TIMESTAMP,
    PROP_NAMESERVER_ADDR,
    ConsumerRunningInfo,
    ProcessQueueInfo,
)

MIB = 1024 * 1024


class RunningInfoSource(Protocol):
    """A consumer that can describe itself."""

    def running_info(self) -> ConsumerRunningInfo: ...

    def consumer_data(self) -> ConsumerData: ...


def build(settings: Mapping[str, object], subscriptions: Mapping[str, SubscriptionData],
          queues: Mapping[MessageQueue, ProcessQueueInfo], stats: ConsumeStatsTracker | None,
          start_ms: int) -> ConsumerRunningInfo:
    """A ConsumerRunningInfo: ``settings`` as properties (Java's field names; bools as
    ``true``/``false``), the subscriptions, the queues and each subscribed topic's figures."""
    props = {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in settings.items()}
    props[PROP_CONSUMER_START_TIMESTAMP] = str(start_ms)
    return ConsumerRunningInfo(
        properties=props,
        subscriptionSet=[subscriptions[t] for t in sorted(subscriptions)],
        mqTable=dict(sorted(queues.items())),
        statusTable={t: stats.status(t) for t in sorted(subscriptions)} if stats else {})


def process_queue_info(pq: ProcessQueue[Any], commit_offset: int) -> ProcessQueueInfo:
    """Java's ``fillProcessQueueInfo``: what ``pq`` buffers, its lock and its last times."""
    now_ms, now = time.time() * 1000, pq.now()

    def wall(t: float) -> int:
        return int(now_ms - (now - t) * 1000)

    taken = pq.taken_offsets()
    return ProcessQueueInfo(
        commitOffset=commit_offset,
        cachedMsgMinOffset=max(pq.min_offset, 0), cachedMsgMaxOffset=max(pq.max_offset, 0),
        cachedMsgCount=pq.msg_count - pq.taken_count, cachedMsgSizeInMiB=pq.msg_size // MIB,
        transactionMsgMinOffset=taken[0] if taken else 0,
        transactionMsgMaxOffset=taken[-1] if taken else 0, transactionMsgCount=len(taken),
        locked=pq.locked, tryUnlockTimes=pq.try_unlock_times,
        lastLockTimestamp=wall(pq.last_lock_time), droped=pq.dropped,
        lastPullTimestamp=wall(pq.last_pull_time), lastConsumeTimestamp=wall(pq.last_consume_time))


def answer(cmd: RemotingCommand, consumers: Mapping[str, RunningInfoSource],
           namesrvs: list[str]) -> RemotingCommand:
    """The reply to a GET_CONSUMER_RUNNING_INFO ``cmd`` (module doc)."""
    try:
        h = GetConsumerRunningInfoRequestHeader.from_ext(cmd.ext_fields)
    except FormatError as e:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"bad GET_CONSUMER_RUNNING_INFO header: {e}")
    consumer = consumers.get(h.consumerGroup)
    if consumer is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR,
                            f"The Consumer Group <{h.consumerGroup}> not exist in this consumer")
    info = consumer.running_info()
    info.properties[PROP_NAMESERVER_ADDR] = "".join(f"{a};" for a in namesrvs)
    consume_type = consumer.consumer_data().consumeType
    info.properties[PROP_CONSUME_TYPE] = consume_type.name if consume_type is not None else ""
    info.properties[PROP_CLIENT_VERSION] = (f"{MQVersion(CURRENT_VERSION).name} "
                                            f"(rocketlite {__version__})")
    if h.jstackEnable:
        info.jstack = thread_dump()
    return cmd.response(ResponseCode.SUCCESS, None, None, info.to_json())


def thread_dump() -> str:
    """Every thread's stack, then every task of the running event loop (jstack's place)."""
    names = {t.ident: t for t in threading.enumerate()}
    out: list[str] = []
    for ident, frame in sorted(sys._current_frames().items()):
        t = names.get(ident)
        name = t.name if t is not None else "?"
        daemon = " daemon" if t is not None and t.daemon else ""
        out.append(f'"{name}" #{ident}{daemon}\n' + "".join(traceback.format_stack(frame)))
    try:
        tasks = sorted(asyncio.all_tasks(), key=lambda t: t.get_name())
    except RuntimeError:  # no running loop
        tasks = []
    for task in tasks:
        buf = io.StringIO()
        task.print_stack(file=buf)
        out.append(buf.getvalue())
    return "\n".join(out)
