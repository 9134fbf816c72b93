"""Read-only access to a store directory's files, for tools that run beside a broker or without
one (``rocketlite store inspect|verify``, the Spark store jobs): no lock, no recovery, nothing
written, every file opened only for as long as it is read.

**How far a reader may trust the CommitLog** (``resolve_bound``; the answer is a CommitLog offset,
and a reader takes the records that end at or before it):

* ``flushed`` (the default) asks for what is *durable*, what a crash right now would keep:

  - no ``abort`` file: the store was shut down cleanly, and shutdown flushes everything, so the
    bound is the written end (the first BLANK-less stop of the last segment that holds data);
  - ``abort`` present (a broker runs on these files right now, or one crashed): the checkpoint.
    Its ``confirmPhyOffset`` is the CommitLog offset the last flush reached (rocketlite and
    RocketMQ 5 write it); when it is 0 (RocketMQ 4 checkpoints) the bound is the first record
    stored after ``physicMsgTimestamp``, the rule RocketMQ's crash recovery relies on: every
    record stored no later than it was flushed. (Records of that same millisecond stored after
    the flush are counted too: the timestamp cannot tell them apart.) A checkpoint with neither
    field set (zeroed or truncated) over a CommitLog holding records is an error, not an empty
    scan: ``valid`` reads such a store.

* ``valid`` asks for everything that verifies (magic, sizes, CRC) up to the first record that does
  not: what crash recovery would keep if the broker stopped now, flushed or not. (The rule text
  says how many bytes of records follow a record that stops it.)

Finding the written end and the timestamp bound walks record heads only: a record whose head is
sound but whose body is damaged stays *inside* the bound, so the reader decoding it reports it
(``flushed``) instead of the scan quietly ending before it.

Below the bound every byte must be records up to a segment's BLANK: zeros or garbage there are
corruption, never the end of data. Above it, nothing is read, so a broker appending meanwhile
cannot hand a reader half a record.

Records are walked by their TOTALSIZE fields from a segment's start; a range in the middle of a
segment (``plan_ranges``) finds its first record that way (``first_record_at_or_after``): 8 bytes
per record, no body read.
"""

from __future__ import annotations

import contextlib
import mmap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rocketlite.common.errors import CorruptRecordError
from rocketlite.formats import message_record as rec
from rocketlite.formats.checkpoint_layout import CHECKPOINT
from rocketlite.formats.consume_queue_unit import CQ_UNIT, CQ_UNIT_SIZE, is_valid_unit
from rocketlite.formats.index_layout import INDEX_ENTRY, INDEX_ENTRY_SIZE, INDEX_HEADER, INDEX_SLOT_SIZE
from rocketlite.store import disk

SEGMENT_NAME_DIGITS = 20
BOUND_FLUSHED = "flushed"
BOUND_VALID = "valid"
BOUND_MODES = (BOUND_FLUSHED, BOUND_VALID)
_DEFAULT_ENTRIES_PER_SLOT = 4  # maxIndexNum = 4 x maxHashSlotNum, RocketMQ's defaults


@contextlib.contextmanager
def mapped(path: Path) -> Iterator[mmap.mmap | bytes]:
    """``path`` mapped read-only (``b""`` for an empty file), unmapped on exit. A file with holes
    (a ConsumeQueue, an IndexFile not yet full) is copied instead (``disk.read_sparse``: only its
    data): on tmpfs reading a hole through a mapping allocates a page, a SIGBUS on a full disk."""
    with path.open("rb") as f:
        size = f.seek(0, 2)
        if size == 0:
            yield b""
            return
        if disk.is_sparse(f.fileno()):
            with disk.read_sparse(f.fileno(), size) as copy:
                yield copy
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            yield mm


# -- CommitLog segments ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Segment:
    """One CommitLog (or ConsumeQueue) file: named by the offset of its byte 0."""

    path: Path
    base: int
    size: int


def list_segments(directory: Path) -> list[Segment]:
    """The 20-digit files of ``directory`` in offset order (none if it does not exist)."""
    if not directory.is_dir():
        return []
    out = [Segment(p, int(p.name), p.stat().st_size) for p in directory.iterdir()
           if p.name.isdigit() and len(p.name) == SEGMENT_NAME_DIGITS and p.is_file()]
    return sorted(out, key=lambda s: s.base)


def commitlog_segments(root: Path) -> list[Segment]:
    return list_segments(root / "commitlog")


def first_record_at_or_after(buf: rec.Buffer, target: int, limit: int) -> int:
    """Walk record heads from position 0 and return the first record start at or after
    ``target``; or, if the walk stops earlier (a BLANK, a head that is not a record, ``limit``),
    where it stopped. Only TOTALSIZE and the magic code are read."""
    pos = 0
    unpack = rec.TOTALSIZE_MAGIC.unpack_from
    magics = (rec.MAGIC_V1, rec.MAGIC_V2)
    smallest = rec.FIXED_SIZE_V4
    while pos < target:
        if limit - pos < 8:
            return pos
        size, magic = unpack(buf, pos)
        if magic not in magics or size < smallest or size > limit - pos:
            return pos
        pos += size
    return pos


def head_kind(buf: rec.Buffer, pos: int, limit: int) -> int | None:
    """TOTALSIZE of the record at ``pos``, 0 for a BLANK, None for anything else (zeros too)."""
    try:
        return rec.check_head(buf, pos, limit)
    except CorruptRecordError:
        return None


def _walk(buf: rec.Buffer, limit: int, *, verify_crc: bool, after_ts: int | None = None
          ) -> tuple[int, bool]:
    """Follow records from position 0; return (end of the last one taken, True if the walk ended
    at a BLANK). It stops at the first head that is not a record (zeros, garbage, a size past
    ``limit``), with ``verify_crc`` also at the first record that does not verify or before a
    torn last record (``message_record.torn_tail``, as recovery decides), and with ``after_ts``
    before the first record stored after it."""
    pos = 0
    last = 0
    while pos < limit:
        try:
            size = rec.check_record(buf, pos, limit, True) if verify_crc else rec.check_head(buf, pos, limit)
        except CorruptRecordError:
            return (rec.end_before_torn(buf, pos, last) if verify_crc else pos), False
        if size == 0:
            return pos, True
        if after_ts is not None and rec.read_store_timestamp(buf, pos) > after_ts:
            return pos, False
        pos += size
        last = size
    return pos, False


def written_end(segments: list[Segment], *, verify_crc: bool = False) -> int:
    """The CommitLog offset where records stop in the last segment holding data (segments after
    it, pre-allocated and still zero, are ignored): at the first head that is not a record, or
    with ``verify_crc`` at the first record that does not verify.

    Without ``verify_crc`` a damaged record with a sound head stays below the end, so the reader
    that decodes it reports it instead of the scan silently ending there.

    Only a segment whose first 8 bytes are all zero (or that is shorter and all zero) counts as
    pre-allocated and is skipped. A last segment that starts with anything else that is not a
    record head raises ``CorruptRecordError`` naming the file; with ``verify_crc`` (the ``valid``
    bound: everything up to the first record that does not verify) the end is that segment's
    base instead."""
    for seg in reversed(segments):
        with mapped(seg.path) as mm:
            head = bytes(mm[:8])
            if not any(head):
                continue
            if len(mm) < 8 or head_kind(mm, 0, len(mm)) is None:
                if verify_crc:
                    return seg.base
                raise CorruptRecordError(
                    f"CommitLog segment {seg.path} position 0 (offset {seg.base}): its first "
                    f"{len(head)} bytes {head.hex()} are neither a record head nor the zeros of a "
                    "pre-allocated file")
            end, blank = _walk(mm, len(mm), verify_crc=verify_crc)
        return seg.base + (seg.size if blank else end)
    return segments[0].base if segments else 0


def timestamp_end(segments: list[Segment], flushed_ts: int) -> int:
    """The CommitLog offset of the first record stored after ``flushed_ts`` (or where records
    stop): from the last segment whose first record is no newer (recovery's choice), walk
    forward by heads."""
    start = 0
    for i in range(len(segments) - 1, -1, -1):
        with mapped(segments[i].path) as mm:
            if len(mm) >= 8 and head_kind(mm, 0, len(mm)) and \
                    rec.read_store_timestamp(mm, 0) <= flushed_ts:
                start = i
                break
    else:
        return segments[0].base if segments else 0
    end = segments[start].base
    for seg in segments[start:]:
        with mapped(seg.path) as mm:
            pos, blank = _walk(mm, len(mm), verify_crc=False, after_ts=flushed_ts)
        if not blank:
            return seg.base + pos
        end = seg.base + seg.size
    return end


# -- the checkpoint and the scan bound ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CheckpointFields:
    physic_msg_timestamp: int
    logics_msg_timestamp: int
    index_msg_timestamp: int
    master_flushed_offset: int
    confirm_phy_offset: int


def read_checkpoint(root: Path) -> CheckpointFields | None:
    """The checkpoint's five fields (a field the file is too short for reads 0); None without a
    checkpoint file."""
    path = root / "checkpoint"
    if not path.is_file():
        return None
    head = path.read_bytes()[: CHECKPOINT.size]
    whole = len(head) - len(head) % 8
    return CheckpointFields(*CHECKPOINT.unpack(head[:whole].ljust(CHECKPOINT.size, b"\0")))


@dataclass(frozen=True, slots=True)
class ScanBound:
    """Where a reader stops: records that end at or before ``end`` are in scope; ``rule`` says
    which rule set it (for logs and reports)."""

    end: int
    rule: str


def resolve_bound(root: Path, mode: str = BOUND_FLUSHED) -> ScanBound:
    """The scan bound of the store at ``root`` under ``mode`` (see the module docstring).

    Raises ``CorruptRecordError`` when the last CommitLog segment holding data starts with bytes
    that are neither a record head nor zeros (``flushed``; ``valid`` stops there). Raises
    ``ValueError`` under ``flushed`` when an abort file is present but the checkpoint is zeroed or
    truncated (neither ``confirmPhyOffset`` nor ``physicMsgTimestamp`` set) while the CommitLog
    holds records: nothing tells how far it was flushed, and silently taking the first segment's
    base would make the scan empty. ``bound=valid`` is the way to scan such a store. With no
    records at all the bound is the first segment's base (an empty scan)."""
    if mode not in BOUND_MODES:
        raise ValueError(f"bound must be one of {', '.join(BOUND_MODES)}, not {mode!r}")
    segs = commitlog_segments(root)
    if not segs:
        return ScanBound(0, "no CommitLog segments")
    if mode == BOUND_VALID:
        end = written_end(segs, verify_crc=True)
        try:
            beyond = written_end(segs)
        except CorruptRecordError:
            beyond = end  # the last segment starts with garbage: nothing follows that is records
        more = f"; {beyond - end} more bytes of records follow it" if beyond > end else ""
        return ScanBound(end, f"valid: up to the first record that does not verify{more}")
    if not (root / "abort").exists():
        return ScanBound(written_end(segs), "clean shutdown (no abort file): all written records")
    cp = read_checkpoint(root)
    if cp is None:
        return ScanBound(written_end(segs), "abort file but no checkpoint: up to the first record "
                                            "that does not verify")
    if cp.confirm_phy_offset > 0:
        return ScanBound(cp.confirm_phy_offset, "running or crashed (abort file): the checkpoint's "
                                                "confirmPhyOffset")
    if cp.physic_msg_timestamp == 0:
        written = written_end(segs)
        if written > segs[0].base:
            raise ValueError(
                f"bound=flushed: {root / 'checkpoint'} is zeroed or truncated (no confirmPhyOffset, "
                f"no physicMsgTimestamp) but an abort file is present and the CommitLog holds "
                f"records up to offset {written}: what was flushed is unknown; pass bound=valid "
                "to scan what verifies")
        return ScanBound(written, "running or crashed (abort file) with a zeroed checkpoint: "
                                  "the CommitLog holds no records")
    return ScanBound(timestamp_end(segs, cp.physic_msg_timestamp),
                     "running or crashed (abort file): records stored up to the checkpoint's "
                     "physicMsgTimestamp")


# -- byte ranges -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ByteRange:
    """Part of one segment: the records that *start* at a position in [start, stop) belong to it,
    and must end by ``limit`` (the segment's size, or the scan bound in the bound's segment)."""

    path: str
    base: int
    start: int
    stop: int
    limit: int
    segment_size: int

    @property
    def bound_inside(self) -> bool:
        """True if the scan bound cuts this segment (records may stop short of a BLANK)."""
        return self.limit < self.segment_size


def plan_ranges(segments: list[Segment], end: int, *, per_segment: int = 1,
                start_offset: int = 0) -> list[ByteRange]:
    """Split every segment below ``end`` into ``per_segment`` equal byte ranges (fewer if the
    segment's part in scope is smaller than that many bytes), from ``start_offset`` on."""
    if per_segment < 1:
        raise ValueError(f"partitions per segment must be at least 1, not {per_segment}")
    out: list[ByteRange] = []
    for seg in segments:
        if seg.base >= end:
            break
        limit = min(seg.size, end - seg.base)
        lo = max(0, start_offset - seg.base)
        if lo >= limit:
            continue
        step = -(-(limit - lo) // per_segment)
        out.extend(ByteRange(str(seg.path), seg.base, a, min(limit, a + step), limit, seg.size)
                   for a in range(lo, limit, step))
    return out


# -- ConsumeQueues -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueueFile:
    topic: str
    queue_id: int
    path: Path
    first_unit: int  # queue offset of the file's first unit
    size: int


def queue_dirs(root: Path) -> Iterator[tuple[str, int, Path]]:
    """``(topic, queue_id, directory)`` of every ConsumeQueue under ``root/consumequeue``."""
    cq_root = root / "consumequeue"
    if not cq_root.is_dir():
        return
    for topic_dir in sorted(cq_root.iterdir()):
        if topic_dir.is_dir():
            for qdir in sorted(topic_dir.iterdir()):
                if qdir.is_dir() and qdir.name.isdigit():
                    yield topic_dir.name, int(qdir.name), qdir


def queue_files(root: Path) -> list[QueueFile]:
    return [QueueFile(topic, qid, s.path, s.base // CQ_UNIT_SIZE, s.size)
            for topic, qid, qdir in queue_dirs(root) for s in list_segments(qdir)]


def iter_units(buf: rec.Buffer, first_unit: int) -> Iterator[tuple[int, int, int, int]]:
    """``(queue_offset, commit_log_offset, size, tags_code)`` of each valid unit of one file."""
    usable = len(buf) - len(buf) % CQ_UNIT_SIZE
    for i, (off, size, tag) in enumerate(CQ_UNIT.iter_unpack(buf[:usable])):
        if is_valid_unit(off, size):
            yield first_unit + i, off, size, tag


def read_units(qdir: Path) -> list[tuple[int, int, int, int]]:
    """``iter_units`` over every file of one queue, in queue order."""
    out: list[tuple[int, int, int, int]] = []
    for seg in list_segments(qdir):
        with mapped(seg.path) as mm:
            out.extend(iter_units(mm, seg.base // CQ_UNIT_SIZE))
    return out


# -- IndexFiles --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IndexHeader:
    begin_timestamp: int
    end_timestamp: int
    begin_phy_offset: int
    end_phy_offset: int
    hash_slot_count: int
    index_count: int  # entries + 1: entry 0 is never used


def index_files(root: Path) -> list[Path]:
    idir = root / "index"
    return sorted(p for p in idir.iterdir() if p.is_file()) if idir.is_dir() else []


def read_index_header(buf: rec.Buffer) -> IndexHeader | None:
    """The header, or None if the file is shorter than one."""
    if len(buf) < INDEX_HEADER.size:
        return None
    return IndexHeader(*INDEX_HEADER.unpack_from(buf, 0))


def _slots_fit(buf: rec.Buffer, head: IndexHeader, slots: int) -> bool:
    entries_at = INDEX_HEADER.size + slots * INDEX_SLOT_SIZE
    room = len(buf) - entries_at
    if slots <= 0 or room < 0 or room % INDEX_ENTRY_SIZE or room // INDEX_ENTRY_SIZE < head.index_count:
        return False
    if head.index_count <= 1:
        return True
    first = INDEX_ENTRY.unpack_from(buf, entries_at + INDEX_ENTRY_SIZE)[1]
    last = INDEX_ENTRY.unpack_from(buf, entries_at + (head.index_count - 1) * INDEX_ENTRY_SIZE)[1]
    return bool(first == head.begin_phy_offset and last == head.end_phy_offset)


def index_slot_num(buf: rec.Buffer, head: IndexHeader, hash_slot_num: int | None = None) -> int | None:
    """The file's ``maxHashSlotNum``: ``hash_slot_num`` if given, else inferred.

    The file size alone does not tell the slot count from the entry count, so two guesses are
    checked against the header (entry 1 holds ``beginPhyOffset``, the last entry
    ``endPhyOffset``): RocketMQ's ratio of 4 entries per slot, and the position of the last
    occurrence of ``endPhyOffset`` (entries after the last one are still zero). None when
    neither fits: the caller must be told the geometry."""
    if hash_slot_num is not None:
        return hash_slot_num if _slots_fit(buf, head, hash_slot_num) else None
    guesses = []
    body = len(buf) - INDEX_HEADER.size
    if body > 0 and body % (INDEX_SLOT_SIZE + _DEFAULT_ENTRIES_PER_SLOT * INDEX_ENTRY_SIZE) == 0:
        guesses.append(body // (INDEX_SLOT_SIZE + _DEFAULT_ENTRIES_PER_SLOT * INDEX_ENTRY_SIZE))
    if head.index_count > 1 and head.end_phy_offset > 0 and isinstance(buf, mmap.mmap | bytes):
        at = buf.rfind(head.end_phy_offset.to_bytes(8, "big"))
        entries_at = at - 4 - (head.index_count - 1) * INDEX_ENTRY_SIZE
        if at > 0 and (entries_at - INDEX_HEADER.size) % INDEX_SLOT_SIZE == 0:
            guesses.append((entries_at - INDEX_HEADER.size) // INDEX_SLOT_SIZE)
    return next((s for s in guesses if _slots_fit(buf, head, s)), None)


def iter_index_entries(buf: rec.Buffer, slots: int, first: int, stop: int
                       ) -> Iterator[tuple[int, int, int, int, int]]:
    """``(entry_no, key_hash, phy_offset, time_diff, prev_index)`` of entries [first, stop)."""
    entries_at = INDEX_HEADER.size + slots * INDEX_SLOT_SIZE
    unpack = INDEX_ENTRY.unpack_from
    for n in range(first, stop):
        h, phy, diff, prev = unpack(buf, entries_at + n * INDEX_ENTRY_SIZE)
        yield n, h, phy, diff, prev
