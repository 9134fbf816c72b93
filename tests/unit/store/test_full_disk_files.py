"""A full disk, one file at a time, through a fault-injecting file layer (``rocketlite.store.disk``):
every file the store writes through a mapping has its blocks before a page is touched, a write
that runs out of space leaves nothing half-written, allocation failures refuse writes (before the
current CommitLog segment is full, before the dispatcher is starved) and writes resume once space
returns. The same on real small filesystems: ``tests/integration/test_full_disk_store.py``."""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from diskhelp import QuotaLayer
from rocketlite.cli.store_commands import verify_store
from rocketlite.common.errors import DiskFullError
from rocketlite.store import disk, store_files
from rocketlite.store.checkpoint import StoreCheckpoint
from rocketlite.store.commitlog import CommitLog
from rocketlite.store.index_file import ENTRY_AHEAD, IndexFile
from rocketlite.store.index_service import IndexService
from rocketlite.store.message_store import MessageStore
from rocketlite.store.timer_wheel import TimerWheel
from storehelp import msg, small_config, wait_dispatched

MiB = 1 << 20


class FaultLayer(disk.FileLayer):
    """Fails ``allocate`` when ``fail_allocate(path, offset)`` says so, and lets ``pwrite``
    write at most ``pwrite_budget`` bytes (then ENOSPC) when that is set."""

    def __init__(self) -> None:
        self.fail_allocate: Callable[[str, int], bool] = lambda path, offset: False
        self.pwrite_budget: int | None = None
        self.no_fallocate = False

    def allocate(self, fd: int, offset: int, length: int) -> None:
        if self.no_fallocate:
            raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))
        if self.fail_allocate(os.readlink(f"/proc/self/fd/{fd}"), offset):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        super().allocate(fd, offset, length)

    def pwrite(self, fd: int, data: bytes | bytearray | memoryview, pos: int) -> int:
        if self.pwrite_budget is not None:
            if self.pwrite_budget <= 0:
                self.pwrite_budget = None  # bytes that landed have blocks: they can be rewritten
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            data = memoryview(data)[: self.pwrite_budget]
            self.pwrite_budget -= len(data)
        return super().pwrite(fd, data, pos)


@pytest.fixture
def faults() -> Iterator[FaultLayer]:
    layer = FaultLayer()
    previous = disk.install(layer)
    try:
        yield layer
    finally:
        disk.install(previous)


@pytest.fixture
def quota(tmp_path: Path) -> Iterator[QuotaLayer]:
    layer = QuotaLayer(tmp_path, 64 * MiB)
    previous = disk.install(layer)
    try:
        yield layer
    finally:
        disk.install(previous)


def blocks(path: Path) -> int:
    return os.stat(path).st_blocks * 512


def fill(layer: QuotaLayer, leave: int) -> Path:
    """Take all but ``leave`` bytes of the quota with a file of its own."""
    path = layer.root / "filler"
    with path.open("ab") as f:
        os.posix_fallocate(f.fileno(), 0, max(4096, layer.available() - leave) // 4096 * 4096)
    return path


def wait_for(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


# -- the file layer ------------------------------------------------------------------------


def test_a_write_that_runs_out_of_space_is_zeroed_again(tmp_path: Path, faults: FaultLayer) -> None:
    """A pwrite that lands 4 KiB of a 10,000-byte record and then hits ENOSPC: the 4 KiB are
    zeroed again, so recovery never reads half a record; the error names the file and the
    space left."""
    path = tmp_path / "seg"
    path.write_bytes(bytes(16384))
    fd = os.open(path, os.O_RDWR)
    faults.pwrite_budget = 4096
    try:
        with pytest.raises(DiskFullError, match=r"the disk is full: .*seg.*bytes free"):
            disk.pwrite_all(fd, b"x" * 10_000, 100, path)
    finally:
        os.close(fd)
    assert path.read_bytes() == bytes(16384)


def test_allocate_writes_zeros_where_the_filesystem_cannot_fallocate(
        tmp_path: Path, faults: FaultLayer) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"data")
    faults.no_fallocate = True
    fd = os.open(path, os.O_RDWR)
    try:
        disk.allocate(fd, 0, 3 * 4096, path)
    finally:
        os.close(fd)
    assert path.read_bytes()[:4] == b"data"  # data is never overwritten
    assert os.path.getsize(path) == 3 * 4096 and blocks(path) >= 3 * 4096


# -- files written through a mapping get their blocks first --------------------------------


def test_an_index_file_has_its_blocks_before_it_is_mapped(tmp_path: Path) -> None:
    """Slots (written at random) and the entries ahead of use are allocated at creation; before
    the fix the file was sparse (ftruncate) and the first write to a page on a full disk was a
    SIGBUS."""
    f = IndexFile(tmp_path / "20240101000000000", 100_000, 400_000, create=True)
    try:
        slots_end = 40 + 100_000 * 4
        assert blocks(f.path) >= slots_end + ENTRY_AHEAD
        assert blocks(f.path) < f.size  # the rest of the entries later, as they come
    finally:
        f.close()


def test_an_index_file_refuses_entries_it_has_no_blocks_for(tmp_path: Path, quota: QuotaLayer) -> None:
    """On a full disk: first ``short`` (the blocks ahead are missing, the store starts refusing),
    then ``DiskFullError`` for the entry with no block; nothing is written by the refused put.
    A new file that cannot get its slots is not created at all."""
    f = IndexFile(tmp_path / "20240101000000000", 1000, 200_000, create=True)
    fill(quota, 0)
    n = 0
    try:
        with pytest.raises(DiskFullError):
            while True:
                f.put(f"k{n}", n, 1_700_000_000_000)
                n += 1
                if n == 10:
                    assert not f.short
        assert f.short
        assert f.entries == n and n >= ENTRY_AHEAD // 20 - 1
        assert f.select(f"k{n - 1}", 1, 0, 1 << 62) == [n - 1]
    finally:
        f.close()
    with pytest.raises(DiskFullError):
        IndexFile(tmp_path / "20240101000000001", 1000, 200_000, create=True)
    assert not (tmp_path / "20240101000000001").exists()


def test_the_checkpoint_has_its_block_before_it_is_mapped(tmp_path: Path) -> None:
    cp = StoreCheckpoint(tmp_path / "checkpoint")
    try:
        assert blocks(cp.path) >= 4096
    finally:
        cp.close()


def test_timer_wheel_slots_are_written_with_pwrite(tmp_path: Path, quota: QuotaLayer) -> None:
    """The wheel stays sparse (38.7 MB by default), so its slots must not be written through the
    mapping: on a full disk a slot write is a DiskFullError (the timer threads retry), and a slot
    written before reads back."""
    wheel = TimerWheel(tmp_path / "timerwheel", 100_000, 1000)
    try:
        wheel.put_slot(5_000, 1, 2, 1)
        fill(quota, 0)
        with pytest.raises(DiskFullError):
            wheel.put_slot(150_000_000, 3, 4, 1)  # a page far from the first: no block yet
        assert wheel.get_slot(5_000).last_pos == 2
    finally:
        wheel.close()


def test_a_config_file_on_a_full_disk_keeps_the_old_one_and_its_backup(
        tmp_path: Path, quota: QuotaLayer) -> None:
    path = tmp_path / "topics.json"
    store_files.atomic_write_json(path, {"v": 1})
    store_files.atomic_write_json(path, {"v": 2})
    fill(quota, 0)
    with pytest.raises(OSError) as e:
        store_files.atomic_write_json(path, {"v": 3, "pad": "x" * 10_000})
    assert e.value.errno == errno.ENOSPC
    assert store_files.read_json(path) == {"v": 2}
    assert store_files.read_json(path.with_name("topics.json.bak")) == {"v": 1}
    assert not path.with_name("topics.json.tmp").exists()


# -- the CommitLog -------------------------------------------------------------------------


def test_an_append_that_cannot_roll_writes_nothing(tmp_path: Path, quota: QuotaLayer) -> None:
    """The next segment cannot be created: the append fails whole with DiskFullError before it
    writes its records or the BLANK that closes the segment; queue offsets are not consumed."""
    cfg = small_config(tmp_path / "store", mappedFileSizeCommitLog=str(64 << 10))
    cl = CommitLog(cfg)
    try:
        [first_record] = cl.append([msg(body=b"a" * 1000)])
        fill(quota, 0)
        first = cl.files.files[0]
        with pytest.raises(DiskFullError, match="the disk is full"):
            for _ in range(200):
                cl.append([msg(body=b"b" * 1000), msg(body=b"c" * 1000)])
        wrote = first.wrote
        assert len(cl.files.files) == 1 and not first.is_full()
        left = first.file_size - wrote
        assert first.read(wrote, left) == bytes(left)  # no BLANK, no partial record
        assert cl.topic_queue_table[("TopicTest", 0)] * first_record.size == wrote
        assert sorted(p.name for p in cfg.commit_log_dir.iterdir()) == [first.path.name]
    finally:
        cl.close()


def test_sends_are_refused_before_the_segment_is_full_and_resume_by_themselves(
        tmp_path: Path, quota: QuotaLayer) -> None:
    """The allocator cannot create the next segment ahead: writes are refused at once, while the
    current segment still has room, and the retention thread's retry lets them through again
    once space returns (within a couple of seconds)."""
    cfg = small_config(tmp_path / "store", mappedFileSizeCommitLog=str(MiB))
    with MessageStore(cfg, disk_usage=lambda _p: 0.1) as store:
        filler = fill(quota, MiB + (256 << 10))  # room for one segment, not two
        store.put_messages_sync([msg()])
        wait_for(lambda: store.write_refused is not None)
        assert "the disk is full" in (store.write_refused or "")
        with pytest.raises(DiskFullError):
            store.put_messages_sync([msg()])
        assert not store.commitlog.files.files[0].is_full()
        filler.unlink()
        wait_for(lambda: store.write_refused is None, timeout=5)
        store.put_messages_sync([msg()])
        assert store.get_message("TopicTest", 0, 0).status.name == "FOUND"


# -- the dispatcher ------------------------------------------------------------------------


def test_a_dispatcher_that_cannot_write_keeps_its_place_and_retries(
        tmp_path: Path, faults: FaultLayer) -> None:
    """A ConsumeQueue file that cannot get a block: the append still succeeds (the message is in
    the CommitLog), the dispatcher thread lives on at the same offset, writes are refused; once
    space returns it dispatches and writes resume."""
    cfg = small_config(tmp_path / "store")
    with MessageStore(cfg) as store:
        store.put_messages_sync([msg(queue_id=0)])
        faults.fail_allocate = lambda path, offset: "/consumequeue/" in path
        [r] = store.put_messages_sync([msg(queue_id=1)])  # a new queue: its file has no block
        assert store.dispatcher.dispatch_from == r.commit_log_offset
        assert store.write_refused is not None and "dispatcher" in store.write_refused
        with pytest.raises(DiskFullError):
            store.put_messages_sync([msg(queue_id=0)])
        time.sleep(0.3)
        assert store.dispatcher._thread is not None and store.dispatcher._thread.is_alive()
        assert store.dispatcher.dispatch_from == r.commit_log_offset
        faults.fail_allocate = lambda path, offset: False
        wait_dispatched(store)
        assert store.write_refused is None
        assert store.get_message("TopicTest", 1, 0).status.name == "FOUND"
        store.put_messages_sync([msg(queue_id=1)])


def test_writes_are_refused_while_queue_blocks_ahead_are_missing(
        tmp_path: Path, faults: FaultLayer) -> None:
    """Only the blocks ahead of a ConsumeQueue's units fail: the message is dispatched, writes
    are refused before the queue runs out, and the retry clears the refusal once space returns."""
    cfg = small_config(tmp_path / "store", mappedFileSizeConsumeQueue="200000")
    with MessageStore(cfg) as store:
        faults.fail_allocate = lambda path, offset: "/consumequeue/" in path and offset > 0
        store.put_messages_sync([msg()] * 150)  # 3,000 bytes of units: the first page only
        wait_dispatched(store)
        assert store.get_message("TopicTest", 0, 149).status.name == "FOUND"
        assert store.write_refused is not None and "ahead" in store.write_refused
        store.gate.retry()
        assert store.write_refused is not None
        faults.fail_allocate = lambda path, offset: False
        store.gate.retry()
        assert store.write_refused is None


def test_the_dispatcher_thread_survives_every_failure(tmp_path: Path, faults: FaultLayer) -> None:
    """The thread lives on, and retries at its idle pace, not in a loop that burns a core (the
    review measured 31,911 retries in a second before the fix)."""
    cfg = small_config(tmp_path / "store", flushDiskType="SYNC_FLUSH")
    with MessageStore(cfg) as store:
        attempts: list[str] = []

        def full(path: str, offset: int) -> bool:
            attempts.append(path)
            return "/consumequeue/" in path

        faults.fail_allocate = full
        store.put_messages_sync([msg()])
        time.sleep(0.2)
        before = len(attempts)
        time.sleep(0.5)
        threads = {t.name for t in threading.enumerate()}
        assert "dispatcher" in threads
        assert len(attempts) - before < 50  # about 5 at IDLE_WAIT_S = 0.1 s, plus retention's
        faults.fail_allocate = lambda path, offset: False
        wait_dispatched(store)


def test_a_queue_directory_that_cannot_be_created_fails_dispatch_not_the_append(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """mkdir of a new ConsumeQueue's directory fails with ENOSPC: the message is stored, so the
    append succeeds (a failed reply would make the producer store it twice), writes are refused
    while the dispatcher cannot write, and once the directory can be made it is dispatched."""
    real_mkdir = Path.mkdir
    full = True

    def mkdir(self: Path, *args: object, **kw: object) -> None:
        if full and "/consumequeue/" in str(self) and str(self).endswith("/1"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_mkdir(self, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "mkdir", mkdir)
    cfg = small_config(tmp_path / "store")
    with MessageStore(cfg) as store:
        store.put_messages_sync([msg(queue_id=0)])
        [r] = store.put_messages_sync([msg(queue_id=1)])  # stored: no error
        assert store.dispatcher.dispatch_from == r.commit_log_offset
        assert store.write_refused is not None and "disk is full" in store.write_refused
        with pytest.raises(DiskFullError):
            store.put_messages_sync([msg(queue_id=0)])
        full = False
        wait_dispatched(store)
        assert store.write_refused is None
        assert store.get_message("TopicTest", 1, 0).status.name == "FOUND"


def test_a_record_cut_short_by_a_full_disk_leaves_nothing_for_recovery(
        tmp_path: Path, faults: FaultLayer) -> None:
    """A pwrite that runs out of space halfway through a record (a sparse segment, e.g. one a
    Java broker created): the append fails, its queue offset is given back, the bytes that landed
    are zeroed; after a crash recovery ends the log at the last whole record and the next append
    takes the same queue offset."""
    cfg = small_config(tmp_path / "store", mappedFileSizeCommitLog=str(64 << 10))
    store = MessageStore(cfg).start()
    [first] = store.put_messages_sync([msg(body=b"a" * 1000)])
    store.commitlog.files.files[-1].allocated = 0  # sparse: its blocks come with each write
    faults.pwrite_budget = 300
    with pytest.raises(DiskFullError):
        store.put_messages_sync([msg(body=b"b" * 1000)])
    assert store.commitlog.topic_queue_table[("TopicTest", 0)] == 1
    store.halt()  # a crash: recovery must find one whole record and nothing after it
    with MessageStore(cfg) as again:
        assert again.commitlog.max_offset == first.end_offset
        [r] = again.put_messages_sync([msg(body=b"c" * 1000)])
        assert r.queue_offset == 1
    assert verify_store(cfg.store_path_root_dir, 64) == []


def test_keys_that_spill_into_a_new_index_file_are_indexed_whole(
        tmp_path: Path, faults: FaultLayer) -> None:
    """The newest index file has room for one of a message's two keys and the next file cannot
    be created: nothing of the message is indexed (the dispatcher retries it whole); once space
    returns both keys are found."""
    svc = IndexService(tmp_path / "index", 16, 4)  # 3 entries per file
    try:
        svc.build("T", ["a", "b"], None, 100, 1_700_000_000_000)
        faults.fail_allocate = lambda path, offset: True
        with pytest.raises(DiskFullError):
            svc.build("T", ["c", "d"], None, 200, 1_700_000_001_000)
        assert svc.end_phy_offset() == 100 and len(svc.files) == 1
        faults.fail_allocate = lambda path, offset: False
        svc.build("T", ["c", "d"], None, 200, 1_700_000_001_000)
        assert [svc.query("T", k, 10, 0, 1 << 62) for k in "abcd"] == [[100], [100], [200], [200]]
    finally:
        svc.close()


def test_a_message_whose_keys_do_not_all_get_blocks_is_indexed_whole_on_retry(
        tmp_path: Path, faults: FaultLayer) -> None:
    """Two keys per message, the disk full: a message fails whole (no key written), so the
    dispatcher's retry after space returns indexes both; before, the first key moved
    endPhyOffset and the retry skipped the message, losing its second key for good."""
    svc = IndexService(tmp_path / "index", 16, 200_000)
    try:
        svc.build("T", ["first"], None, 1, 1_700_000_000_000)
        faults.fail_allocate = lambda path, offset: True
        off = 2
        while True:  # until the blocks ahead run out, on the first key or the second
            try:
                svc.build("T", [f"a{off}", f"b{off}"], None, off, 1_700_000_000_000)
            except DiskFullError:
                break
            off += 1
        faults.fail_allocate = lambda path, offset: False
        svc.build("T", [f"a{off}", f"b{off}"], None, off, 1_700_000_000_000)  # the retry
        for key in (f"a{off}", f"b{off}", f"b{off - 1}"):
            assert svc.query("T", key, 10, 0, 1 << 62) == [off if key.endswith(str(off)) else off - 1]
    finally:
        svc.close()
