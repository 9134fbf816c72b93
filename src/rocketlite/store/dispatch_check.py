"""What dispatch must have written for one CommitLog record: its ConsumeQueue unit and index keys.

The dispatcher (``store/dispatcher.py``) applies these rules on its hot path, reading properties
as bytes; checkers (``rocketlite store verify`` and the Spark verify job) recompute the same
outcome from a decoded record and compare it with what the files hold. Keeping the rules here,
pure, means both checkers agree with each other and can be read against the dispatcher in one
place:

* **ConsumeQueue unit** ``(commit_log_offset, size, tags_code)`` at the record's own
  ``(topic, queue_id, queue_offset)``, unless the record is a *prepared* or *rolled back*
  transaction half (Java's ``CommitLogDispatcherBuildConsumeQueue``: only NOT_TYPE and COMMIT
  records reach a queue), or its topic or queue id cannot name a queue directory (a record the
  store did not write itself: it stays in the CommitLog, readable by offset, and is indexed).
* **tags code**: Java's ``tags.hashCode()`` (0 without TAGS); for ``SCHEDULE_TOPIC_XXXX`` the
  deliver time ``storeTimestamp + delay of its DELAY level`` instead
  (``CommitLog.checkMessageAndReturnSize``), so the schedule service scans a level by tag code.
* **index keys**: ``topic#key`` for the UNIQ_KEY and each space-separated KEYS entry, stripped,
  empty ones dropped, repeats once (``IndexService.build``); every record but a rolled-back one
  is indexed (Java's ``IndexService.buildIndex`` returns early only for ROLLBACK_TYPE, so a
  prepared half is findable by key).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rocketlite.formats import message_record as rec
from rocketlite.formats.delay import SCHEDULE_TOPIC, schedule_tags_code
from rocketlite.formats.javahash import index_key_hash, tags_code
from rocketlite.formats.properties import DELAY, KEY_SEPARATOR, KEYS, TAGS, UNIQ_KEY
from rocketlite.store.commitlog import QUEUE_ID_MAX, TOPIC_PATTERN
from rocketlite.store.index_service import index_key

_NO_QUEUE = (rec.SYSFLAG_TRANSACTION_PREPARED, rec.SYSFLAG_TRANSACTION_ROLLBACK)


def dispatches_unit(sys_flag: int) -> bool:
    """True if a record with this SYSFLAG gets a ConsumeQueue unit."""
    return sys_flag & rec.SYSFLAG_TRANSACTION_MASK not in _NO_QUEUE


def names_queue(topic: str, queue_id: int) -> bool:
    """True if ``consumequeue/{topic}/{queue_id}`` is a queue the store would create: the topic
    in the characters the store accepts, the queue id in its range."""
    return TOPIC_PATTERN.fullmatch(topic) is not None and 0 <= queue_id <= QUEUE_ID_MAX


def is_indexed(sys_flag: int) -> bool:
    """True if a record with this SYSFLAG gets index entries (all but rolled-back halves)."""
    return sys_flag & rec.SYSFLAG_TRANSACTION_MASK != rec.SYSFLAG_TRANSACTION_ROLLBACK


def expected_tags_code(topic: str, props: Mapping[str, str], store_timestamp: int,
                       delay_levels_ms: Sequence[int]) -> int:
    """The tags code of the record's ConsumeQueue unit."""
    if topic == SCHEDULE_TOPIC:
        code = schedule_tags_code(props.get(DELAY), store_timestamp, delay_levels_ms)
        if code is not None:
            return code
    return tags_code(props.get(TAGS))


def expected_unit_tags_code(topic: str, queue_id: int, sys_flag: int, props: Mapping[str, str],
                            store_timestamp: int, delay_levels_ms: Sequence[int]) -> int | None:
    """The tags code of the record's unit, or None when the record gets no unit."""
    if not dispatches_unit(sys_flag) or not names_queue(topic, queue_id):
        return None
    return expected_tags_code(topic, props, store_timestamp, delay_levels_ms)


def index_keys(topic: str, sys_flag: int, props: Mapping[str, str]) -> list[str]:
    """The ``topic#key`` strings dispatch indexes for this record, in the order it writes them."""
    if not is_indexed(sys_flag):
        return []
    uniq = props.get(UNIQ_KEY)
    wanted = [uniq.strip()] if uniq else []
    keys = props.get(KEYS)
    if keys:
        wanted.extend(k.strip() for k in keys.split(KEY_SEPARATOR))
    return [index_key(topic, k) for k in dict.fromkeys(wanted) if k]


def index_hashes(full_keys: Sequence[str]) -> list[int]:
    """The IndexFile ``keyHash`` of each ``topic#key``."""
    return [index_key_hash(k) for k in full_keys]
