"""Encoding a run of single messages (``CommitLog.append``) in two calls instead of a Python loop
with a 22-field ``Struct.pack`` per record.

``check_singles`` is the per-message validation before anything is written: it walks the messages
while each is *plain* (a known topic, body and properties within the limits, no NUL in the
properties, a queue id in range, an IPv4 born host, integer fields that fit their record fields, a
record that fits a segment) and sums their record sizes; the caller runs its full check (which
raises with the reason, or accepts an IPv6 host or a new topic) on the message it stops at, then
asks again after it. ``encode_singles`` writes the records that fit one segment back to back, with
their queue offsets taken from the topic/queue table, and gives back one ``result(offset, size,
queue offset, store timestamp)`` per record.

The messages are read by attribute (``topic``, ``body``, ``queue_id``, ``flag``, ``properties``,
``sys_flag``, ``born_timestamp``, ``born_host``, ``born_port``, ``reconsume_times``,
``prepared_transaction_offset``: ``store.message.MessageToStore``). The pure functions here are the
reference; ``_encode_c.pyx`` holds their compiled twins, same signatures, same bytes and results
(``tests/unit/native/test_encode_twin.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TypeVar

from rocketlite.common import native
from rocketlite.formats import message_record as rec

QUEUE_ID_MAX = 65535
PROPERTIES_MAX = 32767
_I32 = (-(2**31), 2**31 - 1)
_I64 = (-(2**63), 2**63 - 1)
_NO_QUEUE = (rec.SYSFLAG_TRANSACTION_PREPARED, rec.SYSFLAG_TRANSACTION_ROLLBACK)
R = TypeVar("R")


class AppendResult(NamedTuple):
    """Where one message landed (a NamedTuple: one is made per message on the hot path)."""

    commit_log_offset: int
    size: int
    queue_offset: int
    store_timestamp: int

    @property
    def end_offset(self) -> int:
        return self.commit_log_offset + self.size


def _fits(v: object, bounds: tuple[int, int]) -> bool:
    return type(v) is int and bounds[0] <= v <= bounds[1]


def _plain_size(m: Any, topics: dict[str, bytes], max_body: int, max_record: int,
                host_flag: int) -> int:
    """The record size of a plain message (module docstring), else -1."""
    tb = topics.get(m.topic) if type(m.topic) is str else None
    props = m.properties
    body = m.body
    if (tb is None or type(props) is not str or type(body) is not bytes
            or type(m.born_host) is not bytes or len(m.born_host) != 4):
        return -1
    pb = props.encode() if props else b""
    if (len(body) > max_body or len(pb) > PROPERTIES_MAX or b"\x00" in pb
            or not (type(m.queue_id) is int and 0 <= m.queue_id <= QUEUE_ID_MAX)
            or not (_fits(m.flag, _I32) and _fits(m.sys_flag, _I32) and _fits(m.born_port, _I32)
                    and _fits(m.reconsume_times, _I32) and _fits(m.born_timestamp, _I64)
                    and _fits(m.prepared_transaction_offset, _I64))
            or not _fits(m.sys_flag | host_flag, _I32)):
        return -1
    size = rec.record_size(len(body), len(tb), len(pb), m.sys_flag | host_flag)
    return size if size <= max_record else -1


def _check_singles_py(msgs: Sequence[Any], start: int, topics: dict[str, bytes], max_body: int,
                      max_record: int, host_flag: int) -> tuple[int, int]:
    """Walk ``msgs`` from ``start`` while each is plain; return ``(stop, total)``: the index of
    the first message that is not (``len(msgs)`` when all are) and the sum of the record sizes
    before it. ``topics`` maps a known topic to its bytes; ``host_flag`` is the store host's
    SYSFLAG bit."""
    total = 0
    for i in range(start, len(msgs)):
        size = _plain_size(msgs[i], topics, max_body, max_record, host_flag)
        if size < 0:
            return i, total
        total += size
    return len(msgs), total


def _encode_singles_py(msgs: Sequence[Any], lo: int, table: dict[tuple[str, int], int],
                       offset: int, free: int, now: int, store_host: bytes, store_port: int,
                       host_flag: int, result: Callable[[int, int, int, int], R]
                       ) -> tuple[bytes, int, list[R]]:
    """Records of ``msgs[lo:]`` back to back from CommitLog ``offset``, as many as fit ``free``
    bytes: ``(data, hi, results)`` with ``hi`` the first message left out. Each takes the next
    queue offset of ``table[(topic, queue_id)]`` (a transactional PREPARED or ROLLBACK record
    takes none and stores 0). Messages must have passed the caller's checks (``check_singles`` or
    its full check): topics are encoded here, the SYSFLAG gets ``host_flag`` and, for a 16-byte
    born host, ``SYSFLAG_BORNHOST_V6``."""
    chunks: list[bytes] = []
    results: list[R] = []
    used = 0
    crc32 = rec.crc32
    v1, v2, v1_max = rec.MAGIC_V1, rec.MAGIC_V2, rec.TOPIC_V1_MAX_BYTES
    for i in range(lo, len(msgs)):
        m = msgs[i]
        tb = m.topic.encode()
        props = m.properties.encode() if m.properties else b""
        body = m.body
        sys_flag = m.sys_flag | host_flag
        if len(m.born_host) == 16:
            sys_flag |= rec.SYSFLAG_BORNHOST_V6
        st = rec.record_struct(sys_flag, len(body), len(tb), len(props))
        size = st.size
        if size > free - used:
            return b"".join(chunks), i, results
        if sys_flag & rec.SYSFLAG_TRANSACTION_MASK in _NO_QUEUE:
            qoff = 0
        else:
            key = (m.topic, m.queue_id)
            qoff = table.get(key, 0)
            table[key] = qoff + 1
        chunks.append(st.pack(
            size, v2 if len(tb) > v1_max else v1, crc32(body) & 0x7FFFFFFF,
            m.queue_id, m.flag, qoff, offset + used, sys_flag, m.born_timestamp,
            m.born_host, m.born_port, now, store_host, store_port,
            m.reconsume_times, m.prepared_transaction_offset,
            len(body), body, len(tb), tb, len(props), props,
        ))
        results.append(result(offset + used, size, qoff, now))
        used += size
    return b"".join(chunks), len(msgs), results


def give_back(msgs: Sequence[Any], lo: int, hi: int, table: dict[tuple[str, int], int]) -> None:
    """Return the queue offsets ``encode_singles`` took for ``msgs[lo:hi]`` (their write failed)."""
    for i in range(lo, hi):
        m = msgs[i]
        if m.sys_flag & rec.SYSFLAG_TRANSACTION_MASK not in _NO_QUEUE:
            table[(m.topic, m.queue_id)] -= 1


# The compiled twins (``_encode_c.pyx``), unless ROCKETLITE_PURE or not built.
check_singles: Callable[..., tuple[int, int]] = _check_singles_py
encode_singles: Callable[..., tuple[bytes, int, list[Any]]] = _encode_singles_py
_c = native.load("rocketlite.formats._encode_c")
if _c is not None:
    check_singles = _c.check_singles
    encode_singles = _c.encode_singles
