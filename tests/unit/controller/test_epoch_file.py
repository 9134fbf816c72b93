"""The epoch file (``epochFileCheckpoint``): layout, corruption, and the truncation rule."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketlite.formats import epoch_file as fmt
from rocketlite.formats.epoch_file import NO_END, EpochEntry, EpochFileError
from rocketlite.store.epoch_file import EpochFile


def test_layout_is_javas_checkpoint_file() -> None:
    entries = [EpochEntry(1, 100), EpochEntry(2, 300)]
    body = b"1-100\n2-300\n"
    crc = zlib.crc32(body) & 0x7FFFFFFF
    assert fmt.encode(entries) == b"2\n" + str(crc).encode() + b"\n" + body
    assert fmt.decode(fmt.encode(entries)) == [EpochEntry(1, 100, 300), EpochEntry(2, 300, NO_END)]


def test_crc_zero_is_not_checked() -> None:
    assert fmt.decode(b"1\n0\n5-42\n") == [EpochEntry(5, 42)]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"2\n123\n1-100\n", "expected 2 entries, found 1"),
        (b"1\n999\n1-100\n", "CRC"),
        (b"1\n0\n1:100\n", "line 3 is not <epoch>-<startOffset>"),
        (b"x\n0\n1-100\n", "not a number"),
        (b"1\n0\n1-100", "truncated"),
        (b"", "truncated"),
        (b"\xff\xfe\n", "not UTF-8"),
        (b"2\n0\n2-100\n1-200\n", "must both grow"),
    ],
)
def test_corrupt_file_is_a_clear_error(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / fmt.FILE_NAME
    path.write_bytes(data)
    with pytest.raises(EpochFileError, match=message) as err:
        EpochFile(tmp_path)
    assert str(path) in str(err.value)


def test_corrupt_file_is_not_replaced_by_its_backup(tmp_path: Path) -> None:
    ef = EpochFile(tmp_path)
    ef.begin_epoch(1, 0)
    ef.begin_epoch(2, 10)  # the first version is now epochFileCheckpoint.bak
    assert (tmp_path / "epochFileCheckpoint.bak").exists()
    raw = (tmp_path / fmt.FILE_NAME).read_bytes()
    (tmp_path / fmt.FILE_NAME).write_bytes(raw.replace(b"2-10", b"2-11"))
    with pytest.raises(EpochFileError, match="CRC"):
        EpochFile(tmp_path)


def test_begin_epoch_persists_and_drops_empty_epochs(tmp_path: Path) -> None:
    ef = EpochFile(tmp_path)
    assert ef.last_epoch == -1
    ef.begin_epoch(1, 0)
    ef.begin_epoch(2, 500)
    ef.begin_epoch(4, 500)  # epoch 2 got no bytes here: its entry goes
    assert EpochFile(tmp_path).entries(700) == [EpochEntry(1, 0, 500), EpochEntry(4, 500, 700)]
    with pytest.raises(EpochFileError, match="older than the last one"):
        ef.begin_epoch(3, 800)
    ef.truncate_from_offset(400)
    assert EpochFile(tmp_path).entries() == [EpochEntry(1, 0, NO_END)]
    assert not list(tmp_path.glob("*.tmp"))


# Java's EpochFileCacheTest: cache1 = <1,100>, <2,300>, <3,500>.
@pytest.mark.parametrize(
    ("other", "end1", "end2", "point"),
    [
        ([(1, 100), (2, 300), (3, 450)], NO_END, NO_END, 450),
        ([(1, 100), (2, 300), (3, 500)], 700, 600, 600),
        ([(1, 200), (2, 500)], 700, NO_END, -1),
    ],
)
def test_javas_samples(other: list[tuple[int, int]], end1: int, end2: int, point: int) -> None:
    mine = fmt.with_ends([EpochEntry(1, 100), EpochEntry(2, 300), EpochEntry(3, 500)], end1)
    theirs = fmt.with_ends([EpochEntry(e, s) for e, s in other], end2)
    assert fmt.find_common_point(mine, theirs) == point


# -- the truncation rule against a simulated group ------------------------------------------------
#
# Each replica's log is a list of labels, one a byte: the epoch the byte was written in. Only the
# master of an epoch writes in it, and never twice at one offset, so two logs hold the same bytes
# exactly as far as their labels agree: the longest common prefix is the true agreement point,
# which find_common_point must give from the epoch entries alone.


class _Replica:
    def __init__(self) -> None:
        self.log: list[int] = []
        self.entries: list[EpochEntry] = []

    def ended(self) -> list[EpochEntry]:
        return fmt.with_ends(self.entries, len(self.log))


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


_action = st.one_of(
    st.tuples(st.just("write"), st.integers(1, 5)),
    st.tuples(st.just("copy"), st.integers(0, 2), st.integers(0, 12)),
    st.tuples(st.just("elect"), st.integers(0, 2)),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_action, max_size=40))
def test_common_point_is_where_the_logs_agree(actions: list[tuple[int | str, ...]]) -> None:
    replicas = [_Replica() for _ in range(3)]
    master, epoch = 0, 0
    for action in actions:
        if action[0] == "write" and epoch > 0:
            replicas[master].log.extend([epoch] * int(action[1]))
        elif action[0] == "elect":
            master, epoch = int(action[1]), epoch + 1
            r = replicas[master]
            start = len(r.log)  # a new master keeps its log and starts the epoch at its end
            r.entries = [e for e in r.entries if e.start_offset < start]
            r.entries.append(EpochEntry(epoch, start))
        elif action[0] == "copy" and int(action[1]) != master:
            f, m = replicas[int(action[1])], replicas[master]
            truth = _common_prefix(f.log, m.log)
            for a, b in ((f, m), (m, f)):
                assert max(fmt.find_common_point(a.ended(), b.ended()), 0) == truth
            # the follower truncates to the common point, then copies some of the master's bytes
            upto = min(len(m.log), truth + int(action[2]))
            f.log = m.log[:upto]
            f.entries = [e for e in m.entries if e.start_offset < upto]
