"""What the store-file fuzzer found, each minimised to the damage that caused it, with the store's
answer now (``storefuzz`` builds the store and the ground truth).

1. A pull served whatever bytes a ConsumeQueue unit pointed at: a damaged unit (another
   record's offset, a wrong size) served another message, or half of one, as this one.
2. A record damaged in a segment that recovery does not re-verify (after a clean stop only the
   last three are) was served by pulls and look-ups: body bits flipped, a wrong magic code.
3. A record whose QUEUEOFFSET field (outside the body CRC) was flipped high survived a crash
   recovery; re-dispatch then created every ConsumeQueue segment up to it (here: until the
   process ran out of file descriptors; with 6 MB segments, the disk).
4. A damaged record below where re-dispatch restarted (in a segment recovery had not verified)
   stopped dispatch for good: no message sent after the restart ever reached its queue.
5. A start that refused the files (a segment of the wrong size) kept every file it had opened.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

import storefuzz
from rocketlite.common.errors import CorruptRecordError, StoreError
from rocketlite.formats import message_record as rec
from rocketlite.store.message_store import MessageStore
from storehelp import msg, small_config, wait_dispatched


def _open(root: Path, files: dict[str, bytes | None]) -> MessageStore:
    storefuzz.write_files(root, files)
    return MessageStore(small_config(root)).start()


def _queue_records(store: MessageStore, topic: str, qid: int) -> list[rec.MessageRecord]:
    out: list[rec.MessageRecord] = []
    offset = 0
    while offset < store.max_offset_in_queue(topic, qid):
        r = store.get_message(topic, qid, offset, 32)
        pos = 0
        for size in r.sizes:
            m = rec.decode_record(r.body, pos)
            assert m is not None
            out.append(m)
            pos += size
        assert r.next_begin_offset > offset
        offset = r.next_begin_offset
    return out


def _cq_path(topic: str, qid: int) -> str:
    return f"consumequeue/{topic}/{qid}/{0:020d}"


def _same_as_written(p: storefuzz.Pristine, topic: str, qid: int, got: list[rec.MessageRecord]) -> None:
    for m in got:
        w = p.by_queue[topic, qid, m.queue_offset]
        assert (m.topic, m.queue_id, m.body) == (w.topic, w.queue_id, w.body)


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> storefuzz.Pristine:
    return storefuzz.build_pristine(tmp_path_factory.mktemp("clean"), crashed=False)


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> storefuzz.Pristine:
    return storefuzz.build_pristine(tmp_path_factory.mktemp("crashed"), crashed=True)


@pytest.mark.parametrize("damage", ["another unit's offset", "another unit's size"])
def test_a_damaged_consume_queue_unit_is_not_served(clean: storefuzz.Pristine, tmp_path: Path,
                                                    damage: str) -> None:
    topic, qid = "FuzzA", 0
    files: dict[str, bytes | None] = dict(clean.files)
    cq = bytearray(clean.files[_cq_path(topic, qid)])
    field = slice(0, 8) if damage == "another unit's offset" else slice(8, 12)
    cq[field] = cq[20 + field.start : 20 + field.stop]  # unit 0 takes unit 1's field
    files[_cq_path(topic, qid)] = bytes(cq)
    store = _open(tmp_path, files)
    try:
        r = store.get_message(topic, qid, 0, 1)  # unit 0 skipped, unit 1 served
        assert r.queue_offsets == [1] and r.next_begin_offset == 2
        got = _queue_records(store, topic, qid)
        assert [m.queue_offset for m in got] == list(range(1, store.max_offset_in_queue(topic, qid)))
        _same_as_written(clean, topic, qid, got)
    finally:
        store.shutdown()


@pytest.mark.parametrize(("field", "error"), [("body", "CRC"), ("PHYSICALOFFSET", "says it is at")])
def test_a_damaged_record_in_a_segment_recovery_trusts_is_not_served(
        clean: storefuzz.Pristine, tmp_path: Path, field: str, error: str) -> None:
    """(The PHYSICALOFFSET case came with a flipped properties byte, which no check can see: the
    record's offset field is what gives it away.)"""
    w = clean.by_offset[clean.record_starts[3]]
    assert w.end <= 8192 and len(w.body) > 0  # in the first segment, which recovery trusts
    seg = bytearray(clean.files[f"commitlog/{0:020d}"])
    at = w.body_at if field == "body" else w.commit_log_offset + 28
    seg[at] ^= 0x10  # the record's frame still holds
    files: dict[str, bytes | None] = {**clean.files, f"commitlog/{0:020d}": bytes(seg)}
    store = _open(tmp_path, files)
    try:
        r = store.get_message(w.topic, w.queue_id, w.queue_offset, 1)
        assert w.queue_offset not in r.queue_offsets and r.next_begin_offset > w.queue_offset
        with pytest.raises(CorruptRecordError, match=error):
            store.look_message(w.commit_log_offset)
        assert store.look_message_by_id(store.message_id(w.commit_log_offset)) is None
        got = _queue_records(store, w.topic, w.queue_id)
        assert w.queue_offset not in [m.queue_offset for m in got]
        _same_as_written(clean, w.topic, w.queue_id, got)
    finally:
        store.shutdown()


def test_a_queue_offset_flipped_high_is_not_followed_at_recovery(crashed: storefuzz.Pristine,
                                                                  tmp_path: Path) -> None:
    last = crashed.by_offset[crashed.record_starts[-1]]
    base = last.commit_log_offset - last.commit_log_offset % 8192
    name = f"commitlog/{base:020d}"
    seg = bytearray(crashed.files[name])
    at = last.commit_log_offset - base + 20  # QUEUEOFFSET
    struct.pack_into(">q", seg, at, struct.unpack_from(">q", seg, at)[0] | 1 << 54)
    files: dict[str, bytes | None] = {**crashed.files, name: bytes(seg)}
    files = {k: v for k, v in files.items() if not k.startswith(f"consumequeue/{last.topic}/")}
    store = _open(tmp_path, files)  # the queues are rebuilt from the CommitLog
    try:
        queue_dir = tmp_path / "consumequeue" / last.topic / str(last.queue_id)
        assert len(os.listdir(queue_dir)) <= 2
        assert store.max_offset_in_queue(last.topic, last.queue_id) == last.queue_offset
        got = _queue_records(store, last.topic, last.queue_id)
        assert len(got) == last.queue_offset
        _same_as_written(crashed, last.topic, last.queue_id, got)
    finally:
        store.shutdown()


def test_a_damaged_record_below_the_redispatch_start_does_not_stop_dispatch(
        clean: storefuzz.Pristine, tmp_path: Path) -> None:
    seg0 = bytearray(clean.files[f"commitlog/{0:020d}"])
    bad = clean.record_starts[2]
    seg0[bad + 4 : bad + 8] = seg0[bad + 6 : bad + 8] + seg0[bad + 4 : bad + 6]  # magic swapped
    seg1 = bytearray(clean.files[f"commitlog/{8192:020d}"])
    seg1[2120:6216] = bytes(4096)  # cuts the valid end: the index is rebuilt from below ``bad``
    files: dict[str, bytes | None] = {**clean.files, f"commitlog/{0:020d}": bytes(seg0),
                                      f"commitlog/{8192:020d}": bytes(seg1)}
    store = _open(tmp_path, files)
    try:
        (r,) = store.put_messages_sync([msg(topic="After", body=b"sent after the restart")])
        wait_dispatched(store)
        (m,) = _queue_records(store, "After", 0)
        assert (m.body, m.commit_log_offset) == (b"sent after the restart", r.commit_log_offset)
    finally:
        store.shutdown()


def _open_under(root: Path) -> list[str]:
    """The files under ``root`` this process holds open. Only those: a count of all its fds
    moves with whatever else the process holds (an earlier test's socket closed by the garbage
    collector made a fresh-clone run see 15 where it had counted 16)."""
    prefix = f"{root.resolve()}{os.sep}"
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed since the listing
            continue
        if target.startswith(prefix):
            held.append(target)
    return sorted(held)


def test_a_refused_start_keeps_no_file_open_and_writes_nothing(clean: storefuzz.Pristine,
                                                                tmp_path: Path) -> None:
    name = f"commitlog/{8192:020d}"
    files: dict[str, bytes | None] = {**clean.files, name: clean.files[name][:5000]}
    storefuzz.write_files(tmp_path, files)
    checkpoint = (tmp_path / "checkpoint").read_bytes()
    assert _open_under(tmp_path) == []
    for _ in range(3):
        with pytest.raises(StoreError, match="5000 bytes but the configured size is 8192"):
            MessageStore(small_config(tmp_path)).start()
        assert _open_under(tmp_path) == []
    assert (tmp_path / "checkpoint").read_bytes() == checkpoint
