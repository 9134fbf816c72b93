"""The message side of timer messages: which messages are timed and how they are rewritten on the
way into the timer topic (5.x's ``HookUtils.checkIfTimerMessage`` / ``transformTimerMessage``) and
on the way out to their real topic (``TimerMessageStore.convertMessage``). The wheel that holds
them in between is ``broker/timer.py``.

In: a message with ``TIMER_DELAY_SEC``, ``TIMER_DELAY_MS`` (relative) or ``TIMER_DELIVER_MS``
(epoch ms), checked in that order, is stored to ``rmq_sys_wheel_timer`` queue 0 with
``REAL_TOPIC``, ``REAL_QID`` and ``TIMER_OUT_MS``, the time of its wheel slot: the deliver time
rounded down to the precision, one tick less when exact (a slot is delivered once its tick has
passed, so never before the deliver time). A time already past is stored to its topic as sent
(delivered now); beyond ``timerMaxDelaySec`` it is refused (MESSAGE_ILLEGAL). Not timed: a message
with a delay level (5.x: the level wins), a prepared or rolled-back transactional message (its
commit is diverted), and one already carrying ``TIMER_OUT_MS`` (timed once already).

Delete markers (RocketMQ 5.3's recall): a timer message carrying ``TIMER_DEL_UNIQKEY`` =
``build_delete_key(topic, UNIQ_KEY)`` of a scheduled message and the same deliver time is stored
like any timer message, so it lands in the same slot; the wheel then drops that message and never
delivers the marker itself. A marker whose time has already come is refused (it would cancel
nothing and must not reach the topic).

Out: properties are kept (UNIQ_KEY, so the client's message id, and ``TIMER_OUT_MS``, which marks
the message as timed should it be re-sent), ``REAL_TOPIC``/``REAL_QID`` removed,
``TIMER_ENQUEUE_MS``/``TIMER_DEQUEUE_MS`` added; a message that rolls goes back to the timer topic
with ``TIMER_ROLL_TIMES`` + 1.
"""

from __future__ import annotations

from collections.abc import Callable

from rocketlite.common.errors import MessageIllegalError, RocketliteError
from rocketlite.formats.message_record import (
    SYSFLAG_BORNHOST_V6,
    SYSFLAG_STOREHOST_V6,
    SYSFLAG_TRANSACTION_MASK,
    SYSFLAG_TRANSACTION_PREPARED,
    SYSFLAG_TRANSACTION_ROLLBACK,
    MessageRecord,
)
from rocketlite.formats.properties import (
    DELAY,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    REAL_QID,
    REAL_TOPIC,
    UNIQ_KEY,
)
from rocketlite.protocol.codes import ResponseCode
from rocketlite.store.message import MessageToStore

TIMER_TOPIC = "rmq_sys_wheel_timer"  # TopicValidator.SYSTEM_TOPIC_PREFIX + "wheel_timer"
# MessageConst names
TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
TIMER_DELAY_MS = "TIMER_DELAY_MS"
TIMER_OUT_MS = "TIMER_OUT_MS"
TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"

NEVER_ENQUEUED = str((1 << 63) - 1)  # TIMER_ENQUEUE_MS of a message delivered without a unit
_HOST_FLAGS = SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6  # the store sets these itself


class TimerNotEnabledError(RocketliteError):
    """A timer message reached a broker with ``timerWheelEnable=false`` (5.x answers
    SYSTEM_ERROR, WHEEL_TIMER_NOT_ENABLE)."""

    response_code = ResponseCode.SYSTEM_ERROR


def parse_int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


# Property strings are read and rewritten in place rather than decoded into a dict and encoded
# again: divert, enqueue and dequeue each touch every timer message (a third of their cost).


def _entry(text: str, name: str) -> int:
    """Where the last ``name`` entry starts (the last one wins, as Java's HashMap), or -1."""
    key = name + NAME_VALUE_SEPARATOR
    i = text.rfind(key)
    while i > 0 and text[i - 1] != PROPERTY_SEPARATOR:
        i = text.rfind(key, 0, i)
    return i


def get_property(text: str, name: str) -> str | None:
    """One property of an encoded property string; None if absent or empty."""
    if name + NAME_VALUE_SEPARATOR not in text:
        return None
    i = _entry(text, name)
    if i < 0:
        return None
    start = i + len(name) + 1
    end = text.find(PROPERTY_SEPARATOR, start)
    return (text[start:end] if end >= 0 else text[start:]) or None


def set_properties(text: str, drop: tuple[str, ...], put: dict[str, str]) -> str:
    """``text`` without any entry named in ``drop`` or ``put``, then ``put`` appended."""
    for name in (*drop, *put):
        if name + NAME_VALUE_SEPARATOR not in text:
            continue
        while (i := _entry(text, name)) >= 0:
            end = text.find(PROPERTY_SEPARATOR, i)
            text = text[:i] + (text[end + 1:] if end >= 0 else "")
    if text and text[-1] != PROPERTY_SEPARATOR:
        text += PROPERTY_SEPARATOR  # a client's string without its final separator
    return text + "".join([f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}"
                           for k, v in put.items()])


class TimerDiverter:
    """The broker diverter for timer messages (see the module docstring)."""

    def __init__(self, enabled: bool, precision_ms: int, max_delay_ms: int,
                 clock: Callable[[], int]) -> None:
        self.enabled = enabled
        self.precision_ms = precision_ms
        self.max_delay_ms = max_delay_ms
        self.clock = clock
        self.diverted = 0

    def divert(self, msg: MessageToStore) -> MessageToStore | None:
        """``msg`` rewritten for the timer topic, or None if it is not (or no longer) a timer
        message. Raises MessageIllegalError for a bad or too distant time."""
        if "TIMER_" not in msg.properties or msg.topic == TIMER_TOPIC:
            return None
        tran = msg.sys_flag & SYSFLAG_TRANSACTION_MASK
        if tran in (SYSFLAG_TRANSACTION_PREPARED, SYSFLAG_TRANSACTION_ROLLBACK):
            return None
        text = msg.properties
        if get_property(text, TIMER_OUT_MS) is not None or (
                parse_int(get_property(text, DELAY)) or 0) > 0:
            return None
        deliver_ms = deliver_time_ms(text, self.clock)
        if deliver_ms is None:
            return None
        if not self.enabled:
            raise TimerNotEnabledError(
                "accurate timer message is not enabled, timerWheelEnable is false")
        now = self.clock()
        if deliver_ms <= now:
            if get_property(text, TIMER_DEL_UNIQKEY) is not None:
                raise MessageIllegalError("timer message illegal: the delete marker "
                                          "(TIMER_DEL_UNIQKEY) comes after its deliver time")
            return None  # due already: stored to its topic as sent
        if deliver_ms - now > self.max_delay_ms:
            raise MessageIllegalError(
                f"timer message illegal, the delay time should not be bigger than the max delay "
                f"{self.max_delay_ms}ms (timerMaxDelaySec); this one is {deliver_ms - now}ms away")
        self.diverted += 1
        return MessageToStore(
            TIMER_TOPIC, msg.body, 0, msg.flag,
            set_properties(text, (), {TIMER_OUT_MS: str(slot_time_ms(deliver_ms, self.precision_ms)),
                                      REAL_TOPIC: msg.topic, REAL_QID: str(msg.queue_id)}),
            msg.sys_flag, msg.born_timestamp, msg.born_host, msg.born_port, msg.reconsume_times,
            msg.prepared_transaction_offset,
        )


def build_delete_key(real_topic: str, uniq_key: str) -> str:
    """``TimerMessageStore.buildDeleteKey``: a message by topic and unique key."""
    return f"{real_topic}+{uniq_key}"


def delete_key_of(text: str) -> str | None:
    """The delete key of a timer-topic message's properties (its REAL_TOPIC and UNIQ_KEY)."""
    topic = get_property(text, REAL_TOPIC)
    uniq = get_property(text, UNIQ_KEY)
    return None if topic is None or uniq is None else build_delete_key(topic, uniq)


def deliver_time_ms(text: str, clock: Callable[[], int]) -> int | None:
    """The absolute deliver time, in 5.x's order: TIMER_DELAY_SEC, TIMER_DELAY_MS,
    TIMER_DELIVER_MS; None if the message has none of them. Raises MessageIllegalError for a
    value that is not an integer."""
    for name, scale, relative in ((TIMER_DELAY_SEC, 1000, True), (TIMER_DELAY_MS, 1, True),
                                  (TIMER_DELIVER_MS, 1, False)):
        raw = get_property(text, name)
        if raw is not None:
            value = parse_int(raw)
            if value is None:
                raise MessageIllegalError(f"timer message illegal: {name}={raw!r} is not an integer")
            return (clock() if relative else 0) + value * scale
    return None


def slot_time_ms(deliver_ms: int, precision_ms: int) -> int:
    """``TIMER_OUT_MS``: the tick whose slot is delivered when ``deliver_ms`` has come (the slot
    of tick T is delivered once T + precision has passed)."""
    if deliver_ms % precision_ms == 0:
        return deliver_ms - precision_ms
    return deliver_ms // precision_ms * precision_ms


def convert_message(rec: MessageRecord, enqueue_ms: str, dequeue_ms: int,
                    roll: bool) -> MessageToStore | None:
    """The message to put for a timer-topic record whose slot came: for its real topic, or back
    to the timer topic when it rolls. None if it names no real topic and queue."""
    text = rec.properties_text
    put = {TIMER_ENQUEUE_MS: enqueue_ms, TIMER_DEQUEUE_MS: str(dequeue_ms)}
    drop: tuple[str, ...] = ()
    if roll:
        put[TIMER_ROLL_TIMES] = str((parse_int(get_property(text, TIMER_ROLL_TIMES)) or 0) + 1)
        topic, queue_id = TIMER_TOPIC, 0
    else:
        topic = get_property(text, REAL_TOPIC) or ""
        qid = parse_int(get_property(text, REAL_QID))
        if not topic or qid is None:
            return None
        queue_id, drop = qid, (REAL_TOPIC, REAL_QID)
    return MessageToStore(
        topic, rec.body, queue_id, rec.flag, set_properties(text, drop, put),
        rec.sys_flag & ~_HOST_FLAGS, rec.born_timestamp, rec.born_host, rec.born_port,
        rec.reconsume_times,
    )
