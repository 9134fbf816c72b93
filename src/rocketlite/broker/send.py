"""Send processors: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320, and 10/310
with the batch flag, as C++ clients send batches).

Per request: parse the header (V2's one-letter keys for 310 and 320), check the broker and topic
are writable (creating an unknown topic from ``defaultTopic`` when allowed), pick the queue, append
to the store on the event loop thread (an append is a memory copy into the mapped CommitLog), and
reply with the offset message id, queue id and queue offset. Under SYNC_FLUSH the reply waits for
the group commit that makes the message durable, or answers FLUSH_DISK_TIMEOUT. Under SYNC_MASTER
it waits for a slave's ack of the append's end offset (``ha.transfer.GroupTransfer``: one waiter
per append), or answers FLUSH_SLAVE_TIMEOUT (not acked within ``syncFlushTimeout``) or
SLAVE_NOT_AVAILABLE (no slave connected): the message is stored in both cases, the reply carries
its ids, as Java's. Under both, the disk's outcome first, then the slave's (both waits run from
the append, as Java's ``handleDiskFlushAndHA``); a slave's failure code wins over
FLUSH_DISK_TIMEOUT (Java's ``thenCombine``), a disk error (SERVICE_NOT_AVAILABLE) over both.

Per run: the consecutive single sends of one read come to ``send_run`` in one call; the usual
ones (``send_run.SendTaker``: a well-formed header, an existing writable topic and write queue,
nothing to divert) are queued without the per-request layers, every other one goes through them in
order. An append's success replies are written per connection by ``send_run.OkRuns``.

Recall handles (5.3's ``SendMessageProcessor.attachRecallHandle``): a single send (SEND_MESSAGE
or SEND_MESSAGE_V2, not a batch) that the timer wheel took (stored to the timer topic with
``TIMER_OUT_MS``, its real topic not a retry topic) is answered with ``recallHandle`` in the
header, the handle RECALL_MESSAGE takes to withdraw it (``recall.handle_for``). Only the
per-request path diverts, so only it makes handles (``_handles``, by request); a batch without
one is answered as before, one with one by ``_write_ok_recall``.

Errors answer with RocketMQ's codes and a remark that says why: MESSAGE_ILLEGAL (13) for a bad
message or batch (a body above ``maxMessageSize``; a batch's whole body too, as RocketMQ's
``checkMessages``: both counted in ``rocketlite_limit_rejections_total``), TOPIC_NOT_EXIST (17),
NO_PERMISSION (16), SERVICE_NOT_AVAILABLE (14) when the disk is too full or the store cannot
write (with Java's remark, the store's reason in brackets: the file, the free space),
FLUSH_DISK_TIMEOUT (10).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING

from rocketlite.broker.config import PERM_WRITE
from rocketlite.broker.ha.transfer import SUCCESS, Replica
from rocketlite.broker.recall import handle_for
from rocketlite.broker.send_run import TXN_MASK, OkRuns, SendTaker, send_keys
from rocketlite.broker.send_service import (
    SendForbiddenError,
    TopicError,
    TopicNotExistError,
    topic_for_send,
)
from rocketlite.broker.timer_divert import TIMER_TOPIC
from rocketlite.broker.topics import NOT_ALLOWED_SEND_TOPICS
from rocketlite.common.errors import (
    BodyError,
    DiskFullError,
    FlushError,
    FlushTimeoutError,
    HeaderError,
    MessageIllegalError,
    MessageTooLargeError,
    NoPermissionError,
    SlaveModeError,
    StoreClosedError,
)
from rocketlite.formats.message_id import encode_message_id
from rocketlite.protocol.bodies import TopicConfig
from rocketlite.protocol.codes import RPC_ONEWAY, RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import SendMessageRequestHeader
from rocketlite.protocol.message_batch import decode_batch
from rocketlite.protocol.replies import SendOkFrames
from rocketlite.remoting.connection import Connection
from rocketlite.store.message import AppendResult, MessageBatch, MessageToStore

if TYPE_CHECKING:
    from rocketlite.broker.broker import Broker

log = logging.getLogger(__name__)

MAX_BATCH_MESSAGES = 100_000
# Of a producer's read of more sends than this, the first RUN_CHUNK are appended and answered
# (written) before the rest are worked on, so the producer refills its window while the broker
# works (otherwise the two take turns: the broker idle while the producer reads 64 replies, the
# producer idle while the broker appends 64 sends). One early append per read, not one per
# chunk: with 1,000 in flight every extra append and write costs (bench/broker_bench.py --scenario
# send --inflight 1000: 78k msgs/s unchunked, 60k in chunks of 32).
RUN_CHUNK = 32
REGION = "DefaultRegion"

Reply = RemotingCommand | Awaitable[RemotingCommand | None] | None
# conn, request, queue id, CommitLog offset, queue offset, msg id (a batch's list, else None),
# recall handle (a timer message's, else None)
Held = tuple[Connection, RemotingCommand, int, int, int, str | None, str | None]
Pending = list[tuple[Connection, RemotingCommand, int]]


_from_v2_ext = SendMessageRequestHeader.from_v2_ext
_TXN_MASK = TXN_MASK


def _message(conn: Connection, cmd: RemotingCommand, h: SendMessageRequestHeader,
             queue_id: int) -> MessageToStore:
    """What the store gets for a single send."""
    return MessageToStore(
        h.topic, cmd.body, queue_id, h.flag, h.properties or "", h.sysFlag, h.bornTimestamp,
        conn.peer_host, conn.peer_port, h.reconsumeTimes or 0,
    )


def may_divert(properties: str) -> bool:
    """Whether a message may be stored somewhere other than its topic (a delay level or a timer
    property): a cheap test on the encoded properties (per message: no generator), exact checks
    are the diverters'."""
    return "DELAY\x01" in properties or "TIMER_" in properties


def unavailable_remark(e: Exception) -> str:
    """SERVICE_NOT_AVAILABLE's remark: Java's words for a full disk, with the store's reason;
    on a slave, Java's log line ("message store is slave mode, so putMessage is forbidden")."""
    if isinstance(e, SlaveModeError):
        return f"message store is slave mode, so putMessage is forbidden: {e}"
    if isinstance(e, DiskFullError):
        return ("service not available now. It may be caused by one of the following reasons: "
                f"the broker's disk is full [{e}], messages are put to the slave, message store "
                "has been shut down, etc.")
    return str(e)


def _answer(conn: Connection, cmd: RemotingCommand, code: int, remark: str) -> None:
    """An error reply, unless the request was oneway (nobody waits for it)."""
    if not cmd.flag & RPC_ONEWAY:
        conn.send(cmd.response(code, remark))


class SendProcessor:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.store = broker.store
        self.topics = broker.topics
        self.sync_flush = broker.store.config.sync_flush
        self.flush_timeout_s = broker.store.config.sync_flush_timeout / 1000
        self.stats = broker.stats
        # SYNC_MASTER: the waits for the slave (None otherwise: one test per append)
        self.transfer = broker.ha_server.transfer if broker.ha_server is not None else None
        # The sends of this read: their messages, and for each the connection, the request and
        # the queue id to answer (the requested one, even when the message is diverted).
        self._msgs: list[MessageToStore] = []
        self._pending: Pending = []
        # The recall handles of this read's sends that the timer wheel took, by id() of their
        # request (alive in ``_pending`` until answered): usually empty.
        self._handles: dict[int, str] = {}
        self._scheduled = False
        self._batch_conn: Connection | None = None  # the connection of the batch's first send
        self._mixed = False  # the batch has sends of other connections too
        self._alone: Connection | None = None  # the previous batch came from it alone
        self._diverters = broker.diverters
        self._taker = SendTaker(MessageToStore, dict(zip(
            (int(RequestCode.SEND_MESSAGE), int(RequestCode.SEND_MESSAGE_V2)),
            send_keys(SendMessageRequestHeader.V2_KEYS), strict=True)), NOT_ALLOWED_SEND_TOPICS,
            PERM_WRITE)
        self.refresh_store_address()

    def refresh_store_address(self) -> None:
        cl = self.store.commitlog
        self._store_host, self._store_port = cl.store_host, cl.store_port
        self._ok_frames = SendOkFrames(cl.store_host, cl.store_port, REGION, trace_on=True)
        self._ok_runs = OkRuns(self._ok_frames, RPC_ONEWAY, self._other_ok)

    def register(self) -> None:
        server = self.broker.server
        server.register(RequestCode.SEND_MESSAGE, self.send_v1, run=self.send_run)
        server.register(RequestCode.SEND_MESSAGE_V2, self.send_v2, run=self.send_run)
        server.register(RequestCode.SEND_BATCH_MESSAGE, self.send_batch)

    # -- entry points ----------------------------------------------------------------------

    def send_run(self, conn: Connection, cmds: list[RemotingCommand]) -> None:
        """Consecutive SEND_MESSAGE / SEND_MESSAGE_V2 requests of one read: the usual ones
        queued by ``SendTaker`` (one call for each stretch of them), every other one answered
        by ``send_v1``/``send_v2`` through the connection, in order."""
        n = len(cmds)
        if n > RUN_CHUNK:
            self.send_run(conn, cmds[:RUN_CHUNK])
            if self._scheduled and self._alone is conn:
                self._append_pending()  # answer these now: the producer refills meanwhile
                conn.flush_now()
            cmds, n = cmds[RUN_CHUNK:], n - RUN_CHUNK
        i = 0
        take = self._taker.take if self.broker.config.broker_permission & PERM_WRITE else None
        while i < n:
            if take is not None:
                msgs = self._msgs
                before = len(msgs)
                i = take(conn, cmds, i, self.topics.table, bool(self._diverters), msgs,
                         self._pending)
                if len(msgs) > before:
                    if not self._scheduled:
                        self._schedule(conn)
                    elif conn is not self._batch_conn:
                        self._mixed = True
                if i >= n:
                    break
            conn.handle_request(cmds[i])
            i += 1

    def send_v1(self, conn: Connection, cmd: RemotingCommand) -> Reply:
        header = SendMessageRequestHeader.from_ext(cmd.ext_fields)
        if header.batch:
            return self._send(conn, cmd, header, True)
        return self._send_one(conn, cmd, header)

    def send_v2(self, conn: Connection, cmd: RemotingCommand) -> Reply:
        header = _from_v2_ext(cmd.ext_fields)
        if header.batch:
            return self._send(conn, cmd, header, True)
        return self._send_one(conn, cmd, header)

    def send_batch(self, conn: Connection, cmd: RemotingCommand) -> Reply:
        header = SendMessageRequestHeader.from_v2_ext(cmd.ext_fields)
        return self._send(conn, cmd, header, True)

    # -- the work --------------------------------------------------------------------------

    def _topic_config(self, cmd: RemotingCommand, h: SendMessageRequestHeader
                      ) -> TopicConfig | RemotingCommand:
        try:
            return topic_for_send(self.broker, h.topic, h.defaultTopic, h.defaultTopicQueueNums)
        except SendForbiddenError as e:
            return cmd.response(ResponseCode.NO_PERMISSION, str(e))
        except TopicNotExistError as e:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, str(e))
        except TopicError as e:
            return cmd.response(ResponseCode.MESSAGE_ILLEGAL, str(e))

    def _send_one(self, conn: Connection, cmd: RemotingCommand, h: SendMessageRequestHeader
                  ) -> Reply:
        """A single message. The usual one (its topic exists and takes writes, the broker too,
        its queue id is a write queue, nothing may divert it) is queued here in one call, for
        the batch's append; any other goes through ``_send``'s checks one by one."""
        topic = h.topic
        tc = self.topics.table.get(topic)
        queue_id = h.queueId
        if (tc is None or not tc.perm & PERM_WRITE or not 0 <= queue_id < tc.writeQueueNums
                or not self.broker.config.broker_permission & PERM_WRITE
                or topic in NOT_ALLOWED_SEND_TOPICS
                or (self._diverters and (h.sysFlag & _TXN_MASK or may_divert(h.properties or "")))):
            return self._send(conn, cmd, h, False)
        self._queue(conn, cmd, _message(conn, cmd, h, queue_id), queue_id)
        return None

    def _send(self, conn: Connection, cmd: RemotingCommand, h: SendMessageRequestHeader,
              batch: bool) -> Reply:
        tc = self._topic_config(cmd, h)
        if isinstance(tc, RemotingCommand):
            return tc
        queue_id = h.queueId
        if queue_id < 0:
            queue_id = random.randrange(tc.writeQueueNums)
        elif queue_id >= max(tc.writeQueueNums, tc.readQueueNums):
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                f"request queueId[{queue_id}] is illegal, topic {h.topic} has "
                                f"{tc.writeQueueNums} write queues")
        try:
            if batch:
                return self._put_batch(conn, cmd, h, queue_id)
            return self._put_one(conn, cmd, h, queue_id)
        except (MessageIllegalError, BodyError, HeaderError) as e:
            if isinstance(e, MessageTooLargeError):
                self.broker.limit_counts.hit("message_size")
            return cmd.response(ResponseCode.MESSAGE_ILLEGAL, str(e))
        except (DiskFullError, FlushError, StoreClosedError) as e:
            return cmd.response(ResponseCode.SERVICE_NOT_AVAILABLE, unavailable_remark(e))
        except NoPermissionError as e:  # a diverter's refusal (rejectTransactionMessage)
            return cmd.response(ResponseCode.NO_PERMISSION, str(e))

    def _put_one(self, conn: Connection, cmd: RemotingCommand, h: SendMessageRequestHeader,
                 queue_id: int) -> Reply:
        """Queue the message for the batch's one CommitLog append (``_append_pending``, when
        ``_schedule`` says), answered after it."""
        msg = _message(conn, cmd, h, queue_id)
        if self._diverters and (h.sysFlag & _TXN_MASK or may_divert(msg.properties)):
            msg = self.broker.divert(msg)
            if msg.topic == TIMER_TOPIC and not cmd.flag & RPC_ONEWAY:
                handle = handle_for(msg, self.broker.config.broker_name)
                if handle:
                    self._handles[id(cmd)] = handle
        self._queue(conn, cmd, msg, queue_id)
        return None

    def _queue(self, conn: Connection, cmd: RemotingCommand, msg: MessageToStore,
               queue_id: int) -> None:
        """Add a send to the batch of the next append, arranging that append if none is."""
        self._msgs.append(msg)
        self._pending.append((conn, cmd, queue_id))
        if not self._scheduled:
            self._schedule(conn)
        elif conn is not self._batch_conn:
            self._mixed = True

    def _schedule(self, conn: Connection) -> None:
        """Arrange the append of the batch that ``conn``'s send starts. When the previous batch
        came from this connection alone (one producer, or one busy one), at the end of this
        read: no loop hop between the read and its replies. Otherwise, at the end of this loop
        iteration, so that the sends of every connection read in it share the append (the
        store's cost per call is not paid per connection)."""
        self._scheduled = True
        self._batch_conn = conn
        self._mixed = False
        if conn is self._alone:
            conn.at_read_end(self._append_pending)
        else:
            asyncio.get_running_loop().call_soon(self._append_pending)

    def _append_pending(self) -> None:
        if not self._pending:
            return  # appended early (``send_run``'s chunks); this is the read end's call
        pending, self._pending = self._pending, []
        msgs, self._msgs = self._msgs, []
        handles = self._handles or None
        if handles is not None:
            self._handles = {}
        self._scheduled = False
        self._alone = None if self._mixed else self._batch_conn
        self._batch_conn = None
        try:
            put = self.store.put_messages(msgs)
        except MessageIllegalError:
            for (conn, cmd, qid), msg in zip(pending, msgs, strict=True):  # find the culprit(s)
                self._append_alone(conn, cmd, msg, qid,
                                   None if handles is None else handles.get(id(cmd)))
            return
        except (DiskFullError, FlushError, StoreClosedError) as e:
            for conn, cmd, _ in pending:
                _answer(conn, cmd, ResponseCode.SERVICE_NOT_AVAILABLE, unavailable_remark(e))
            return
        except Exception as e:
            log.exception("appending %d messages failed", len(pending))
            for conn, cmd, _ in pending:
                _answer(conn, cmd, ResponseCode.SYSTEM_ERROR, f"{type(e).__name__}: {e}")
            return
        self.stats.put_messages += len(pending)
        if (metrics := self.broker.metrics) is not None:
            metrics.fold_in(msgs, put.results)
        self._answer_put(pending, put.results, put.flushed, handles,
                         None if self.transfer is None else self._replica(put.results[-1]
                                                                          .end_offset))

    def _replica(self, end_offset: int) -> Replica | None:
        """SYNC_MASTER: the slave's outcome of an append ending at ``end_offset`` (None: acked)."""
        assert self.transfer is not None
        r = self.transfer.request(end_offset)
        return None if isinstance(r, int) and r == SUCCESS else r

    def _append_alone(self, conn: Connection, cmd: RemotingCommand, msg: MessageToStore,
                      queue_id: int, handle: str | None) -> None:
        try:
            put = self.store.put_messages((msg,))
        except MessageIllegalError as e:
            if isinstance(e, MessageTooLargeError):
                self.broker.limit_counts.hit("message_size")
            _answer(conn, cmd, ResponseCode.MESSAGE_ILLEGAL, str(e))
            return
        except (DiskFullError, FlushError, StoreClosedError) as e:
            _answer(conn, cmd, ResponseCode.SERVICE_NOT_AVAILABLE, unavailable_remark(e))
            return
        except Exception as e:  # answered like the read's append: the others still go on
            log.exception("appending a message alone failed")
            _answer(conn, cmd, ResponseCode.SYSTEM_ERROR, f"{type(e).__name__}: {e}")
            return
        self.stats.put_messages += 1
        if (metrics := self.broker.metrics) is not None:
            metrics.fold_in((msg,), put.results)
        replica = None if self.transfer is None else self._replica(put.results[-1].end_offset)
        if not cmd.flag & RPC_ONEWAY:
            self._answer_put([(conn, cmd, queue_id)], put.results, put.flushed,
                             None if handle is None else {id(cmd): handle}, replica)

    def _reply(self, cmd: RemotingCommand, queue_id: int, commit_log_offset: int,
               queue_offset: int, msg_id: str | None = None,
               recall_handle: str | None = None) -> RemotingCommand:
        ext = {
            "msgId": msg_id or encode_message_id(self._store_host, self._store_port,
                                                 commit_log_offset),
            "queueId": str(queue_id),
            "queueOffset": str(queue_offset),
            "MSG_REGION": REGION,
            "TRACE_ON": "true",
        }
        if recall_handle is not None:
            ext["recallHandle"] = recall_handle
        return cmd.response(ResponseCode.SUCCESS, None, ext)

    def _answer_put(self, pending: Pending, results: list[AppendResult],
                    flushed: Future[None] | None, handles: dict[int, str] | None = None,
                    replica: Replica | None = None) -> None:
        """Answer single sends appended with ``results`` (oneway ones excepted): one write per
        run of replies to a connection, written by ``OkRuns`` in one call; after the flush
        under SYNC_FLUSH, after the slave's ack under SYNC_MASTER (``replica``: None when
        there is nothing to wait for). ``handles``: the recall handles of the timer sends among
        them (by id() of the request), if any."""
        if handles is not None:
            self._answer_recall_put(pending, results, flushed, handles, replica)
            return
        if replica is None and (flushed is None
                                or (flushed.done() and flushed.exception() is None)):
            self._write_ok(pending, results)
            return
        self._answer_when_flushed(
            lambda: [(conn, cmd, qid, r[0], r[2], None, None)  # offset, queue offset
                     for (conn, cmd, qid), r in zip(pending, results, strict=True)
                     if not cmd.flag & RPC_ONEWAY],
            flushed, lambda: self._write_ok(pending, results), replica)

    def _answer_recall_put(self, pending: Pending, results: list[AppendResult],
                           flushed: Future[None] | None, handles: dict[int, str],
                           replica: Replica | None = None) -> None:
        """``_answer_put`` of sends some of which have a recall handle: every reply of a timer
        send carries it (a FLUSH_DISK_TIMEOUT one too: 5.x answers the header then as well)."""
        self._answer_when_flushed(
            lambda: [(conn, cmd, qid, r[0], r[2], None, handles.get(id(cmd)))
                     for (conn, cmd, qid), r in zip(pending, results, strict=True)
                     if not cmd.flag & RPC_ONEWAY],
            flushed, lambda: self._write_ok_recall(pending, results, handles), replica)

    def _write_ok(self, pending: Pending, results: list[AppendResult]) -> None:
        for conn, frames in self._ok_runs.runs(pending, results):
            conn.send_frames([frames])

    def _write_ok_recall(self, pending: Pending, results: list[AppendResult],
                         handles: dict[int, str]) -> None:
        """``_write_ok`` for sends some of which have a recall handle: theirs are encoded with
        the handle (the generic encoding), the stretches between them by ``OkRuns``; still one
        write per run of consecutive replies to a connection, in the order of ``pending``."""
        out: list[tuple[Connection, bytes]] = []
        runs = self._ok_runs.runs
        start = 0
        for i, (conn, cmd, qid) in enumerate(pending):
            handle = handles.get(id(cmd))
            if handle is None:
                continue
            if start < i:
                out += runs(pending[start:i], results[start:i])
            start = i + 1
            if cmd.flag & RPC_ONEWAY:
                continue
            r = results[i]
            head, body = self._reply(cmd, qid, r[0], r[2], None, handle).encode_parts()
            out.append((conn, head + body if body else head))
        if start < len(pending):
            out += runs(pending[start:], results[start:])
        to: Connection | None = None
        frames: list[bytes] = []
        for conn, frame in out:
            if conn is not to:
                if to is not None:
                    to.send_frames(frames)
                to, frames = conn, []
            frames.append(frame)
        if to is not None:
            to.send_frames(frames)

    def _other_ok(self, cmd: RemotingCommand, queue_id: int, commit_log_offset: int,
                  queue_offset: int) -> bytes:
        """A single send's success reply in a serialization ``OkRuns`` does not pre-encode."""
        head, body = self._reply(cmd, queue_id, commit_log_offset, queue_offset).encode_parts()
        return head + body if body else head

    def _answer_ok(self, held: list[Held]) -> None:
        """Success replies with the generic encoding (a batch's list of ids)."""
        for conn, cmd, queue_id, offset, queue_offset, msg_id, handle in held:
            head, body = self._reply(cmd, queue_id, offset, queue_offset, msg_id,
                                     handle).encode_parts()
            conn.send_frames([head + body if body else head])

    def _answer_when_flushed(self, held: Callable[[], list[Held]], flushed: Future[None] | None,
                             ok: Callable[[], None], replica: Replica | None = None) -> None:
        """Answer the sends now with ``ok`` (ASYNC_FLUSH, or already durable) or once the group
        commit covering them completes (no task: the flush thread's callback hops to the loop).
        After ``syncFlushTimeout`` the sends ``held`` gives are answered FLUSH_DISK_TIMEOUT
        (stored, not yet durable: the client's SendStatus.FLUSH_DISK_TIMEOUT, ids kept); if the
        disk failed, SERVICE_NOT_AVAILABLE. Then, under SYNC_MASTER (``replica`` not None),
        once the slave's outcome is known (``_answer_when_replicated``)."""
        if flushed is None or (flushed.done() and flushed.exception() is None):
            if replica is None:
                ok()
            else:
                self._answer_when_replicated(held, replica, ok, None)
            return
        loop = asyncio.get_running_loop()
        answered = False

        def answer(fut: Future[None] | None) -> None:
            nonlocal answered
            if answered:
                return
            answered = True
            timer.cancel()
            err = None if fut is None else fut.exception()
            if replica is not None:
                self._answer_when_replicated(
                    held, replica, ok,
                    None if fut is not None and err is None else _FlushFailed(err))
                return
            if fut is not None and err is None:
                ok()
                return
            for conn, cmd, queue_id, offset, queue_offset, msg_id, handle in held():
                reply = self._reply(cmd, queue_id, offset, queue_offset, msg_id, handle)
                _flush_failed(reply, err, self.flush_timeout_s)
                conn.send(reply)

        timer = loop.call_later(self.flush_timeout_s, answer, None)
        flushed.add_done_callback(lambda f: loop.call_soon_threadsafe(answer, f))

    def _answer_when_replicated(self, held: Callable[[], list[Held]], replica: Replica,
                                ok: Callable[[], None], flush: _FlushFailed | None) -> None:
        """SYNC_MASTER, the disk's outcome known (``flush``: None if durable or ASYNC_FLUSH):
        answer with ``ok`` once a slave acked the append; else each send ``held`` gives with
        its ids and FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE (a disk error's
        SERVICE_NOT_AVAILABLE wins)."""
        if not isinstance(replica, int):
            if not replica.done():
                replica.add_done_callback(
                    lambda f: self._answer_when_replicated(held, f.result(), ok, flush))
                return
            replica = replica.result()
        if replica == SUCCESS and flush is None:
            ok()
            return
        for conn, cmd, queue_id, offset, queue_offset, msg_id, handle in held():
            reply = self._reply(cmd, queue_id, offset, queue_offset, msg_id, handle)
            if flush is not None and (replica == SUCCESS or not _is_timeout(flush.error)):
                _flush_failed(reply, flush.error, self.flush_timeout_s)
            else:
                reply.code = replica
                reply.remark = (
                    f"the message was not acked by a slave within {self.flush_timeout_s:g} s"
                    if replica == ResponseCode.FLUSH_SLAVE_TIMEOUT else
                    "no slave is available: the message is stored on the master only")
            conn.send(reply)

    def _put_batch(self, conn: Connection, cmd: RemotingCommand, h: SendMessageRequestHeader,
                   queue_id: int) -> Reply:
        if h.topic.startswith("%RETRY%"):
            return cmd.response(ResponseCode.MESSAGE_ILLEGAL,
                                "batch sending is not supported for retry topics")
        max_size = self.store.config.max_message_size
        if len(cmd.body) > max_size:  # RocketMQ's checkMessages: the whole batch's body
            self.broker.limit_counts.hit("batch_size")
            return cmd.response(ResponseCode.MESSAGE_ILLEGAL,
                                f"the batch body is {len(cmd.body)} bytes, larger than "
                                f"maxMessageSize {max_size}")
        bodies, props, flags = decode_batch(cmd.body, max_count=MAX_BATCH_MESSAGES)
        if not bodies:
            return cmd.response(ResponseCode.MESSAGE_ILLEGAL, "the batch has no messages")
        put = self.store.put_batch(MessageBatch(
            topic=h.topic, queue_id=queue_id, bodies=bodies, properties=props,
            flags=flags if any(flags) else None, sys_flag=h.sysFlag,
            born_timestamp=h.bornTimestamp, born_host=conn.peer_host, born_port=conn.peer_port,
        ))
        res = put.result
        self.stats.put_messages += len(res)
        if (metrics := self.broker.metrics) is not None:
            metrics.fold_in_batch(h.topic, len(res), sum(res.sizes))
        replica = None if self.transfer is None else self._replica(res.end_offset)
        if not cmd.flag & RPC_ONEWAY:
            ids = self._ok_frames.message_ids(res.offsets)
            held: list[Held] = [(conn, cmd, queue_id, 0, res.queue_offset, ids, None)]
            self._answer_when_flushed(lambda: held, put.flushed, lambda: self._answer_ok(held),
                                      replica)
        return None


class _FlushFailed:
    """The group commit's failure: ``error`` None when it was not done in time."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


def _is_timeout(err: BaseException | None) -> bool:
    return err is None or isinstance(err, FlushTimeoutError)


def _flush_failed(reply: RemotingCommand, err: BaseException | None, timeout_s: float) -> None:
    """Turn a send's success reply into its flush outcome: FLUSH_DISK_TIMEOUT (stored, not yet
    durable: the client's SendStatus.FLUSH_DISK_TIMEOUT, ids kept) when the flush did not
    complete in time (``err`` None or FlushTimeoutError), else SERVICE_NOT_AVAILABLE."""
    if err is None or isinstance(err, FlushTimeoutError):
        reply.code = ResponseCode.FLUSH_DISK_TIMEOUT
        reply.remark = f"the message was not flushed within {timeout_s:g} s"
    else:
        reply.code = ResponseCode.SERVICE_NOT_AVAILABLE
        reply.remark = f"the store could not flush the message: {err}"
        reply.ext_fields = {}
