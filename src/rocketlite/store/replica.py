"""What a slave's store does with its master's CommitLog bytes (4.x HA, ``broker/ha``): the
network-free half of replication.

A master sends raw CommitLog bytes cut wherever its batch size falls, so a slave's log may end
inside a record until the next frame arrives. ``whole_end`` walks the record heads from where
it stopped to the end of the last whole record: the dispatcher of a slave goes no further
(a torn tail is not corruption here, only bytes still on their way), and the store timestamp of
that record is the CommitLog's for the checkpoint.

``truncate`` cuts a diverged slave's log (it holds bytes its master never had) back to an
offset with the recovery machinery: the CommitLog's tail zeroed and later segments deleted, the
ConsumeQueues' units past the cut dropped, the index files holding entries past it dropped, and
dispatch restarted from the lowest point any of them may now miss.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from rocketlite.formats import message_record as rec
from rocketlite.store.commitlog import CommitLog
from rocketlite.store.consume_queue import ConsumeQueue
from rocketlite.store.dispatcher import Dispatcher
from rocketlite.store.index_service import IndexService

log = logging.getLogger(__name__)


def whole_end(cl: CommitLog, start: int) -> tuple[int, int]:
    """``(end, store timestamp)``: the end of the last whole record at or after ``start`` (which
    must be a record boundary) within what is readable, and the store timestamp of that record
    (0 if none was passed). A BLANK record moves to the next segment's start."""
    pos, ts = start, 0
    files = cl.files
    while True:
        mf = files.find(pos)
        if mf is None:
            return pos, ts
        base = mf.file_from_offset
        p, limit, mm = pos - base, mf.committed, mf.mm
        while limit - p >= 8:
            size, magic = rec.TOTALSIZE_MAGIC.unpack_from(mm, p)
            if magic == rec.BLANK_MAGIC:
                p = mf.file_size
                break
            if size < rec.FIXED_SIZE_V4 or p + size > limit:
                if size < rec.FIXED_SIZE_V4 or magic not in (rec.MAGIC_V1, rec.MAGIC_V2):
                    log.error("replica: CommitLog offset %d holds no record head", base + p)
                break
            ts = rec.read_store_timestamp(mm, p)
            p += size
        if p < mf.file_size or mf.committed < mf.file_size:
            return base + p, ts
        pos = base + mf.file_size


def truncate(cl: CommitLog, queues: Iterable[ConsumeQueue], index: IndexService | None,
             dispatcher: Dispatcher, offset: int) -> None:
    """Cut the CommitLog, ConsumeQueues and index back to ``offset`` (call holding the
    dispatcher's lock, so no round runs meanwhile) and move dispatch back where needed."""
    if offset >= cl.max_offset:
        return
    log.warning("replica: truncating the CommitLog from %d to %d (the master's log diverged)",
                cl.max_offset, offset)
    with cl.lock:
        cl.files.truncate_dirty(offset)
        cl.files.drop_ahead()
        cl.dispatch_hints.clear()
    redispatch = offset
    for cq in queues:
        cq.truncate_dirty(offset)
        cl.topic_queue_table[(cq.topic, cq.queue_id)] = cq.max_offset
    if index is not None:
        rebuild_from = index.truncate(offset)
        if rebuild_from is not None:
            redispatch = min(redispatch, rebuild_from)
    dispatcher.dispatch_from = max(min(dispatcher.dispatch_from, redispatch), cl.min_offset)

