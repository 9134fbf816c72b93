"""The restart log of ``MappedFileQueue.truncate_dirty``: a segment created ahead of need (no
record in it) is "removed", not "deleted" as if data were lost; one with data is "deleting"."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from rocketlite.store.mapped_file_queue import MappedFileQueue

SIZE = 4096


def three_segments(tmp_path: Path, third_written: bool) -> MappedFileQueue:
    q = MappedFileQueue(tmp_path, SIZE)
    for i in range(3):
        mf = q.next_file()
        if i < 2 or third_written:
            mf.append(b"\x01" * SIZE if i < 2 else b"\x01" * 16)
    return q


@pytest.mark.parametrize("third_written", [False, True])
def test_truncate_names_what_it_drops(tmp_path: Path, third_written: bool,
                                      caplog: pytest.LogCaptureFixture) -> None:
    q = three_segments(tmp_path, third_written)
    try:
        with caplog.at_level(logging.INFO, logger="rocketlite.store.mapped_file_queue"):
            q.truncate_dirty(SIZE + 100)
        text = caplog.text
        assert len(q.files) == 2
        assert ("deleting segment" in text) is third_written
        assert ("removing the preallocated empty segment" in text) is not third_written
    finally:
        q.close()
