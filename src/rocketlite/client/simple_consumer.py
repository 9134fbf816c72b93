"""SimpleConsumer: RocketMQ 5's POP consumption over Remoting (the shape of rocketmq-clients'
``SimpleConsumer``: receive, ack, change the invisible duration), no rebalance, no offsets here.

``receive`` sends one POP_MESSAGE (200050): to the next subscribed topic in turn, to the next
broker of its route in turn, queue id -1 (any queue of that broker), long-polling
``await_duration``. The broker hides each message it hands out for the invisible duration; a
message not acked by then comes back (from the group's retry topic ``%RETRY%{group}_{topic}``,
``delivery_attempt`` one higher), and past the group's ``retryMaxTimes`` goes to ``%DLQ%{group}``.
Each message is a ``PopMessage`` with its ``receipt_handle`` (RocketMQ's extraInfo, built from the
reply headers as ``MQClientAPIImpl.processPopResponse`` does, also kept as the ``POP_CK``
property), ``delivery_attempt`` (reconsume times + 1), ``fifo`` (the broker popped it orderly:
revive queue 999) and the subscribed topic also for a retry.

``ack`` (ACK_MESSAGE, 200051) and ``change_invisible_duration`` (CHANGE_MESSAGE_INVISIBLETIME,
200053) name the topic the message was popped from (the retry topic for a retry), as the Java
client does; ``ack_many`` sends one BATCH_ACK_MESSAGE (200151) per broker. A refusal raises
``MQBrokerError`` with the broker's code and remark: an expired handle (the invisible time is
over) is NO_MESSAGE, a malformed one INVALID_PARAMETER, an unknown group
SUBSCRIPTION_GROUP_NOT_EXIST, an unknown topic TOPIC_NOT_EXIST; a topic without a route raises
``MQClientError``.

FIFO: the Remoting POP request carries ``order`` itself (the broker cannot be asked for a group's
``consumeMessageOrderly`` over Remoting here), so pops are orderly when the consumer is made with
``fifo=True``: one batch per queue in flight for the group, the next only after all of it is
acked. Each orderly receive carries an attempt id, reused by the next receive of that topic and
broker when this one failed (its answer may be lost: the broker hands the same batch out again
instead of keeping the queue blocked until the invisible time is over), as rocketmq-clients'
FIFO consumers do.

Heartbeats register the group with consumeType CONSUME_POP (as RocketMQ's broker records a pop
consumer), so the broker lists the member.
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
import time
import uuid

from rocketlite.client import running_info
from rocketlite.client.broker_api import BrokerApi, PopReply
from rocketlite.client.config import ClientConfig, CredentialsLike, client_config
from rocketlite.client.errors import MQBrokerError, MQClientError
from rocketlite.client.instance import ClientInstance
from rocketlite.client.message import MessageExt, check_topic
from rocketlite.client.route import subscribe_queues
from rocketlite.common.errors import FormatError
from rocketlite.protocol.bodies import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    MessageModel,
    MessageQueue,
    SubscriptionData,
    TopicRouteData,
)
from rocketlite.protocol.pop_info import (
    FIRST_POP_TIME,
    MAX_BATCH_ACKS,
    MAX_BITSET_BYTES,
    MAX_INVISIBLE_MS,
    MAX_POP_NUM,
    POP_CK,
    ReceiptHandle,
    batch_acks,
)
from rocketlite.protocol.running_info import ConsumerRunningInfo
from rocketlite.remoting.tls import TlsOption

log = logging.getLogger(__name__)

MAX_RECEIVE = MAX_POP_NUM
"""The most messages one receive asks for (a POP_MESSAGE's limit, RocketMQ's)."""
MAX_INVISIBLE = dt.timedelta(milliseconds=MAX_INVISIBLE_MS)
MAX_AWAIT = dt.timedelta(seconds=60)
INIT_LAST, INIT_MIN = 0, 1  # ConsumeInitMode
MAX_BIT = 8 * MAX_BITSET_BYTES  # the furthest a batch-acked message may lie past its CK's start

Duration = dt.timedelta | float | int


class PopMessage(MessageExt):
    """A popped message: a ``MessageExt`` with what acking it needs."""

    __slots__ = ("fifo", "handle", "receipt_handle")

    handle: ReceiptHandle
    receipt_handle: str
    fifo: bool

    @property
    def delivery_attempt(self) -> int:
        """1 on the first delivery, one more on each redelivery (reconsume times + 1)."""
        return self.reconsume_times + 1

    @property
    def invisible_until_ms(self) -> int:
        """When the message becomes visible again unless acked (epoch ms)."""
        return self.handle.revive_time

    def _set_handle(self, handle: ReceiptHandle) -> None:
        self.handle = handle
        self.receipt_handle = handle.encode()
        self.properties[POP_CK] = self.receipt_handle

    @classmethod
    def of(cls, m: MessageExt, handle: ReceiptHandle, topic: str, reconsume_times: int,
           pop_time: int) -> PopMessage:
        p = cls.__new__(cls)
        for name in MessageExt.__slots__:
            setattr(p, name, getattr(m, name))
        p.topic = topic
        p.reconsume_times = reconsume_times
        p.fifo = handle.is_order
        p._set_handle(handle)
        p.properties.setdefault(FIRST_POP_TIME, str(pop_time))
        return p


def _ms(d: Duration, what: str, limit: dt.timedelta) -> int:
    seconds = d.total_seconds() if isinstance(d, dt.timedelta) else float(d)
    if not 0 <= seconds <= limit.total_seconds():
        raise MQClientError(f"{what} of {seconds} s: must be within 0..{limit.total_seconds():g} s")
    return int(seconds * 1000)


class SimpleConsumer:
    """Receive messages by POP and ack each (Remoting; RocketMQ 5 brokers and rocketlite)."""

    def __init__(
        self,
        group: str,
        *,
        namesrv_addr: str = "",
        subscriptions: dict[str, str] | None = None,
        await_duration: Duration = 30.0,
        config: ClientConfig | None = None,
        fifo: bool = False,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        credentials: CredentialsLike | None = None,
        tls: TlsOption = None,
    ) -> None:
        check_topic(group)
        self.group = group
        self.config = client_config(config, namesrv_addr, credentials, tls)
        self.await_ms = _ms(await_duration, "await_duration", MAX_AWAIT)
        self.fifo = fifo
        first = (ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                 ConsumeFromWhere.CONSUME_FROM_MIN_OFFSET)
        self.init_mode = INIT_MIN if consume_from_where in first else INIT_LAST
        self.consume_from_where = consume_from_where
        self.subscriptions: dict[str, SubscriptionData] = {}
        for topic, expression in (subscriptions or {}).items():
            self.subscribe(topic, expression)
        self.instance: ClientInstance | None = None
        self.api: BrokerApi | None = None
        self._brokers: dict[str, list[str]] = {}  # topic -> readable brokers, by name
        self._turn = itertools.count()
        self._attempts: dict[tuple[str, str], str] = {}  # fifo: (topic, broker) -> attempt id
        self._start_ms = 0
        self._started = False

    # -- subscriptions --------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str = "*") -> None:
        """Receive ``topic``'s messages whose tag matches ``expression`` ("*", "TagA || TagB")."""
        check_topic(topic)
        self.subscriptions[topic] = SubscriptionData.from_expression(topic, expression)

    def unsubscribe(self, topic: str) -> None:
        self.subscriptions.pop(topic, None)
        self._brokers.pop(topic, None)

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Fetch the subscribed topics' routes (a topic without one is looked up again at each
        receive) and send the first heartbeat."""
        if self._started:
            return
        inst = ClientInstance(self.config)
        inst.register_consumer(self)
        self.instance, self.api = inst, BrokerApi(inst)
        self._start_ms = int(time.time() * 1000)
        await inst.start()
        self._started = True
        await inst.route_subscriptions(self.group, list(self.subscriptions))
        await inst.send_heartbeat()

    async def close(self) -> None:
        """Leave the group (UNREGISTER_CLIENT) and close the connections. Messages received and
        not acked come back to the group after their invisible time."""
        inst = self.instance
        if not self._started or inst is None:
            return
        self._started = False
        try:
            await inst.unregister(consumer_group=self.group)
        finally:
            await inst.close()

    async def __aenter__(self) -> SimpleConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _api(self) -> BrokerApi:
        if not self._started or self.api is None:
            raise MQClientError("the consumer is not started (await consumer.start())")
        return self.api

    # -- ClientInstance's view ------------------------------------------------------------------

    def topics(self) -> list[str]:
        return list(self.subscriptions)

    def on_route(self, topic: str, route: TopicRouteData) -> None:
        self._brokers[topic] = sorted({mq.brokerName for mq in subscribe_queues(topic, route)})

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(
            groupName=self.group, consumeType=ConsumeType.CONSUME_POP,
            messageModel=MessageModel.CLUSTERING, consumeFromWhere=self.consume_from_where,
            subscriptionDataSet=[self.subscriptions[t] for t in sorted(self.subscriptions)])

    def running_info(self) -> ConsumerRunningInfo:
        """GET_CONSUMER_RUNNING_INFO's answer: settings and subscriptions (no queue of its own:
        the broker hands out messages)."""
        return running_info.build({
            "consumerGroup": self.group, "messageModel": MessageModel.CLUSTERING.name,
            "consumeFromWhere": self.consume_from_where.name, "fifo": self.fifo,
            "awaitDuration": self.await_ms}, self.subscriptions, {}, None, self._start_ms)

    async def rebalance(self) -> None:
        """Nothing to do: the broker hands messages to whoever pops."""

    async def persist_offsets(self) -> None:
        """Nothing to do: the broker moves the group's offsets as it pops."""

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """Nothing to do: the broker pops from the offsets it reset."""

    # -- receive --------------------------------------------------------------------------------

    async def _next_broker(self) -> tuple[str, str]:
        if not self.subscriptions:
            raise MQClientError(f"group {self.group}: no subscription to receive from")
        topics = sorted(self.subscriptions)
        turn = next(self._turn)
        topic = topics[turn % len(topics)]
        brokers = self._brokers.get(topic)
        if not brokers:
            assert self.instance is not None
            await self.instance.update_route(topic)
            brokers = self._brokers.get(topic)
        if not brokers:
            raise MQClientError(f"no route for topic {topic!r}: no readable broker serves it")
        return topic, brokers[turn // len(topics) % len(brokers)]

    async def receive(self, max_messages: int = 16,
                      invisible_duration: Duration = dt.timedelta(seconds=30),
                      ) -> list[PopMessage]:
        """Up to ``max_messages`` (1..32) messages of one broker of one subscribed topic (each
        receive asks the next in turn), waiting up to ``await_duration`` for some; each is
        invisible to the group for ``invisible_duration`` unless acked. [] when none came."""
        api = self._api()
        if not 0 < max_messages <= MAX_RECEIVE:
            raise MQClientError(f"max_messages {max_messages}: must be within 1..{MAX_RECEIVE}")
        invisible_ms = _ms(invisible_duration, "invisible_duration", MAX_INVISIBLE)
        if invisible_ms <= 0:
            raise MQClientError("invisible_duration must be positive")
        topic, broker = await self._next_broker()
        sub = self.subscriptions.get(topic)
        attempt = None
        if self.fifo:  # a failed receive's id is used again (see the module's docstring)
            attempt = self._attempts.setdefault((topic, broker), uuid.uuid4().hex)
        reply = await api.pop(self.group, topic, broker, max_nums=max_messages,
                              invisible_ms=invisible_ms, poll_ms=self.await_ms,
                              expression=(sub.subString if sub is not None else None) or "*",
                              expression_type=sub.expressionType if sub is not None else "TAG",
                              order=self.fifo, init_mode=self.init_mode, attempt_id=attempt)
        msgs = self._messages(topic, broker, reply)
        self._attempts.pop((topic, broker), None)
        return msgs

    def _messages(self, topic: str, broker: str, reply: PopReply) -> list[PopMessage]:
        """``processPopResponse``: each record's handle from the reply's offset infos, the
        subscribed topic for a retry, orderly pops' delivery counts."""
        info = reply.info
        if info is None or not reply.messages:
            return []
        firsts: dict[tuple[str, int], int] = {}
        out = []
        try:
            for m in reply.messages:
                first = firsts.setdefault((m.topic, m.queue_id), m.queue_offset)
                handle = info.handle(m.topic, m.queue_id, m.queue_offset, broker, first)
                times = m.reconsume_times
                if handle.is_order:
                    times = info.order_count(m.topic, m.queue_id, m.queue_offset) or times
                out.append(PopMessage.of(m, handle, topic, times, info.pop_time))
        except FormatError as e:
            raise MQClientError(f"the pop reply of {broker} for {topic!r} does not match its "
                                f"messages: {e}") from e
        return out

    # -- ack and change -------------------------------------------------------------------------

    @staticmethod
    def _handle_of(msg: MessageExt) -> ReceiptHandle:
        if not isinstance(msg, PopMessage):
            raise MQClientError("only a message received by a SimpleConsumer can be acked "
                                f"(got a {type(msg).__name__} without a receipt handle)")
        return msg.handle

    def _real_topic(self, msg: PopMessage) -> str:
        return msg.handle.real_topic(msg.topic, self.group)

    async def ack(self, msg: MessageExt) -> None:
        """Ack ``msg``: it is never delivered to the group again. Raises ``MQBrokerError``
        (NO_MESSAGE) once its invisible time is over: it is being redelivered."""
        api = self._api()
        handle = self._handle_of(msg)
        assert isinstance(msg, PopMessage)
        await api.ack(self.group, self._real_topic(msg), handle, route_topic=msg.topic)

    async def ack_many(self, msgs: list[MessageExt]) -> None:
        """Ack ``msgs`` with one BATCH_ACK_MESSAGE per broker (of up to 1,024 checkpoints; a
        message too far past its checkpoint's start for the bit set, after many filtered ones,
        gets an ACK_MESSAGE of its own). Every broker is asked; if some acks are refused
        (expired handles) or a broker cannot be reached, the others are still acked and the
        first error is raised, saying how many requests failed."""
        api = self._api()
        by_broker: dict[str, dict[str, list[ReceiptHandle]]] = {}
        singles: list[PopMessage] = []
        for m in msgs:
            handle = self._handle_of(m)
            assert isinstance(m, PopMessage)
            if handle.msg_queue_offset is None:
                raise MQClientError(f"the receipt handle {m.receipt_handle!r} has no message "
                                    "offset")
            if 0 <= handle.msg_queue_offset - handle.ck_queue_offset < MAX_BIT:
                by_broker.setdefault(handle.broker_name, {}).setdefault(m.topic, []).append(handle)
            else:
                singles.append(m)
        errors: list[MQBrokerError | MQClientError] = []
        for broker, topics in by_broker.items():
            acks = [a for topic, hs in topics.items() for a in batch_acks(self.group, topic, hs)]
            for i in range(0, len(acks), MAX_BATCH_ACKS):
                try:
                    await api.batch_ack(broker, next(iter(topics)), acks[i:i + MAX_BATCH_ACKS])
                except (MQBrokerError, MQClientError) as e:
                    errors.append(e)
        for m in singles:
            try:
                await api.ack(self.group, self._real_topic(m), m.handle, route_topic=m.topic)
            except (MQBrokerError, MQClientError) as e:
                errors.append(e)
        if len(errors) == 1:
            raise errors[0]
        if errors:
            first, more = errors[0], f" (and {len(errors) - 1} more ack requests failed)"
            if isinstance(first, MQBrokerError):
                raise MQBrokerError(first.code, first.remark + more, first.addr) from first
            raise MQClientError(str(first) + more) from first

    async def change_invisible_duration(self, msg: MessageExt, duration: Duration) -> None:
        """Hide ``msg`` for ``duration`` from now instead (more time to process it, or 0-ish to
        have it redelivered soon); ``msg.receipt_handle`` becomes the new handle, which the next
        ack or change must use."""
        api = self._api()
        handle = self._handle_of(msg)
        assert isinstance(msg, PopMessage)
        ms = _ms(duration, "duration", MAX_INVISIBLE)
        if ms <= 0:
            raise MQClientError("the invisible duration must be positive")
        new = await api.change_invisible(self.group, self._real_topic(msg), handle, ms,
                                         route_topic=msg.topic)
        msg._set_handle(new)

