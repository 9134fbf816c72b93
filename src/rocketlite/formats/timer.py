"""Byte layouts of RocketMQ 5.x's timer wheel (``store/timer``): the TimerLog unit, the wheel slot
and the ``timercheck`` checkpoint. All big-endian, as Java's ByteBuffer writes them.

TimerLog unit, 52 bytes (``TimerLog.UNIT_SIZE``), appended once per scheduled message:

======  ==============  =====  ==============================================================
offset  field           bytes  notes
======  ==============  =====  ==============================================================
0       size            4      always 52; a BLANK (below) pads a segment's end
4       prevPos         8      TimerLog position of the previous unit of the same slot, -1 none
12      magic           4      bit 0 DEFAULT, bit 1 ROLL (re-enqueue, not due yet), bit 2
                               DELETE; valid when ``magic | 0xF == 0xF``
16      writeTimeMs     8      the wheel's write time when the unit was written ("for trace")
24      delayDeltaMs    4      slot time - writeTimeMs (the slot's time, "for check")
28      commitLogOffset 8      the message in the CommitLog (``UNIT_PRE_SIZE_FOR_MSG`` = 28)
36      sizePy          4      its TOTALSIZE
40      topicHash       4      Java ``hashCode`` of REAL_TOPIC (metrics)
44      reserved        8      0
======  ==============  =====  ==============================================================

TimerLog BLANK, 16 bytes (``MIN_BLANK_LEN``): ``size`` (bytes left in the segment), a long 0, and
``BLANK_MAGIC_CODE`` = ``0xBBCCDDEE ^ 1880681586 + 8`` = 0xCBD43194, the CommitLog's BLANK magic.

Wheel slot, 32 bytes (``Slot.SIZE``); the wheel file holds ``2 * slotsTotal`` of them and a time
``t`` lives in slot ``t // precisionMs % (2 * slotsTotal)``:

======  ==========  =====  =====================================================================
offset  field       bytes  notes
======  ==========  =====  =====================================================================
0       timeUnits   8      the slot's time divided by ``precisionMs`` (seconds at 1000 ms); a
                           slot whose value is not ``t // precisionMs`` is empty for ``t``
8       firstPos    8      TimerLog position of the slot's first unit
16      lastPos     8      ... of its last unit: the head of the ``prevPos`` chain
24      num         4      units linked (metrics)
28      magic       4      unused (0)
======  ==========  =====  =====================================================================

``timercheck`` (``TimerCheckpoint``): a 4 KiB file of which the first 56 bytes are used:

======  ======================  =====  =======================================================
offset  field                   bytes  notes
======  ======================  =====  =======================================================
0       lastReadTimeMs          8      every slot before it was delivered
8       lastTimerLogFlushPos    8      the TimerLog is durable (and linked) up to here
16      lastTimerQueueOffset    8      timer-topic queue offset enqueued up to (exclusive)
24      masterTimerQueueOffset  8      the same on a master
32      stateVersion            8      DataVersion (5.x): state version
40      timestamp               8      ... time of the last change
48      counter                 8      ... changes so far
======  ======================  =====  =======================================================
"""

from __future__ import annotations

import mmap
import struct
from typing import NamedTuple, TypeAlias

Buffer: TypeAlias = "bytes | bytearray | memoryview | mmap.mmap"

TIMER_LOG_UNIT = struct.Struct(">iqiqiqiiq")
TIMER_LOG_UNIT_SIZE = 52
UNIT_PRE_SIZE_FOR_MSG = 28
TIMER_LOG_BLANK = struct.Struct(">iqi")
MIN_BLANK_LEN = 16
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194

MAGIC_DEFAULT = 1
MAGIC_ROLL = 1 << 1
MAGIC_DELETE = 1 << 2

SLOT = struct.Struct(">qqqii")
SLOT_SIZE = 32

TIMER_CHECKPOINT = struct.Struct(">qqqqqqq")
TIMER_CHECKPOINT_USED_SIZE = 56
TIMER_CHECKPOINT_FILE_SIZE = 4096


def is_magic_ok(magic: int) -> bool:
    """``TimerMessageStore.isMagicOK``: only the four low bits may be set."""
    return (magic | 0xF) == 0xF


class TimerLogUnit(NamedTuple):
    size: int
    prev_pos: int
    magic: int
    write_time_ms: int
    delay_delta_ms: int
    commit_log_offset: int
    size_py: int
    topic_hash: int
    reserved: int = 0

    @property
    def delayed_time_ms(self) -> int:
        """The time of the slot the unit is linked into."""
        return self.write_time_ms + self.delay_delta_ms

    @property
    def valid(self) -> bool:
        return self.size == TIMER_LOG_UNIT_SIZE and is_magic_ok(self.magic)


def encode_unit(prev_pos: int, magic: int, write_time_ms: int, delayed_time_ms: int,
                commit_log_offset: int, size_py: int, topic_hash: int) -> bytes:
    """One unit; ``delayed_time_ms`` is stored as its distance from ``write_time_ms`` (int32)."""
    return TIMER_LOG_UNIT.pack(TIMER_LOG_UNIT_SIZE, prev_pos, magic, write_time_ms,
                               delayed_time_ms - write_time_ms, commit_log_offset, size_py,
                               topic_hash, 0)


def decode_unit(buf: Buffer, pos: int = 0) -> TimerLogUnit:
    return TimerLogUnit._make(TIMER_LOG_UNIT.unpack_from(buf, pos))


def encode_blank(remaining: int) -> bytes:
    """The BLANK that ends a segment with ``remaining`` bytes left (only its head is written)."""
    return TIMER_LOG_BLANK.pack(remaining, 0, BLANK_MAGIC_CODE)


class Slot(NamedTuple):
    """A wheel slot with its time in ms (``time_ms`` -1: empty)."""

    time_ms: int
    first_pos: int
    last_pos: int
    num: int = 0
    magic: int = 0

    @property
    def empty(self) -> bool:
        return self.time_ms == -1


EMPTY_SLOT = Slot(-1, -1, -1)


def encode_slot(slot: Slot, precision_ms: int) -> bytes:
    return SLOT.pack(slot.time_ms // precision_ms, slot.first_pos, slot.last_pos, slot.num,
                     slot.magic)


def decode_slot(buf: Buffer, pos: int, precision_ms: int) -> Slot:
    units, first, last, num, magic = SLOT.unpack_from(buf, pos)
    return Slot(units * precision_ms, first, last, num, magic)


class TimerCheckpointData(NamedTuple):
    last_read_time_ms: int = 0
    last_timer_log_flush_pos: int = 0
    last_timer_queue_offset: int = 0
    master_timer_queue_offset: int = 0
    state_version: int = 0
    timestamp: int = 0
    counter: int = 0


def encode_checkpoint(cp: TimerCheckpointData) -> bytes:
    return TIMER_CHECKPOINT.pack(*cp)


def decode_checkpoint(buf: Buffer, pos: int = 0) -> TimerCheckpointData:
    return TimerCheckpointData._make(TIMER_CHECKPOINT.unpack_from(buf, pos))
