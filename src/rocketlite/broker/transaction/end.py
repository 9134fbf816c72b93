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
import logging
from concurrent.futures import Future
from typing import TYPE_CHECKING

from rocketlite.broker.transaction.half import (
    TRANS_HALF_TOPIC,
    commit_message,
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
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import EndTransactionRequestHeader
from rocketlite.remoting.connection import Connection
from rocketlite.store.message import MessageToStore

if TYPE_CHECKING:
    from rocketlite.broker.transaction.service import TransactionalMessageService

log = logging.getLogger(__name__)


@dataclasses.dataclass(slots=True)
class _Decision:
    """One END_TRANSACTION waiting for the next append."""

    conn: Connection
    cmd: RemotingCommand
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
        if not self.broker.config.is_master:
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
        return self._end(conn, cmd, h, kind == SYSFLAG_TRANSACTION_COMMIT)

    def _end(self, conn: Connection, cmd: RemotingCommand, h: EndTransactionRequestHeader,
             commit: bool) -> RemotingCommand | None:
        """Validate and queue the decision (None: answered after the append), or the error."""
        svc = self.service
        try:
            rec = self.broker.store.look_message(h.commitLogOffset)
        except RocketliteError as e:
            log.warning("END_TRANSACTION: reading the half message at %d failed: %s",
                        h.commitLogOffset, e)
            rec = None
        bad = _check_prepared(rec, h)
        if bad is not None:
            log.warning("END_TRANSACTION (%s) refused: %s", "commit" if commit else "rollback", bad)
            return cmd.response(ResponseCode.SYSTEM_ERROR, bad)
        assert rec is not None
        half_offset = rec.queue_offset
        svc.load_resolutions()  # once per run: resolutions stored before a restart count too
        if svc.is_resolved(rec):
            log.info("END_TRANSACTION for half offset %d which is resolved already: ignored",
                     half_offset)
            return cmd.response(ResponseCode.SUCCESS)
        msgs = []
        if commit:
            final = commit_message(rec)
            if final is None:
                return cmd.response(ResponseCode.SYSTEM_ERROR,
                                    f"the half message at {h.commitLogOffset} has no valid "
                                    "REAL_TOPIC/REAL_QID properties")
            try:
                msgs.append(self.broker.divert(final))
            except MessageIllegalError as e:  # e.g. a timer property out of range
                return cmd.response(ResponseCode.MESSAGE_ILLEGAL, str(e))
        msgs.append(svc.op(half_offset))
        keys = svc.resolution_keys(rec)
        svc.resolved.update(keys)  # now: a duplicate arriving before the append is a no-op
        svc.deciding.update(keys)
        self._pending.append(_Decision(conn, cmd, msgs, keys, commit))
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
            self._failed(pending, ResponseCode.SERVICE_NOT_AVAILABLE, str(e))
            return
        except Exception as e:
            log.exception("END_TRANSACTION: appending %d decisions failed", len(pending))
            self._failed(pending, ResponseCode.SYSTEM_ERROR, f"{type(e).__name__}: {e}")
            return
        self._stored(pending, put.flushed)

    def _append(self, pending: list[_Decision]) -> None:
        try:
            put = self.broker.store.put_messages([m for d in pending for m in d.msgs])
        except MessageIllegalError as e:
            self._failed(pending, ResponseCode.MESSAGE_ILLEGAL, str(e))
            return
        except (DiskFullError, FlushError, StoreClosedError) as e:
            self._failed(pending, ResponseCode.SERVICE_NOT_AVAILABLE, str(e))
            return
        self._stored(pending, put.flushed)

    def _failed(self, pending: list[_Decision], code: int, remark: str) -> None:
        """Nothing was stored: the half messages are undecided again (the producer may retry,
        or the check-back asks)."""
        for d in pending:
            self.service.resolved.difference_update(d.keys)
            self.service.deciding.difference_update(d.keys)
            _answer(d, code, remark)

    def _stored(self, pending: list[_Decision], flushed: Future[None] | None) -> None:
        for d in pending:
            self.service.deciding.difference_update(d.keys)
        self.broker.stats.put_messages += sum(len(d.msgs) for d in pending)
        commits = sum(d.commit for d in pending)
        self.commits += commits
        self.rollbacks += len(pending) - commits
        if flushed is None or (flushed.done() and flushed.exception() is None):
            for d in pending:
                _answer(d, ResponseCode.SUCCESS, None)
            return
        task = asyncio.ensure_future(self._answer_when_flushed(pending, flushed))
        self._waiters.add(task)
        task.add_done_callback(self._waiters.discard)

    async def _answer_when_flushed(self, pending: list[_Decision], flushed: Future[None]) -> None:
        await self.service.wait_flushed(flushed, sum(len(d.msgs) for d in pending))
        for d in pending:
            _answer(d, ResponseCode.SUCCESS, None)


def _answer(d: _Decision, code: int, remark: str | None) -> None:
    if not d.cmd.is_oneway and d.conn.is_open:
        d.conn.send(d.cmd.response(code, remark))


def _check_prepared(rec: MessageRecord | None, h: EndTransactionRequestHeader) -> str | None:
    """Java's ``checkPrepareMessage`` (plus: the record must be in the half topic); the reason
    the request does not match, or None."""
    if rec is None:
        return (f"Find prepared transaction message failed: no message at commit log offset "
                f"{h.commitLogOffset}")
    if rec.topic != TRANS_HALF_TOPIC:
        return (f"the message at commit log offset {h.commitLogOffset} is not a half "
                f"(prepared) message: it is in topic {rec.topic}")
    group = producer_group(rec)
    if group != h.producerGroup:
        return (f"The producer group wrong: the half message belongs to {group!r}, the request "
                f"names {h.producerGroup!r}")
    if rec.queue_offset != h.tranStateTableOffset:
        return (f"The transaction state table offset wrong: the half message is at queue offset "
                f"{rec.queue_offset}, the request says {h.tranStateTableOffset}")
    if rec.commit_log_offset != h.commitLogOffset:
        return (f"The commit log offset wrong: {rec.commit_log_offset} != {h.commitLogOffset}")
    return None
