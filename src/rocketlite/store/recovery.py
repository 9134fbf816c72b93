"""Recovery at start-up (seed S12).

* Clean stop (no ``abort`` file): trust the files; re-verify only the last three CommitLog segments to
  find the written end.
* Crash (``abort`` present): start at the last segment whose first record was stored no later than
  the checkpoint's smallest flushed timestamp, re-verify every record (magic, sizes, CRC) forward,
  and stop at the first torn or corrupt one.

What stops the walk is what a crash can produce, never the content of a record: a frame that is
not whole (magic, sizes, body CRC: ``message_record.check_record``) and, just before where the
written records stop, a last record whose zeroed tail blocks hide part of its topic or properties
(``message_record.torn_tail``). A record with odd content but a whole frame is kept.

Either way everything past the valid end is zeroed or deleted, so new writes continue from the last
good record. A damaged tail is logged and cut, never a reason to refuse to start. The caller then
trims ConsumeQueues and the index to that end and re-dispatches from the returned scan start.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from rocketlite.common.errors import CorruptRecordError
from rocketlite.formats import message_record as rec
from rocketlite.formats.record_scan import scan_segment
from rocketlite.store.commitlog import CommitLog
from rocketlite.store.mapped_file import MappedFile

log = logging.getLogger(__name__)

NORMAL_RECOVERY_FILES = 3


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    valid_end: int  # CommitLog offset after the last good record
    scan_start: int  # CommitLog offset where verification began
    redispatch_from: int  # first record stored after the checkpoint's smallest timestamp
    records: int  # records verified
    seconds: float


def _first_store_timestamp(mf: MappedFile) -> int | None:
    try:
        if rec.check_head(mf.mm, 0, mf.file_size) == 0:
            return None
    except CorruptRecordError:
        return None
    return rec.read_store_timestamp(mf.mm, 0)


def _start_index(files: list[MappedFile], abnormal: bool, min_timestamp: int) -> int:
    if not abnormal:
        return max(0, len(files) - NORMAL_RECOVERY_FILES)
    for i in range(len(files) - 1, -1, -1):
        ts = _first_store_timestamp(files[i])
        if ts is not None and ts <= min_timestamp:
            return i
    return 0


def _scan_segment(mf: MappedFile, after_ts: int) -> tuple[int, int, bool, int | None]:
    """Verify records from the start (``record_scan.scan_segment``: one call per segment); return
    (valid end position, records, reached BLANK, position of the first record stored after
    ``after_ts`` or None)."""
    mm = mf.mm
    pos, n, blank, first_after, walked = scan_segment(mm, 0, mf.file_size, True, after_ts)
    if not blank and walked < mf.file_size and mm[walked : walked + 8] != b"\x00" * 8:
        try:
            rec.check_record(mm, walked, mf.file_size, True)
        except CorruptRecordError as e:
            log.warning("recovery: %s in %s; cutting the log here", e, mf.path.name)
    if pos != walked:
        log.warning("recovery: the record at position %d of %s ends in zeroed blocks over "
                    "its topic or properties (a write cut short); cutting the log here",
                    pos, mf.path.name)
    return pos, n, blank, None if first_after < 0 else first_after


def recover_commitlog(cl: CommitLog, abnormal: bool, min_timestamp: int) -> RecoveryResult:
    t0 = time.perf_counter()
    files = cl.files.files
    if not files:
        return RecoveryResult(0, 0, 0, 0, 0.0)
    start_idx = _start_index(files, abnormal, min_timestamp)
    for mf in files[:start_idx]:
        mf.set_positions(mf.file_size)
    scan_start = files[start_idx].file_from_offset
    log.info(
        "recovery (%s) starts at CommitLog offset %d (segment %d of %d)",
        "after a crash" if abnormal else "after a clean stop",
        scan_start, start_idx + 1, len(files),
    )
    records = 0
    valid_end = scan_start
    redispatch_from: int | None = None
    for mf in files[start_idx:]:
        end, n, blank, first_after = _scan_segment(mf, min_timestamp if abnormal else -1)
        if redispatch_from is None and first_after is not None:
            redispatch_from = mf.file_from_offset + first_after
        records += n
        valid_end = mf.file_from_offset + end
        log.info("recovery: segment %s verified, %d records, %d bytes", mf.path.name, n, end)
        if blank:
            mf.set_positions(mf.file_size)
            valid_end = mf.file_from_offset + mf.file_size
            continue
        mf.set_positions(end)
        break
    # No record holds a longer run of zeros than its body and properties can: past such a run the
    # pre-allocated segment was never written.
    cl.files.truncate_dirty(valid_end, zero_run_stop=cl.config.max_message_size + (64 << 10))
    seconds = time.perf_counter() - t0
    log.info(
        "recovery done: %d records verified, valid end %d, %.3f s", records, valid_end, seconds
    )
    return RecoveryResult(
        valid_end, scan_start, valid_end if redispatch_from is None else redispatch_from,
        records, seconds,
    )
