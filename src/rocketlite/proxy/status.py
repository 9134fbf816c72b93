"""v2 ``Status`` values: ``ok()``, ``status(code, message)``, ``FrontError`` (a refusal the front
decides itself: a bad field, an unknown client) and ``error_status`` mapping the broker's
exceptions to v2 codes with their message (what was wrong, in the client's words).

==================================  ======================================================
broker error                        v2 code
==================================  ======================================================
FlushTimeoutError                   MASTER_PERSISTENCE_TIMEOUT (the Java proxy's for
                                    FLUSH_DISK_TIMEOUT: stored, not yet durable)
DiskFullError, FlushError,          INTERNAL_SERVER_ERROR (the store cannot write)
StoreClosedError
SendForbiddenError,                 FORBIDDEN
NoPermissionError
TopicNotExistError                  TOPIC_NOT_FOUND
TopicError (a bad topic name)       ILLEGAL_TOPIC
MessageIllegalError, BodyError,     BAD_REQUEST
HeaderError
anything else                       INTERNAL_SERVER_ERROR with the error's type and text
==================================  ======================================================
"""

from __future__ import annotations

from rocketlite.broker.send_service import TopicError, TopicNotExistError
from rocketlite.common.errors import (
    BodyError,
    DiskFullError,
    FlushError,
    FlushTimeoutError,
    HeaderError,
    MessageIllegalError,
    NoPermissionError,
    StoreClosedError,
)
from rocketlite.proxy.pb import definition_pb2 as pb

Code = pb.Code

# The broker's errors, most specific first; anything else is INTERNAL_SERVER_ERROR.
ERROR_CODES: list[tuple[type[BaseException], int]] = [
    (FlushTimeoutError, Code.MASTER_PERSISTENCE_TIMEOUT),
    (DiskFullError, Code.INTERNAL_SERVER_ERROR),
    (FlushError, Code.INTERNAL_SERVER_ERROR),
    (StoreClosedError, Code.INTERNAL_SERVER_ERROR),
    (NoPermissionError, Code.FORBIDDEN),
    (TopicNotExistError, Code.TOPIC_NOT_FOUND),
    (TopicError, Code.ILLEGAL_TOPIC),
    (MessageIllegalError, Code.BAD_REQUEST),
    (BodyError, Code.BAD_REQUEST),
    (HeaderError, Code.BAD_REQUEST),
]

_OK = pb.Status(code=Code.OK, message="OK")


class FrontError(Exception):
    """A request the front refuses with ``code``; the message says what was wrong."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code

    def status(self) -> pb.Status:
        return status(self.code, str(self))


def ok() -> pb.Status:
    return _OK


def status(code: int, message: str) -> pb.Status:
    return pb.Status(code=code, message=message)  # type: ignore[arg-type]


def error_status(e: BaseException) -> pb.Status:
    """The v2 status for a refusal or a broker error: ``FrontError``'s own code, else the first
    matching entry of ``ERROR_CODES``."""
    if isinstance(e, FrontError):
        return e.status()
    for kind, code in ERROR_CODES:
        if isinstance(e, kind):
            return status(code, str(e))
    return status(Code.INTERNAL_SERVER_ERROR, f"{type(e).__name__}: {e}")
