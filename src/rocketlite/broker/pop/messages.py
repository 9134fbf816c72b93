"""The messages the POP path writes: CK and ack records for the revive topic, a revived message
for the retry topic, a dead letter for ``%DLQ%{group}`` (the topic and queue count are
send-back's, ``broker/send_back.py``), and the reading of one popped message back.

Revived and dead-lettered messages keep the record's body, flag, born time and host and
properties. A revived one gets ``1ST_POP_TIME`` = the CK's pop time on its first revive (or when
absent), as RocketMQ's ``PopReviveService.reviveRetry`` sets it; both also get, when not set
already, ``RETRY_TOPIC`` = the original topic and ``ORIGIN_MESSAGE_ID`` = the first stored copy's
id, as send-back sets them (RocketMQ's revive does not: its clients strip ``%RETRY%{group}_`` from
the topic; with the property the original topic is in the message itself).
"""

from __future__ import annotations

from rocketlite.broker.pop.records import AckMsg, PopCheckPoint
from rocketlite.broker.timer_divert import get_property, set_properties
from rocketlite.formats.message_id import encode_message_id
from rocketlite.formats.message_record import (
    SYSFLAG_BORNHOST_V6,
    SYSFLAG_STOREHOST_V6,
    MessageRecord,
    decode_record,
)
from rocketlite.formats.properties import (
    ORIGIN_MESSAGE_ID,
    RETRY_TOPIC,
    TAGS,
    UNIQ_KEY,
    encode_properties,
)
from rocketlite.protocol.pop_info import FIRST_POP_TIME, RETRY_TOPIC_PREFIX, pop_retry_topic
from rocketlite.store.get_message import GetMessageStatus
from rocketlite.store.message import MessageToStore
from rocketlite.store.message_store import MessageStore

_HOST_FLAGS = SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6  # the store sets these itself


def ck_message(revive_topic: str, revive_qid: int, ck: PopCheckPoint) -> MessageToStore:
    props = encode_properties({TAGS: "ck", UNIQ_KEY: ck.unique_id()})
    return MessageToStore(revive_topic, ck.to_json(), revive_qid, properties=props,
                          born_timestamp=ck.pop_time)


def ack_message(revive_topic: str, revive_qid: int, ack: AckMsg, now: int) -> MessageToStore:
    props = encode_properties({TAGS: ack.tag, UNIQ_KEY: ack.unique_id()})
    return MessageToStore(revive_topic, ack.to_json(), revive_qid, properties=props,
                          born_timestamp=now)


def original_topic(rec: MessageRecord, topic_read: str) -> str:
    """The topic a consumer subscribed to: ``RETRY_TOPIC`` for a message of a retry topic."""
    if topic_read.startswith(RETRY_TOPIC_PREFIX):
        return get_property(rec.properties_text, RETRY_TOPIC) or topic_read
    return topic_read


def _origin_props(rec: MessageRecord, topic_read: str) -> dict[str, str]:
    text = rec.properties_text
    put: dict[str, str] = {}
    if get_property(text, RETRY_TOPIC) is None:
        put[RETRY_TOPIC] = original_topic(rec, topic_read)
    if get_property(text, ORIGIN_MESSAGE_ID) is None:
        put[ORIGIN_MESSAGE_ID] = (get_property(text, UNIQ_KEY) or encode_message_id(
            rec.store_host, rec.store_port, rec.commit_log_offset))
    return put


def retry_message(rec: MessageRecord, ck: PopCheckPoint) -> MessageToStore:
    """``rec`` (popped from ``ck.topic``) for the group's POP retry topic, queue 0."""
    topic = ck.topic if ck.topic.startswith(RETRY_TOPIC_PREFIX) else pop_retry_topic(ck.topic,
                                                                                     ck.cid)
    put = _origin_props(rec, ck.topic)
    if rec.reconsume_times == 0 or get_property(rec.properties_text, FIRST_POP_TIME) is None:
        put[FIRST_POP_TIME] = str(ck.pop_time)
    return MessageToStore(
        topic, rec.body, 0, rec.flag, set_properties(rec.properties_text, (), put),
        rec.sys_flag & ~_HOST_FLAGS, rec.born_timestamp, rec.born_host, rec.born_port,
        rec.reconsume_times + 1,
    )


def dead_letter(rec: MessageRecord, topic_read: str, dlq: str, queue_id: int) -> MessageToStore:
    """``rec`` for the dead-letter topic ``dlq`` (reconsume times kept)."""
    put = _origin_props(rec, topic_read)
    return MessageToStore(
        dlq, rec.body, queue_id, rec.flag, set_properties(rec.properties_text, (), put),
        rec.sys_flag & ~_HOST_FLAGS, rec.born_timestamp, rec.born_host, rec.born_port,
        rec.reconsume_times,
    )


def read_one(store: MessageStore, topic: str, queue_id: int, offset: int) -> MessageRecord | None:
    """The message at ``offset`` of the queue; None when it is gone (or never was)."""
    res = store.get_message(topic, queue_id, offset, 1)
    if res.status is not GetMessageStatus.FOUND or res.queue_offsets[0] != offset:
        return None
    return decode_record(res.body, 0)
