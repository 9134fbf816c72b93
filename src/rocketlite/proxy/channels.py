"""``TelemetryChannel``: a 5.x client as the broker's client managers see it (the Java proxy's
``GrpcClientChannel``).

One per client id (``ClientSession.channel``), hashable by identity, registered in the broker's
``ConsumerManager`` / ``ProducerManager`` in place of a Remoting ``Connection``. It satisfies the
``broker.transaction.check.ProducerChannel`` protocol (``is_open``, ``send_oneway``): the
CHECK_TRANSACTION_STATE request the check-back service sends a producer becomes a
``RecoverOrphanedTransactionCommand{message, transaction_id}`` written on the client's Telemetry
stream (``message``: the half message as ``convert_out`` converts any stored record;
``transaction_id``: the offset message id of the half record the check names, which
EndTransaction resolves); other Remoting requests mean nothing to a 5.x client and are dropped.

``is_open`` while a Telemetry stream is attached. Writes queue up to ``MAX_PENDING`` commands
(a client that does not read its stream loses the newest, counted in ``dropped``); the stream's
writer (``telemetry.telemetry``) drains the queue. ``close`` (the broker expiring the channel, or
the session ending) ends the stream.
"""

from __future__ import annotations

import asyncio
import logging

from rocketlite.common.errors import RocketliteError
from rocketlite.formats.message_record import decode_record
from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.proxy.convert_out import pulled_messages
from rocketlite.proxy.pb import service_pb2 as spb

log = logging.getLogger(__name__)

MAX_PENDING = 1024
Outbox = asyncio.Queue[spb.TelemetryCommand | None]


class TelemetryChannel:
    """See the module docstring."""

    def __init__(self, client_id: str, peer: str, limit: int = MAX_PENDING) -> None:
        self.client_id = client_id
        self.peer = peer
        self.limit = limit
        self.dropped = 0
        self._out: Outbox | None = None

    def __repr__(self) -> str:
        return f"TelemetryChannel({self.client_id!r}, {self.peer})"

    @property
    def is_open(self) -> bool:
        return self._out is not None

    def attach(self) -> Outbox:
        """A new stream's outbox; a stream the client had open before is ended (the newest
        stream of a client is the one the server writes to)."""
        old = self._out
        self._out = asyncio.Queue(self.limit + 1)
        if old is not None:
            _end(old)
        return self._out

    def detach(self, outbox: Outbox) -> None:
        if self._out is outbox:
            self._out = None

    def write(self, command: spb.TelemetryCommand) -> bool:
        """Queue a command for the client's stream; False when no stream is attached or it is
        full (the command is dropped and counted)."""
        out = self._out
        if out is None or out.qsize() >= self.limit:
            self.dropped += 1
            log.warning("telemetry command for client %s dropped (%s)", self.client_id,
                        "no stream" if out is None else f"{self.limit} unread")
            return False
        out.put_nowait(command)
        return True

    def send_oneway(self, cmd: RemotingCommand) -> None:
        """A broker request for this client (module docstring)."""
        if cmd.code != RequestCode.CHECK_TRANSACTION_STATE:
            return
        ext = cmd.ext_fields or {}
        tid = ext.get("offsetMsgId") or ""
        try:
            rec = decode_record(cmd.body or b"", verify_crc=False)
        except RocketliteError as e:
            log.warning("transaction check for client %s: the half record is unreadable: %s",
                        self.client_id, e)
            return
        if rec is None or not tid:
            return
        # the half message as a receive would carry it (Java's GrpcConverter.buildMessage):
        # TRANSACTION by its TRAN_MSG property
        [message] = pulled_messages([rec], rec.topic)
        self.write(spb.TelemetryCommand(
            recover_orphaned_transaction_command=spb.RecoverOrphanedTransactionCommand(
                message=message, transaction_id=tid)))

    def close(self) -> None:
        out, self._out = self._out, None
        if out is not None:
            _end(out)


def _end(out: Outbox) -> None:
    try:
        out.put_nowait(None)
    except asyncio.QueueFull:  # the reader is gone or far behind: make room for the end
        out.get_nowait()
        out.put_nowait(None)
