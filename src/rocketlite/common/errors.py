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


class MessageTooLargeError(MessageIllegalError):
    """A message body above ``maxMessageSize`` (counted as the ``message_size`` limit)."""


class StoreLockedError(StoreError):
    """Another process holds the store's lock file."""


class StoreClosedError(StoreError):
    """The store was shut down."""


class SlaveModeError(StoreClosedError):
    """A write to a slave's store (``brokerRole=SLAVE``): sends go to the master. A
    ``StoreClosedError``, so every path that answers a store that takes no writes answers it
    SERVICE_NOT_AVAILABLE too (Java's DefaultMessageStore: "message store is slave mode")."""


class DiskFullError(StoreError):
    """Disk use passed the threshold above which the store refuses writes."""


class FlushTimeoutError(StoreError):
    """A SYNC_FLUSH writer waited longer than syncFlushTimeout for its flush."""


class FlushError(StoreError):
    """An fsync or write to disk failed; the data it covered may not be durable."""


class ConfigError(RocketliteError):
    """A configuration key with a value that cannot be used."""


class NoPermissionError(RocketliteError):
    """A request the broker's configuration forbids (answered NO_PERMISSION), such as a prepared
    transactional message on a broker with ``rejectTransactionMessage``."""


class RemotingError(RocketliteError):
    """A Remoting connection failed or closed while a request waited."""


class RemotingTimeoutError(RemotingError):
    """No response arrived within the request's timeout."""


class HeaderError(FormatError):
    """A custom header (a command's ext fields) with a required field missing or a value of the wrong
    type. ``field`` is the wire key, ``value`` the offending value (None when missing)."""

    def __init__(self, message: str, *, field: str | None = None, value: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.value = value


class BodyError(FormatError):
    """A command body (JSON, compressed RegisterBrokerBody, message batch) that cannot be decoded."""


class ProtocolError(FormatError):
    """A Remoting frame that breaks the wire format.

    ``opaque`` is set only when the frame was well delimited (the stream can go on) and its header
    showed a two-way request with a readable opaque: a server should then answer with SYSTEM_ERROR and
    that opaque instead of closing. It stays None for responses and oneway requests (nobody waits for
    an answer, and a response to a response could complete an unrelated request of the peer)."""

    def __init__(self, message: str, *, opaque: int | None = None) -> None:
        super().__init__(message)
        self.opaque = opaque


class FrameTooLargeError(ProtocolError):
    """A frame's length field exceeds the maximum frame size; the stream cannot be used any more."""


class HeaderTooLargeError(ProtocolError):
    """A frame whose header length is above the decoder's ``max_header`` (``maxHeaderBytes``): the
    frame is skipped undecoded, so there is no opaque to answer (a server closes)."""
