"""``TelemetryChannel``: a 5.x client as the broker's client managers see it (the Java proxy's
``GrpcClientChannel``).

One per client id (``ClientSession.channel``), hashable by identity, registered in the broker's
``ConsumerManager`` / ``ProducerManager`` in place of a Remoting ``Connection``. It satisfies the
``broker.transaction.check.ProducerChannel`` protocol (``is_open``, ``send_oneway``): the
CHECK_TRANSACTION_STATE request the check-back service sends a producer becomes a
``RecoverOrphanedTransactionCommand{message, transaction_id}`` written on the client's Telemetry
stream (``transaction_id``: the offset message id of the half record the check names, which
EndTransaction resolves); other Remoting requests mean nothing to a 5.x client and are dropped.

``is_open`` while a Telemetry stream is attached. Writes queue up to ``MAX_PENDING`` commands
(a client that does not read its stream loses the newest, counted in ``dropped``); the stream's
writer (``telemetry.telemetry``) drains the queue. ``close`` (the broker expiring the channel, or
the session ending) ends the stream.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging

from google.protobuf.timestamp_pb2 import Timestamp

from rocketlite.client.message import RESERVED_PROPERTIES, SHARDING_KEY
from rocketlite.common.errors import RocketliteError
from rocketlite.formats.message_record import SYSFLAG_COMPRESSED, MessageRecord, decode_record
from rocketlite.formats.properties import KEYS, TAGS, UNIQ_KEY, decode_properties
from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.proxy.pb import definition_pb2 as pb
from rocketlite.proxy.pb import service_pb2 as spb

log = logging.getLogger(__name__)

MAX_PENDING = 1024
# Not user properties: what the system owns (MessageConst.STRING_HASH_SET) and what the broker
# or the Java proxy add.
SYSTEM_KEYS = RESERVED_PROPERTIES | {SHARDING_KEY, "TRAN_PREPARED_QUEUE_OFFSET", "BORN_HOST",
                                     "BORN_TIMESTAMP", "TRACE_CONTEXT"}

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
        self.write(spb.TelemetryCommand(
            recover_orphaned_transaction_command=spb.RecoverOrphanedTransactionCommand(
                message=record_message(rec, pb.MessageType.TRANSACTION), transaction_id=tid)))

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


def _timestamp(ms: int) -> Timestamp:
    return Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def _host(raw: bytes, port: int) -> str:
    if len(raw) == 4:
        return f"{'.'.join(str(b) for b in raw)}:{port}"
    return f"[{raw.hex(':', 2)}]:{port}"


def record_message(rec: MessageRecord, message_type: int) -> pb.Message:
    """A stored record as the v2 ``Message`` a 5.x client reads (the fields an orphaned
    transaction check needs: ids, tag, keys, group, user properties, times, MD5 digest)."""
    props = decode_properties(rec.properties_text)
    sp = pb.SystemProperties(
        message_id=props.get(UNIQ_KEY, ""),
        keys=[k for k in props.get(KEYS, "").split(" ") if k],
        body_digest=pb.Digest(type=pb.DigestType.MD5,
                              checksum=hashlib.md5(rec.body).hexdigest().upper()),
        body_encoding=(pb.Encoding.GZIP if rec.sys_flag & SYSFLAG_COMPRESSED
                       else pb.Encoding.IDENTITY),
        message_type=message_type,  # type: ignore[arg-type]
        born_timestamp=_timestamp(rec.born_timestamp),
        born_host=_host(rec.born_host, rec.born_port),
        store_timestamp=_timestamp(rec.store_timestamp),
        store_host=_host(rec.store_host, rec.store_port),
        queue_id=rec.queue_id,
        queue_offset=rec.queue_offset,
    )
    if TAGS in props:
        sp.tag = props[TAGS]
    if SHARDING_KEY in props:
        sp.message_group = props[SHARDING_KEY]
    user = {k: v for k, v in props.items() if k not in SYSTEM_KEYS}
    return pb.Message(topic=pb.Resource(name=rec.topic), user_properties=user,
                      system_properties=sp, body=rec.body)
