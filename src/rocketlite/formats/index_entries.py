"""Writing IndexFile entries in batches: the keys of a run of messages (``key_entries``) and the
hash slots and chained entries of many keys in one call (``put_entries``), for
``IndexService.build_many`` and ``IndexFile.put_many``. The layout is ``index_layout``'s; the pure
function here is the reference, and ``_index_c.pyx`` its compiled twin with the same signature and
the same results (``tests/unit/native/test_index_twin.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeAlias

from rocketlite.common import native
from rocketlite.formats.index_layout import (
    INDEX_ENTRY,
    INDEX_ENTRY_SIZE,
    INDEX_SLOT,
    entry_position,
    slot_position,
)
from rocketlite.formats.properties import find_property

if TYPE_CHECKING:
    import mmap

MAX_TIME_DIFF = 0x7FFFFFFF


def _put_entries_py(buf: bytearray | mmap.mmap, hash_slot_num: int, index_count: int,
                    hash_slot_count: int, begin_timestamp: int, key_hashes: Sequence[int],
                    phy_offsets: Sequence[int], timestamps: Sequence[int]) -> tuple[int, int]:
    """Write one entry per key from entry number ``index_count`` on (the caller makes sure they
    fit), each linked to the newest entry of its slot, and point the slots at them, as
    ``IndexFile.put`` does one at a time. ``begin_timestamp`` is the header's (already set from
    the first entry of a new file): times are stored as whole seconds since it. Returns the new
    ``(indexCount, hashSlotCount)``; the header is the caller's to write."""
    entries_at = entry_position(0, hash_slot_num)
    n = index_count
    for key_hash, phy, ts in zip(key_hashes, phy_offsets, timestamps, strict=True):
        slot_at = slot_position(key_hash, hash_slot_num)
        prev: int = INDEX_SLOT.unpack_from(buf, slot_at)[0]
        if prev < 0 or prev >= n:
            prev = 0  # a garbage slot (torn write): start a fresh chain
        if prev == 0:
            hash_slot_count += 1
        diff = 0 if begin_timestamp <= 0 else min(max((ts - begin_timestamp) // 1000, 0),
                                                  MAX_TIME_DIFF)
        INDEX_ENTRY.pack_into(buf, entries_at + n * INDEX_ENTRY_SIZE, key_hash, phy, diff, prev)
        INDEX_SLOT.pack_into(buf, slot_at, n)
        n += 1
    return n, hash_slot_count


_KEYS = b"KEYS\x01"
_UNIQ = b"UNIQ_KEY\x01"

KeyEntries: TypeAlias = tuple[list[str], list[int], list[int], int]


def message_keys(topic: str, props: bytes) -> list[str]:
    """The index keys of one message: ``topic#k`` for its UNIQ_KEY, then each KEYS entry (split
    on spaces), stripped, empty and repeated ones left out."""
    keys = find_property(props, _KEYS)
    uniq = find_property(props, _UNIQ)
    wanted = [uniq.strip()] if uniq else []
    if keys:
        wanted.extend(k.strip() for k in keys.split(" "))
    return [f"{topic}#{k}" for k in dict.fromkeys(wanted) if k]


def _key_entries_py(topics: Sequence[str], props: Sequence[bytes], phy_offsets: Sequence[int],
                    timestamps: Sequence[int], done: int) -> KeyEntries:
    """The index entries of a run of messages in CommitLog order: ``(keys, phy_offsets,
    timestamps, done)``, one row per key (``message_keys``); a message at or below ``done``
    (the newest index file's ``endPhyOffset``) is left out as indexed before, and ``done``
    comes back moved to the last message that has keys."""
    keys: list[str] = []
    phys: list[int] = []
    stamps: list[int] = []
    for topic, p, phy, ts in zip(topics, props, phy_offsets, timestamps, strict=True):
        if phy <= done:
            continue
        fk = message_keys(topic, p)
        if fk:
            keys += fk
            phys += [phy] * len(fk)
            stamps += [ts] * len(fk)
            done = phy
    return keys, phys, stamps, done


put_entries: Callable[..., tuple[int, int]] = _put_entries_py
key_entries: Callable[[Sequence[str], Sequence[bytes], Sequence[int], Sequence[int], int],
                      KeyEntries] = _key_entries_py
_c = native.load("rocketlite.formats._index_c")
if _c is not None:
    put_entries = _c.put_entries
    key_entries = _c.key_entries
