"""v2 ``Status`` values: ``ok()``, ``status(code, message)``, and ``error_status`` mapping the
broker's exceptions to v2 codes with their message (what was wrong, in the client's words)."""

from __future__ import annotations

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
    (FlushTimeoutError, Code.REQUEST_TIMEOUT),
    (DiskFullError, Code.INTERNAL_SERVER_ERROR),
    (FlushError, Code.INTERNAL_SERVER_ERROR),
    (StoreClosedError, Code.INTERNAL_SERVER_ERROR),
    (NoPermissionError, Code.FORBIDDEN),
    (MessageIllegalError, Code.BAD_REQUEST),
    (BodyError, Code.BAD_REQUEST),
    (HeaderError, Code.BAD_REQUEST),
]

_OK = pb.Status(code=Code.OK, message="OK")


def ok() -> pb.Status:
    return _OK


def status(code: int, message: str) -> pb.Status:
    return pb.Status(code=code, message=message)  # type: ignore[arg-type]


def error_status(e: BaseException) -> pb.Status:
    """The v2 status for a broker error: the first matching entry of ``ERROR_CODES``."""
    for kind, code in ERROR_CODES:
        if isinstance(e, kind):
            return status(code, str(e))
    return status(Code.INTERNAL_SERVER_ERROR, f"{type(e).__name__}: {e}")
