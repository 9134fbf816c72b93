"""SendMessage (NORMAL, FIFO, DELAY, TRANSACTION) and EndTransaction (the Java proxy's
``SendMessageActivity`` and ``EndTransactionActivity``).

SendMessage: the request's messages go to one topic, whose checks (broker and topic writable,
created when allowed) are the Remoting send's (``broker.send_service.topic_for_send``); each
message is checked and converted by ``convert_in`` (the first refusal answers the whole request,
nothing is stored, as the Java proxy does), sent through the broker's diverters (transaction half
messages, timers) and the request's messages are stored with ONE ``put_messages`` call. Queue: a
message with a message group goes to ``consistent_hash(String.hashCode(group), writeQueueNums)``
(Guava's ``Hashing.consistentHash``, the Java proxy's choice: stable, so one group stays in one
queue); the others of a request share one queue picked at random. Each entry is answered with
its status, ``message_id`` (the client's, kept as UNIQ_KEY), ``offset`` (the queue offset) and,
for a transaction, ``transaction_id``: the offset message id of the stored half record, which
EndTransaction reads back (so it works after a restart). Under SYNC_FLUSH the answer waits for
the group commit; one not done within ``syncFlushTimeout`` is MASTER_PERSISTENCE_TIMEOUT
(stored, not yet durable: the Java proxy's code for FLUSH_DISK_TIMEOUT).

EndTransaction: see ``end_transaction``.
"""

from __future__ import annotations

import asyncio
import random
from concurrent.futures import Future

from rocketlite.broker.send import may_divert
from rocketlite.broker.send_service import topic_for_send
from rocketlite.broker.topics import AUTO_CREATE_TOPIC
from rocketlite.common.errors import FlushTimeoutError, MessageIllegalError
from rocketlite.formats.javahash import java_string_hash
from rocketlite.formats.message_record import SYSFLAG_TRANSACTION_MASK
from rocketlite.proxy import validate
from rocketlite.proxy.context import FrontContext, ServicerContext, peer_address
from rocketlite.proxy.convert_in import Inbound, convert, host_bytes, now_ms
from rocketlite.proxy.pb import definition_pb2 as pb
from rocketlite.proxy.pb import service_pb2 as spb
from rocketlite.proxy.route import accepted_types
from rocketlite.proxy.status import Code, FrontError, error_status, ok, status
from rocketlite.proxy.transaction import end_transaction as end_transaction

__all__ = ["consistent_hash", "end_transaction", "send_message"]

MAX_MESSAGES = 1024  # per request
TRANSACTION = int(pb.MessageType.TRANSACTION)
DELAY = int(pb.MessageType.DELAY)
_MASK64 = (1 << 64) - 1


def consistent_hash(value: int, buckets: int) -> int:
    """Guava's ``Hashing.consistentHash(long, int)`` (a linear congruential walk)."""
    state = value & _MASK64
    candidate = 0
    while True:
        state = (2862933555777941757 * state + 1) & _MASK64
        nxt = int((candidate + 1) / (((state >> 33) + 1) / 2147483648.0))
        if 0 <= nxt < buckets:
            candidate = nxt
        else:
            return candidate


def _refused(n: int, st: pb.Status) -> spb.SendMessageResponse:
    return spb.SendMessageResponse(status=st, entries=[spb.SendResultEntry(status=st)] * n)


async def _flushed(ctx: FrontContext, flushed: Future[None]) -> pb.Status | None:
    """None once the group commit is done; the status to answer if it is not in time or failed."""
    timeout = ctx.broker.store.config.sync_flush_timeout / 1000
    try:
        async with asyncio.timeout(timeout):
            await asyncio.wrap_future(flushed)
    except (TimeoutError, FlushTimeoutError):
        return status(Code.MASTER_PERSISTENCE_TIMEOUT,
                      f"stored, but not flushed to disk within {timeout:g} s")
    except Exception as e:  # noqa: BLE001 - the flush failed: answered with the error
        return error_status(e)
    return None


async def send_message(
    ctx: FrontContext, request: spb.SendMessageRequest, context: ServicerContext,
) -> spb.SendMessageResponse:
    msgs = request.messages
    n = len(msgs)
    try:
        if n == 0:
            raise FrontError(Code.MESSAGE_CORRUPTED, "no message to send")
        if n > MAX_MESSAGES:
            raise FrontError(Code.BAD_REQUEST, f"{n} messages in one request, more than "
                             f"{MAX_MESSAGES}")
        broker = ctx.broker
        topic = validate.topic_name(msgs[0].topic, broker.config)
        tc = topic_for_send(broker, topic, AUTO_CREATE_TOPIC, broker.config.default_topic_queue_nums)
        host, port = peer_address(context)
        into = Inbound(topic, accepted_types(tc), broker.store_config.max_message_size,
                       broker.config.timer_max_delay_sec * 1000, host_bytes(host), port, now_ms())
        wq = max(1, tc.writeQueueNums)
        shared_qid = random.randrange(wq)
        diverters = bool(broker.diverters)
        stored = []
        txn = []
        for m in msgs:
            sp = m.system_properties
            qid = (consistent_hash(java_string_hash(sp.message_group), wq)
                   if sp.HasField("message_group") else shared_qid)
            msg, kind = convert(m, into, qid)
            if diverters and (msg.sys_flag & SYSFLAG_TRANSACTION_MASK or may_divert(msg.properties)):
                try:
                    msg = broker.divert(msg)
                except MessageIllegalError as e:
                    code = Code.ILLEGAL_DELIVERY_TIME if kind == DELAY else Code.BAD_REQUEST
                    raise FrontError(code, str(e)) from None
            stored.append(msg)
            txn.append(kind == TRANSACTION)
    except Exception as e:  # noqa: BLE001 - refused whole, with its status
        return _refused(n, error_status(e))
    try:
        put = broker.store.put_messages(stored)
    except Exception as e:  # noqa: BLE001 - nothing stored: answered with the error
        return _refused(n, error_status(e))
    broker.stats.put_messages += n
    st = ok()
    if put.flushed is not None and not (put.flushed.done() and put.flushed.exception() is None):
        st = await _flushed(ctx, put.flushed) or st
    store = broker.store
    entries = [spb.SendResultEntry(
        status=st, message_id=m.system_properties.message_id, offset=r.queue_offset,
        transaction_id=store.message_id(r.commit_log_offset) if t else "",
    ) for m, r, t in zip(msgs, put.results, txn, strict=True)]
    return spb.SendMessageResponse(status=st, entries=entries)
