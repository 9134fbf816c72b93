"""Storing the messages a broker service writes itself (timer and delay-level deliveries): the
caller is a service thread that must not lose a due message, so a put the store refuses for a
while (disk full, a failed flush, a store closing) is retried until the service stops; a message
the store calls illegal is dropped (logged: retrying cannot fix it, and it must not block the
messages behind it); under SYNC_FLUSH the put waits for the group commit covering it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from rocketlite.common.errors import (
    DiskFullError,
    FlushError,
    FlushTimeoutError,
    MessageIllegalError,
    StoreClosedError,
)
from rocketlite.store.flush import FlushService
from rocketlite.store.message import MessageToStore
from rocketlite.store.message_store import MessageStore

log = logging.getLogger(__name__)

RETRY_S = 0.5  # pause before retrying a put the store refused (disk full, flush failure)


def put_until_stored(store: MessageStore, msgs: Sequence[MessageToStore], stop: threading.Event,
                     what: str) -> tuple[bool, int]:
    """Store ``msgs``; returns (False only if ``stop`` was set first, how many were dropped as
    illegal). ``what`` names the messages in the log lines."""
    while True:
        try:
            put = store.put_messages(msgs)
        except MessageIllegalError as e:
            if len(msgs) > 1:  # find the culprit(s): one at a time
                dropped = 0
                for m in msgs:
                    ok, n = put_until_stored(store, (m,), stop, what)
                    dropped += n
                    if not ok:
                        return False, dropped
                return True, dropped
            log.error("%s for %s refused by the store, dropped: %s", what, msgs[0].topic, e)
            return True, 1
        except (DiskFullError, FlushError, StoreClosedError) as e:
            log.warning("%s delivery waits: %s", what, e)
            if stop.wait(RETRY_S):
                return False, 0
            continue
        if put.flushed is not None:
            try:
                FlushService.wait(put.flushed, store.config.sync_flush_timeout)
            except (FlushError, FlushTimeoutError) as e:
                log.warning("%s stored but not confirmed durable: %s", what, e)
        return True, 0
