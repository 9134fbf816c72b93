"""``<storeRoot>/epochFileCheckpoint`` on disk: the master epochs this replica's CommitLog was
written in (layout and truncation rule: ``formats/epoch_file.py``).

Every change rewrites the whole file through ``atomic_write_bytes`` (temp file, fsync, rename;
the previous version kept as ``.bak``), so a crash leaves the old or the new list. A corrupt
current file is an ``EpochFileError``, not a silent fall-back to ``.bak``: the backup lacks the
latest epoch, and a wrong list would truncate the log at the wrong place.
"""

from __future__ import annotations

from pathlib import Path

from rocketlite.formats import epoch_file as fmt
from rocketlite.formats.epoch_file import EpochEntry
from rocketlite.store.store_files import atomic_write_bytes


def _is_valid(data: bytes) -> bool:
    try:
        fmt.decode(data)
    except fmt.EpochFileError:
        return False
    return True


class EpochFile:
    """The epoch entries of the store at ``root``, read at construction (none if no file)."""

    def __init__(self, root: Path) -> None:
        self.path = Path(root) / fmt.FILE_NAME
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            self._entries: list[EpochEntry] = []
        else:
            self._entries = fmt.decode(data, where=str(self.path))

    def entries(self, max_offset: int = fmt.NO_END) -> list[EpochEntry]:
        """The entries, the last one ending at ``max_offset`` (the store's max offset)."""
        return fmt.with_ends(self._entries, max_offset)

    @property
    def last_epoch(self) -> int:
        """The newest epoch, -1 with no entry."""
        return self._entries[-1].epoch if self._entries else -1

    def begin_epoch(self, epoch: int, start_offset: int) -> None:
        """Record that from ``start_offset`` (this store's max offset when it became master of
        ``epoch``) the log is written in ``epoch``. Entries starting at or after
        ``start_offset`` (epochs in which this log got no bytes) or with an epoch not below
        ``epoch`` are dropped first (Java's ``changeToMaster``); an epoch below the last one is
        refused: this store has already seen a newer master."""
        if epoch < self.last_epoch:
            raise fmt.EpochFileError(
                f"{self.path}: epoch {epoch} is older than the last one here, {self.last_epoch}"
            )
        kept = [e for e in self._entries if e.start_offset < start_offset and e.epoch < epoch]
        entry = EpochEntry(epoch, start_offset)
        fmt.check_append(kept, entry)
        self._write([*kept, entry])

    def replace(self, entries: list[EpochEntry]) -> None:
        """Make ``entries`` the list (a slave taking its master's entries for what it copied)."""
        checked: list[EpochEntry] = []
        for e in entries:
            fmt.check_append(checked, e)
            checked.append(e)
        self._write(checked)

    def truncate_from_offset(self, offset: int) -> None:
        """Drop the entries starting at or after ``offset`` (the log was truncated there;
        Java's ``truncateSuffixByOffset``)."""
        kept = [e for e in self._entries if e.start_offset < offset]
        if len(kept) != len(self._entries):
            self._write(kept)

    def find_common_point(self, other: list[EpochEntry], max_offset: int) -> int:
        """Where this store must truncate to agree with ``other`` (the new master's entries,
        with ends): -1 when they share no epoch. ``max_offset`` is this store's max offset."""
        return fmt.find_common_point(self.entries(max_offset), other)

    def _write(self, entries: list[EpochEntry]) -> None:
        atomic_write_bytes(self.path, fmt.encode(entries), is_valid=_is_valid)
        self._entries = [EpochEntry(e.epoch, e.start_offset) for e in entries]
