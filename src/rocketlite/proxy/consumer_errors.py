"""The POP path's errors (``broker.pop.errors``) as v2 codes, the Java proxy's answers:

=====================  =======================================================================
error                  code
=====================  =======================================================================
InvalidReceiptHandle   INVALID_RECEIPT_HANDLE (a handle that does not parse or names another
                       topic/queue)
ReceiptHandleExpired   INVALID_RECEIPT_HANDLE, "receipt handle is expired" (the proxy's
                       ``ConsumerProcessor`` refuses an expired handle so)
GroupNotFound          CONSUMER_GROUP_NOT_FOUND
TopicNotFound          TOPIC_NOT_FOUND
NoPermission           FORBIDDEN
BadPopRequest          BAD_REQUEST
PollingFull            TOO_MANY_REQUESTS (a pop answers it as ``PopStatus.POLLING_FULL``, which
                       ReceiveMessage answers so too)
=====================  =======================================================================

Anything else goes to ``consume_checks.answer`` (``FrontError`` as raised, the store's errors by
``status.error_status``).
"""

from __future__ import annotations

from rocketlite.broker.pop import errors as pop_errors
from rocketlite.proxy import consume_checks
from rocketlite.proxy.pb import definition_pb2 as pb
from rocketlite.proxy.status import Code, status

POP_ERROR_CODES: list[tuple[str, int]] = [
    ("InvalidReceiptHandle", Code.INVALID_RECEIPT_HANDLE),
    ("ReceiptHandleExpired", Code.INVALID_RECEIPT_HANDLE),
    ("GroupNotFound", Code.CONSUMER_GROUP_NOT_FOUND),
    ("TopicNotFound", Code.TOPIC_NOT_FOUND),
    ("NoPermission", Code.FORBIDDEN),
    ("BadPopRequest", Code.BAD_REQUEST),
    ("PollingFull", Code.TOO_MANY_REQUESTS),
]
_CODES: list[tuple[type[BaseException], int]] = [
    (getattr(pop_errors, name), code) for name, code in POP_ERROR_CODES]


def pop_status(e: BaseException, rpc: str) -> pb.Status:
    """The v2 status of what stopped ``rpc``."""
    for kind, code in _CODES:
        if isinstance(e, kind):
            text = str(e) or type(e).__name__
            if isinstance(e, pop_errors.ReceiptHandleExpired):
                text = f"receipt handle is expired: {text}"
            return status(code, text)
    return consume_checks.answer(e, rpc)
