"""``resend-dlq``: dead letters of a consumer group (``%DLQ%{group}``, readable in rocketlite, see
``broker/send_back.py``) are re-sent to their original topic (the ``RETRY_TOPIC`` property the
broker stamped on the first send-back, else the topic given) with the same body, tags, keys and
user properties (the retry, delay and DLQ bookkeeping stripped: a fresh message with a fresh id
and reconsumeTimes 0), so the group consumes them again once the cause is fixed.

Progress is committed under a tool consumer group (``RESEND_DLQ_GROUP``), so a second run does not
re-send what the first one did. Bounded by a maximum and by an idle timeout: it stops once the DLQ
yields nothing for that long. It also stops at the first dead letter it cannot re-send (no
original topic, a failed send), having committed only what went before it: nothing is skipped for
good, a re-run starts there; ``ResendCounts.stopped`` says why.
"""

from __future__ import annotations

import dataclasses

from rocketlite.admin.errors import AdminError, TopicNotFoundError
from rocketlite.admin.session import AdminSession
from rocketlite.client.errors import MQBrokerError, MQClientError
from rocketlite.client.lite_pull_consumer import LitePullConsumer
from rocketlite.client.message import RESERVED_PROPERTIES, Message, MessageExt
from rocketlite.client.producer import Producer
from rocketlite.common.errors import RemotingError
from rocketlite.formats import properties as props
from rocketlite.protocol.bodies import ConsumeFromWhere, MessageQueue

RESEND_DLQ_GROUP = "rocketlite-resend-dlq"
DLQ_PREFIX = "%DLQ%"


@dataclasses.dataclass(slots=True)
class ResendCounts:
    read: int = 0
    resent: int = 0
    skipped: int = 0  # no RETRY_TOPIC and no topic given: the original topic is unknown
    failed: int = 0
    by_topic: dict[str, int] = dataclasses.field(default_factory=dict)  # re-sent per topic
    stopped: str | None = None  # why the run stopped before the DLQ was drained, if it did


def _copy(m: MessageExt, topic: str) -> Message:
    user = {k: v for k, v in m.properties.items() if k not in RESERVED_PROPERTIES}
    return Message(topic, m.body, tags=m.tags, keys=m.keys or None, properties=user, flag=m.flag)


async def resend_dlq(session: AdminSession, group: str, max_messages: int | None = None,
                     idle_s: float = 3.0, topic: str | None = None) -> ResendCounts:
    """Re-send up to ``max_messages`` dead letters of ``group`` to their original topics
    (``topic`` for those without ``RETRY_TOPIC``, e.g. written to the DLQ by another tool).
    AdminError when the group has no DLQ topic (it never had a dead letter)."""
    dlq = DLQ_PREFIX + group
    try:
        await session.route(dlq)
    except TopicNotFoundError as e:
        raise AdminError(f"group {group!r} has no dead letters (no topic {dlq})") from e
    try:
        return await _resend(session, group, dlq, max_messages, idle_s, topic)
    except (MQClientError, MQBrokerError, RemotingError) as e:
        raise AdminError(f"resend of {dlq} failed: {e}") from e


async def _resend(session: AdminSession, group: str, dlq: str, max_messages: int | None,
                  idle_s: float, topic: str | None) -> ResendCounts:
    counts = ResendCounts()
    namesrv, creds = session.namesrv, session.credentials
    reader = LitePullConsumer(f"{RESEND_DLQ_GROUP}-{group}"[:120], namesrv_addr=namesrv,
                              consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                              auto_commit=False, credentials=creds)
    reader.subscribe(dlq)
    async with Producer(f"{RESEND_DLQ_GROUP}-P"[:120], namesrv_addr=namesrv,
                        credentials=creds) as producer:
        await reader.start()
        try:
            while counts.stopped is None and (max_messages is None or counts.read < max_messages):
                batch = await reader.poll(idle_s)
                if not batch:
                    break
                if max_messages is not None:
                    batch = batch[:max_messages - counts.read]
                done: dict[MessageQueue, int] = {}
                for m in batch:
                    counts.read += 1
                    target = m.properties.get(props.RETRY_TOPIC) or topic
                    if not target:
                        counts.skipped += 1
                        counts.stopped = f"{m.msg_id} has no RETRY_TOPIC: give the topic"
                        break
                    try:
                        await producer.send(_copy(m, target))
                    except Exception as e:  # noqa: BLE001 - reported; the run stops before it
                        counts.failed += 1
                        counts.stopped = f"cannot re-send {m.msg_id} to {target}: {e}"
                        break
                    counts.resent += 1
                    counts.by_topic[target] = counts.by_topic.get(target, 0) + 1
                    mq = MessageQueue(m.topic, m.broker_name, m.queue_id)
                    done[mq] = max(done.get(mq, 0), m.queue_offset + 1)
                if done:
                    await reader.commit_sync(done)  # what was re-sent, not all that was polled
        finally:
            await reader.shutdown()
    return counts
