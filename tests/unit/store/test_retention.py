"""Retention with faked file times and an injected disk-usage probe."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from rocketlite.common.errors import DiskFullError
from rocketlite.store.get_message import GetMessageStatus
from rocketlite.store.message_store import MessageStore
from storehelp import msg, small_config, wait_dispatched

HOUR = 3600.0


class Disk:
    def __init__(self) -> None:
        self.ratio = 0.10

    def __call__(self, path: Path) -> float:
        return self.ratio


def open_store(tmp_path: Path, disk: Disk, **extra: str) -> MessageStore:
    # deleteWhen is set to an hour that is not now, so only space or age triggers deletion.
    other_hour = f"{(time.localtime().tm_hour + 12) % 24:02d}"
    settings = {"deleteWhen": other_hour, "deleteFileBatchMax": "3",
                "cleanResourceInterval": "3600000", **extra}
    cfg = small_config(tmp_path, **settings)
    return MessageStore(cfg, disk_usage=disk).start()


def fill_segments(s: MessageStore, segments: int) -> None:
    while len(s.commitlog.files.files) < segments:
        s.put_messages_sync([msg(body=b"x" * 700, keys="k") for _ in range(4)])
    wait_dispatched(s)


def age(s: MessageStore, hours: float, count: int | None = None) -> None:
    files = s.commitlog.files.files[:count]
    t = time.time() - hours * HOUR
    for mf in files:
        os.utime(mf.path, (t, t))


def test_nothing_is_deleted_when_disk_is_fine_and_not_delete_hour(tmp_path: Path) -> None:
    disk = Disk()
    with open_store(tmp_path, disk) as s:
        fill_segments(s, 5)
        age(s, 100)
        rep = s.retention.run_once()
        assert rep.triggered_by == "" and rep.commitlog_files_deleted == 0


def test_expired_files_go_head_first_in_bounded_batches(tmp_path: Path) -> None:
    disk = Disk()
    with open_store(tmp_path, disk) as s:
        fill_segments(s, 8)
        age(s, 100, count=5)  # the 5 oldest are past fileReservedTime (72 h)
        disk.ratio = 0.80  # above diskMaxUsedSpaceRatio: delete expired files now
        first = s.retention.run_once()
        assert first.triggered_by == "space"
        assert first.commitlog_files_deleted == 3  # deleteFileBatchMax
        second = s.retention.run_once()
        assert second.commitlog_files_deleted == 2  # the rest of the expired ones, no more
        assert s.retention.run_once().commitlog_files_deleted == 0
        cl_min = s.commitlog.min_offset
        assert cl_min == 5 * s.config.mapped_file_size_commit_log
        names = sorted(p.name for p in s.config.commit_log_dir.iterdir())
        assert int(names[0]) == cl_min
        # ConsumeQueue and index were cleaned in step and the minimum offset corrected.
        cq = s.find_queue("TopicTest", 0)
        assert cq is not None
        first_unit = cq.get_unit(cq.min_offset)
        assert first_unit is not None and first_unit[0] >= cl_min
        too_small = s.get_message("TopicTest", 0, 0)
        assert too_small.status is GetMessageStatus.OFFSET_TOO_SMALL
        assert too_small.next_begin_offset == cq.min_offset
        assert s.get_message("TopicTest", 0, cq.min_offset).status is GetMessageStatus.FOUND


def test_young_head_file_blocks_deletion_behind_it(tmp_path: Path) -> None:
    disk = Disk()
    with open_store(tmp_path, disk) as s:
        fill_segments(s, 5)
        age(s, 100)
        os.utime(s.commitlog.files.files[0].path, None)  # the oldest file was just touched
        disk.ratio = 0.80
        assert s.retention.run_once().commitlog_files_deleted == 0


def test_forced_cleaning_ignores_age_but_keeps_the_current_file(tmp_path: Path) -> None:
    disk = Disk()
    with open_store(tmp_path, disk, deleteFileBatchMax="100") as s:
        fill_segments(s, 4)
        disk.ratio = 0.87  # above diskSpaceCleanForciblyRatio (85 %)
        rep = s.retention.run_once()
        assert rep.triggered_by == "forced"
        assert len(s.commitlog.files.files) == 1
        s.put_messages_sync([msg()])  # still writable below 90 %


def test_without_forced_cleaning_a_full_disk_deletes_only_expired_files(tmp_path: Path) -> None:
    disk = Disk()
    with open_store(tmp_path, disk, deleteFileBatchMax="100",
                    cleanFileForciblyEnable="false") as s:
        fill_segments(s, 5)
        age(s, 100, count=2)  # the 2 oldest are past fileReservedTime (72 h)
        disk.ratio = 0.87  # above diskSpaceCleanForciblyRatio (85 %)
        rep = s.retention.run_once()
        assert (rep.triggered_by, rep.commitlog_files_deleted) == ("space", 2)
        assert s.commitlog.min_offset == 2 * s.config.mapped_file_size_commit_log
        assert s.retention.run_once().commitlog_files_deleted == 0  # the young ones stay


def test_writes_are_refused_above_90_percent_and_resume(tmp_path: Path) -> None:
    disk = Disk()
    with open_store(tmp_path, disk) as s:
        s.put_messages_sync([msg()])
        disk.ratio = 0.93
        s.retention.run_once()
        with pytest.raises(DiskFullError) as e:
            s.put_messages_sync([msg()])
        text = str(e.value)
        assert str(s.config.store_path_root_dir) in text and "93.0%" in text and "90%" in text
        wait_dispatched(s)
        assert s.max_offset_in_queue("TopicTest", 0) == 1  # nothing stored was lost
        disk.ratio = 0.50
        s.retention.run_once()
        [r] = s.put_messages_sync([msg()])
        assert r.queue_offset == 1


def test_restart_after_deletion_keeps_min_offsets(tmp_path: Path) -> None:
    disk = Disk()
    with open_store(tmp_path, disk, deleteFileBatchMax="100") as s:
        fill_segments(s, 5)
        disk.ratio = 0.87
        s.retention.run_once()
        cl_min = s.commitlog.min_offset
        q_min = s.min_offset_in_queue("TopicTest", 0)
        q_max = s.max_offset_in_queue("TopicTest", 0)
    disk.ratio = 0.1
    with open_store(tmp_path, disk) as s:
        assert s.commitlog.min_offset == cl_min
        assert s.min_offset_in_queue("TopicTest", 0) == q_min
        assert s.max_offset_in_queue("TopicTest", 0) == q_max


def test_the_retention_thread_refuses_and_resumes_writes_by_itself(tmp_path: Path) -> None:
    """No manual run: the thread measures every cleanResourceInterval (its loop also wakes every
    second for allocation retries) and lifts the refusal once use is below the limit."""
    disk = Disk()
    with open_store(tmp_path, disk, cleanResourceInterval="50") as s:
        disk.ratio = 0.93
        deadline = time.monotonic() + 5
        while s.write_refused is None:
            assert time.monotonic() < deadline, "never refused"
            time.sleep(0.01)
        disk.ratio = 0.50
        while s.write_refused is not None:
            assert time.monotonic() < deadline + 5, "never resumed"
            time.sleep(0.01)
        s.put_messages_sync([msg()])
