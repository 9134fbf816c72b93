"""A small filesystem for full-disk tests (not a test module).

``small_disk(kind, tmp_path)`` yields a ``SmallDisk``: a directory on

* ``tmpfs``: a 48 MiB tmpfs mounted there (root only),
* ``ext4``: a 48 MiB ext4 image, no reserved blocks, loop-mounted there (root only),
* ``quota``: a plain directory whose space ``QuotaLayer`` limits to 48 MiB by going through
  ``rocketlite.store.disk`` (anyone): allocations and writes past the limit fail with ENOSPC, the
  free space the store sees is what is left of the limit.

``disk_kinds()`` is what the current user can have: the real filesystems as root, the quota layer
otherwise. Whatever is mounted is unmounted (and its image removed) on the way out, also when the
test fails.

``python -m diskhelp ROOT LIMIT ARGS...`` runs ``rocketlite ARGS`` with the quota layer installed:
a broker on a "small disk" for tests that cannot mount one.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

from rocketlite.store import disk

SIZE = 48 << 20


def is_root() -> bool:
    return os.geteuid() == 0


def disk_kinds() -> list[str]:
    """``ROCKETLITE_TEST_DISK=quota`` (or tmpfs, ext4) picks one, e.g. to try the quota layer
    as root."""
    if kind := os.environ.get("ROCKETLITE_TEST_DISK"):
        return [kind]
    return ["tmpfs", "ext4"] if is_root() else ["quota"]


class QuotaLayer(disk.FileLayer):
    """The store's file layer with every file under ``root`` limited to ``limit`` bytes of
    blocks (what ``st_blocks`` says they use). Blocks are taken to be allocated from the start of
    a file, which is how the store allocates them."""

    def __init__(self, root: Path, limit: int) -> None:
        self.root = Path(root).absolute()
        self.limit = limit

    def used(self) -> int:
        total = 0
        for d, _, names in os.walk(self.root):
            for n in names:
                with contextlib.suppress(FileNotFoundError):
                    total += os.lstat(os.path.join(d, n)).st_blocks * 512
        return total

    def available(self) -> int:
        return max(0, self.limit - self.used())

    def _mine(self, fd: int) -> bool:
        try:
            return Path(os.readlink(f"/proc/self/fd/{fd}")).is_relative_to(self.root)
        except OSError:
            return True

    def allocate(self, fd: int, offset: int, length: int) -> None:
        if self._mine(fd):
            have = os.fstat(fd).st_blocks * 512
            need = max(0, min(length, offset + length - have))
            if need > self.available():
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        super().allocate(fd, offset, length)

    def pwrite(self, fd: int, data: bytes | bytearray | memoryview, pos: int) -> int:
        if self._mine(fd):
            have = os.fstat(fd).st_blocks * 512
            need = pos + len(data) - max(have, pos)
            if need > 0:
                avail = self.available()
                if need > avail:
                    fits = (len(data) - (need - avail)) // 4096 * 4096
                    if fits <= 0:
                        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                    return super().pwrite(fd, memoryview(data)[:fits], pos)  # a short write
        return super().pwrite(fd, data, pos)

    def space(self, path: Path) -> tuple[int, int]:
        if Path(path).absolute().is_relative_to(self.root):
            used = self.used()
            return used, max(0, self.limit - used)
        return super().space(path)


class SmallDisk:
    def __init__(self, kind: str, root: Path) -> None:
        self.kind = kind
        self.root = root

    def free(self) -> int:
        return disk.space(self.root)[1]

    def fill(self, leave: int, name: str = "filler") -> Path:
        """A file that takes all but about ``leave`` bytes of the free space."""
        path = self.root / name
        size = max(0, self.free() - leave) // 4096 * 4096
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            if size:
                disk.LAYER.allocate(fd, 0, size)
        finally:
            os.close(fd)
        return path


def _run(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True, timeout=60)


@contextlib.contextmanager
def small_disk(kind: str, tmp_path: Path) -> Iterator[SmallDisk]:
    root = tmp_path / f"{kind}-disk"
    root.mkdir()
    if kind == "quota":
        previous = disk.install(QuotaLayer(root, SIZE))
        try:
            yield SmallDisk(kind, root)
        finally:
            disk.install(previous)
        return
    image = tmp_path / "ext4.img"
    if kind == "tmpfs":
        _run("mount", "-t", "tmpfs", "-o", f"size={SIZE >> 20}m", "tmpfs", str(root))
    else:
        with image.open("wb") as f:
            f.truncate(SIZE)
        _run("mkfs.ext4", "-q", "-F", "-m", "0", "-E", "nodiscard", str(image))
        _run("mount", "-o", "loop", str(image), str(root))
    try:
        yield SmallDisk(kind, root)
    finally:
        try:
            _run("umount", str(root))
        except subprocess.CalledProcessError:
            _run("umount", "-l", str(root))  # something still holds it: detach it anyway
        image.unlink(missing_ok=True)


if __name__ == "__main__":
    import sys

    from rocketlite.cli.main import main

    disk.install(QuotaLayer(Path(sys.argv[1]), int(sys.argv[2])))
    sys.argv = ["rocketlite", *sys.argv[3:]]
    main()
