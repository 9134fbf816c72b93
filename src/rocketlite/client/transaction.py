"""Transactional producer (RocketMQ's ``TransactionMQProducer``): two-phase sends.

    send_message_in_transaction(msg, arg)
      1. send a half message: properties TRAN_MSG=true and PGROUP=<group>, sysFlag
         TRANSACTION_PREPARED (0x4); the broker keeps it invisible to consumers
      2. SEND_OK: run ``listener.execute_local_transaction(msg, arg)``; any other send status
         means ROLLBACK_MESSAGE without running it; a raising listener means UNKNOW
      3. END_TRANSACTION (37), oneway, to the broker that stored the half message:
         commitOrRollback 8 (commit), 12 (rollback) or 0 (unknown: the broker asks later)

    CHECK_TRANSACTION_STATE (39), broker -> producer, for a half message still undecided after
    the broker's transactionTimeOut: ``listener.check_local_transaction(msg_ext)`` answers, and
    the producer sends END_TRANSACTION with fromTransactionCheck=true on the same broker.

Checks wait in a bounded queue (``check_backlog``, Java's 2,000) served by ``check_concurrency``
workers (Java's single check thread); a check arriving at a full queue is dropped with a warning:
the broker asks again at its next check interval. Listener methods may be coroutines (awaited on
the client's loop) or plain functions (run in the loop's default executor, as Java runs them on
its executor threads, so a blocking database call does not stall the client).

Naming the transaction: the listener's ``msg`` in ``execute_local_transaction`` is a copy of the
message sent (the caller's ``Message`` is not changed) whose properties carry ``UNIQ_KEY`` (the
result's ``msg_id``) and ``__transactionId__`` (the broker's transaction id, else the UNIQ_KEY);
the ``MessageExt`` of a check carries the same two, so either names the transaction in both calls
(Java's ``msg.getTransactionId()``).

Failures: a half send that raises raises here (no local transaction ran). END_TRANSACTION is
oneway and, as in Java, a failure to send it is only logged: the local transaction has run, and
the broker's check-back settles the half message.

As in Java, a delay level on a transactional message is cleared (a half message is never
delayed); a timer (``deliver_time_ms``) and batches are refused.

Two-phase sends without a local transaction (``HalfProducer``, which ``TransactionProducer``
extends): ``send_half(msg)`` stores a half message and returns a ``HalfReceipt`` (plain data:
it pickles, so the decision can be taken later by another process, e.g. a Spark driver
committing what its executors sent), and ``end(receipt, commit)`` sends END_TRANSACTION as a
request (not oneway) so the caller learns that the broker applied it. A HalfProducer has no
listener: the broker's check-backs go unanswered, so a half message nobody ends stays invisible
and, after ``transactionCheckMax`` checks, lands in ``TRANS_CHECK_MAX_TIME_TOPIC``. The broker
treats an END for a half message it already resolved as a no-op, so ``end`` may be retried.

With ``enable_trace`` a TransactionProducer writes a Pub record (type Trans_Msg_Half) for each
half message and an EndTransaction record for each decision it sends, its own or a check-back's.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from rocketlite.client.errors import MQBrokerError, MQClientError
from rocketlite.client.message import TRANSACTION_ID, Message, MessageExt, decode_messages
from rocketlite.client.producer import Producer, SendResult, SendStatus
from rocketlite.client.send_types import _Prepared
from rocketlite.client.trace_codec import MessageType
from rocketlite.common.errors import FormatError, RemotingError
from rocketlite.formats import properties as props
from rocketlite.formats.message_id import decode_message_id
from rocketlite.protocol.bodies import MessageQueue
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader

log = logging.getLogger(__name__)

TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
TRANSACTION_NOT_TYPE = 0x0


class LocalTransactionState(enum.Enum):
    """What the local transaction decided (Java's spelling, UNKNOW included)."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"


COMMIT_OR_ROLLBACK: dict[LocalTransactionState, int] = {
    LocalTransactionState.COMMIT_MESSAGE: TRANSACTION_COMMIT_TYPE,
    LocalTransactionState.ROLLBACK_MESSAGE: TRANSACTION_ROLLBACK_TYPE,
    LocalTransactionState.UNKNOW: TRANSACTION_NOT_TYPE,
}

StateOrAwaitable = LocalTransactionState | Awaitable[LocalTransactionState]


class TransactionListener(Protocol):
    def execute_local_transaction(self, msg: Message, arg: Any) -> StateOrAwaitable:
        """Run the local transaction after the half message was stored."""

    def check_local_transaction(self, msg: MessageExt) -> StateOrAwaitable:
        """Tell the broker what became of the local transaction of ``msg``."""


@dataclass(slots=True, frozen=True)
class TransactionSendResult(SendResult):
    """A send result with the local transaction's outcome."""

    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW


@dataclass(slots=True, frozen=True)
class HalfReceipt:
    """What END_TRANSACTION needs to settle one half message, as plain data.

    ``tran_state_offset`` is the half message's offset in the half queue (the header's
    ``tranStateTableOffset``), ``commit_log_offset`` its CommitLog offset, ``msg_id`` its
    UNIQ_KEY, which the committed message keeps."""

    producer_group: str
    broker_name: str
    broker_addr: str
    topic: str
    queue_id: int
    commit_log_offset: int
    tran_state_offset: int
    msg_id: str
    transaction_id: str
    offset_msg_id: str
    status: SendStatus = SendStatus.SEND_OK


class HalfProducer(Producer):
    """A Producer that can also send half messages and end them later (see the module
    docstring); normal sends work as on Producer."""

    def _prepare_half(self, msg: Message) -> _Prepared:
        if not isinstance(msg, Message):
            raise MQClientError(f"a half message is one Message, not {type(msg).__name__}: "
                                "batches cannot be sent in a transaction")
        if msg.deliver_time_ms is not None:
            raise MQClientError("a transactional message cannot carry a delivery time (deliver_time_ms)")
        if msg.delay_level:
            msg = dataclasses.replace(msg, delay_level=0)  # Java clears it: never delay a half message
        p = self._prepare(msg)
        p.properties += props.encode_properties({props.TRAN_MSG: "true", props.PGROUP: self.group})
        p.wire = p.properties.encode()  # what the send frame carries
        p.sys_flag |= TRANSACTION_PREPARED_TYPE
        return p

    async def send_half(self, msg: Message, queue: MessageQueue | None = None, *,
                        timeout: float | None = None) -> HalfReceipt:  # noqa: ASYNC109
        """Store ``msg`` as a half message (invisible until ``end(receipt, commit=True)``), on
        ``queue`` if given. Raises as ``send`` does; a status other than SEND_OK is reported in
        the receipt (the half message is stored, but not flushed or replicated)."""
        p = self._prepare_half(msg)
        result = await self._send(p, queue, None, None, msg, timeout)
        try:
            commit_log_offset = decode_message_id(result.offset_msg_id)[2]
        except FormatError as e:
            raise MQClientError(f"the broker's message id {result.offset_msg_id!r} is malformed: {e}") from e
        addr = await self._instance().require_broker_addr(result.queue.brokerName, result.queue.topic)
        return HalfReceipt(self.group, result.queue.brokerName, addr, result.queue.topic,
                           result.queue.queueId, commit_log_offset, result.queue_offset, result.msg_id,
                           result.transaction_id or result.msg_id, result.offset_msg_id, result.status)

    async def end(self, receipt: HalfReceipt, commit: bool, *,
                  timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Commit (the message becomes visible in its topic) or roll back the half message of
        ``receipt``, and wait for the broker to apply it. Raises ``MQClientError`` when the broker
        cannot be reached in time (the decision may or may not have been applied: ending again
        is safe), ``MQBrokerError`` when it refuses (e.g. the receipt names no half message)."""
        header = EndTransactionRequestHeader(
            producerGroup=receipt.producer_group, tranStateTableOffset=receipt.tran_state_offset,
            commitLogOffset=receipt.commit_log_offset,
            commitOrRollback=TRANSACTION_COMMIT_TYPE if commit else TRANSACTION_ROLLBACK_TYPE,
            msgId=receipt.msg_id, transactionId=receipt.transaction_id, fromTransactionCheck=False)
        cmd = RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_ext())
        reply = await self._instance().invoke(receipt.broker_addr, cmd, timeout)
        if reply.code != ResponseCode.SUCCESS:
            raise MQBrokerError(reply.code, reply.remark, receipt.broker_addr)

    def on_check_transaction(self, addr: str, cmd: RemotingCommand) -> None:
        log.debug("CHECK_TRANSACTION_STATE from %s for group %s: a HalfProducer does not answer "
                  "(the half message stays undecided until someone ends it)", addr, self.group)


class TransactionProducer(HalfProducer):
    """A Producer that also sends transactional messages; normal sends work as on Producer."""

    def __init__(self, group: str, listener: TransactionListener | None = None, *,
                 check_concurrency: int = 1, check_backlog: int = 2000, **kwargs: Any) -> None:
        super().__init__(group, **kwargs)
        if check_concurrency < 1 or check_backlog < 1:
            raise MQClientError("check_concurrency and check_backlog must be at least 1")
        self.listener = listener
        self.check_concurrency = check_concurrency
        self.check_backlog = check_backlog
        self._checks: asyncio.Queue[tuple[str, RemotingCommand]] | None = None
        self._workers: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        if self.listener is None:
            raise MQClientError("a TransactionProducer needs a TransactionListener")
        if self._started:
            return
        await super().start()
        self._checks = asyncio.Queue(self.check_backlog)
        self._workers = [asyncio.create_task(self._check_worker(), name=f"txn-check-{self.group}-{i}")
                         for i in range(self.check_concurrency)]

    async def shutdown(self) -> None:
        for t in self._workers:
            t.cancel()
        for t in self._workers:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._workers = []
        self._checks = None
        await super().shutdown()

    # -- phase one and two ----------------------------------------------------------------------

    async def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        """Send ``msg`` as a half message, run the local transaction, then commit or roll back.

        Raises ``MQClientError`` / ``MQBrokerError`` when the half message cannot be sent (the
        local transaction is then not run); a send answered with a status other than SEND_OK
        is rolled back without running it (ROLLBACK_MESSAGE)."""
        listener = self.listener
        if listener is None:
            raise MQClientError("a TransactionProducer needs a TransactionListener")
        if not isinstance(msg, Message):
            raise MQClientError(f"send_message_in_transaction takes one Message, not {type(msg).__name__}: "
                                "batches cannot be sent in a transaction")
        if msg.delay_level:
            msg = dataclasses.replace(msg, delay_level=0)  # the listener sees what was sent
        p = self._prepare_half(msg)
        started = time.time_ns() // 1_000_000
        result = await self._send(p, None, None, None, msg, None)
        self._trace_pub(msg, result, started, MessageType.Trans_Msg_Half)
        error: BaseException | None = None
        if result.status is SendStatus.SEND_OK:
            # A copy: the caller's Message stays sendable (both names are reserved properties).
            mine = dataclasses.replace(msg, properties={
                **msg.properties, props.UNIQ_KEY: p.uniq_key,
                TRANSACTION_ID: result.transaction_id or p.uniq_key})
            try:
                state = await self._call(listener.execute_local_transaction, mine, arg)
            except Exception as e:  # noqa: BLE001 - the broker asks again later
                log.warning("execute_local_transaction of %s raised: %r; the state is UNKNOW",
                            result.msg_id, e)
                state, error = LocalTransactionState.UNKNOW, e
        else:
            log.warning("the half message %s was stored with status %s: rolled back without running "
                        "the local transaction", result.msg_id, result.status.name)
            state = LocalTransactionState.ROLLBACK_MESSAGE
        try:
            await self._end(msg, result, state, error)
        except (MQClientError, MQBrokerError, RemotingError) as e:  # Java only warns too
            log.warning("the local transaction of %s ended as %s, but END_TRANSACTION could not be "
                        "sent: %s; the broker will check back", result.msg_id, state.name, e)
        return TransactionSendResult(result.status, result.msg_id, result.offset_msg_id, result.queue,
                                     result.queue_offset, result.transaction_id, result.region_id,
                                     result.recall_handle, local_transaction_state=state)

    async def _end(self, msg: Message, result: SendResult, state: LocalTransactionState,
                   error: BaseException | None) -> None:
        inst = self._instance()
        try:
            commit_log_offset = decode_message_id(result.offset_msg_id)[2]
        except FormatError as e:
            raise MQClientError(f"the broker's message id {result.offset_msg_id!r} is malformed: {e}") from e
        header = EndTransactionRequestHeader(
            producerGroup=self.group, tranStateTableOffset=result.queue_offset,
            commitLogOffset=commit_log_offset, commitOrRollback=COMMIT_OR_ROLLBACK[state],
            msgId=result.msg_id, transactionId=result.transaction_id or result.msg_id,
            fromTransactionCheck=False)
        addr = await inst.require_broker_addr(result.queue.brokerName, result.queue.topic)
        remark = None if error is None else f"executeLocalTransactionBranch exception: {error!r}"
        if self.trace is not None:
            self.trace.end_transaction(self.group, msg.topic, msg.tags, " ".join(msg.key_list()),
                                       result.msg_id, addr, state.name, header.transactionId, False)
        await self._send_end(addr, header, remark)

    async def _send_end(self, addr: str, header: EndTransactionRequestHeader, remark: str | None) -> None:
        cmd = RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_ext())
        cmd.remark = remark
        conn = await self._instance().connection(addr)
        conn.send_oneway(cmd)

    # -- check-back -----------------------------------------------------------------------------

    def on_check_transaction(self, addr: str, cmd: RemotingCommand) -> None:
        queue = self._checks
        if queue is None:
            log.warning("CHECK_TRANSACTION_STATE from %s after shutdown: ignored", addr)
            return
        try:
            queue.put_nowait((addr, cmd))
        except asyncio.QueueFull:
            log.warning("%d transaction checks already wait: the check from %s is dropped (the "
                        "broker asks again)", queue.qsize(), addr)

    async def _check_worker(self) -> None:
        queue = self._checks
        assert queue is not None
        while True:
            addr, cmd = await queue.get()
            try:
                await self._check(addr, cmd)
            except Exception:
                log.exception("the transaction check from %s failed", addr)

    async def _check(self, addr: str, cmd: RemotingCommand) -> None:
        listener = self.listener
        if listener is None:
            log.warning("CHECK_TRANSACTION_STATE from %s, but the producer has no listener: ignored", addr)
            return
        try:
            header = CheckTransactionStateRequestHeader.from_ext(cmd.ext_fields)
            msgs = decode_messages(cmd.body, verify_crc=False)
        except (FormatError, MQClientError) as e:
            log.warning("a malformed CHECK_TRANSACTION_STATE from %s: %s", addr, e)
            return
        if not msgs:
            log.warning("CHECK_TRANSACTION_STATE from %s carries no message", addr)
            return
        msg = msgs[0]
        uniq = msg.properties.get(props.UNIQ_KEY) or msg.msg_id
        msg.properties.setdefault(TRANSACTION_ID, header.transactionId or uniq)
        error: BaseException | None = None
        try:
            state = await self._call(listener.check_local_transaction, msg)
        except Exception as e:  # noqa: BLE001 - UNKNOW: the broker asks again
            log.warning("check_local_transaction of %s raised: %r; the state is UNKNOW", msg.msg_id, e)
            state, error = LocalTransactionState.UNKNOW, e
        end = EndTransactionRequestHeader(
            producerGroup=msg.properties.get(props.PGROUP) or self.group,
            tranStateTableOffset=header.tranStateTableOffset, commitLogOffset=header.commitLogOffset,
            commitOrRollback=COMMIT_OR_ROLLBACK[state], msgId=uniq,
            transactionId=header.transactionId, fromTransactionCheck=True)
        remark = None if error is None else f"checkLocalTransactionState exception: {error!r}"
        if self.trace is not None:
            self.trace.end_transaction(end.producerGroup, msg.topic, msg.tags, " ".join(msg.keys), uniq,
                                       addr, state.name, header.transactionId, True)
        try:
            await self._send_end(addr, end, remark)
        except (MQClientError, RemotingError) as e:
            log.warning("the answer %s to the check of %s could not be sent to %s: %s; the broker "
                        "will ask again", state.name, uniq, addr, e)

    @staticmethod
    async def _call(fn: Callable[..., StateOrAwaitable], *args: Any) -> LocalTransactionState:
        """A coroutine listener is awaited; a plain one runs in the default executor."""
        if inspect.iscoroutinefunction(fn):
            out: Any = await fn(*args)
        else:
            out = await asyncio.get_running_loop().run_in_executor(None, fn, *args)
            if inspect.isawaitable(out):
                out = await out
        if out is None:
            return LocalTransactionState.UNKNOW  # Java treats a null answer as UNKNOW
        if not isinstance(out, LocalTransactionState):
            raise MQClientError(f"a transaction listener returned {out!r}, not a LocalTransactionState")
        return out
