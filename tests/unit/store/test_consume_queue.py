"""ConsumeQueue writes: the tail buffer, commits, segment ends, rewrites in place and gaps, and the
bounded cache of write descriptors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketlite.formats.consume_queue_unit import CQ_UNIT, CQ_UNIT_SIZE
from rocketlite.store import mapped_file
from rocketlite.store.consume_queue import ConsumeQueue

UNITS_PER_FILE = 20


@pytest.fixture
def cq(tmp_path: Path) -> Iterator[ConsumeQueue]:
    q = ConsumeQueue("T", 0, tmp_path / "T" / "0", UNITS_PER_FILE * CQ_UNIT_SIZE)
    yield q
    q.close()


def unit(i: int) -> tuple[int, int, int]:
    return (1000 * i, 100 + i, -i)


def on_disk(q: ConsumeQueue) -> list[tuple[int, int, int]]:
    """Units as the files hold them (read with plain file I/O, not through the mappings)."""
    data = b"".join(p.read_bytes() for p in sorted(q.files.directory.iterdir()))
    return [u for u in CQ_UNIT.iter_unpack(data) if u[1] > 0]


def test_units_are_readable_only_after_commit(cq: ConsumeQueue) -> None:
    for i in range(5):
        cq.put(*unit(i), i)
    assert cq.max_offset == 0 and cq.get_unit(0) is None
    cq.commit()
    assert cq.max_offset == 5
    assert [cq.get_unit(i) for i in range(5)] == [unit(i) for i in range(5)]
    assert on_disk(cq) == [unit(i) for i in range(5)]
    assert cq.max_physic_end == 4000 + 104


def test_batches_cross_segment_ends(cq: ConsumeQueue) -> None:
    n = 2 * UNITS_PER_FILE + 7
    us = [unit(i) for i in range(n)]
    cq.put_batch([u[0] for u in us[:13]], [u[1] for u in us[:13]], [u[2] for u in us[:13]], 0)
    cq.put_batch([u[0] for u in us[13:]], [u[1] for u in us[13:]], [u[2] for u in us[13:]], 13)
    cq.commit()
    assert len(cq.files.files) == 3
    assert cq.max_offset == n
    got = [u for start in range(0, n, UNITS_PER_FILE) for u in cq.get_units(start, UNITS_PER_FILE)]
    assert got == us
    assert on_disk(cq) == us


def test_rewrite_in_place_commits_the_tail_first(cq: ConsumeQueue) -> None:
    for i in range(6):
        cq.put(*unit(i), i)
    cq.commit()
    for i in range(6, 9):
        cq.put(*unit(i), i)  # pending in the tail
    cq.put(*unit(2), 2)  # re-dispatch of an old record: same bytes, in place
    assert cq.max_offset == 9  # the tail was written before the rewrite
    cq.put(*unit(9), 9)
    cq.commit()
    assert [cq.get_unit(i) for i in range(10)] == [unit(i) for i in range(10)]


def test_a_gap_is_written_where_the_offset_says(cq: ConsumeQueue) -> None:
    cq.put(*unit(0), 0)
    cq.put(*unit(3), 3)  # units 1 and 2 missing (a torn write before a crash)
    cq.commit()
    assert cq.max_offset == 4
    assert cq.get_unit(3) == unit(3)
    assert cq.get_unit(1) == (0, 0, 0)


def test_close_writes_what_is_pending(tmp_path: Path) -> None:
    q = ConsumeQueue("T", 0, tmp_path / "T" / "0", UNITS_PER_FILE * CQ_UNIT_SIZE)
    q.put_batch([1, 2], [10, 10], [0, 0], 0)
    q.close()
    q2 = ConsumeQueue("T", 0, tmp_path / "T" / "0", UNITS_PER_FILE * CQ_UNIT_SIZE)
    try:
        q2.load()
        q2.recover()
        assert q2.max_offset == 2 and q2.get_unit(1) == (2, 10, 0)
    finally:
        q2.close()


def test_write_descriptors_are_bounded_and_least_recently_used_go_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = mapped_file.FdCache(capacity=3)
    monkeypatch.setattr(mapped_file, "WRITE_FDS", cache)
    queues = [ConsumeQueue("T", i, tmp_path / "T" / str(i), UNITS_PER_FILE * CQ_UNIT_SIZE)
              for i in range(5)]
    try:
        for round_ in range(3):
            for q in queues:
                q.put(*unit(round_), round_)
                q.commit()
            assert len(cache) == 3
        assert list(cache._fds) == [q.files.files[0].path for q in queues[2:]]
        for q in queues:  # every write landed, whether its descriptor was cached or reopened
            assert on_disk(q) == [unit(i) for i in range(3)]
            assert [q.get_unit(i) for i in range(3)] == [unit(i) for i in range(3)]
        queues[4].close()
        assert len(cache) == 2  # closing a segment closes its cached descriptor
    finally:
        for q in queues:
            q.close()
        cache.clear()
    assert len(cache) == 0
