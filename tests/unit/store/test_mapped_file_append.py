"""MappedFile.append: a small append into blocks the segment has is copied through the mapping,
anything else is a ``pwrite``; either way the bytes are in the file at ``wrote``, readers see them,
and positions move the same."""

from __future__ import annotations

from pathlib import Path

from rocketlite.store import mapped_file as mfmod
from rocketlite.store.mapped_file import MappedFile


def test_small_and_large_appends_land_in_the_file(tmp_path: Path) -> None:
    mf = MappedFile(tmp_path / f"{0:020d}", 1 << 16, create=True)
    try:
        assert mf.allocated == mf.file_size  # a segment holding a descriptor has its blocks
        small, large = b"s" * 100, b"L" * (mfmod.SMALL_APPEND + 1)
        assert mf.append(small) == 0
        assert mf.append(large) == 100
        mf.allocated = 0  # sparse (a Java broker's segment): small appends go by pwrite too
        assert mf.append(small) == 100 + len(large)
        assert (mf.wrote, mf.committed) == (200 + len(large), 200 + len(large))
        with open(mf.path, "rb") as f:  # the file itself, not the mapping
            assert f.read(mf.wrote) == small + large + small
        assert mf.read(0, 100) == small
    finally:
        mf.close()
