"""The epoch file of a replica's store, ``<storeRoot>/epochFileCheckpoint`` (RocketMQ 5's
``EpochFileCache`` written through ``CheckpointFile``), and the truncation rule it serves.

Each election gives the group a master epoch; the master that takes it appends
``(epoch, startOffset)``: from ``startOffset`` on, the CommitLog was written under that epoch.
An entry's end offset is the next entry's start; the last one's is the store's max offset.

Text layout (UTF-8, ``\\n`` line ends, as Java's ``System.lineSeparator()`` on Linux)::

    <number of entries>
    <crc32 of the entry lines>      (zlib CRC32 & 0x7FFFFFFF, Java's UtilAll.crc32; 0 = unchecked)
    <epoch>-<startOffset>           (one line an entry, epochs ascending)
    ...

A returning old master compares its entries with the new master's (``find_common_point``): the
last epoch both have with the same start offset is where their logs agree, up to the smaller of
the two end offsets of that epoch; the old master truncates its CommitLog there.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from rocketlite.common.errors import FormatError

FILE_NAME = "epochFileCheckpoint"
NO_END = (1 << 63) - 1  # Java's Long.MAX_VALUE: the last entry's end while it is unknown


class EpochFileError(FormatError):
    """An epoch file that does not follow the layout: wrong count, CRC or entry line."""


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """From ``start_offset`` up to ``end_offset`` (exclusive) the log was written in ``epoch``."""

    epoch: int
    start_offset: int
    end_offset: int = NO_END


def _crc32(data: bytes) -> int:
    return zlib.crc32(data) & 0x7FFFFFFF


def check_append(entries: Sequence[EpochEntry], entry: EpochEntry) -> None:
    """Refuse an entry whose epoch or start offset is not above the last one's (Java's
    ``appendEntry`` returns false there): epochs only grow, and so do their starts."""
    if entries:
        last = entries[-1]
        if entry.epoch <= last.epoch or entry.start_offset <= last.start_offset:
            raise EpochFileError(
                f"epoch entry {entry.epoch}-{entry.start_offset} does not follow the last one "
                f"{last.epoch}-{last.start_offset}: epoch and start offset must both grow"
            )
    if entry.epoch < 0 or entry.start_offset < 0:
        raise EpochFileError(f"negative epoch or offset: {entry.epoch}-{entry.start_offset}")


def with_ends(entries: Sequence[EpochEntry], last_end: int = NO_END) -> list[EpochEntry]:
    """The entries with each end offset set to the next entry's start and the last one's to
    ``last_end`` (the store's max offset when known)."""
    out = []
    for i, e in enumerate(entries):
        end = entries[i + 1].start_offset if i + 1 < len(entries) else last_end
        out.append(EpochEntry(e.epoch, e.start_offset, end))
    return out


def encode(entries: Sequence[EpochEntry]) -> bytes:
    """The file's bytes for ``entries`` (in order; end offsets are not stored)."""
    body = "".join(f"{e.epoch}-{e.start_offset}\n" for e in entries).encode()
    return f"{len(entries)}\n{_crc32(body)}\n".encode() + body


def decode(data: bytes, where: str = "epoch file") -> list[EpochEntry]:
    """Parse an epoch file; ``EpochFileError`` naming ``where`` if it is corrupt. End offsets
    come from the following entry (the last one's is ``NO_END``)."""
    try:
        text = data.decode()
    except UnicodeDecodeError as e:
        raise EpochFileError(f"{where}: not UTF-8 text ({e})") from None
    lines = text.split("\n")
    if len(lines) < 3 or lines[-1] != "":
        raise EpochFileError(f"{where}: truncated (needs a count line, a CRC line, entry lines)")
    try:
        expected_count = int(lines[0])
        expected_crc = int(lines[1])
    except ValueError:
        raise EpochFileError(f"{where}: count or CRC line is not a number: {lines[:2]!r}") from None
    entry_lines = lines[2:-1]
    entries: list[EpochEntry] = []
    for n, line in enumerate(entry_lines, start=3):
        epoch_s, sep, start_s = line.partition("-")
        if not sep or not epoch_s.isdigit() or not start_s.isdigit():
            raise EpochFileError(f"{where}: line {n} is not <epoch>-<startOffset>: {line!r}")
        entry = EpochEntry(int(epoch_s), int(start_s))
        try:
            check_append(entries, entry)
        except EpochFileError as e:
            raise EpochFileError(f"{where}: line {n}: {e}") from None
        entries.append(entry)
    if len(entries) != expected_count:
        raise EpochFileError(f"{where}: expected {expected_count} entries, found {len(entries)}")
    body = "".join(line + "\n" for line in entry_lines).encode()
    if expected_crc != 0 and _crc32(body) != expected_crc:
        raise EpochFileError(f"{where}: CRC {_crc32(body)} of the entries, the file says {expected_crc}")
    return with_ends(entries)


def find_common_point(local: Sequence[EpochEntry], other: Sequence[EpochEntry]) -> int:
    """The offset up to which ``local``'s log agrees with ``other``'s, or -1 if they share no
    epoch (Java's ``EpochFileCache.findConsistentPoint``).

    Walk ``local`` from its last epoch down; the first epoch ``other`` also has, started at the
    same offset, is the last one both logs were written in: they agree up to the smaller of its
    two end offsets. Give entries their ends first (``with_ends`` with each store's max offset)."""
    by_epoch = {e.epoch: e for e in other}
    for mine in reversed(local):
        theirs = by_epoch.get(mine.epoch)
        if theirs is not None and theirs.start_offset == mine.start_offset:
            return min(mine.end_offset, theirs.end_offset)
    return -1
