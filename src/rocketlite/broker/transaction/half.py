"""The message side of transactional messages (RocketMQ 4.9's ``TransactionalMessageBridge``,
``EndTransactionProcessor.endMessageTransaction`` and
``DefaultTransactionalMessageCheckListener``): how a message is rewritten on its way into the half
topic, out of it on commit, back into it for another check, into the op topic as a resolution,
and into ``TRANS_CHECK_MAX_TIME_TOPIC`` when its producer never decided.

Everything here is pure (a record or a message in, a ``MessageToStore`` out), so the processor
(``end.py``) and the check service (``check.py``) share one definition of each rewrite. Property
strings are edited in place with the timer's helpers (``timer_divert.get_property`` /
``set_properties``) rather than decoded and re-encoded.

- Half (``parseHalfMessageInner``): topic ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0, ``REAL_TOPIC`` /
  ``REAL_QID`` added, the transaction bits reset to NOT_TYPE so the dispatcher indexes it in the
  half queue (a PREPARED record is never put in any ConsumeQueue), hence never in the real topic.
- Commit (``endMessageTransaction``): back to ``REAL_TOPIC`` / ``REAL_QID`` with those two and
  TRAN_MSG removed (Java clears all three, though 4.x writes the properties string it built
  before the clears) and everything else kept (UNIQ_KEY: the client's message id stays stable;
  PGROUP), sysFlag COMMIT, ``prepared_transaction_offset`` = the half record's CommitLog offset.
  Without TRAN_MSG a consumer's re-send of the message is never taken for a new half message.
- Op (``addRemoveTagInTransactionOp``): one message per resolution in
  ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` queue 0 (the half queue's id), tag ``d`` (REMOVETAG), body = the
  half message's queue offset in decimal. The check service reads it back, so a resolution
  survives a restart.
"""

from __future__ import annotations

from rocketlite.broker.timer_divert import get_property, parse_int, set_properties
from rocketlite.broker.topics import (
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)
from rocketlite.formats.message_record import (
    SYSFLAG_BORNHOST_V6,
    SYSFLAG_STOREHOST_V6,
    SYSFLAG_TRANSACTION_COMMIT,
    SYSFLAG_TRANSACTION_MASK,
    SYSFLAG_TRANSACTION_NOT_TYPE,
    SYSFLAG_TRANSACTION_PREPARED,
    MessageRecord,
)
from rocketlite.formats.properties import (
    DELAY,
    PGROUP,
    REAL_QID,
    REAL_TOPIC,
    TAGS,
    TRAN_MSG,
    WAIT,
    encode_properties,
)
from rocketlite.store.message import LOOPBACK_V4, MessageToStore

HALF_QUEUE_ID = 0  # Java: one half queue (and one op queue with the same id)
CHECK_MAX_QUEUE_NUMS = 1  # TCMT_QUEUE_NUMS
REMOVE_TAG = "d"  # TransactionalMessageUtil.REMOVETAG
CHECK_GROUP = "CID_RMQ_SYS_TRANS"  # the consumer group whose offsets are the check's progress
# MessageConst names
TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"  # on a re-put copy: the original's offset

_HOST_FLAGS = SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6  # the store sets these itself

__all__ = [
    "CHECK_GROUP",
    "CHECK_IMMUNITY_TIME_IN_SECONDS",
    "CHECK_MAX_QUEUE_NUMS",
    "HALF_QUEUE_ID",
    "PREPARED_QUEUE_OFFSET",
    "REMOVE_TAG",
    "TRANSACTION_CHECK_TIMES",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "TRANS_HALF_TOPIC",
    "TRANS_OP_HALF_TOPIC",
    "check_max_message",
    "check_times",
    "commit_message",
    "divert_half",
    "get_property",
    "is_prepared",
    "op_message",
    "parse_op_offsets",
    "producer_group",
    "real_destination",
    "renew_half_message",
]


def is_prepared(sys_flag: int, properties: str) -> bool:
    """A half message: the PREPARED transaction type and ``TRAN_MSG=true`` (the producer sets
    both; Java's send processor keys on the property, our send path only calls the diverters for
    transactional sysFlags, so both are required)."""
    return (sys_flag & SYSFLAG_TRANSACTION_MASK == SYSFLAG_TRANSACTION_PREPARED
            and (get_property(properties, TRAN_MSG) or "").lower() == "true")


def divert_half(msg: MessageToStore) -> MessageToStore | None:
    """The broker diverter: a prepared message rewritten for the half topic, else None.

    Like Java, a consumer's retry of a transactional message (reconsumed with a delay level) is
    not a new half message."""
    if msg.topic == TRANS_HALF_TOPIC or not is_prepared(msg.sys_flag, msg.properties):
        return None
    if msg.reconsume_times > 0 and (parse_int(get_property(msg.properties, DELAY)) or 0) > 0:
        return None
    return MessageToStore(
        TRANS_HALF_TOPIC, msg.body, HALF_QUEUE_ID, msg.flag,
        set_properties(msg.properties, (), {REAL_TOPIC: msg.topic, REAL_QID: str(msg.queue_id)}),
        _with_type(msg.sys_flag, SYSFLAG_TRANSACTION_NOT_TYPE), msg.born_timestamp, msg.born_host,
        msg.born_port, msg.reconsume_times, msg.prepared_transaction_offset,
    )


def real_destination(rec: MessageRecord) -> tuple[str, int] | None:
    """The topic and queue a half record was sent to, or None if its properties lack them."""
    text = rec.properties_text
    topic = get_property(text, REAL_TOPIC)
    qid = parse_int(get_property(text, REAL_QID))
    if not topic or qid is None or qid < 0:
        return None
    return topic, qid


def commit_message(rec: MessageRecord) -> MessageToStore | None:
    """The message a commit stores for half record ``rec``, or None if it names no real topic."""
    dest = real_destination(rec)
    if dest is None:
        return None
    topic, qid = dest
    return MessageToStore(
        topic, rec.body, qid, rec.flag,
        set_properties(rec.properties_text, (REAL_TOPIC, REAL_QID, TRAN_MSG), {}),
        _with_type(rec.sys_flag, SYSFLAG_TRANSACTION_COMMIT), rec.born_timestamp, rec.born_host,
        rec.born_port, rec.reconsume_times, rec.commit_log_offset,
    )


def op_message(half_queue_offset: int, now_ms: int, store_host: bytes = LOOPBACK_V4,
               store_port: int = 0) -> MessageToStore:
    """The op record that marks the half message at ``half_queue_offset`` resolved."""
    return MessageToStore(
        TRANS_OP_HALF_TOPIC, str(half_queue_offset).encode(), HALF_QUEUE_ID, 0,
        encode_properties({TAGS: REMOVE_TAG, WAIT: "true"}), 0, now_ms, store_host, store_port,
    )


def parse_op_offsets(rec: MessageRecord) -> list[int]:
    """Every half queue offset an op record resolves (one in 4.9, a comma list in 5.x)."""
    if get_property(rec.properties_text, TAGS) != REMOVE_TAG:
        return []
    out = []
    for part in rec.body.decode("ascii", "replace").split(","):
        v = parse_int(part.strip())
        if v is not None and v >= 0:
            out.append(v)
    return out


def check_times(rec: MessageRecord) -> int:
    """How often the half message was checked already (``TRANSACTION_CHECK_TIMES``)."""
    return parse_int(get_property(rec.properties_text, TRANSACTION_CHECK_TIMES)) or 0


def renew_half_message(rec: MessageRecord, times: int, original: int) -> MessageToStore:
    """A copy of half record ``rec`` for the end of the half queue with ``times`` checks
    (``putBackHalfMsgQueue``): the check goes out for the copy, whose offsets the producer then
    names in its END_TRANSACTION. ``original`` (``TRAN_PREPARED_QUEUE_OFFSET``) is the queue
    offset of the message as the producer sent it, so a decision on either is seen on both."""
    return MessageToStore(
        TRANS_HALF_TOPIC, rec.body, HALF_QUEUE_ID, rec.flag,
        set_properties(rec.properties_text, (), {TRANSACTION_CHECK_TIMES: str(times),
                                                 PREPARED_QUEUE_OFFSET: str(original)}),
        rec.sys_flag & ~_HOST_FLAGS, rec.born_timestamp, rec.born_host, rec.born_port,
        rec.reconsume_times,
    )


def check_max_message(rec: MessageRecord) -> MessageToStore:
    """Where a half message goes once checked ``transactionCheckMax`` times without a decision:
    the readable ``TRANS_CHECK_MAX_TIME_TOPIC`` (properties kept, so REAL_TOPIC still says where
    it was meant to go)."""
    return MessageToStore(
        TRANS_CHECK_MAX_TIME_TOPIC, rec.body, 0, rec.flag, rec.properties_text,
        rec.sys_flag & ~_HOST_FLAGS, rec.born_timestamp, rec.born_host, rec.born_port,
        rec.reconsume_times,
    )


def producer_group(rec: MessageRecord) -> str | None:
    return get_property(rec.properties_text, PGROUP)


def _with_type(sys_flag: int, tran_type: int) -> int:
    """``MessageSysFlag.resetTransactionValue`` (and the host bits dropped: the store sets them
    from the addresses it writes)."""
    return (sys_flag & ~SYSFLAG_TRANSACTION_MASK & ~_HOST_FLAGS) | tran_type
