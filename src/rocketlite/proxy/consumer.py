"""ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue: POP
consumption over the broker's ``PopService`` (``broker.pop``), as the Java proxy's
``ReceiveMessageActivity``, ``AckMessageActivity``, ``ChangeInvisibleDurationActivity`` and
``ForwardMessageToDLQActivity`` do.

ReceiveMessage checks the request (``consume_checks``), pops from every readable queue of the
topic on this broker (queue -1, as the proxy: the client copies a route queue into the request,
but a receive waits for any), orderly when the group is (``consumeMessageOrderly``), and streams
``{status}`` (OK, MESSAGE_NOT_FOUND, TOO_MANY_REQUESTS when too many polls are held, or the
error), one ``{message}`` per message, then ``{delivery_timestamp: now}``, whatever happened.
The poll ends ``polling_reserve_ms`` before the client's deadline. Popped messages the client will
not get are dealt with as the proxy's ``PopMessageResultFilterImpl`` says: a tag that does not
match (the broker filters by tag hash) is acked, a message past the group's attempts
(``retryMaxTimes + 1``) goes to ``%DLQ%<group>``. If the stream breaks before a message is sent,
that message becomes visible again 1 s later (the proxy's NACK).

The invisible time of a receive is the request's; with ``auto_renew`` (the PushConsumers) or none,
the proxy's default (60 s), and with ``auto_renew`` the front renews it while the client works on
the message (``renew``): Ack, ChangeInvisibleDuration and ForwardToDLQ then use the message's
current handle in place of the one the client holds.

The AckMessage calls of one loop iteration (the clients ack one message a call, a window of calls
in flight) are acked together (``AckGroup``): one ``ack_many`` per group and topic, so one store
append (the acks of one checkpoint as one ``bAck`` record) in place of one per call; each call
gets its own entries' results, and a store refusal fails the entries of every call it covered.
The native server hands over the calls of one read at once (``ack_messages``, no task per call).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING

from google.protobuf.timestamp_pb2 import Timestamp

from rocketlite.broker.pop.service import PoppedMessage, PopService, PopStatus
from rocketlite.broker.subscriptions import SubscriptionGroupConfig
from rocketlite.protocol.bodies import SubscriptionData
from rocketlite.proxy import consume_checks as checks
from rocketlite.proxy import validate
from rocketlite.proxy.consumer_errors import pop_status
from rocketlite.proxy.context import (
    CLIENT_VERSION,
    FrontContext,
    ServicerContext,
    client_id,
    metadata,
)
from rocketlite.proxy.convert_out import popped_fields, timestamp
from rocketlite.proxy.pb import service_pb2 as spb
from rocketlite.proxy.status import Code, FrontError, ok, status

if TYPE_CHECKING:
    from rocketlite.broker.broker import Broker

log = logging.getLogger(__name__)

NACK_INVISIBLE_MS = 1_000  # ReceiveMessageResponseStreamWriter.NACK_INVISIBLE_TIME
ANY_QUEUE = -1
INIT_MODE_MAX = 0  # ConsumeInitMode.MAX: a new group starts at the queue's end
MAX_ACK_ENTRIES = 1024  # the clients ack one message a call; a bigger batch is refused whole
MAX_ACK_NAMES = 4096  # (group, topic) pairs whose names were checked, remembered
MAX_ACK_GROUP = 4096  # handles of one AckGroup round; a fuller round is acked at once
AckErrors = list[BaseException | None]
AckCall = tuple[str, str, list[str]]  # group, topic, receipt handles


def max_attempts(sgc: SubscriptionGroupConfig) -> int:
    """The delivery attempts of a group's message before it is dead (the proxy answers the
    client ``retryMaxTimes + 1``, ``GrpcClientSettingsManager``)."""
    return sgc.retryMaxTimes + 1


def _now_ts() -> Timestamp:
    return timestamp(int(time.time() * 1000))


async def _sort_out(pops: PopService, group: str, topic: str, sub: SubscriptionData,
                    attempts: int, found: Sequence[PoppedMessage]) -> list[PoppedMessage]:
    """The messages to deliver; a tag the filter does not take is acked, a message past its
    attempts forwarded to the dead-letter queue."""
    out: list[PoppedMessage] = []
    for p in found:
        if not sub.matches_all and sub.tagsSet:
            tag = p.record.properties.get("TAGS") if p.record.properties_text else None
            if tag not in sub.tagsSet:
                try:
                    pops.ack(group, topic, p.receipt_handle)
                except Exception:
                    log.warning("could not ack a filtered message of %s", topic, exc_info=True)
                continue
        if p.delivery_attempt > attempts:
            try:
                await pops.forward_to_dlq(group, topic, p.receipt_handle, attempts)
            except Exception:
                log.warning("could not forward a message of %s to the DLQ", topic, exc_info=True)
            continue
        out.append(p)
    return out


async def receive_message(
    ctx: FrontContext, request: spb.ReceiveMessageRequest, context: ServicerContext,
) -> AsyncIterator[spb.ReceiveMessageResponse]:
    limits = ctx.limits
    group, topic = request.group.name, request.message_queue.topic.name
    try:
        requested = request.long_polling_timeout.ToMilliseconds() \
            if request.HasField("long_polling_timeout") else None
        poll_ms = checks.polling_ms(requested, checks.remaining_ms(context.time_remaining()),
                                    limits, metadata(context, CLIENT_VERSION))
        checks.find_topic(ctx.broker, topic)
        sgc = checks.find_group(ctx.broker, group)
        auto_renew = request.auto_renew and ctx.renew.enable
        if auto_renew or not request.HasField("invisible_duration"):
            invisible_ms = ctx.renew.default_invisible_ms
        else:
            invisible_ms = checks.check_invisible(request.invisible_duration.ToMilliseconds(),
                                                  limits)
        sub = checks.subscription(topic, request.filter_expression)
        batch = checks.check_batch(request.batch_size, limits)
        pops = ctx.broker.pop
        attempt_id = request.attempt_id if request.HasField("attempt_id") else None
        result = await pops.pop(group, topic, ANY_QUEUE, batch, invisible_ms, poll_ms, sub,
                                fifo=sgc.consumeMessageOrderly, init_mode=INIT_MODE_MAX,
                                attempt_id=attempt_id)
        found = await _sort_out(pops, group, topic, sub, max_attempts(sgc), result.messages) \
            if result.messages else []
        messages = popped_fields(found, result.invisible_time,
                                 request.message_queue.topic.resource_namespace)
        renewer = ctx.renewer if auto_renew and messages else None
        client = client_id(context) or ""
        if renewer is not None:
            for p, f in zip(found, messages, strict=True):
                renewer.add(client, group, topic, f["system_properties"]["message_id"],
                            p.receipt_handle, p.invisible_until_ms)
    except Exception as e:  # noqa: BLE001 - every failure is answered as a v2 status
        yield spb.ReceiveMessageResponse(status=pop_status(e, "ReceiveMessage"))
        yield spb.ReceiveMessageResponse(delivery_timestamp=_now_ts())
        return
    if messages:
        yield spb.ReceiveMessageResponse(status=ok())
        sent = 0
        try:
            for m in messages:
                yield spb.ReceiveMessageResponse(message=m)  # type: ignore[arg-type]
                sent += 1
        finally:
            if sent < len(messages):  # the stream broke: the rest are visible again soon
                if renewer is not None:
                    for f in messages[sent:]:
                        sp = f["system_properties"]
                        renewer.take(client, group, sp["message_id"], sp["receipt_handle"])
                _nack(pops, group, topic, found[sent:])
        ctx.broker.stats.got_messages += len(messages)
    elif result.status is PopStatus.POLLING_FULL:
        yield spb.ReceiveMessageResponse(status=status(Code.TOO_MANY_REQUESTS, "polling full"))
    else:
        yield spb.ReceiveMessageResponse(status=status(Code.MESSAGE_NOT_FOUND, "no new message"))
    yield spb.ReceiveMessageResponse(delivery_timestamp=_now_ts())


def _nack(pops: PopService, group: str, topic: str, unsent: Sequence[PoppedMessage]) -> None:
    for p in unsent:
        try:
            pops.change_invisible(group, topic, p.receipt_handle, NACK_INVISIBLE_MS)
        except Exception:
            log.warning("could not make an unsent message of %s visible again", topic,
                        exc_info=True)


def _current_handles(ctx: FrontContext, context: ServicerContext, group: str,
                     entries: list[tuple[str, str]]) -> list[str]:
    """The handles to use for the client's (message id, handle) pairs: a renewed message's
    current one, no longer renewed (``renew``)."""
    renewer = ctx.renewer
    if not len(renewer):
        return [h for _, h in entries]
    client = client_id(context) or ""
    return [renewer.take(client, group, mid, h) for mid, h in entries]


def _names(ctx: FrontContext, group: str, topic: str) -> None:
    validate.topic_name(topic, ctx.broker.config)
    validate.group_name(group)


class AckGroup:
    """The acks of the AckMessage calls of one loop iteration, made together at its end by one
    ``ack_many`` per group and topic (module docstring); ``ack_now`` does the same for the calls
    of one read."""

    __slots__ = ("_count", "_names", "_pending", "_scheduled", "broker")

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._names: set[tuple[str, str]] = set()  # (group, topic) pairs that passed the checks
        self._pending: list[tuple[AckCall, asyncio.Future[AckErrors]]] = []
        self._count = 0
        self._scheduled = False

    def names(self, group: str, topic: str) -> None:
        """``_names``' checks, remembered for pairs that pass (at most ``MAX_ACK_NAMES``)."""
        key = (group, topic)
        if key in self._names:
            return
        validate.topic_name(topic, self.broker.config)
        validate.group_name(group)
        if len(self._names) >= MAX_ACK_NAMES:
            self._names.clear()
        self._names.add(key)

    def ack(self, group: str, topic: str, handles: list[str]) -> asyncio.Future[AckErrors]:
        """A future of the handles' results (None or the error), in their order."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[AckErrors] = loop.create_future()
        self._pending.append(((group, topic, handles), fut))
        self._count += len(handles)
        if self._count >= MAX_ACK_GROUP:
            self.run()
        elif not self._scheduled:
            self._scheduled = True
            loop.call_soon(self.run)
        return fut

    def run(self) -> None:
        self._scheduled = False
        pending, self._pending, self._count = self._pending, [], 0
        if not pending:
            return
        for (_, fut), errors in zip(pending, self.ack_now([c for c, _ in pending]), strict=True):
            if not fut.done():
                fut.set_result(errors)

    def ack_now(self, calls: list[AckCall]) -> list[AckErrors]:
        """Each call's results (None or the error per handle): one ``ack_many`` per group and
        topic; a store refusal fails every handle it covered."""
        by_pair: dict[tuple[str, str], list[int]] = {}
        for i, (group, topic, _) in enumerate(calls):
            by_pair.setdefault((group, topic), []).append(i)
        out: list[AckErrors] = [[] for _ in calls]
        pops = self.broker.pop
        for (group, topic), idx in by_pair.items():
            handles = [h for i in idx for h in calls[i][2]]
            try:
                errors: AckErrors = list(pops.ack_many(group, topic, handles))
            except Exception as e:  # noqa: BLE001 - the store refused the append: all failed
                errors = [e] * len(handles)
            at = 0
            for i in idx:
                n = len(calls[i][2])
                out[i] = errors[at:at + n]
                at += n
        return out


def ack_group(ctx: FrontContext) -> AckGroup:
    """The front's ``AckGroup`` (made on first use)."""
    group = ctx.ack_group
    if group is None:
        group = ctx.ack_group = AckGroup(ctx.broker)
    return group


def _check_ack(ctx: FrontContext, acks: AckGroup, request: spb.AckMessageRequest,
               context: ServicerContext) -> AckCall | spb.AckMessageResponse:
    """(group, topic, the handles to ack) of a request, or its refusal."""
    group, topic = request.group.name, request.topic.name
    try:
        acks.names(group, topic)
        if not request.entries:
            raise FrontError(Code.BAD_REQUEST, "the request has no entries to ack")
        if len(request.entries) > MAX_ACK_ENTRIES:
            raise FrontError(Code.BAD_REQUEST, f"{len(request.entries)} entries to ack, more "
                                               f"than {MAX_ACK_ENTRIES} in one request")
        return group, topic, _current_handles(ctx, context, group, [
            (e.message_id, e.receipt_handle) for e in request.entries])
    except Exception as e:  # noqa: BLE001 - every failure is answered as a v2 status
        return spb.AckMessageResponse(status=pop_status(e, "AckMessage"))


def _ack_answer(request: spb.AckMessageRequest, errors: AckErrors) -> spb.AckMessageResponse:
    response = spb.AckMessageResponse()  # filled in place: a constructor's copies cost twice
    entries = response.entries
    codes: set[int] = set()
    for entry, err in zip(request.entries, errors, strict=True):
        st = ok() if err is None else pop_status(err, "AckMessage")
        codes.add(st.code)
        out = entries.add()
        out.message_id = entry.message_id
        out.receipt_handle = entry.receipt_handle
        out.status.CopyFrom(st)
    if len(codes) > 1:
        overall = status(Code.MULTIPLE_RESULTS, "MULTIPLE_RESULTS")
    else:
        code = codes.pop()
        overall = ok() if code == Code.OK else status(code, entries[0].status.message)
    response.status.CopyFrom(overall)
    return response


async def ack_message(
    ctx: FrontContext, request: spb.AckMessageRequest, context: ServicerContext,
) -> spb.AckMessageResponse:
    """One call (grpc.aio's path): one append for the calls of this iteration, the acks of one
    checkpoint as one bAck record."""
    acks = ack_group(ctx)
    call = _check_ack(ctx, acks, request, context)
    if isinstance(call, spb.AckMessageResponse):
        return call
    return _ack_answer(request, await acks.ack(*call))


def ack_messages(ctx: FrontContext, calls: list[tuple[spb.AckMessageRequest, ServicerContext]]
                 ) -> list[spb.AckMessageResponse]:
    """The calls of one read (the native server's batch), acked together and answered now."""
    acks = ack_group(ctx)
    checked = [_check_ack(ctx, acks, request, context) for request, context in calls]
    passed = [c for c in checked if not isinstance(c, spb.AckMessageResponse)]
    results = iter(acks.ack_now(passed) if passed else ())
    return [c if isinstance(c, spb.AckMessageResponse) else _ack_answer(request, next(results))
            for (request, _), c in zip(calls, checked, strict=True)]


async def change_invisible_duration(
    ctx: FrontContext, request: spb.ChangeInvisibleDurationRequest, context: ServicerContext,
) -> spb.ChangeInvisibleDurationResponse:
    group, topic = request.group.name, request.topic.name
    try:
        _names(ctx, group, topic)
        ms = checks.check_invisible(request.invisible_duration.ToMilliseconds(), ctx.limits,
                                    minimum=0)  # GrpcValidator.validateInvisibleTime's minimum
        [current] = _current_handles(ctx, context, group,
                                     [(request.message_id, request.receipt_handle)])
        handle = ctx.broker.pop.change_invisible(group, topic, current,
                                                          ms)
        return spb.ChangeInvisibleDurationResponse(status=ok(), receipt_handle=handle)
    except Exception as e:  # noqa: BLE001 - every failure is answered as a v2 status
        return spb.ChangeInvisibleDurationResponse(
            status=pop_status(e, "ChangeInvisibleDuration"))


async def forward_to_dlq(
    ctx: FrontContext, request: spb.ForwardMessageToDeadLetterQueueRequest, context: ServicerContext,
) -> spb.ForwardMessageToDeadLetterQueueResponse:
    group, topic = request.group.name, request.topic.name
    try:
        _names(ctx, group, topic)
        sgc = checks.find_group(ctx.broker, group)
        attempts = request.max_delivery_attempts if request.max_delivery_attempts > 0 \
            else max_attempts(sgc)
        [current] = _current_handles(ctx, context, group,
                                     [(request.message_id, request.receipt_handle)])
        await ctx.broker.pop.forward_to_dlq(group, topic, current,
                                                     attempts)
        return spb.ForwardMessageToDeadLetterQueueResponse(status=ok())
    except Exception as e:  # noqa: BLE001 - every failure is answered as a v2 status
        return spb.ForwardMessageToDeadLetterQueueResponse(
            status=pop_status(e, "ForwardMessageToDeadLetterQueue"))

