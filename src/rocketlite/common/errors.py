"""The exception hierarchy. Every error a caller can act on has its own class."""

from __future__ import annotations


class RocketliteError(Exception):
    """Base of every error raised by rocketlite."""


class FormatError(RocketliteError):
    """Bytes that do not follow a documented layout."""


class CorruptRecordError(FormatError):
    """A CommitLog record whose magic code, size or CRC is wrong."""


class StoreError(RocketliteError):
    """Base of the storage engine's errors."""


class MessageIllegalError(StoreError):
    """A message the store refuses: too large, empty or illegal topic, bad queue id."""


class StoreLockedError(StoreError):
    """Another process holds the store's lock file."""


class StoreClosedError(StoreError):
    """The store was shut down."""


class DiskFullError(StoreError):
    """Disk use passed the threshold above which the store refuses writes."""


class FlushTimeoutError(StoreError):
    """A SYNC_FLUSH writer waited longer than syncFlushTimeout for its flush."""


class FlushError(StoreError):
    """An fsync or write to disk failed; the data it covered may not be durable."""


class ConfigError(RocketliteError):
    """A configuration key with a value that cannot be used."""
