"""Whole-segment walks over CommitLog records: one call per segment instead of a Python loop per
record. Recovery verifies records (``scan_records``); the dispatcher turns a run of records into
ConsumeQueue units (``dispatch_plan``) and a hinted run's properties into tag codes
(``tags_codes``); a pull checks the records it serves against their units
(``records_match_units``). Each has a compiled twin in ``_record_c.pyx`` with the
same signature and results (``tests/unit/native/test_record_twin.py``); the pure functions here
are the reference, written over ``message_record``'s own checks so they cannot drift from them.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from rocketlite.common import native
from rocketlite.common.errors import CorruptRecordError
from rocketlite.formats import message_record as rec
from rocketlite.formats.consume_queue_unit import CQ_UNIT
from rocketlite.formats.delay import SCHEDULE_TOPIC_BYTES
from rocketlite.formats.javahash import tags_code
from rocketlite.formats.properties import find_property

ScanResult: TypeAlias = tuple[int, int, int, bool, int]
# A run of units for one queue: [topic, queue id, first queue offset, packed units, max end]
Run: TypeAlias = list[Any]
Keyed: TypeAlias = tuple[bytes, bytes, int, int]  # (topic, properties, CommitLog offset, store ts)
Plan: TypeAlias = tuple[int, list[Run], list[Keyed], int]

_TAGS = b"TAGS\x01"
_KEYS = b"KEYS\x01"
_UNIQ = b"UNIQ_KEY\x01"
_NO_QUEUE = (rec.SYSFLAG_TRANSACTION_PREPARED, rec.SYSFLAG_TRANSACTION_ROLLBACK)


def _scan_records_py(buf: rec.Buffer, start: int, end: int, check_crc: bool,
                     after_ts: int) -> ScanResult:
    """Walk whole records (``check_record``: magic, sizes, BODYCRC when ``check_crc``) from
    ``start`` towards ``end``. Returns ``(stop, records, last_size, blank, first_after)``: where
    the walk stopped (``end``, a BLANK record, or the first record that is not whole), how many
    records were whole, the size of the last of them (0 for none), whether it stopped at a BLANK,
    and the position of the first record stored after ``after_ts`` (-1 for none). The torn-tail
    rule (``message_record.end_before_torn``) is the caller's: ``scan_segment``."""
    pos, n, last, first_after = start, 0, 0, -1
    check = rec.check_record
    while pos < end:
        try:
            size = check(buf, pos, end, check_crc)
        except (CorruptRecordError, struct.error):
            return pos, n, last, False, first_after
        if size == 0:
            return pos, n, last, True, first_after
        if first_after < 0 and rec.read_store_timestamp(buf, pos) > after_ts:
            first_after = pos
        pos += size
        n += 1
        last = size
    return pos, n, last, False, first_after


def _dispatch_plan_py(buf: rec.Buffer, pos: int, limit: int) -> Plan:
    """The ConsumeQueue units of the plain records from ``pos`` towards ``limit``, packed per
    queue. Plain: IPv4 hosts and a V1 topic, a whole frame below ``limit``, a record that takes a
    queue offset (not PREPARED nor ROLLBACK), not ``SCHEDULE_TOPIC_XXXX`` (its tag code is a
    deliver time) and a TAGS value in ASCII. The walk stops at the first record that is not plain,
    which the caller dispatches by the general path before asking again.

    Returns ``(stop, runs, keyed, last_store_timestamp)``: where it stopped; per queue, runs of
    consecutive queue offsets as ``[topic, queue id, first queue offset, units, max end]``
    (``units``: the 20-byte units back to back; ``max end``: the largest CommitLog offset + size
    among them) in the order they began; the records whose properties mention KEYS or UNIQ_KEY,
    for the index, as ``(topic, properties, CommitLog offset, store timestamp)``; and the store
    timestamp of the last record walked (0 for none)."""
    runs: list[Run] = []
    open_runs: dict[tuple[bytes, int], Run] = {}
    keyed: list[Keyed] = []
    last_ts = 0
    for size, qid, qoff, phys, sys_flag, store_ts, topic, props in rec.iter_dispatch(
        buf, pos, limit  # type: ignore[arg-type]
    ):
        if (rec.TOTALSIZE_MAGIC.unpack_from(buf, pos)[1] != rec.MAGIC_V1
                or sys_flag & (rec.SYSFLAG_BORNHOST_V6 | rec.SYSFLAG_STOREHOST_V6)
                or sys_flag & rec.SYSFLAG_TRANSACTION_MASK in _NO_QUEUE
                or topic == SCHEDULE_TOPIC_BYTES):
            break
        tags = find_property(props, _TAGS) if props else None
        if tags is not None and not tags.isascii():
            break
        unit = CQ_UNIT.pack(phys, size, tags_code(tags))
        key = (topic, qid)
        run = open_runs.get(key)
        if run is not None and run[2] + len(run[3]) // 20 == qoff:
            run[3] += unit
            if phys + size > run[4]:
                run[4] = phys + size
        else:
            run = [topic, qid, qoff, bytearray(unit), phys + size]
            open_runs[key] = run
            runs.append(run)
        if _KEYS in props or _UNIQ in props:
            keyed.append((topic, props, phys, store_ts))
        last_ts = store_ts
        pos += size
    return pos, runs, keyed, last_ts


def _tags_code_py(props: bytes) -> int:
    """The ConsumeQueue tag code of one encoded property string (0 without TAGS)."""
    return tags_code(find_property(props, _TAGS)) if props else 0


def _tags_codes_py(props: Sequence[bytes]) -> list[int]:
    """The tag code of each property string of a run (a hinted batch's ConsumeQueue units)."""
    return list(map(_tags_code_py, props))


def _records_match_units_py(buf: rec.Buffer, spans: list[int], base: int,
                            queue_offsets: list[int], first: int, queue_id: int, topic: bytes,
                            start: int = 0) -> int:
    """A pull's records in one segment checked against their ConsumeQueue units in one call: the
    index of the first record from ``start`` on that ``message_record.unit_record_ok`` does not
    accept, -1 when it accepts them all. Record ``k`` is the ``spans[2k + 1]`` bytes at
    ``spans[2k]`` of ``buf`` (a segment that starts at CommitLog offset ``base``), the record of
    queue offset ``queue_offsets[first + k]`` of ``topic``, ``queue_id``."""
    if len(spans) % 2:
        raise ValueError("spans must be start, size pairs")
    n = len(spans) // 2
    if first < 0 or first > len(queue_offsets) - n:
        raise IndexError("fewer queue offsets than spans")
    ok = rec.unit_record_ok
    for k in range(max(start, 0), n):
        rel, size = spans[2 * k], spans[2 * k + 1]
        if not ok(buf, rel, size, base + rel, queue_id, queue_offsets[first + k], topic):
            return k
    return -1


# The compiled twins (``_record_c.pyx``), unless ROCKETLITE_PURE or not built.
scan_records: Callable[[rec.Buffer, int, int, bool, int], ScanResult] = _scan_records_py
dispatch_plan: Callable[[rec.Buffer, int, int], Plan] = _dispatch_plan_py
tags_codes: Callable[[Sequence[bytes]], list[int]] = _tags_codes_py
unit_record_ok: Callable[[rec.Buffer, int, int, int, int, int, bytes], bool] = rec.unit_record_ok
records_match_units: Callable[[rec.Buffer, list[int], int, list[int], int, int, bytes, int], int] = (
    _records_match_units_py)
_c = native.load("rocketlite.formats._record_c")
if _c is not None:
    scan_records = _c.scan_records
    dispatch_plan = _c.dispatch_plan
    tags_codes = _c.tags_codes
    unit_record_ok = _c.unit_record_ok
    records_match_units = _c.records_match_units


def scan_segment(buf: rec.Buffer, start: int, end: int, check_crc: bool,
                 after_ts: int) -> tuple[int, int, bool, int, int]:
    """``scan_records`` with the torn-tail rule applied where the walk stopped short of ``end``
    and of a BLANK: ``(stop, records, blank, first_after, walked)``; ``walked`` is where the walk
    itself stopped, past ``stop`` when the last whole record was cut off as a write a crash left
    unfinished."""
    walked, n, last, blank, first_after = scan_records(buf, start, end, check_crc, after_ts)
    stop = walked
    if not blank and walked < end and (cut := rec.end_before_torn(buf, walked, last)) != walked:
        stop, n = cut, n - 1
        if first_after == stop:
            first_after = -1
    return stop, n, blank, first_after, walked
