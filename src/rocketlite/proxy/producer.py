"""SendMessage (NORMAL, FIFO, DELAY, TRANSACTION) and EndTransaction (the Java proxy's
``SendMessageActivity`` and ``EndTransactionActivity``).

SendMessage: the request's messages go to one topic, whose checks (broker and topic writable,
created when allowed) are the Remoting send's (``broker.send_service.topic_for_send``); each
message is checked and converted by ``convert_in`` (the first refusal answers the whole request,
nothing is stored, as the Java proxy does), sent through the broker's diverters (transaction half
messages, timers). The messages of the SendMessage requests checked in one loop iteration (a
client's window of calls in flight arrives in one read) are stored together with ONE
``put_messages`` call (``SendGroup``, one per front): the store's lock, write, dispatch round
and group-commit wait are paid once per group, not per call. The native server hands over the
calls of one read at once (``send_messages``, no task per call); grpc.aio's calls each await
their group (``send_message``). Each request keeps its own answer:
a request refused by its checks is answered alone and is not in the group; when the store
refuses the group's messages as illegal, each request is stored alone so that only the culprit's
is refused; other store errors answer every request of the group. Queue: a
message with a message group goes to ``consistent_hash(String.hashCode(group), writeQueueNums)``
(Guava's ``Hashing.consistentHash``, the Java proxy's choice: stable, so one group stays in one
queue); the others of a request share one queue picked at random. Each entry is answered with
its status, ``message_id`` (the client's, kept as UNIQ_KEY), ``offset`` (the queue offset) and,
for a transaction, ``transaction_id``: the offset message id of the stored half record, which
EndTransaction reads back (so it works after a restart). Under SYNC_FLUSH the answer waits for
the group commit; one not done within ``syncFlushTimeout`` is MASTER_PERSISTENCE_TIMEOUT
(stored, not yet durable: the Java proxy's code for FLUSH_DISK_TIMEOUT). Under SYNC_MASTER the
answer then waits for a slave's ack of the append (``broker.ha.transfer``: one waiter per append,
shared by the group's requests): not acked within ``syncFlushTimeout`` is
SLAVE_PERSISTENCE_TIMEOUT, no slave connected HA_NOT_AVAILABLE (the Java proxy's codes for
FLUSH_SLAVE_TIMEOUT and SLAVE_NOT_AVAILABLE; the message is stored in both cases); a slave's
failure wins over MASTER_PERSISTENCE_TIMEOUT, as in Java's ``thenCombine``.

EndTransaction: see ``end_transaction``.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rocketlite.broker.ha.transfer import FLUSH_SLAVE_TIMEOUT, SUCCESS, Replica
from rocketlite.broker.send import may_divert
from rocketlite.broker.send_service import topic_for_send
from rocketlite.broker.timer_divert import TIMER_TOPIC
from rocketlite.broker.topics import AUTO_CREATE_TOPIC
from rocketlite.common.errors import FlushTimeoutError, MessageIllegalError, MessageTooLargeError
from rocketlite.formats.javahash import java_string_hash
from rocketlite.formats.message_record import SYSFLAG_TRANSACTION_MASK
from rocketlite.proxy import send_answer as answer
from rocketlite.proxy import validate
from rocketlite.proxy.context import FrontContext, ServicerContext, peer_address
from rocketlite.proxy.convert_in import Inbound, convert, host_bytes, now_ms
from rocketlite.proxy.pb import definition_pb2 as pb
from rocketlite.proxy.pb import service_pb2 as spb
from rocketlite.proxy.recall import handle_for
from rocketlite.proxy.route import accepted_types
from rocketlite.proxy.status import Code, FrontError, error_status, ok, status
from rocketlite.proxy.transaction import end_transaction as end_transaction
from rocketlite.store.message import AppendResult, MessageToStore

if TYPE_CHECKING:
    from rocketlite.broker.broker import Broker

__all__ = ["consistent_hash", "end_transaction", "send_message", "send_messages"]

MAX_MESSAGES = 1024  # per request
MAX_TOPIC_NAMES = 4096  # valid topic names a front remembers
MAX_GROUP = 4096  # messages of one group append; a fuller group is appended at once
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


async def _replicated(ctx: FrontContext, replica: Replica) -> pb.Status | None:
    """None once a slave acked the append; the status to answer if none did in time or no
    slave is available (SYNC_MASTER)."""
    # shielded: the future is shared by the group's requests, a cancelled call must not cancel it
    code = replica if isinstance(replica, int) else await asyncio.shield(replica)
    if code == SUCCESS:
        return None
    if code == FLUSH_SLAVE_TIMEOUT:
        timeout = ctx.broker.store.config.sync_flush_timeout / 1000
        return status(Code.SLAVE_PERSISTENCE_TIMEOUT,
                      f"stored, but not acked by a slave within {timeout:g} s")
    return status(Code.HA_NOT_AVAILABLE, "stored on the master only: no slave is available")


# A request's results, the group commit's future (SYNC_FLUSH) and the slave's outcome
# (SYNC_MASTER: None when there is nothing to wait for).
Stored = tuple[list[AppendResult], "Future[None] | None", "Replica | None"]


class SendGroup:
    """The messages of the requests checked in one loop iteration, appended together at its end
    (module docstring). ``put`` returns a future of the request's results and the group commit's
    future (SYNC_FLUSH), or of the error that refused the request's messages; ``store`` appends
    the requests of a batch at once."""

    __slots__ = ("_msgs", "_scheduled", "_topics", "_waiting", "broker")

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._topics: set[str] = set()  # names that passed ``validate.topic_name``
        self._msgs: list[MessageToStore] = []
        self._waiting: list[tuple[int, asyncio.Future[Stored]]] = []  # (message count, answer)
        self._scheduled = False

    def topic_name(self, name: str) -> str:
        """``validate.topic_name`` against the broker's config, remembered for names that pass
        (at most ``MAX_TOPIC_NAMES``; the broker's names are fixed while it runs)."""
        if name in self._topics:
            return name
        validate.topic_name(name, self.broker.config)
        if len(self._topics) >= MAX_TOPIC_NAMES:
            self._topics.clear()
        self._topics.add(name)
        return name

    def put(self, msgs: list[MessageToStore]) -> asyncio.Future[Stored]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Stored] = loop.create_future()
        self._msgs += msgs
        self._waiting.append((len(msgs), fut))
        if len(self._msgs) >= MAX_GROUP:
            self.append()
        elif not self._scheduled:
            self._scheduled = True
            loop.call_soon(self.append)
        return fut

    def append(self) -> None:
        """Store the queued messages with one ``put_messages`` and answer each request."""
        self._scheduled = False
        waiting, msgs = self._waiting, self._msgs
        if not waiting:
            return
        self._waiting, self._msgs = [], []
        outcomes = self._store([n for n, _ in waiting], msgs)
        for (_, fut), outcome in zip(waiting, outcomes, strict=True):
            if fut.done():  # a request cancelled meanwhile: stored all the same
                continue
            if isinstance(outcome, BaseException):
                fut.set_exception(outcome)
            else:
                fut.set_result(outcome)

    def store(self, requests: list[list[MessageToStore]]) -> list[Stored | Exception]:
        """Each request's results, or the error that refused its messages; all appended with
        one ``put_messages`` (at most ``MAX_GROUP`` messages an append)."""
        out: list[Stored | Exception] = []
        counts: list[int] = []
        msgs: list[MessageToStore] = []
        for r in requests:
            if msgs and len(msgs) + len(r) > MAX_GROUP:
                out += self._store(counts, msgs)
                counts, msgs = [], []
            counts.append(len(r))
            msgs += r
        if counts:
            out += self._store(counts, msgs)
        return out

    def _store(self, counts: list[int], msgs: list[MessageToStore]) -> list[Stored | Exception]:
        broker = self.broker
        try:
            put = broker.store.put_messages(msgs)
        except MessageIllegalError as e:
            if len(counts) > 1:  # which request's message: each stored alone
                return self._alone(counts, msgs)
            if isinstance(e, MessageTooLargeError):
                broker.limit_counts.hit("message_size")
            return [e]
        except Exception as e:  # noqa: BLE001 - nothing stored: every request gets the error
            return [e] * len(counts)
        broker.stats.put_messages += len(msgs)
        results, flushed = put.results, put.flushed
        if (metrics := broker.metrics) is not None:  # one fold per append, as the Remoting sends
            metrics.fold_in(msgs, results)
        replica = _replica(broker, results)
        if len(counts) == 1:
            return [(results, flushed, replica)]
        out: list[Stored | Exception] = []
        at = 0
        for n in counts:
            out.append((results[at:at + n], flushed, replica))
            at += n
        return out

    def _alone(self, counts: list[int], msgs: Sequence[MessageToStore]
               ) -> list[Stored | Exception]:
        """Each request's messages in their own ``put_messages``: only the refused are refused."""
        broker = self.broker
        out: list[Stored | Exception] = []
        at = 0
        for n in counts:
            mine, at = list(msgs[at:at + n]), at + n
            try:
                put = broker.store.put_messages(mine)
            except Exception as e:  # noqa: BLE001 - this request's error
                out.append(e)
                continue
            broker.stats.put_messages += n
            if (metrics := broker.metrics) is not None:
                metrics.fold_in(mine, put.results)
            out.append((put.results, put.flushed, _replica(broker, put.results)))
        return out


def _replica(broker: Broker, results: list[AppendResult]) -> Replica | None:
    """SYNC_MASTER: the slave's outcome of the append of ``results`` (None: nothing to wait
    for, as under ASYNC_MASTER)."""
    ha = broker.ha_server
    if ha is None or ha.transfer is None:
        return None
    r = ha.transfer.request(results[-1].end_offset)
    return None if isinstance(r, int) and r == SUCCESS else r


def send_group(ctx: FrontContext) -> SendGroup:
    """The front's ``SendGroup`` (made on first use)."""
    group = ctx.send_group
    if group is None:
        group = ctx.send_group = SendGroup(ctx.broker)
    return group


@dataclass(slots=True)
class _Checked:
    """A request that passed its checks: its messages as stored and which are transactions;
    ``plain``: none is a transaction or was diverted (to the timer)."""

    request: spb.SendMessageRequest
    stored: list[MessageToStore]
    txn: list[bool]
    plain: bool
    ids: list[str]  # the messages' ids


Memo = dict[tuple[str, str], tuple[Inbound, int]]  # (topic, peer) -> (Inbound, write queues)


def _inbound(ctx: FrontContext, group: SendGroup, name: str, context: ServicerContext,
             memo: Memo) -> tuple[Inbound, int]:
    """What a request's messages are checked against and its topic's write queues: the topic
    checked for a send (created when allowed), once per topic and client in ``memo``."""
    key = (name, context.peer())
    got = memo.get(key)
    if got is None:
        broker = ctx.broker
        topic = group.topic_name(name)
        tc = topic_for_send(broker, topic, AUTO_CREATE_TOPIC,
                            broker.config.default_topic_queue_nums)
        host, port = peer_address(context)
        got = memo[key] = (
            Inbound(topic, accepted_types(tc), broker.store_config.max_message_size,
                    broker.config.timer_max_delay_sec * 1000, host_bytes(host), port, now_ms()),
            max(1, tc.writeQueueNums))
    return got


def _check(ctx: FrontContext, group: SendGroup, request: spb.SendMessageRequest,
           context: ServicerContext, memo: Memo) -> _Checked | spb.SendMessageResponse:
    """The request's messages converted (and diverted) for the store, or its refusal. ``memo``
    keeps the topic's checks for the other requests of a batch."""
    msgs = request.messages
    n = len(msgs)
    try:
        if n == 0:
            raise FrontError(Code.MESSAGE_CORRUPTED, "no message to send")
        if n > MAX_MESSAGES:
            raise FrontError(Code.BAD_REQUEST, f"{n} messages in one request, more than "
                             f"{MAX_MESSAGES}")
        broker = ctx.broker
        into, wq = _inbound(ctx, group, msgs[0].topic.name, context, memo)
        shared_qid = int(random.random() * wq)
        diverters = bool(broker.diverters)
        stored = []
        txn = []
        ids = []
        plain = True
        for m in msgs:
            sp = m.system_properties
            ids.append(sp.message_id)
            qid = (consistent_hash(java_string_hash(sp.message_group), wq)
                   if sp.HasField("message_group") else shared_qid)
            msg, kind = convert(m, into, qid)
            if diverters and (msg.sys_flag & SYSFLAG_TRANSACTION_MASK or may_divert(msg.properties)):
                plain = False
                try:
                    msg = broker.divert(msg)
                except MessageIllegalError as e:
                    code = Code.ILLEGAL_DELIVERY_TIME if kind == DELAY else Code.BAD_REQUEST
                    raise FrontError(code, str(e)) from None
            stored.append(msg)
            if kind == TRANSACTION:
                plain = False
            txn.append(kind == TRANSACTION)
    except Exception as e:  # noqa: BLE001 - refused whole, with its status
        return _refused(n, error_status(e))
    return _Checked(request, stored, txn, plain, ids)


def _entries(ctx: FrontContext, checked: _Checked, results: list[AppendResult]
             ) -> list[tuple[str, str, int, str]]:
    """(message id, transaction id, queue offset, recall handle) of each message stored."""
    broker = ctx.broker
    broker_name = broker.config.broker_name
    out = []
    for mid, s, r, t in zip(checked.ids, checked.stored, results, checked.txn, strict=True):
        tid = broker.store.message_id(r.commit_log_offset) if t else ""
        recall = handle_for(s, broker_name) if not t and s.topic == TIMER_TOPIC else ""
        out.append((mid, tid, r.queue_offset, recall))
    return out


def _answer(ctx: FrontContext, checked: _Checked, results: list[AppendResult], st: pb.Status
            ) -> spb.SendMessageResponse:
    response = spb.SendMessageResponse()  # filled in place: a constructor's copies cost twice
    response.status.CopyFrom(st)
    entries = response.entries
    for mid, tid, offset, recall in _entries(ctx, checked, results):
        entry = entries.add()
        entry.status.CopyFrom(st)
        entry.message_id = mid
        entry.offset = offset
        if tid:
            entry.transaction_id = tid
        if recall:
            entry.recall_handle = recall
    return response


_OK_STATUS = answer.status(ok().code, ok().message)
_OK_FIELD = answer.status_field(_OK_STATUS)


def _answer_ok(ctx: FrontContext, checked: _Checked, results: list[AppendResult]
               ) -> answer.Encoded:
    """``_answer`` with an OK status, as bytes (``send_answer``: no protobuf objects)."""
    if checked.plain:
        return answer.Encoded(answer.plain_ok(_OK_FIELD, checked.ids,
                                              [r.queue_offset for r in results]))
    ok_field = _OK_FIELD
    return answer.Encoded(answer.response(_OK_STATUS, [
        answer.entry(ok_field, mid, tid, offset, recall)
        for mid, tid, offset, recall in _entries(ctx, checked, results)]))


def _durable(flushed: Future[None] | None) -> bool:
    """True when there is no group commit to wait for (ASYNC_FLUSH, or done and ok)."""
    return flushed is None or (flushed.done() and flushed.exception() is None)


async def _answer_flushed(ctx: FrontContext, checked: _Checked, results: list[AppendResult],
                          flushed: Future[None] | None, replica: Replica | None = None
                          ) -> spb.SendMessageResponse:
    """The answer once the disk (SYNC_FLUSH), then the slave (SYNC_MASTER) gave their outcome."""
    st = None if flushed is None or _durable(flushed) else await _flushed(ctx, flushed)
    if replica is not None:
        slave = await _replicated(ctx, replica)
        if slave is not None and (st is None or st.code == Code.MASTER_PERSISTENCE_TIMEOUT):
            st = slave
    return _answer(ctx, checked, results, st or ok())


async def send_message(
    ctx: FrontContext, request: spb.SendMessageRequest, context: ServicerContext,
) -> spb.SendMessageResponse:
    """One call (grpc.aio's path): its messages join the loop iteration's ``SendGroup``."""
    group = send_group(ctx)
    checked = _check(ctx, group, request, context, {})
    if not isinstance(checked, _Checked):
        return checked
    try:
        results, flushed, replica = await group.put(checked.stored)
    except Exception as e:  # noqa: BLE001 - nothing stored: answered with the error
        return _refused(len(request.messages), error_status(e))
    if replica is not None or (flushed is not None and not _durable(flushed)):
        return await _answer_flushed(ctx, checked, results, flushed, replica)
    return _answer(ctx, checked, results, ok())


def send_messages(
    ctx: FrontContext, calls: list[tuple[spb.SendMessageRequest, ServicerContext]],
) -> list[spb.SendMessageResponse | answer.Encoded | Awaitable[spb.SendMessageResponse]]:
    """The calls of one read (the native server's batch): checked one by one, the messages of
    those that pass stored with one append, each call answered now, or once the group commit
    is done (SYNC_FLUSH)."""
    group = send_group(ctx)
    memo: Memo = {}
    checked = [_check(ctx, group, request, context, memo) for request, context in calls]
    passed = [c for c in checked if isinstance(c, _Checked)]
    outcomes = iter(group.store([c.stored for c in passed]) if passed else ())
    out: list[spb.SendMessageResponse | answer.Encoded | Awaitable[spb.SendMessageResponse]] = []
    for c in checked:
        if not isinstance(c, _Checked):
            out.append(c)
            continue
        outcome = next(outcomes)
        if isinstance(outcome, BaseException):
            out.append(_refused(len(c.request.messages), error_status(outcome)))
            continue
        results, flushed, replica = outcome
        out.append(_answer_ok(ctx, c, results)
                   if replica is None and (flushed is None or _durable(flushed))
                   else _answer_flushed(ctx, c, results, flushed, replica))
    return out
