"""The usual single sends of a run of requests, in one call: ``SendTaker.take``.

A connection hands the send processor a run of consecutive SEND_MESSAGE (10) / SEND_MESSAGE_V2
(310) requests at once (``RemotingServer.register(..., run=...)``). ``take`` turns the longest
prefix of the usual ones into the ``MessageToStore`` the store gets and the ``(connection,
request, queue id)`` the reply needs, and stops at the first other one, which the processor sends
down the per-request path (its checks, errors and lenient coercions) before taking the rest.

Usual means what the per-request path would queue as is, decided without it:

* every header field in the strict form the header decoder's fast path reads: strings for the
  string fields, 1 to 9 ASCII digits for an Int32 (1 to 18 for the Int64 ``bornTimestamp``),
  exactly ``true``/``false``/``1``/``0`` for a boolean; required fields present; ``batch`` false;
* its topic exists, takes writes and is not one a client may not send to (``not_allowed``), and
  its queue id is one of the topic's write queues;
* with ``diverting``, neither a transactional sysFlag nor a delay level or timer property.

The caller checks the broker takes writes (once per run). Anything else (a sign, ``""``, a
number too long for the fast path, a non-string value, ``TRUE``, a missing field, a new topic, a
random queue) is left to the per-request path, which decides as before. The compiled twin is
``_send_run_c.SendTaker`` (``tests/unit/native/test_send_run_twin.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rocketlite.common import native
from rocketlite.protocol.replies import SendOkFrames

__all__ = ["TXN_MASK", "SendTaker", "SendTakerPy", "send_keys"]

TXN_MASK = 0x4 | 0x8  # sysFlag: a prepared (0x4) or committed (0x8) transactional message
_BOOLS = frozenset(("true", "false", "1", "0"))
_FALSE = frozenset(("false", "0"))
_FIELDS = ("producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId",
           "sysFlag", "bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode",
           "batch", "maxReconsumeTimes", "bname")
_MESSAGE_FIELDS = ("topic", "body", "queue_id", "flag", "properties", "sys_flag",
                   "born_timestamp", "born_host", "born_port", "reconsume_times",
                   "prepared_transaction_offset")


def send_keys(v2_keys: Mapping[str, str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The wire keys ``take`` reads, in its order: SEND_MESSAGE's (the field names) and
    SEND_MESSAGE_V2's (``SendMessageRequestHeader.V2_KEYS``)."""
    return _FIELDS, tuple(v2_keys[f] for f in _FIELDS)


def _int(v: Any, digits: int) -> int:
    """The value of 1 to ``digits`` ASCII digits, else -1 (not the usual form)."""
    if v.__class__ is not str or not 0 < len(v) <= digits or not v.isascii() or not v.isdigit():
        return -1
    return int(v)


def _usual(ext: Any, keys: Sequence[str]) -> tuple[str, int, int, int, int, str, int] | None:
    """Topic, queue id, sysFlag, born timestamp, flag, properties and reconsume times of a header
    whose every field is in the usual form and that is not a batch; else None."""
    if ext.__class__ is not dict:
        return None
    get = ext.get
    group, topic, default_topic = get(keys[0]), get(keys[1]), get(keys[2])
    if group.__class__ is not str or topic.__class__ is not str \
            or default_topic.__class__ is not str:
        return None
    if (_int(get(keys[3]), 9) < 0 or (queue_id := _int(get(keys[4]), 9)) < 0
            or (sys_flag := _int(get(keys[5]), 9)) < 0
            or (born := _int(get(keys[6]), 18)) < 0 or (flag := _int(get(keys[7]), 9)) < 0):
        return None
    props = get(keys[8])
    if props is None:
        props = ""
    elif props.__class__ is not str:
        return None
    v = get(keys[9])
    reconsume = 0
    if v is not None and (reconsume := _int(v, 9)) < 0:
        return None
    v = get(keys[10])
    if v is not None and (v.__class__ is not str or v not in _BOOLS):
        return None
    v = get(keys[11])  # batch: a batch goes the per-request way
    if v is not None and (v.__class__ is not str or v not in _FALSE):
        return None
    v = get(keys[12])
    if v is not None and _int(v, 9) < 0:
        return None
    v = get(keys[13])
    if v is not None and v.__class__ is not str:
        return None
    return topic, queue_id, sys_flag, born, flag, props, reconsume


class SendTakerPy:
    """Built once per send processor: the message class (its fields checked), the wire keys per
    request code, the topics a client may not send to, the topic's write permission bit."""

    def __init__(self, message_cls: type, keys: Mapping[int, Sequence[str]],
                 not_allowed: frozenset[str], perm_write: int) -> None:
        fields = getattr(message_cls, "__slots__", ())
        if tuple(fields) != _MESSAGE_FIELDS:
            raise TypeError(f"{message_cls.__name__} has fields {fields}, the taker knows "
                            f"{_MESSAGE_FIELDS}")
        for code, k in keys.items():
            if len(k) != len(_FIELDS):
                raise TypeError(f"request code {code}: {len(k)} keys, the taker reads {len(_FIELDS)}")
        self._cls = message_cls
        self._keys = {int(c): tuple(k) for c, k in keys.items()}
        self._not_allowed = not_allowed
        self._perm_write = perm_write

    def take(self, conn: Any, cmds: Sequence[Any], start: int, table: Mapping[str, Any],
             diverting: bool, msgs: list[Any], pending: list[tuple[Any, Any, int]]) -> int:
        """Append the message and the reply's ``(conn, cmd, queue id)`` of every usual send of
        ``cmds`` from ``start`` on, stopping at the first other one: returns its index (or
        ``len(cmds)``). ``table`` is the topic table, ``conn`` gives the born host and port."""
        writable: dict[str, int] = {}  # topic -> its write queues, 0 if it takes no sends here
        host, port = conn.peer_host, conn.peer_port
        n = len(cmds)
        i = start
        while i < n:
            cmd = cmds[i]
            keys = self._keys.get(cmd.code)
            if keys is None:
                return i
            usual = _usual(cmd.ext_fields, keys)
            if usual is None:
                return i
            topic, queue_id, sys_flag, born, flag, props, reconsume = usual
            queues = writable.get(topic)
            if queues is None:
                tc = table.get(topic)
                queues = 0 if tc is None or not tc.perm & self._perm_write \
                    or topic in self._not_allowed else tc.writeQueueNums
                writable[topic] = queues
            if queue_id >= queues:
                return i
            if diverting and (sys_flag & TXN_MASK or "DELAY\x01" in props or "TIMER_" in props):
                return i
            msgs.append(self._cls(topic, cmd.body, queue_id, flag, props, sys_flag, born, host,
                                  port, reconsume, 0))
            pending.append((conn, cmd, queue_id))
            i += 1
        return i


class OkRunsPy:
    """The success replies of an append, in one call: ``runs(pending, results)`` gives, for each
    run of consecutive replies to one connection, the connection and its frames joined (one
    write). ``pending`` holds ``(connection, request, queue id)`` per message, ``results`` the
    store's ``AppendResult`` (CommitLog offset, size, queue offset, ...) in the same order;
    requests with the ``oneway`` flag are not answered. A JSON or ROCKETMQ request is answered
    with ``frames``' pre-encoded reply, any other with ``other(request, queue id, CommitLog
    offset, queue offset)``'s frame. The compiled twin (``_send_run_c.OkRuns``) writes the bytes
    of ``frames.layout()`` itself."""

    def __init__(self, frames: SendOkFrames, oneway: int,
                 other: Callable[[Any, int, int, int], bytes]) -> None:
        self._frames = frames
        self._oneway = oneway
        self._other = other

    def runs(self, pending: Sequence[tuple[Any, Any, int]], results: Sequence[Sequence[int]]
             ) -> list[tuple[Any, bytes]]:
        out: list[tuple[Any, bytes]] = []
        to: Any = None
        chunk: list[bytes] = []
        json_frame, binary_frame = self._frames.frame, self._frames.binary_frame
        for (conn, cmd, queue_id), r in zip(pending, results, strict=True):
            if cmd.flag & self._oneway:
                continue
            if conn is not to:
                if chunk:
                    out.append((to, b"".join(chunk)))
                    chunk = []
                to = conn
            stype = cmd.serialize_type
            if stype == 0:
                chunk.append(json_frame(cmd.opaque, queue_id, r[0], r[2]))
            elif stype == 1:
                chunk.append(binary_frame(cmd.opaque, queue_id, r[0], r[2]))
            else:
                chunk.append(self._other(cmd, queue_id, r[0], r[2]))
        if chunk:
            out.append((to, b"".join(chunk)))
        return out


SendTaker: type[SendTakerPy] = SendTakerPy
OkRuns: type[OkRunsPy] = OkRunsPy
_c = native.load("rocketlite.broker._send_run_c")
if _c is not None:
    SendTaker = _c.SendTaker
    OkRuns = _c.OkRuns
