"""EndTransaction: a 5.x producer's commit or rollback of a half message, through the broker's
END_TRANSACTION decision core (``broker.transaction.end.EndTransactionProcessor.decide``), so
both transports resolve half messages the same way (final message through the diverters, op
record, one append per loop iteration, resolutions remembered across a restart).

The request names the half message by ``transaction_id``: the offset message id of the half
record (SendMessage answers it; an orphaned transaction check names the re-put copy's), which
gives its CommitLog offset whatever happened since (a restart included). The record there must be
a half message of producer group = the request's topic (the group SendMessage stores, the Java
proxy's rule) carrying ``message_id`` as its UNIQ_KEY. A transaction id that is not an offset
message id, or names no such half message, is INVALID_TRANSACTION_ID with the reason.
``resolution`` COMMIT or ROLLBACK; TRANSACTION_RESOLUTION_UNSPECIFIED (the client does not know
yet) is answered OK and changes nothing: the check asks again later. ``source`` (client or server
check) is only logged.

=======================  =========================
``EndResult``            v2 code
=======================  =========================
OK                       OK
NOT_PREPARED             INVALID_TRANSACTION_ID
ILLEGAL                  BAD_REQUEST
UNAVAILABLE, FAILED      INTERNAL_SERVER_ERROR
SLAVE                    HA_NOT_AVAILABLE
=======================  =========================
"""

from __future__ import annotations

import asyncio
import logging

from rocketlite.broker.transaction.end import EndRequest, EndResult
from rocketlite.common.errors import FormatError
from rocketlite.formats.message_id import decode_message_id
from rocketlite.proxy import validate
from rocketlite.proxy.context import FrontContext, ServicerContext
from rocketlite.proxy.pb import definition_pb2 as pb
from rocketlite.proxy.pb import service_pb2 as spb
from rocketlite.proxy.status import Code, FrontError, error_status, ok, status

log = logging.getLogger(__name__)

CODES = {
    EndResult.OK: Code.OK, EndResult.NOT_PREPARED: Code.INVALID_TRANSACTION_ID,
    EndResult.ILLEGAL: Code.BAD_REQUEST, EndResult.UNAVAILABLE: Code.INTERNAL_SERVER_ERROR,
    EndResult.FAILED: Code.INTERNAL_SERVER_ERROR, EndResult.SLAVE: Code.HA_NOT_AVAILABLE,
}


def half_offset(transaction_id: str) -> int:
    """The half record's CommitLog offset named by a transaction id; ``FrontError`` if none."""
    try:
        _host, _port, offset = decode_message_id(transaction_id)
    except FormatError:
        raise FrontError(Code.INVALID_TRANSACTION_ID,
                         f"the transaction id {transaction_id[:80]!r} is not one this broker "
                         "gave (an offset message id)") from None
    return offset


def _status(result: EndResult, remark: str | None) -> pb.Status:
    return ok() if result is EndResult.OK else status(CODES[result], remark or result.value)


async def end_transaction(
    ctx: FrontContext, request: spb.EndTransactionRequest, context: ServicerContext,
) -> spb.EndTransactionResponse:
    try:
        topic = validate.topic_name(request.topic, ctx.broker.config)
        if not request.message_id.strip():
            raise FrontError(Code.ILLEGAL_MESSAGE_ID, "the message id is empty")
        offset = half_offset(request.transaction_id)
        resolution = request.resolution
        if resolution not in (pb.TransactionResolution.COMMIT, pb.TransactionResolution.ROLLBACK):
            log.warning("client answered transaction %s of message %s as unknown; it will be "
                        "checked again", request.transaction_id, request.message_id)
            return spb.EndTransactionResponse(status=ok())
        loop = asyncio.get_running_loop()
        done: asyncio.Future[tuple[EndResult, str | None]] = loop.create_future()

        def answer(result: EndResult, remark: str | None) -> None:
            if not done.done():
                done.set_result((result, remark))

        now = ctx.broker.transactions.end.decide(EndRequest(
            topic, offset, resolution == pb.TransactionResolution.COMMIT,
            message_id=request.message_id), answer)
        result, remark = now if now is not None else await done
        return spb.EndTransactionResponse(status=_status(result, remark))
    except Exception as e:  # noqa: BLE001 - every failure is answered with its status
        return spb.EndTransactionResponse(status=error_status(e))
