"""PullMessage, UpdateOffset, GetOffset, QueryOffset: the 5.x lite-pull path, straight on the
store's queues and the broker's ``ConsumerOffsetManager`` (the Java proxy's
``PullMessageActivity``/``OffsetActivity``).

PullMessage streams ``{status}``, one ``{message}`` per record found, then ``{next_offset}``.
Store status to v2 code (the Java client's PullStatus, then ``PullMessageResponseStreamWriter``):

=========================================================  ===================================
FOUND                                                      OK, the messages
OFFSET_OVERFLOW_ONE, OFFSET_FOUND_NULL, NO_MATCHED_MESSAGE,  MESSAGE_NOT_FOUND
MESSAGE_WAS_REMOVING; no queue / empty queue at offset 0
OFFSET_OVERFLOW_BADLY, OFFSET_TOO_SMALL; no queue / empty   ILLEGAL_OFFSET, next_offset corrected
queue at another offset
=========================================================  ===================================

Nothing at the queue's end is held like the Remoting pull's long polling (the broker's
``PullRequestHoldService``: woken one dispatch round after a message arrives) for the request's
long_polling_timeout within ``FrontContext.limits`` and the client's deadline; records the
filter skips move the offset on and the poll goes on from past them.

GetOffset answers OFFSET_NOT_FOUND when the group has no offset for the queue; UpdateOffset
refuses an offset below 0 or past the queue's end (ILLEGAL_OFFSET); QueryOffset answers the
queue's first offset (BEGINNING), its end (END) or the first offset stored at or after a time
(TIMESTAMP, which needs the timestamp: BAD_REQUEST without).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from rocketlite.formats.message_record import MessageRecord, decode_record
from rocketlite.protocol.bodies import SubscriptionData
from rocketlite.proxy import consume_checks as checks
from rocketlite.proxy.context import CLIENT_VERSION, FrontContext, ServicerContext, metadata
from rocketlite.proxy.convert_out import pulled_fields
from rocketlite.proxy.pb import definition_pb2 as pb
from rocketlite.proxy.pb import service_pb2 as spb
from rocketlite.proxy.status import Code, FrontError, ok, status
from rocketlite.store.get_message import GetMessageResult, GetMessageStatus

_ST = GetMessageStatus
_NOT_FOUND = frozenset({_ST.OFFSET_OVERFLOW_ONE, _ST.OFFSET_FOUND_NULL, _ST.NO_MATCHED_MESSAGE,
                        _ST.MESSAGE_WAS_REMOVING})
_MOVED = frozenset({_ST.OFFSET_OVERFLOW_BADLY, _ST.OFFSET_TOO_SMALL})
_NO_QUEUE = frozenset({_ST.NO_MATCHED_LOGIC_QUEUE, _ST.NO_MESSAGE_IN_QUEUE})


def _code(result: GetMessageResult, offset: int) -> int:
    st = result.status
    if st is _ST.FOUND:
        return Code.OK
    if st in _NOT_FOUND:
        return Code.MESSAGE_NOT_FOUND
    if st in _MOVED:
        return Code.ILLEGAL_OFFSET
    return Code.MESSAGE_NOT_FOUND if offset == 0 else Code.ILLEGAL_OFFSET


def _at_end(result: GetMessageResult, offset: int) -> bool:
    """Nothing to read yet where the consumer stands: worth waiting for."""
    st = result.status
    return st is _ST.OFFSET_OVERFLOW_ONE or (st in _NO_QUEUE and offset == 0)


def records_of(result: GetMessageResult) -> list[MessageRecord]:
    out: list[MessageRecord] = []
    body, pos = result.body, 0
    for size in result.sizes:
        r = decode_record(body, pos, pos + size, verify_crc=False)
        if r is not None:
            out.append(r)
        pos += size
    return out


class _Pull:
    """One PullMessage: read, and while nothing is there, wait for arrivals until the deadline."""

    def __init__(self, ctx: FrontContext, topic: str, queue_id: int, max_count: int,
                 sub: SubscriptionData) -> None:
        self.broker = ctx.broker
        self.topic, self.queue_id, self.max_count = topic, queue_id, max_count
        self.tag_filter = None if sub.matches_all else sub.codeSet.__contains__

    def read(self, offset: int) -> GetMessageResult:
        return self.broker.store.get_message(self.topic, self.queue_id, offset, self.max_count,
                                             self.broker.config.max_transfer_bytes,
                                             self.tag_filter)

    async def wait(self, offset: int, timeout_s: float) -> bool:
        """Until the queue passes ``offset`` or ``timeout_s``; False at once if no more pulls
        may be held (the broker's ``maxHeldPulls``, or it is shutting down)."""
        loop = asyncio.get_running_loop()
        arrived: asyncio.Future[None] = loop.create_future()
        store = self.broker.store

        def run() -> None:
            if not arrived.done():
                arrived.set_result(None)

        def current_end() -> int:
            return store.max_offset_in_queue(self.topic, self.queue_id)

        if not self.broker.hold.hold((self.topic, self.queue_id), offset, timeout_s, run,
                                     current_end):
            return False
        await arrived
        return True

    async def run(self, offset: int, poll_ms: int) -> tuple[GetMessageResult, int]:
        """The read to answer and the offset it was made at."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + poll_ms / 1000
        while True:
            result = self.read(offset)
            left = deadline - loop.time()
            if result.status is _ST.NO_MATCHED_MESSAGE and left > 0 \
                    and result.next_begin_offset > offset:
                offset = result.next_begin_offset  # filtered out: go on past them
                await asyncio.sleep(0)
                continue
            if not _at_end(result, offset) or left <= 0:
                return result, offset
            if not await self.wait(offset, left) or loop.time() >= deadline:
                return self.read(offset), offset


async def pull_message(
    ctx: FrontContext, request: spb.PullMessageRequest, context: ServicerContext,
) -> AsyncIterator[spb.PullMessageResponse]:
    limits = ctx.limits
    try:
        mq = request.message_queue
        topic, queue_id, group = mq.topic.name, mq.id, request.group.name
        checks.find_group(ctx.broker, group)
        checks.find_topic(ctx.broker, topic, queue_id)
        sub = checks.subscription(topic, request.filter_expression)
        batch = checks.check_batch(request.batch_size, limits)
        if request.offset < 0:
            raise FrontError(Code.ILLEGAL_OFFSET, f"offset {request.offset} is negative")
        requested = request.long_polling_timeout.ToMilliseconds() \
            if request.HasField("long_polling_timeout") else 0
        poll_ms = 0 if requested <= 0 else checks.polling_ms(
            requested, checks.remaining_ms(context.time_remaining()), limits,
            metadata(context, CLIENT_VERSION))
        result, offset = await _Pull(ctx, topic, queue_id, batch, sub).run(request.offset,
                                                                             poll_ms)
        code = _code(result, offset)
        messages = pulled_fields(records_of(result), topic, mq.topic.resource_namespace) \
            if code == Code.OK else []
    except Exception as e:  # noqa: BLE001 - every failure is answered as a v2 status
        yield spb.PullMessageResponse(status=checks.answer(e, "PullMessage"))
        return
    if messages:
        ctx.broker.stats.got_messages += len(messages)
        yield spb.PullMessageResponse(status=ok())
        for m in messages:
            yield spb.PullMessageResponse(message=m)  # type: ignore[arg-type]
    elif code == Code.ILLEGAL_OFFSET:
        yield spb.PullMessageResponse(status=status(
            code, f"offset {offset} is outside queue {topic}:{queue_id} "
                  f"[{result.min_offset}, {result.max_offset}]"))
    else:
        yield spb.PullMessageResponse(status=status(Code.MESSAGE_NOT_FOUND, "no new message"))
    yield spb.PullMessageResponse(next_offset=result.next_begin_offset)


async def update_offset(
    ctx: FrontContext, request: spb.UpdateOffsetRequest, context: ServicerContext,
) -> spb.UpdateOffsetResponse:
    try:
        mq = request.message_queue
        topic, queue_id, group = mq.topic.name, mq.id, request.group.name
        checks.find_group(ctx.broker, group)
        checks.find_topic(ctx.broker, topic, queue_id)
        end = ctx.broker.store.max_offset_in_queue(topic, queue_id)
        if not 0 <= request.offset <= end:
            raise FrontError(Code.ILLEGAL_OFFSET, f"offset {request.offset} is outside queue "
                                                  f"{topic}:{queue_id} [0, {end}]")
        ctx.broker.offsets.commit(group, topic, queue_id, request.offset)
        return spb.UpdateOffsetResponse(status=ok())
    except Exception as e:  # noqa: BLE001 - every failure is answered as a v2 status
        return spb.UpdateOffsetResponse(status=checks.answer(e, "UpdateOffset"))


async def get_offset(
    ctx: FrontContext, request: spb.GetOffsetRequest, context: ServicerContext,
) -> spb.GetOffsetResponse:
    try:
        mq = request.message_queue
        topic, queue_id, group = mq.topic.name, mq.id, request.group.name
        checks.find_group(ctx.broker, group)
        checks.find_topic(ctx.broker, topic, queue_id)
        offset = ctx.broker.offsets.query(group, topic, queue_id)
        if offset < 0:
            raise FrontError(Code.OFFSET_NOT_FOUND, f"consumer group {group} has no offset for "
                                                    f"queue {topic}:{queue_id}")
        return spb.GetOffsetResponse(status=ok(), offset=offset)
    except Exception as e:  # noqa: BLE001 - every failure is answered as a v2 status
        return spb.GetOffsetResponse(status=checks.answer(e, "GetOffset"))


async def query_offset(
    ctx: FrontContext, request: spb.QueryOffsetRequest, context: ServicerContext,
) -> spb.QueryOffsetResponse:
    try:
        mq = request.message_queue
        topic, queue_id = mq.topic.name, mq.id
        checks.find_topic(ctx.broker, topic, queue_id)
        store, policy = ctx.broker.store, request.query_offset_policy
        if policy == pb.QueryOffsetPolicy.BEGINNING:
            offset = store.min_offset_in_queue(topic, queue_id)
        elif policy == pb.QueryOffsetPolicy.END:
            offset = store.max_offset_in_queue(topic, queue_id)
        elif policy == pb.QueryOffsetPolicy.TIMESTAMP:
            if not request.HasField("timestamp"):
                raise FrontError(Code.BAD_REQUEST,
                                 "timestamp is required for the TIMESTAMP query offset policy")
            offset = store.offset_in_queue_by_time(topic, queue_id,
                                                   request.timestamp.ToMilliseconds())
        else:
            raise FrontError(Code.BAD_REQUEST, f"unsupported query offset policy {policy}")
        return spb.QueryOffsetResponse(status=ok(), offset=offset)
    except Exception as e:  # noqa: BLE001 - every failure is answered as a v2 status
        return spb.QueryOffsetResponse(status=checks.answer(e, "QueryOffset"))
