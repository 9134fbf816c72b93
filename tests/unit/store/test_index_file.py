"""IndexFile and IndexService: layout, chains, collisions, time filters, rolling, reopen, recovery
cut, retention, corrupt files, and a model-based property test."""

from __future__ import annotations

import re
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.common.errors import StoreError
from rocketlite.formats.index_layout import (
    INDEX_ENTRY,
    INDEX_HEADER,
    INDEX_SLOT,
    entry_position,
    index_file_size,
    slot_position,
)
from rocketlite.formats.javahash import index_key_hash
from rocketlite.formats.properties import encode_properties
from rocketlite.store import index_service as index_service_mod
from rocketlite.store.index_file import IndexFile
from rocketlite.store.index_service import IndexService, index_file_name

SLOTS = 64
ENTRIES = 100
T0 = 1_700_000_000_000
ALL = (0, 1 << 62)


def new_file(tmp_path: Path, slots: int = SLOTS, entries: int = ENTRIES) -> IndexFile:
    return IndexFile(tmp_path / "20240101000000000", slots, entries, create=True)


def new_service(tmp_path: Path, slots: int = SLOTS, entries: int = ENTRIES) -> IndexService:
    svc = IndexService(tmp_path / "index", slots, entries)
    svc.load()
    return svc


# -- IndexFile ---------------------------------------------------------------------------------


def test_new_file_is_sparse_full_size_with_index_count_one(tmp_path: Path) -> None:
    f = new_file(tmp_path)
    assert f.path.stat().st_size == index_file_size(SLOTS, ENTRIES)
    assert (f.index_count, f.entries, f.hash_slot_count) == (1, 0, 0)
    assert f.select("k", 10, *ALL) == []
    f.close()


def test_put_select_round_trip_and_header(tmp_path: Path) -> None:
    f = new_file(tmp_path)
    assert f.put("T#k1", 100, T0)
    assert f.put("T#k2", 200, T0 + 1500)
    assert f.put("T#k1", 300, T0 + 3000)
    assert f.select("T#k1", 10, *ALL) == [300, 100]  # newest first
    assert f.select("T#k2", 10, *ALL) == [200]
    assert f.select("T#k1", 1, *ALL) == [300]
    assert f.select("T#nope", 10, *ALL) == []
    assert f.select("T#k1", 0, *ALL) == []
    assert (f.begin_timestamp, f.end_timestamp) == (T0, T0 + 3000)
    assert (f.begin_phy_offset, f.end_phy_offset) == (100, 300)
    assert f.index_count == 4
    assert f.hash_slot_count == len({index_key_hash(k) % SLOTS for k in ("T#k1", "T#k2")})
    # The header and entries are in the mapping as the layout says.
    assert INDEX_HEADER.unpack_from(f.mm, 0) == (T0, T0 + 3000, 100, 300, f.hash_slot_count, 4)
    h = index_key_hash("T#k1")
    assert INDEX_SLOT.unpack_from(f.mm, slot_position(h, SLOTS))[0] == 3
    assert INDEX_ENTRY.unpack_from(f.mm, entry_position(3, SLOTS)) == (h, 300, 3, 1)
    assert INDEX_ENTRY.unpack_from(f.mm, entry_position(1, SLOTS)) == (h, 100, 0, 0)
    assert INDEX_ENTRY.unpack_from(f.mm, entry_position(0, SLOTS)) == (0, 0, 0, 0)  # unused
    f.close()


def test_collisions_return_only_hash_matching_entries(tmp_path: Path) -> None:
    f = new_file(tmp_path, slots=2)
    keys = [f"T#key-{i}" for i in range(40)]
    for i, k in enumerate(keys):
        assert f.put(k, i * 10, T0)
    for i, k in enumerate(keys):
        expected = [j * 10 for j in reversed(range(40)) if index_key_hash(keys[j]) == index_key_hash(k)]
        assert f.select(k, 100, *ALL) == expected
        assert i * 10 in expected
    f.close()


def test_equal_java_hashes_are_both_returned_for_the_caller_to_verify(tmp_path: Path) -> None:
    assert index_key_hash("T#Aa") == index_key_hash("T#BB")
    f = new_file(tmp_path)
    f.put("T#Aa", 1, T0)
    f.put("T#BB", 2, T0)
    assert f.select("T#Aa", 10, *ALL) == [2, 1]
    f.close()


def test_time_range_filtering(tmp_path: Path) -> None:
    f = new_file(tmp_path)
    for i in range(10):
        f.put("T#k", i, T0 + i * 1000)
    assert f.select("T#k", 100, T0 + 3000, T0 + 5000) == [5, 4, 3]
    assert f.select("T#k", 2, T0 + 3000, T0 + 5000) == [5, 4]
    assert f.select("T#k", 100, T0 + 20_000, T0 + 30_000) == []
    # Times are whole seconds since beginTimestamp: 1.7 s in is seen as 1 s in.
    f.put("T#x", 50, T0 + 1700)
    assert f.select("T#x", 10, T0 + 1000, T0 + 1000) == [50]
    assert f.select("T#x", 10, T0 + 1500, T0 + 2000) == []
    f.close()


def test_time_before_begin_clamps_to_zero(tmp_path: Path) -> None:
    f = new_file(tmp_path)
    f.put("T#k", 1, T0)
    f.put("T#k", 2, T0 - 5000)  # clock went back
    assert INDEX_ENTRY.unpack_from(f.mm, entry_position(2, SLOTS))[2] == 0
    assert f.select("T#k", 10, T0, T0) == [2, 1]
    f.close()


def test_full_file_refuses_put(tmp_path: Path) -> None:
    f = new_file(tmp_path, entries=5)
    assert all(f.put(f"T#k{i}", i, T0) for i in range(4))  # entry 0 is never used
    assert f.is_full()
    assert not f.put("T#k9", 9, T0)
    assert f.index_count == 5
    f.close()


def test_reopen_after_close_keeps_data(tmp_path: Path) -> None:
    f = new_file(tmp_path)
    for i in range(5):
        f.put(f"T#k{i % 2}", i, T0 + i * 1000)
    f.flush()
    f.close()
    f.close()  # idempotent
    g = IndexFile(f.path, SLOTS, ENTRIES)
    assert g.select("T#k0", 10, *ALL) == [4, 2, 0]
    assert (g.index_count, g.begin_phy_offset, g.end_phy_offset) == (6, 0, 4)
    assert (g.begin_timestamp, g.end_timestamp) == (T0, T0 + 4000)
    assert g.put("T#k0", 5, T0 + 5000)
    assert g.select("T#k0", 10, *ALL) == [5, 4, 2, 0]
    g.destroy()
    assert not f.path.exists()


def test_reopen_rejects_wrong_size_and_bad_header(tmp_path: Path) -> None:
    f = new_file(tmp_path)
    f.put("T#k", 1, T0)
    f.close()
    with pytest.raises(StoreError, match=r"expected \d+ .*truncated"):
        IndexFile(f.path, SLOTS * 2, ENTRIES)
    with f.path.open("r+b") as fh:
        fh.seek(36)
        fh.write((ENTRIES + 1).to_bytes(4, "big"))
    with pytest.raises(StoreError, match="indexCount"):
        IndexFile(f.path, SLOTS, ENTRIES)
    with pytest.raises(FileExistsError):
        IndexFile(f.path, SLOTS, ENTRIES, create=True)


def test_corrupt_chain_walk_terminates(tmp_path: Path) -> None:
    f = new_file(tmp_path)
    f.put("T#k", 1, T0)
    f.put("T#k", 2, T0)
    h = index_key_hash("T#k")
    INDEX_ENTRY.pack_into(f.mm, entry_position(1, SLOTS), h, 1, 0, 2)  # a cycle 2 -> 1 -> 2
    assert f.select("T#k", 10, *ALL) == [2, 1]
    INDEX_SLOT.pack_into(f.mm, slot_position(h, SLOTS), 77)  # past indexCount: ignored
    assert f.select("T#k", 10, *ALL) == []
    assert f.put("T#k", 3, T0)  # a garbage slot starts a fresh chain
    assert f.select("T#k", 10, *ALL) == [3]
    f.close()


# -- IndexService ------------------------------------------------------------------------------


def test_service_build_query_and_key_handling(tmp_path: Path) -> None:
    svc = new_service(tmp_path)
    assert (svc.end_phy_offset(), svc.last_update_timestamp(), svc.flush()) == (0, 0, 0)
    svc.build("T", ["a", " b ", "", "a"], "U1", 100, T0)
    svc.build("T", [], None, 150, T0)  # nothing to index: no file needed for it
    svc.build("T", ["a"], None, 200, T0 + 1000)
    svc.build("S", ["a"], None, 300, T0 + 2000)
    assert svc.query("T", "a", 10, *ALL) == [200, 100]
    assert svc.query("T", "b", 10, *ALL) == [100]
    assert svc.query("T", "U1", 10, *ALL) == [100]
    assert svc.query("S", "a", 10, *ALL) == [300]
    assert svc.query("T", "a", 1, *ALL) == [200]
    assert svc.query("T", "a", 0, *ALL) == []
    assert svc.files[0].entries == 5  # U1, a, b (dedup, stripped, empty skipped), a, S#a
    assert svc.end_phy_offset() == 300
    assert svc.last_update_timestamp() == T0 + 2000
    assert svc.flush() == T0 + 2000
    names = [p.name for p in (tmp_path / "index").iterdir()]
    assert len(names) == 1 and re.fullmatch(r"\d{17}", names[0])
    svc.close()


def test_duplicate_build_at_or_below_end_phy_offset_is_skipped(tmp_path: Path) -> None:
    svc = new_service(tmp_path)
    svc.build("T", ["a"], None, 100, T0)
    svc.build("T", ["a"], None, 200, T0)
    svc.build("T", ["a"], None, 100, T0)  # re-dispatch after recovery
    svc.build("T", ["a"], None, 200, T0)
    assert svc.query("T", "a", 10, *ALL) == [200, 100]
    svc.close()


def test_service_rolls_when_full_and_queries_across_files(tmp_path: Path) -> None:
    svc = new_service(tmp_path, entries=4)  # 3 entries per file
    for i in range(10):
        svc.build("T", ["k", f"x{i}"], None, i * 100, T0 + i * 1000)
    assert len(svc.files) == 7
    assert all(f.entries == 3 for f in svc.files[:-1])
    assert [p.name for p in sorted((tmp_path / "index").iterdir())] == [f.path.name for f in svc.files]
    assert svc.query("T", "k", 100, *ALL) == [i * 100 for i in reversed(range(10))]
    assert svc.query("T", "k", 4, *ALL) == [900, 800, 700, 600]
    assert svc.query("T", "k", 100, T0 + 2000, T0 + 4000) == [400, 300, 200]
    assert svc.query("T", "x3", 100, *ALL) == [300]
    svc.close()


def test_service_reopen_keeps_data(tmp_path: Path) -> None:
    svc = new_service(tmp_path, entries=4)
    for i in range(5):
        svc.build("T", ["k"], None, i, T0 + i)
    svc.close()
    again = new_service(tmp_path, entries=4)
    assert len(again.files) == 2
    assert again.query("T", "k", 100, *ALL) == [4, 3, 2, 1, 0]
    assert again.end_phy_offset() == 4
    again.build("T", ["k"], None, 5, T0 + 5)
    assert again.query("T", "k", 100, *ALL) == [5, 4, 3, 2, 1, 0]
    again.close()


def test_load_removes_corrupt_and_empty_files_and_ignores_others(tmp_path: Path) -> None:
    svc = new_service(tmp_path)
    svc.build("T", ["k"], None, 10, T0)
    svc.close()
    d = tmp_path / "index"
    good = next(d.iterdir())
    truncated = d / "20000101000000000"
    truncated.write_bytes(good.read_bytes()[:1000])
    IndexFile(d / "20000101000000001", SLOTS, ENTRIES, create=True).close()  # no entries
    (d / "notes.txt").write_text("keep me")
    (d / "123").write_text("keep me too")
    again = new_service(tmp_path)
    assert [f.path for f in again.files] == [good]
    assert not truncated.exists() and not (d / "20000101000000001").exists()
    assert (d / "notes.txt").exists() and (d / "123").exists()
    assert again.query("T", "k", 10, *ALL) == [10]
    again.build("T", ["k"], None, 20, T0)
    assert again.query("T", "k", 10, *ALL) == [20, 10]
    again.close()


def test_new_file_names_bump_when_taken_or_clock_goes_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now_ns = T0 * 1_000_000
    monkeypatch.setattr(index_service_mod.time, "time_ns", lambda: now_ns)
    svc = new_service(tmp_path, entries=2)  # one entry per file
    svc.build("T", ["a"], None, 1, T0)
    svc.build("T", ["a"], None, 2, T0)  # same millisecond
    now_ns -= 3_600_000 * 1_000_000  # clock back one hour
    svc.build("T", ["a"], None, 3, T0)
    names = [f.path.name for f in svc.files]
    assert names[0] == index_file_name(T0)
    assert names == sorted(names) and len(set(names)) == 3
    assert int(names[1]) == int(names[0]) + 1 and int(names[2]) == int(names[0]) + 2
    svc.close()


def test_truncate_drops_files_at_or_past_the_cut(tmp_path: Path) -> None:
    svc = new_service(tmp_path, entries=4)
    for i in range(9):  # files: [0,1,2] [3,4,5] [6,7,8] (x100)
        svc.build("T", ["k"], None, i * 100, T0 + i)
    assert svc.truncate(900) is None
    assert svc.truncate(700) == 600  # the last file also indexes 600: it goes whole
    assert len(svc.files) == 2 and svc.end_phy_offset() == 500
    assert svc.query("T", "k", 100, *ALL) == [500, 400, 300, 200, 100, 0]
    svc.build("T", ["k"], None, 600, T0 + 6)  # the dispatcher rebuilds from 600
    assert svc.query("T", "k", 2, *ALL) == [600, 500]
    assert svc.truncate(0) == 0
    assert svc.files == [] and list((tmp_path / "index").iterdir()) == []
    svc.close()


def test_delete_expired_keeps_the_newest_file(tmp_path: Path) -> None:
    svc = new_service(tmp_path, entries=4)
    for i in range(9):
        svc.build("T", ["k"], None, i * 100, T0 + i)
    assert svc.delete_expired(200) == 0  # the first file ends at 200
    assert svc.delete_expired(201) == 1
    assert svc.delete_expired(10_000) == 1
    assert len(svc.files) == 1 and len(list((tmp_path / "index").iterdir())) == 1
    assert svc.query("T", "k", 100, *ALL) == [800, 700, 600]
    svc.close()


def test_concurrent_build_query_flush(tmp_path: Path) -> None:
    svc = new_service(tmp_path, slots=16, entries=50)
    stop = threading.Event()
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            while not stop.is_set():
                got = svc.query("T", "k", 1000, *ALL)
                assert got == sorted(got, reverse=True)
                svc.flush()
        except BaseException as e:  # noqa: BLE001 - surfaced below
            errors.append(e)

    t = threading.Thread(target=reader)
    t.start()
    for i in range(500):
        svc.build("T", ["k", f"o{i}"], None, i, T0 + i)
    stop.set()
    t.join()
    assert errors == []
    assert svc.query("T", "k", 1000, *ALL) == list(reversed(range(500)))
    svc.close()


# -- model-based property ----------------------------------------------------------------------

KEYS = ["a", "b", "Aa", "BB", "c", " ", "key-long-1", "key-long-2"]  # "Aa"/"BB": same Java hash
messages = st.lists(
    st.tuples(
        st.lists(st.sampled_from(KEYS), max_size=3),
        st.none() | st.sampled_from(KEYS),
        st.integers(min_value=1, max_value=50),
    ),
    max_size=40,
)


@given(msgs=messages, max_num=st.integers(1, 20), window=st.tuples(st.integers(0, 60), st.integers(0, 60)))
def test_query_matches_a_model(msgs: list[tuple[list[str], str | None, int]], max_num: int,
                               window: tuple[int, int]) -> None:
    lo, hi = sorted(window)
    begin_ms, end_ms = T0 + lo * 1000, T0 + hi * 1000
    with tempfile.TemporaryDirectory() as d:
        svc = new_service(Path(d), slots=4, entries=6)
        model: list[tuple[int, int, int]] = []  # (hash, offset, time) of each entry, oldest first
        offset = 0
        for i, (keys, uniq, size) in enumerate(msgs):
            ts = T0 + i * 1000
            svc.build("T", keys, uniq, offset, ts)
            wanted = [uniq.strip()] if uniq else []
            wanted += [k.strip() for k in keys]
            model += [(index_key_hash(f"T#{k}"), offset, ts) for k in dict.fromkeys(wanted) if k]
            offset += size
        for key in KEYS[:-1]:
            h = index_key_hash(f"T#{key}")
            got = svc.query("T", key, max_num, begin_ms, end_ms)
            expected = [o for kh, o, t in reversed(model) if kh == h and begin_ms <= t <= end_ms]
            assert got == expected[:max_num]
        svc.close()


# -- batches: the same bytes as one put (one build) at a time ----------------------------------

KEY_TEXT = st.text(alphabet="abK#1 ", max_size=6)


@given(st.lists(st.tuples(KEY_TEXT, st.integers(0, 2**40), st.integers(T0 - 5000, T0 + 10**7)),
                max_size=30), st.integers(1, 3))
def test_put_many_writes_what_put_writes(items: list[tuple[str, int, int]], parts: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        one = IndexFile(Path(d) / "20240101000000000", 8, 20, create=True)
        many = IndexFile(Path(d) / "20240101000000001", 8, 20, create=True)
        want = [one.put(k, p, t) for k, p, t in items]
        step = max(1, len(items) // parts)
        got = 0
        for i in range(0, len(items), step):
            chunk = items[i : i + step]
            got += many.put_many([index_key_hash(k) for k, _, _ in chunk],
                                 [p for _, p, _ in chunk], [t for _, _, t in chunk])
        assert got == sum(want)
        assert many.mm[:] == one.mm[:]
        one.close()
        many.close()


@given(st.lists(st.tuples(st.lists(KEY_TEXT, max_size=3), st.none() | KEY_TEXT, st.integers(0, 50)),
                max_size=25))
def test_build_many_builds_what_build_builds(msgs: list[tuple[list[str], str | None, int]]) -> None:
    """Across files (rolling when full), with repeated, empty and already indexed keys."""
    with tempfile.TemporaryDirectory() as d:
        one, many = (IndexService(Path(d) / name, 8, 6) for name in ("one", "many"))
        one.load()
        many.load()
        props, offsets, stamps = [], [], []
        for i, (keys, uniq, jump) in enumerate(msgs):
            d_ = {"KEYS": " ".join(keys)} if "".join(keys) else {}
            if uniq:
                d_["UNIQ_KEY"] = uniq
            props.append(encode_properties(d_).encode())
            offsets.append(i * 10 + jump)
            stamps.append(T0 + i * 1500)
            if d_:
                one.build("T", d_["KEYS"].split(" ") if "KEYS" in d_ else [], uniq, offsets[-1],
                          stamps[-1])
        half, third = len(msgs) // 2, len(msgs) // 3
        many.build_many(["T"] * half, props[:half], offsets[:half], stamps[:half])
        rest = len(msgs) - third  # an overlap: skipped as already indexed
        many.build_many(["T"] * rest, props[third:], offsets[third:], stamps[third:])
        assert [f.mm[:] for f in many.files] == [f.mm[:] for f in one.files]
        one.close()
        many.close()
