"""What the consumer RPCs (ReceiveMessage, Ack, ChangeInvisibleDuration, ForwardToDLQ, the
lite-pull RPCs) check before they touch the broker, and the limits they check against.

A failed check raises ``FrontError(code, message)``; each RPC answers it as its v2 status. The
checks and codes are the Java proxy's (``GrpcValidator``, ``ReceiveMessageActivity``):

==========================================  ====================================================
check                                       code
==========================================  ====================================================
topic blank, bad characters, > 127, system  ILLEGAL_TOPIC (``validate.topic_name``)
group blank, bad characters, > 255, system  ILLEGAL_CONSUMER_GROUP (``validate.group_name``)
topic unknown                               TOPIC_NOT_FOUND
broker or topic not readable                FORBIDDEN
group unknown (autoCreateSubscriptionGroup  CONSUMER_GROUP_NOT_FOUND
off), or consumption disabled               FORBIDDEN
queue id outside the topic's read queues    BAD_REQUEST
filter expression not TAG (SQL92)           ILLEGAL_FILTER_EXPRESSION
invisible time outside [min, max]           ILLEGAL_INVISIBLE_TIME
deadline too short for the shortest poll    ILLEGAL_POLLING_TIME (BAD_REQUEST before 5.0.3)
batch size outside 1..32                    BAD_REQUEST
==========================================  ====================================================

``ConsumeLimits`` holds the numbers (ProxyConfig's names and defaults); the front's are
``FrontContext.limits`` (``ConsumeLimits.from_properties(broker_conf)`` when the CLI starts it;
tests give theirs to poll in milliseconds).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rocketlite.broker.config import PERM_READ
from rocketlite.broker.pop.service import MAX_POLL_MS
from rocketlite.broker.subscriptions import SubscriptionGroupConfig
from rocketlite.common.errors import ConfigError
from rocketlite.protocol.bodies import SubscriptionData, TopicConfig
from rocketlite.protocol.pop_info import MAX_INVISIBLE_MS, MAX_POP_NUM
from rocketlite.proxy import validate
from rocketlite.proxy.pb import definition_pb2 as pb
from rocketlite.proxy.status import Code, FrontError, error_status
from rocketlite.store.config import kwargs_from_properties

if TYPE_CHECKING:
    from rocketlite.broker.broker import Broker

log = logging.getLogger(__name__)


def answer(e: BaseException, rpc: str) -> pb.Status:
    """The v2 status for what stopped an RPC: a ``FrontError`` as raised, a broker error by
    ``status.error_status`` (an unexpected one logged with its trace)."""
    st = error_status(e)
    if st.code == Code.INTERNAL_SERVER_ERROR:
        log.error("%s failed", rpc, exc_info=e)
    return st


def remaining_ms(time_remaining: float | None) -> float | None:
    """``ServicerContext.time_remaining()`` (seconds, None without a deadline) in ms."""
    return None if time_remaining is None else time_remaining * 1000


@dataclass(frozen=True, slots=True)
class ConsumeLimits:
    """ProxyConfig's consumer limits, by their Java names (``from_properties`` reads them from
    broker.conf):

    ==============================================  ========  ==================================
    key                                             default   meaning
    ==============================================  ========  ==================================
    minInvisibleTimeMillsForRecv                    10000     shortest invisible time a receive
    maxInvisibleTimeMills                           43200000  longest invisible time (12 h)
    grpcClientConsumerMinLongPollingTimeoutMillis   5000      shortest poll
    grpcClientConsumerMaxLongPollingTimeoutMillis   20000     longest poll
    longPollingReserveTimeInMillis                  100       kept from the client's deadline
    grpcClientConsumerLongPollingBatchSize          32        largest receive/pull batch
    ==============================================  ========  ==================================
    """

    min_invisible_ms: int = field(default=10_000,
                                  metadata={"key": "minInvisibleTimeMillsForRecv"})
    max_invisible_ms: int = field(default=MAX_INVISIBLE_MS,
                                  metadata={"key": "maxInvisibleTimeMills"})
    min_polling_ms: int = field(default=5_000, metadata={
        "key": "grpcClientConsumerMinLongPollingTimeoutMillis"})
    max_polling_ms: int = field(default=20_000, metadata={
        "key": "grpcClientConsumerMaxLongPollingTimeoutMillis"})
    polling_reserve_ms: int = field(default=100,
                                    metadata={"key": "longPollingReserveTimeInMillis"})
    max_batch: int = field(default=32,
                           metadata={"key": "grpcClientConsumerLongPollingBatchSize"})

    def __post_init__(self) -> None:
        if not 0 < self.min_invisible_ms <= self.max_invisible_ms <= MAX_INVISIBLE_MS:
            raise ConfigError(f"minInvisibleTimeMillsForRecv={self.min_invisible_ms} and "
                              f"maxInvisibleTimeMills={self.max_invisible_ms} must satisfy "
                              f"0 < min <= max <= {MAX_INVISIBLE_MS} (the broker's bound)")
        if not 0 <= self.min_polling_ms <= self.max_polling_ms <= MAX_POLL_MS:
            raise ConfigError(
                f"grpcClientConsumerMinLongPollingTimeoutMillis={self.min_polling_ms} and "
                f"grpcClientConsumerMaxLongPollingTimeoutMillis={self.max_polling_ms} must "
                f"satisfy 0 <= min <= max <= {MAX_POLL_MS}")
        if self.polling_reserve_ms < 0:
            raise ConfigError(f"longPollingReserveTimeInMillis={self.polling_reserve_ms} is "
                              "negative")
        if not 1 <= self.max_batch <= MAX_POP_NUM:
            raise ConfigError(f"grpcClientConsumerLongPollingBatchSize={self.max_batch} must be "
                              f"within 1..{MAX_POP_NUM}")

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ConsumeLimits:
        return cls(**kwargs_from_properties(cls, props))



ILLEGAL_POLLING_TIME_SINCE = (5, 0, 3)


def find_topic(broker: Broker, topic: str, queue_id: int | None = None) -> TopicConfig:
    """The readable topic (and, given, a queue id among its read queues) of a readable broker."""
    validate.topic_name(topic, broker.config)
    if not broker.config.broker_permission & PERM_READ:
        raise FrontError(Code.FORBIDDEN,
                         f"the broker {broker.config.broker_name} is not readable")
    tc = broker.topics.get(topic)
    if tc is None:
        raise FrontError(Code.TOPIC_NOT_FOUND, f"topic {topic} does not exist")
    if not tc.perm & PERM_READ:
        raise FrontError(Code.FORBIDDEN, f"the topic {topic} is not readable")
    if queue_id is not None and not 0 <= queue_id < tc.readQueueNums:
        raise FrontError(Code.BAD_REQUEST, f"queue id {queue_id} is not a read queue of topic "
                                           f"{topic} (0..{tc.readQueueNums - 1})")
    return tc


def find_group(broker: Broker, group: str) -> SubscriptionGroupConfig:
    """The subscription group, made with defaults if unknown and autoCreateSubscriptionGroup."""
    validate.group_name(group)
    try:
        sgc = broker.subscriptions.get(group)
    except ValueError as e:  # the group table is full
        raise FrontError(Code.TOO_MANY_REQUESTS, str(e)) from None
    if sgc is None:
        raise FrontError(Code.CONSUMER_GROUP_NOT_FOUND, broker.subscriptions.missing(
            group, f"consumer group {group} does not exist (autoCreateSubscriptionGroup is off)"))
    if not sgc.consumeEnable:
        raise FrontError(Code.FORBIDDEN, f"consumer group {group} may not consume")
    return sgc


def subscription(topic: str, expression: pb.FilterExpression) -> SubscriptionData:
    """The filter as the broker's SubscriptionData; TAG (or unspecified) only."""
    if expression.type == pb.FilterType.SQL:
        raise FrontError(Code.ILLEGAL_FILTER_EXPRESSION,
                         "SQL92 filter expressions are not supported by this broker; use TAG")
    if expression.type not in (pb.FilterType.TAG, pb.FilterType.FILTER_TYPE_UNSPECIFIED):
        raise FrontError(Code.ILLEGAL_FILTER_EXPRESSION,
                         f"unknown filter type {expression.type}")
    return SubscriptionData.from_expression(topic, expression.expression or "*", "TAG")


def check_batch(size: int, limits: ConsumeLimits) -> int:
    if not 1 <= size <= limits.max_batch:
        raise FrontError(Code.BAD_REQUEST,
                         f"batch size {size} is out of range 1..{limits.max_batch}")
    return size


def check_invisible(ms: int, limits: ConsumeLimits, minimum: int | None = None) -> int:
    low = limits.min_invisible_ms if minimum is None else minimum
    if ms < low:
        raise FrontError(Code.ILLEGAL_INVISIBLE_TIME,
                         f"the invisible time {ms} ms is too small: the minimum is {low} ms")
    if ms > limits.max_invisible_ms:
        raise FrontError(Code.ILLEGAL_INVISIBLE_TIME,
                         f"the invisible time {ms} ms is too large: the maximum is "
                         f"{limits.max_invisible_ms} ms")
    return ms


def _version(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    out = []
    for part in text.split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        out.append(int(digits.group()))
    return tuple(out) or None


def polling_ms(requested_ms: int | None, remaining_ms: float | None, limits: ConsumeLimits,
               client_version: str | None = None) -> int:
    """How long a poll may wait: the request's (None: half the deadline), within the limits,
    and ending ``polling_reserve_ms`` before the client's deadline (``remaining_ms``; None: no
    deadline). A deadline too short for the shortest poll is refused (Java's rule)."""
    left = None if remaining_ms is None else remaining_ms - limits.polling_reserve_ms
    wanted = requested_ms if requested_ms is not None else (
        int(left / 2) if left is not None else limits.max_polling_ms)
    wanted = max(limits.min_polling_ms, min(wanted, limits.max_polling_ms))
    if left is not None and wanted > left:
        if left < limits.min_polling_ms:
            version = _version(client_version)
            code = Code.ILLEGAL_POLLING_TIME if version is not None and \
                version >= ILLEGAL_POLLING_TIME_SINCE else Code.BAD_REQUEST
            raise FrontError(code, f"the deadline leaves {max(int(left), 0)} ms, less than the "
                                   f"shortest poll ({limits.min_polling_ms} ms)")
        wanted = int(left)
    return wanted
