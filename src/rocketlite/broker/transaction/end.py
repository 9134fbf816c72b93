"""END_TRANSACTION (37): the producer's decision on a half message (RocketMQ 4.9's
``EndTransactionProcessor``).

``commitOrRollback``: 8 commit, 12 rollback, 0 unknown (logged, nothing else: the check-back
service asks again later); anything else is ignored. The half record is looked up by
``commitLogOffset`` and must be a half message of the request's producer group at queue offset
``tranStateTableOffset`` (``checkPrepareMessage``); a mismatch answers SYSTEM_ERROR saying which.
Commit: the message is rebuilt for its real topic and queue (``half.commit_message``), goes through
the broker's diverters (a delay level or timer property still applies) and is stored; then an op
record marks the half message resolved. Rollback: the op record only. A oneway request (the
clients' usual form) gets no reply.

The decision core (``decide``) takes no Remoting types: an ``EndRequest`` (group, offsets, commit
or rollback, optionally the message id the half record must carry) and a callback that gets the
``EndResult`` and its remark once the decision is stored; the Remoting END_TRANSACTION and the gRPC
front's EndTransaction each map ``EndResult`` to their own codes.

Decisions that arrive in one loop iteration (on any connection) are appended together, each final
message right before its op record, with one ``put_messages`` in a ``call_soon`` callback, as the
send path batches single sends: one lock, one ``pwrite`` and one dispatch round for all of them
instead of one each (a committed transaction costs three records: the half message, the final
message and the op record). Replies go out after the append, under SYNC_FLUSH after the group
commit (one waiting task per batch).
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import logging
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING

from rocketlite.broker.transaction.half import (
    TRANS_HALF_TOPIC,
    commit_message,
    get_property,
    producer_group,
)
from rocketlite.common.errors import (
    DiskFullError,
    FlushError,
    MessageIllegalError,
    RocketliteError,
    StoreClosedError,
)
from rocketlite.formats.message_record import (
    SYSFLAG_TRANSACTION_COMMIT,
    SYSFLAG_TRANSACTION_NOT_TYPE,
    SYSFLAG_TRANSACTION_ROLLBACK,
    MessageRecord,
)
from rocketlite.formats.properties import UNIQ_KEY
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import EndTransactionRequestHeader
from rocketlite.remoting.connection import Connection
from rocketlite.store.message import MessageToStore

if TYPE_CHECKING:
    from rocketlite.broker.transaction.service import TransactionalMessageService

log = logging.getLogger(__name__)


class EndResult(enum.Enum):
    """How a decision ended, each transport mapping it to its code (Remoting in brackets)."""

    OK = "ok"  # stored, or resolved already (SUCCESS)
    NOT_PREPARED = "not prepared"  # no such half message for this request (SYSTEM_ERROR)
    ILLEGAL = "illegal"  # the final message was refused (MESSAGE_ILLEGAL)
    UNAVAILABLE = "unavailable"  # the store cannot write (SERVICE_NOT_AVAILABLE)
    FAILED = "failed"  # anything else (SYSTEM_ERROR)
    SLAVE = "slave"  # this broker is a slave (SLAVE_NOT_AVAILABLE)


REMOTING_CODES = {
    EndResult.OK: ResponseCode.SUCCESS, EndResult.NOT_PREPARED: ResponseCode.SYSTEM_ERROR,
    EndResult.ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    EndResult.UNAVAILABLE: ResponseCode.SERVICE_NOT_AVAILABLE,
    EndResult.FAILED: ResponseCode.SYSTEM_ERROR, EndResult.SLAVE: ResponseCode.SLAVE_NOT_AVAILABLE,
}

Answer = Callable[[EndResult, "str | None"], None]


@dataclasses.dataclass(frozen=True, slots=True)
class EndRequest:
    """A producer's decision on the half record at ``commit_log_offset``.

    ``tran_state_table_offset``: the half queue offset the request names (checked when given);
    ``message_id``: the UNIQ_KEY the half record must carry (checked when given)."""

    producer_group: str
    commit_log_offset: int
    commit: bool
    tran_state_table_offset: int | None = None
    message_id: str | None = None


@dataclasses.dataclass(slots=True)
class _Decision:
    """One decision waiting for the next append."""

    answer: Answer
    msgs: list[MessageToStore]  # the final message (commit only), then the op record
    keys: list[int]  # the half offsets it resolves (undone if the append fails)
    commit: bool


class EndTransactionProcessor:
    def __init__(self, service: TransactionalMessageService) -> None:
        self.service = service
        self.broker = service.broker
        self.commits = 0
        self.rollbacks = 0
        self._pending: list[_Decision] = []
        self._scheduled = False
        self._waiters: set[asyncio.Task[None]] = set()  # SYNC_FLUSH replies waiting for a flush

    def register(self) -> None:
        self.broker.server.register(RequestCode.END_TRANSACTION, self.end_transaction)

    async def drain(self) -> None:
        """Let replies waiting for a group commit go out (at shutdown, while the store runs)."""
        if self._waiters:
            await asyncio.wait(set(self._waiters),
                               timeout=self.broker.store.config.sync_flush_timeout / 1000 + 1)

    def end_transaction(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        h = EndTransactionRequestHeader.from_ext(cmd.ext_fields)
        if self.broker.slave:  # the live role: a promoted replica (controller mode) is master
            log.warning("END_TRANSACTION from %s on a slave: refused", conn.peer)
            return cmd.response(ResponseCode.SLAVE_NOT_AVAILABLE,
                                "the broker is a slave: end transaction is forbidden")
        kind = h.commitOrRollback
        source = "the check of" if h.fromTransactionCheck else "the end of"
        if kind == SYSFLAG_TRANSACTION_NOT_TYPE:
            log.warning("producer %s (group %s) answered %s transaction %s (half offset %d) as "
                        "unknown; it will be checked again", conn.peer, h.producerGroup, source,
                        h.transactionId or h.msgId, h.tranStateTableOffset)
            return None
        if kind not in (SYSFLAG_TRANSACTION_COMMIT, SYSFLAG_TRANSACTION_ROLLBACK):
            log.warning("END_TRANSACTION from %s with commitOrRollback=%d: ignored", conn.peer,
                        kind)
            return None

        def answer(result: EndResult, remark: str | None) -> None:
            if not cmd.is_oneway and conn.is_open:
                conn.send(cmd.response(REMOTING_CODES[result], remark))

        now = self.decide(EndRequest(h.producerGroup, h.commitLogOffset,
                                     kind == SYSFLAG_TRANSACTION_COMMIT, h.tranStateTableOffset),
                          answer)
        if now is None:
            return None
        return cmd.response(REMOTING_CODES[now[0]], now[1])

    def decide(self, req: EndRequest, answer: Answer) -> tuple[EndResult, str | None] | None:
        """Validate and queue the decision: None when it is queued (``answer`` is called once
        it is stored, or failed), else the result at once (``answer`` is not called)."""
        if self.broker.slave:  # the live role: a promoted replica (controller mode) is master
            return EndResult.SLAVE, "the broker is a slave: end transaction is forbidden"
        svc = self.service
        commit = req.commit
        try:
            rec = self.broker.store.look_message(req.commit_log_offset)
        except RocketliteError as e:
            log.warning("END_TRANSACTION: reading the half message at %d failed: %s",
                        req.commit_log_offset, e)
            rec = None
        bad = _check_prepared(rec, req)
        if bad is not None:
            log.warning("END_TRANSACTION (%s) refused: %s", "commit" if commit else "rollback", bad)
            return EndResult.NOT_PREPARED, bad
        assert rec is not None
        half_offset = rec.queue_offset
        svc.load_resolutions()  # once per run: resolutions stored before a restart count too
        if svc.is_resolved(rec):
            log.info("END_TRANSACTION for half offset %d which is resolved already: ignored",
                     half_offset)
            return EndResult.OK, None
        msgs = []
        if commit:
            final = commit_message(rec)
            if final is None:
                return EndResult.NOT_PREPARED, (f"the half message at {req.commit_log_offset} has "
                                                "no valid REAL_TOPIC/REAL_QID properties")
            try:
                msgs.append(self.broker.divert(final))
            except MessageIllegalError as e:  # e.g. a timer property out of range
                return EndResult.ILLEGAL, str(e)
        msgs.append(svc.op(half_offset))
        keys = svc.resolution_keys(rec)
        svc.resolved.update(keys)  # now: a duplicate arriving before the append is a no-op
        svc.deciding.update(keys)
        self._pending.append(_Decision(answer, msgs, keys, commit))
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._append_pending)
        return None

    # -- the append --------------------------------------------------------------------------

    def _append_pending(self) -> None:
        pending, self._pending = self._pending, []
        self._scheduled = False
        try:
            put = self.broker.store.put_messages([m for d in pending for m in d.msgs])
        except MessageIllegalError:
            for d in pending:  # find the culprit(s): one at a time
                self._append([d])
            return
        except (DiskFullError, FlushError, StoreClosedError) as e:
            self._failed(pending, EndResult.UNAVAILABLE, str(e))
            return
        except Exception as e:
            log.exception("END_TRANSACTION: appending %d decisions failed", len(pending))
            self._failed(pending, EndResult.FAILED, f"{type(e).__name__}: {e}")
            return
        self._stored(pending, put.flushed)

    def _append(self, pending: list[_Decision]) -> None:
        try:
            put = self.broker.store.put_messages([m for d in pending for m in d.msgs])
        except MessageIllegalError as e:
            self._failed(pending, EndResult.ILLEGAL, str(e))
            return
        except (DiskFullError, FlushError, StoreClosedError) as e:
            self._failed(pending, EndResult.UNAVAILABLE, str(e))
            return
        self._stored(pending, put.flushed)

    def _failed(self, pending: list[_Decision], result: EndResult, remark: str) -> None:
        """Nothing was stored: the half messages are undecided again (the producer may retry,
        or the check-back asks)."""
        for d in pending:
            self.service.resolved.difference_update(d.keys)
            self.service.deciding.difference_update(d.keys)
            _answer(d, result, remark)

    def _stored(self, pending: list[_Decision], flushed: Future[None] | None) -> None:
        for d in pending:
            self.service.deciding.difference_update(d.keys)
        self.broker.stats.put_messages += sum(len(d.msgs) for d in pending)
        commits = sum(d.commit for d in pending)
        self.commits += commits
        self.rollbacks += len(pending) - commits
        if flushed is None or (flushed.done() and flushed.exception() is None):
            for d in pending:
                _answer(d, EndResult.OK, None)
            return
        task = asyncio.ensure_future(self._answer_when_flushed(pending, flushed))
        self._waiters.add(task)
        task.add_done_callback(self._waiters.discard)

    async def _answer_when_flushed(self, pending: list[_Decision], flushed: Future[None]) -> None:
        await self.service.wait_flushed(flushed, sum(len(d.msgs) for d in pending))
        for d in pending:
            _answer(d, EndResult.OK, None)


def _answer(d: _Decision, result: EndResult, remark: str | None) -> None:
    try:
        d.answer(result, remark)
    except Exception:  # one caller's failure must not keep the others unanswered
        log.exception("answering an END_TRANSACTION failed")


def _check_prepared(rec: MessageRecord | None, req: EndRequest) -> str | None:
    """Java's ``checkPrepareMessage`` (plus: the record must be in the half topic, and carry the
    request's message id when it names one); the reason the request does not match, or None."""
    if rec is None:
        return (f"Find prepared transaction message failed: no message at commit log offset "
                f"{req.commit_log_offset}")
    if rec.topic != TRANS_HALF_TOPIC:
        return (f"the message at commit log offset {req.commit_log_offset} is not a half "
                f"(prepared) message: it is in topic {rec.topic}")
    group = producer_group(rec)
    if group != req.producer_group:
        return (f"The producer group wrong: the half message belongs to {group!r}, the request "
                f"names {req.producer_group!r}")
    if req.tran_state_table_offset is not None and rec.queue_offset != req.tran_state_table_offset:
        return (f"The transaction state table offset wrong: the half message is at queue offset "
                f"{rec.queue_offset}, the request says {req.tran_state_table_offset}")
    if rec.commit_log_offset != req.commit_log_offset:
        return (f"The commit log offset wrong: {rec.commit_log_offset} != {req.commit_log_offset}")
    if req.message_id is not None:
        uniq = get_property(rec.properties_text, UNIQ_KEY)
        if uniq != req.message_id:
            return (f"The message id wrong: the half message is {uniq!r}, the request names "
                    f"{req.message_id!r}")
    return None
